// README and docs cite repository paths only: no path of a development machine (/work/..., /home/...,
// /tmp/...) that a reader's clone would not have.
#include <doctest/doctest.h>

#include <regex>

#include "cli_test_util.hpp"

using namespace fabricsim::cli_test;

TEST_CASE("README and docs name no absolute path outside the repository") {
  const fs::path root = FABRICSIM_SOURCE_DIR;
  std::vector<fs::path> files = {root / "README.md"};
  for (const auto& e : fs::directory_iterator(root / "docs"))
    if (e.path().extension() == ".md") files.push_back(e.path());
  REQUIRE(files.size() > 5);
  const std::regex outside(R"((^|[ `("'])/(work|tmp|home|farm|root)/)");
  for (const auto& f : files) {
    std::istringstream in(slurp(f));
    std::string line;
    int no = 0;
    while (std::getline(in, line)) {
      ++no;
      CHECK_MESSAGE(!std::regex_search(line, outside), f.filename().string() << ":" << no << ": " << line);
    }
  }
}

// A `fabricsim sweep` killed with SIGKILL (no chance to clean up) and started again resumes and ends with
// the byte-identical CSV of an uninterrupted run (issue 24). The output is a journal of complete rows
// appended as points finish, rewritten atomically at the start and the end of each run; a row cut by the
// kill has no newline and runs again.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli_test_util.hpp"

namespace fs = std::filesystem;
namespace cli_test = fabricsim::cli_test;

namespace {

int lines(const fs::path& p) {
  const std::string s = cli_test::slurp(p);
  return static_cast<int>(std::count(s.begin(), s.end(), '\n'));
}

// Starts `fabricsim sweep sweep.json --threads 1 --quiet` in `dir`; kills it with SIGKILL once out.csv holds
// more than `rows_before` rows. Returns true if the process was still running when killed.
bool run_and_kill(const fs::path& dir, int rows_before) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    if (::chdir(dir.c_str()) != 0) ::_exit(127);
    const int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 1);
    ::dup2(null, 2);
    ::execl(FABRICSIM_BINARY, FABRICSIM_BINARY, "sweep", "sweep.json", "--threads", "1", "--quiet",
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  int status = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    if (::waitpid(pid, &status, WNOHANG) == pid) return false;  // finished before the kill
    if (fs::exists(dir / "out.csv") && lines(dir / "out.csv") > 1 + rows_before) break;
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
}

}  // namespace

TEST_CASE("fabricsim sweep: killed with SIGKILL and restarted, it produces the byte-identical CSV") {
  const fs::path dir = cli_test::scratch_dir("sweep_kill");
  std::ofstream(dir / "base.json") << cli_test::small_gpt_scenario(1, 64, 1, 1);
  std::ofstream(dir / "sweep.json") << R"({
  "scenario": "base.json",
  "axes": [
    {"name": "nodes", "path": "/topology/params/nodes", "values": [1, 2]},
    {"name": "tp", "path": "/workload/params/tensor_model_parallel_size", "values": [1, 2, 4, 8]}
  ],
  "output": "out.csv"
})";
  const std::string bin = cli_test::quoted(FABRICSIM_BINARY);
  cli_test::Run ref = cli_test::run_in(dir, bin + " sweep sweep.json --threads 2 --quiet --output ref.csv");
  REQUIRE_MESSAGE(ref.rc == 0, ref.err);
  const std::string want = cli_test::slurp(dir / "ref.csv");
  REQUIRE(lines(dir / "ref.csv") == 1 + 8);

  // Kill, restart, kill again... each run adds at least one row before its kill.
  int killed = 0, rows = 0;
  for (int attempt = 0; attempt < 4 && rows < 8; ++attempt) {
    if (run_and_kill(dir, rows)) ++killed;
    rows = lines(dir / "out.csv") - 1;
  }
  CHECK_MESSAGE(killed >= 1, "no run was still going when killed: the points ran too fast to test the kill");
  cli_test::Run fin = cli_test::run_in(dir, bin + " sweep sweep.json --threads 1");
  CHECK(fin.rc == 0);
  CHECK(fin.err.find("came from a different scenario") == std::string::npos);
  CHECK(cli_test::slurp(dir / "out.csv") == want);

  // A kill in the middle of an append leaves a row without its newline, here cut inside its input_hash
  // (the right number of fields, a wrong hash): it runs again silently, not as a "stale" row.
  {
    const std::string cut = want.substr(0, want.size() - 4);
    std::ofstream(dir / "out.csv", std::ios::binary | std::ios::trunc) << cut;
  }
  cli_test::Run torn = cli_test::run_in(dir, bin + " sweep sweep.json --threads 1");
  CHECK(torn.rc == 0);
  CHECK_MESSAGE(torn.err.find("8 points, 7 already in out.csv, 1 to run") != std::string::npos, torn.err);
  CHECK(torn.err.find("different scenario") == std::string::npos);
  CHECK(cli_test::slurp(dir / "out.csv") == want);

  // A file that is not this sweep's CSV (here: a header cut to a different text) is refused, not overwritten.
  std::ofstream(dir / "out.csv", std::ios::binary | std::ios::trunc) << "hello";
  cli_test::Run other = cli_test::run_in(dir, bin + " sweep sweep.json --threads 1");
  CHECK(other.rc == 2);
  CHECK(other.err.find("out.csv: exists and is not a CSV written by this sweep") != std::string::npos);
  CHECK(cli_test::slurp(dir / "out.csv") == "hello");
  fs::remove_all(dir);
}

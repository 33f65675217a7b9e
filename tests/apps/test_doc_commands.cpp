// Every command shown in README.md, docs/*.md and examples/**/README.md code blocks, and every file in
// examples/, is run by the suite with a checked output, or names the test that does the same work
// (tests/apps/doc_commands.txt says which, and why). The list and the docs must agree: a doc command missing
// from the list, or a listed command no doc shows, fails here, so no command shown in the docs goes stale.
// The `long` entries (several seconds of CPU each) run in their own test case, "doc commands: long", which
// ctest registers as its own test `apps_doc_long` (label `long`) so that it runs beside the others.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <regex>
#include <set>
#include <vector>

#include "cli_test_util.hpp"
#include "sim/base/json_reader.hpp"

using namespace fabricsim::cli_test;

namespace {

const fs::path kRoot = FABRICSIM_SOURCE_DIR;

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  std::size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

// The commands in the fenced code blocks of `md`: `\`-continued lines joined, a leading "$ " and
// "build/apps/" dropped, a trailing "# comment" dropped, whitespace collapsed. Lines that are not fabricsim /
// python3 commands (shell set-up, output, an error message "fabricsim topo: error: ...") and synopses (with
// <...>, [...], "|" or "...") are left out.
std::vector<std::string> doc_commands(const fs::path& md) {
  std::vector<std::string> out;
  std::istringstream in(slurp(md));
  std::string line, cont;
  bool in_block = false;
  // docs/reliability.md's fuzzing commands too: the driver (FABRICSIM_FUZZ_...), the libFuzzer build and run.
  // And the refresh of docs/validation.md's generated tables.
  const std::regex is_cmd(
      R"(^((build/apps/)?fabricsim\s|python3\s|PYTHONPATH=|FABRICSIM_FUZZ_|cmake\s|fuzz/run\.sh\s|scripts/refresh-validation-docs\.sh$))");
  const std::regex is_error_line(R"(^fabricsim [a-z-]+: )");
  const std::regex synopsis(R"([<\[|]|\.\.\.)");
  while (std::getline(in, line)) {
    if (trim(line).rfind("```", 0) == 0) {
      in_block = !in_block;
      cont.clear();
      continue;
    }
    if (!in_block) continue;
    if (!cont.empty()) line = cont + " " + trim(line);
    cont.clear();
    std::string t = trim(line);
    if (!t.empty() && t.back() == '\\') {
      cont = trim(t.substr(0, t.size() - 1));
      continue;
    }
    if (t.rfind("$ ", 0) == 0) t = t.substr(2);
    if (!std::regex_search(t, is_cmd) || std::regex_search(t, is_error_line)) continue;
    t = std::regex_replace(t, std::regex(R"(\s+#.*$)"), "");
    t = std::regex_replace(t, std::regex(R"(^build/apps/)"), "");
    t = std::regex_replace(t, std::regex(R"(\s+)"), " ");
    if (std::regex_search(t, synopsis)) continue;
    out.push_back(t);
  }
  return out;
}

std::vector<fs::path> doc_files() {
  std::vector<fs::path> f = {kRoot / "README.md"};
  for (const auto& e : fs::directory_iterator(kRoot / "docs"))
    if (e.path().extension() == ".md") f.push_back(e.path());
  for (const auto& e : fs::recursive_directory_iterator(kRoot / "examples"))
    if (e.path().filename() == "README.md") f.push_back(e.path());
  std::sort(f.begin(), f.end());
  return f;
}

struct Entry {
  std::string kind, command, expected, setup;
  int line = 0;
};

std::vector<Entry> manifest() {
  std::vector<Entry> out;
  std::istringstream in(slurp(kRoot / "tests" / "apps" / "doc_commands.txt"));
  std::string line;
  int no = 0;
  while (std::getline(in, line)) {
    ++no;
    if (trim(line).empty() || trim(line)[0] == '#') continue;
    std::vector<std::string> f;
    for (std::size_t a = 0;;) {
      std::size_t b = line.find(" ;; ", a);
      f.push_back(trim(line.substr(a, b == std::string::npos ? std::string::npos : b - a)));
      if (b == std::string::npos) break;
      a = b + 4;
    }
    REQUIRE_MESSAGE(f.size() >= 3, "doc_commands.txt:" << no << ": expected KIND ;; COMMAND ;; EXPECTED [;; SETUP]");
    out.push_back({f[0], f[1], f[2], f.size() > 3 ? f[3] : "", no});
  }
  return out;
}

// A scratch directory that looks like the repository to a doc command without letting it write there.
fs::path doc_sandbox(const std::string& name) {
  fs::path d = scratch_dir(name);
  fs::create_directory_symlink(kRoot / "examples", d / "examples");
  fs::create_directory_symlink(kRoot / "tests", d / "tests");
  fs::create_directories(d / "validate" / "calibrations");
  fs::create_directory_symlink(kRoot / "validate" / "compute_calibrations", d / "validate" / "compute_calibrations");
  fs::create_directories(d / "bin");
  fs::create_symlink(FABRICSIM_BINARY, d / "bin" / "fabricsim");
  // build/tests/test_apps: this executable (docs/reliability.md runs its fuzz driver).
  fs::create_directories(d / "build" / "tests");
  fs::create_symlink(fs::read_symlink("/proc/self/exe"), d / "build" / "tests" / "test_apps");
#ifdef FABRICSIM_PYTHON_DIR
  fs::create_directory_symlink(FABRICSIM_PYTHON_DIR, d / "build" / "python");
#endif
  return d;
}

// The first place where two JSON documents differ ("" when none): numbers to 1e-9 relative (a refit on another
// machine moves the last digits), everything else exactly; "source" (provenance text naming paths) is skipped.
std::string json_difference(const fabricsim::Json& a, const fabricsim::Json& b, const std::string& at) {
  if (a.is_number() && b.is_number()) {
    const double x = a.get<double>(), y = b.get<double>();
    return std::abs(x - y) <= 1e-9 * std::max(std::abs(x), std::abs(y)) ? "" : at;
  }
  if (a.type() != b.type() || a.size() != b.size()) return at.empty() ? "/" : at;
  if (a.is_object()) {
    for (auto it = a.begin(); it != a.end(); ++it) {
      if (it.key() == "source") continue;
      if (!b.contains(it.key())) return at + "/" + it.key();
      const std::string d = json_difference(it.value(), b.at(it.key()), at + "/" + it.key());
      if (!d.empty()) return d;
    }
    return "";
  }
  if (a.is_array()) {
    for (std::size_t i = 0; i < a.size(); ++i) {
      const std::string d = json_difference(a[i], b[i], at + "/" + std::to_string(i));
      if (!d.empty()) return d;
    }
    return "";
  }
  return a == b ? "" : at;
}

void run_entry(const fs::path& d, const Entry& e) {
  CAPTURE(e.line);
  CAPTURE(e.command);
  std::string cmd = "PATH=" + (d / "bin").string() + ":\"$PATH\"; ";  // scratch paths hold no quote or space
  if (!e.setup.empty()) cmd += e.setup + " >/dev/null 2>&1 && ";
  cmd += e.command;
  const Run r = run_in(d, "bash -c " + fabricsim::cli_test::quoted(cmd));
  CHECK_MESSAGE(r.rc == 0, r.err.substr(0, 600));
  if (e.expected.rfind("same-numbers:", 0) == 0) {
    // "same-numbers:NAME:REF": the command wrote NAME, the same document as the repository's REF (a shipped
    // calibration is what its documented command fits today).
    const auto colon = e.expected.find(':', 13);
    const std::string name = e.expected.substr(13, colon - 13), ref = e.expected.substr(colon + 1);
    REQUIRE_MESSAGE(fs::exists(d / name), name);
    const std::string diff =
        json_difference(fabricsim::Json::parse(slurp(d / name)), fabricsim::Json::parse(slurp(kRoot / ref)), "");
    CHECK_MESSAGE(diff.empty(), name << " differs from " << ref << " at " << diff << ": refit with this command");
  } else if (e.expected.rfind("file:", 0) == 0) {  // "file:NAME:TEXT": the command wrote NAME, and NAME holds TEXT
    const auto colon = e.expected.find(':', 5);
    const std::string name = e.expected.substr(5, colon - 5);
    CHECK_MESSAGE(slurp(d / name).find(e.expected.substr(colon + 1)) != std::string::npos, name);
  } else {
    CHECK_MESSAGE((r.out + r.err).find(e.expected) != std::string::npos, r.out.substr(0, 400) << r.err.substr(0, 400));
  }
}

// Runs the entries of one tier in a fresh sandbox, in file order (a later entry may read what an earlier one
// wrote); returns how many ran.
int run_tier(const fs::path& d, bool long_tier) {
  int ran = 0;
  for (const auto& e : manifest()) {
    const bool is_long = e.kind == "long" || e.kind == "example-long";
    const bool is_run = e.kind == "run" || e.kind == "example-run";
    if (long_tier ? !is_long : !is_run) continue;
#ifndef FABRICSIM_PYTHON_DIR
    if (e.command.find("build/python") != std::string::npos) {  // the Python module was not built here
      MESSAGE("doc_commands.txt:" << e.line << " not run: this build has no Python module (pybind11-dev)");
      continue;
    }
#endif
    run_entry(d, e);
    ++ran;
  }
  return ran;
}

}  // namespace

TEST_CASE("doc commands: the list names every command the docs show, and nothing else") {
  std::set<std::string> shown;
  std::map<std::string, std::string> where;
  for (const auto& f : doc_files())
    for (const auto& c : doc_commands(f)) {
      shown.insert(c);
      where.emplace(c, fs::relative(f, kRoot).string());
    }
  REQUIRE(shown.size() > 30);
  std::set<std::string> listed;
  for (const auto& e : manifest()) {
    CAPTURE(e.line);
    CHECK_MESSAGE((e.kind == "run" || e.kind == "long" || e.kind == "covered" || e.kind == "example-run" ||
                   e.kind == "example-long" || e.kind == "example-covered" || e.kind == "example-via"),
                  e.kind);
    if (e.kind.rfind("example-", 0) == 0) continue;
    listed.insert(e.command);
    CHECK_MESSAGE(shown.count(e.command) == 1, "listed in tests/apps/doc_commands.txt but no doc shows it: " << e.command);
  }
  for (const auto& c : shown)
    CHECK_MESSAGE(listed.count(c) == 1, where[c] << " shows a command tests/apps/doc_commands.txt does not cover: " << c);
}

TEST_CASE("doc commands: every examples/ file is run by an entry or by a named test") {
  const auto entries = manifest();
  std::string commands;
  for (const auto& e : entries)
    if (e.kind == "run" || e.kind == "long" || e.kind == "example-run" || e.kind == "example-long")
      commands += e.command + "\n";
  std::map<std::string, std::string> via, covered;
  for (const auto& e : entries) {
    if (e.kind == "example-via") {
      CAPTURE(e.line);
      // The file that names it is run by an entry, and really names it (relative to its own directory).
      CHECK(commands.find(e.expected) != std::string::npos);
      const std::string rel = fs::path(e.command).lexically_relative(fs::path(e.expected).parent_path()).string();
      CHECK_MESSAGE(slurp(kRoot / e.expected).find("\"" + rel) != std::string::npos, e.expected << " names " << rel);
      via[e.command] = e.expected;
    }
    if (e.kind == "example-covered" || e.kind == "covered") {
      CAPTURE(e.line);
      const auto sep = e.expected.find(" :: ");
      REQUIRE(sep != std::string::npos);
      const std::string test = slurp(kRoot / e.expected.substr(0, sep));
      CHECK_MESSAGE(test.find("TEST_CASE(\"" + e.expected.substr(sep + 4) + "\")") != std::string::npos, e.expected);
      CHECK_MESSAGE(test.find(e.setup) != std::string::npos, e.expected << " uses " << e.setup);
      if (e.kind == "example-covered") covered[e.command] = e.expected;
    }
  }
  int files = 0;
  for (const auto& it : fs::recursive_directory_iterator(kRoot / "examples")) {
    if (!it.is_regular_file() || it.path().filename() == "README.md") continue;
    ++files;
    const std::string rel = fs::relative(it.path(), kRoot).string();
    // "examples/imports/minimal.0.json" is run as the trace prefix "examples/imports/minimal".
    const std::string name = it.path().filename().string();
    const std::string stem = (fs::path(rel).parent_path() / name.substr(0, name.find('.'))).string();
    const bool ok = commands.find(rel) != std::string::npos || commands.find(stem + " ") != std::string::npos ||
                    via.count(rel) || via.count(stem) || covered.count(rel) || covered.count(stem);
    CHECK_MESSAGE(ok, rel << ": no entry in tests/apps/doc_commands.txt runs it");
  }
  CHECK(files > 20);
}

TEST_CASE("doc commands: run") {
  const fs::path d = doc_sandbox("doc_commands");
  const int ran = run_tier(d, false);
  MESSAGE("doc commands run: " << ran);
  CHECK(ran >= 25);
  // The validation figure docs/validation.md shows is what its command writes today (byte-identical outputs),
  // so a model change that moves it fails here until the figure is regenerated.
  if (fs::exists(d / "validate-default.svg"))
    CHECK_MESSAGE(slurp(d / "validate-default.svg") == slurp(kRoot / "docs" / "img" / "validate-default.svg"),
                  "docs/img/validate-default.svg is stale: rerun the command docs/validation.md shows");
  // Nothing was written into the repository's validate/calibrations through the sandbox.
  CHECK(fs::is_directory(d / "validate" / "calibrations"));
  CHECK(!fs::is_symlink(d / "validate" / "calibrations"));
  fs::remove_all(d);
}

TEST_CASE("doc commands: long") {
  const fs::path d = doc_sandbox("doc_commands_long");
  const int ran = run_tier(d, true);
  MESSAGE("doc commands run (long tier): " << ran);
  CHECK(ran >= 10);
  CHECK(!fs::is_symlink(d / "validate" / "calibrations"));
  fs::remove_all(d);
}

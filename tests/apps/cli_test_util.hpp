#pragma once
// Shared by the tests in tests/apps: run a shell command (usually the built `fabricsim` binary) in a
// scratch directory and capture its exit status, stdout and stderr.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <sys/wait.h>
#include <unistd.h>

namespace fabricsim::cli_test {

namespace fs = std::filesystem;

inline std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// An empty directory for one test: <tmp>/fabricsim_<name>_<pid> (removed first if it exists).
inline fs::path scratch_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("fabricsim_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// '<s>' for the shell (the tests' paths contain no single quote).
inline std::string quoted(const std::string& s) {
  std::string r = "'";
  r += s;
  r += '\'';
  return r;
}

// "'<fabricsim binary>' <args>"
inline std::string fabricsim(const std::string& args) {
  std::string r = quoted(FABRICSIM_BINARY);
  r += ' ';
  r += args;
  return r;
}

// The small GPT scenario the CLI tests run (4 layers of hidden size 1024, 16 heads, 1024-token sequences, one
// sample per micro-batch) on `nodes` DGX H100 servers, as scenario JSON text; `rest` is put after the
// workload (e.g. ",\n  \"outputs\": {...}").
inline std::string small_gpt_scenario(int nodes, int global_batch, int tp, int pp, const std::string& rest = "") {
  return R"({
  "topology": {"preset": "superpod", "params": {"nodes": )" + std::to_string(nodes) + R"(, "node": "dgx-h100"}},
  "workload": {"generator": "gpt", "params": {
    "num_layers": 4, "hidden_size": 1024, "num_attention_heads": 16, "seq_length": 1024,
    "padded_vocab_size": 51200, "micro_batch_size": 1, "global_batch_size": )" + std::to_string(global_batch) + R"(,
    "tensor_model_parallel_size": )" + std::to_string(tp) + R"(, "pipeline_model_parallel_size": )" +
         std::to_string(pp) + "}}" + rest + "\n}";
}

struct Run {
  int rc = -1;  // exit status, -1 when the command did not exit normally
  std::string out, err;
};

// Runs `cmd` with `dir` as working directory; stdout and stderr go to dir/stdout.txt and dir/stderr.txt
// (`cmd` must not redirect them itself).
inline Run run_in(const fs::path& dir, const std::string& cmd) {
  const fs::path out = dir / "stdout.txt", err = dir / "stderr.txt";
  std::string full = "cd " + quoted(dir.string()) + " && " + cmd + " >" + quoted(out.string()) + " 2>" +
                     quoted(err.string());
  const int st = std::system(full.c_str());
  Run r;
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

// Writes `text` to `p` as it is (binary).
inline void write_file(const fs::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary);
  f << text;
}

#ifdef FABRICSIM_SOURCE_DIR
// `fabricsim <args>` run from the repository root (where the tests' example and data paths start), with its
// output captured in `dir` as run_in does.
inline Run run_from_source(const fs::path& dir, const std::string& args) {
  return run_in(dir, "cd " + quoted(FABRICSIM_SOURCE_DIR) + " && " + fabricsim(args));
}
#endif

// `fabricsim ARGS -o OUT` run in `dir` is refused: exit 2, nothing on stdout, one error line (equal to `message`
// unless it is empty), `out` not written.
inline void check_refused(const fs::path& dir, const std::string& args, const fs::path& out, const std::string& message) {
  fs::remove(out);
  Run r = run_in(dir, fabricsim(args + " -o " + quoted(out.string())));
  CHECK(r.rc == 2);
  CHECK(r.out.empty());
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  if (!message.empty()) CHECK(r.err == message);
  CHECK_FALSE(fs::exists(out));
}

}  // namespace fabricsim::cli_test

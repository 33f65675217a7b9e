// `fabricsim sweep` end to end: real simulations of a small GPT on 1-2 DGX H100 nodes. The CSV is
// identical for 1 and 2 threads and under `mpirun -np 2`; a failing point is a row (and exit status 1);
// a resumed sweep runs only the missing points and produces the same file.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli_test_util.hpp"

namespace fs = std::filesystem;

namespace {

namespace cli_test = fabricsim::cli_test;
using cli_test::slurp;
using Proc = cli_test::Run;

Proc sh(const std::string& cmd, const fs::path& dir) { return cli_test::run_in(dir, cmd); }

int count_lines(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

// 2 node counts x 3 layouts; layout tp16 cannot exist (16 heads but only 8 GPUs on one node): fails at nodes=1.
void write_inputs(const fs::path& dir) {
  std::ofstream(dir / "base.json") << cli_test::small_gpt_scenario(1, 64, 1, 1, ",\n  \"outputs\": {\"timeline\": \"should_not_be_written.json\"}");
  std::ofstream(dir / "sweep.json") << R"({
  "scenario": "base.json",
  "axes": [
    {"name": "nodes", "path": "/topology/params/nodes", "values": [1, 2]},
    {"name": "tp", "path": "/workload/params/tensor_model_parallel_size", "values": [2, 8, 16]}
  ],
  "output": "out.csv"
})";
}

}  // namespace

TEST_CASE("fabricsim sweep: threads, failures, resume, MPI give one CSV") {
  const fs::path dir = cli_test::scratch_dir("sweep_test");
  write_inputs(dir);
  const std::string bin = cli_test::quoted(FABRICSIM_BINARY);

  Proc one = sh(bin + " sweep sweep.json --threads 1 --quiet", dir);
  CHECK_MESSAGE(one.rc == 1, one.err);  // one point fails -> exit 1
  std::string csv1 = slurp(dir / "out.csv");
  REQUIRE(count_lines(csv1) == 1 + 6);
  CHECK(!fs::exists(dir / "should_not_be_written.json"));
  std::istringstream in(csv1);
  std::string header, line;
  std::getline(in, header);
  CHECK(header.rfind("point,nodes,tp,status,error,gpus,iteration_s,", 0) == 0);
  int ok = 0, failed = 0;
  while (std::getline(in, line)) {
    if (line.find(",ok,") != std::string::npos) ++ok;
    if (line.find(",failed,") != std::string::npos) ++failed;
  }
  CHECK(ok == 5);
  CHECK(failed == 1);
  CHECK(csv1.find("\n2,1,16,failed,") != std::string::npos);
  CHECK(one.err.find("point 2 (nodes=1, tp=16) failed") != std::string::npos);
  // The ok rows carry real figures: 8 GPUs on one node, 16 on two.
  CHECK(csv1.find("\n0,1,2,ok,,8,") != std::string::npos);
  CHECK(csv1.find("\n3,2,2,ok,,16,") != std::string::npos);

  fs::rename(dir / "out.csv", dir / "one.csv");
  Proc two = sh(bin + " sweep sweep.json --threads 2 --quiet", dir);
  CHECK(two.rc == 1);
  CHECK(slurp(dir / "out.csv") == csv1);

  // Resume: keep the header and rows 4 and 0 plus half a row; the sweep reruns only the other 4 points.
  {
    std::istringstream all(csv1);
    std::string h, rows[6];
    std::getline(all, h);
    for (auto& r : rows) std::getline(all, r);
    std::ofstream(dir / "out.csv") << h << "\n" << rows[4] << "\n" << rows[0] << "\n" << rows[5].substr(0, 9);
  }
  Proc resumed = sh(bin + " sweep sweep.json --threads 2", dir);
  CHECK(resumed.rc == 1);
  CHECK_MESSAGE(resumed.err.find("6 points, 2 already in out.csv, 4 to run") != std::string::npos, resumed.err);
  CHECK(slurp(dir / "out.csv") == csv1);
  // Nothing left to run: the file is unchanged and no point runs.
  Proc again = sh(bin + " sweep sweep.json", dir);
  CHECK(again.err.find("6 already in out.csv, 0 to run") != std::string::npos);
  CHECK(slurp(dir / "out.csv") == csv1);

  // The base scenario changes outside the axes (a larger batch): the rows on file are stale, every point runs
  // again (said on stderr even with --quiet) and the step times change; the failed point fails again.
  fs::copy_file(dir / "base.json", dir / "base.orig.json");
  {
    std::string b = slurp(dir / "base.json");
    const std::string from = "\"global_batch_size\": 64";
    b.replace(b.find(from), from.size(), "\"global_batch_size\": 128");
    std::ofstream(dir / "base.json") << b;
  }
  Proc restale = sh(bin + " sweep sweep.json --threads 2 --quiet", dir);
  CHECK(restale.rc == 1);
  CHECK_MESSAGE(restale.err.find("6 row(s) of out.csv came from a different scenario") != std::string::npos,
                restale.err);
  const std::string csv_big = slurp(dir / "out.csv");
  CHECK(count_lines(csv_big) == 1 + 6);
  CHECK(csv_big != csv1);
  CHECK(csv_big.find("\n0,1,2,ok,,8,") != std::string::npos);
  // --comm-model is part of the inputs too.
  Proc analytic = sh(bin + " sweep sweep.json --threads 2 --comm-model analytic", dir);
  CHECK(analytic.err.find("0 already in out.csv, 6 to run") != std::string::npos);
  // Back to the original base: the original rows again, byte for byte.
  fs::remove(dir / "base.json");
  fs::rename(dir / "base.orig.json", dir / "base.json");
  Proc back = sh(bin + " sweep sweep.json --threads 2 --quiet", dir);
  CHECK(back.rc == 1);
  CHECK(slurp(dir / "out.csv") == csv1);

  // Bad input: exit 2, one line, no output file.
  std::ofstream(dir / "bad.json") << R"({"scenario": "base.json", "axes": [], "output": "bad.csv"})";
  Proc bad = sh(bin + " sweep bad.json", dir);
  CHECK(bad.rc == 2);
  CHECK(bad.err.find("bad.json: /axes") != std::string::npos);
  CHECK(count_lines(bad.err) == 1);
  CHECK(!fs::exists(dir / "bad.csv"));

  // MPI: same CSV from two ranks.
  if (std::system("command -v mpirun >/dev/null 2>&1") != 0) {
    MESSAGE("SKIPPED: mpirun not found; the MPI sweep was not run");
  } else {
    fs::remove(dir / "out.csv");
    Proc mpi = sh("mpirun --allow-run-as-root --oversubscribe -np 2 " + bin + " sweep sweep.json --threads 1", dir);
    if (mpi.err.find("on 2 process(es)") == std::string::npos) {
      MESSAGE("SKIPPED: fabricsim was built without MPI (no 'on 2 process(es)' in its stderr): " << mpi.err);
    } else {
      CHECK(mpi.rc == 1);
      CHECK(slurp(dir / "out.csv") == csv1);
    }
  }
  fs::remove_all(dir);
}

TEST_CASE("fabricsim sweep: a layout that needs more GPU memory than the GPU has is a does_not_fit row, exit 0") {
  const fs::path dir = cli_test::scratch_dir("sweep_no_fit");
  write_inputs(dir);
  // hidden 1024 fits; hidden 65536 on 4 layers is 4 x 12 x 65536^2 = 206e9 parameters on one 8-GPU node with
  // TP 2: about 1.6 TiB of weights, gradients and Adam state per GPU against 80 GiB.
  std::ofstream(dir / "fit.json") << R"({
  "scenario": "base.json",
  "axes": [
    {"name": "hidden", "path": "/workload/params/hidden_size", "values": [1024, 65536]},
    {"name": "tp", "path": "/workload/params/tensor_model_parallel_size", "values": [2]}
  ],
  "output": "fit.csv"
})";
  const std::string bin = cli_test::quoted(FABRICSIM_BINARY);
  Proc r = sh(bin + " sweep fit.json --threads 1", dir);
  CHECK_MESSAGE(r.rc == 0, r.err);
  const std::string csv = slurp(dir / "fit.csv");
  CHECK(csv.find("\n0,1024,2,ok,,8,") != std::string::npos);
  CHECK(csv.find("\n1,65536,2,does_not_fit,") != std::string::npos);
  CHECK(csv.find("model does not fit in GPU memory") != std::string::npos);
  CHECK(r.err.find("point 1 (hidden=65536, tp=2) does not fit") != std::string::npos);
  CHECK(r.err.find("1 ok, 1 do not fit in GPU memory, 0 failed") != std::string::npos);
  // Resume keeps the does_not_fit row (a deterministic answer) and runs nothing.
  Proc again = sh(bin + " sweep fit.json --threads 1", dir);
  CHECK(again.rc == 0);
  CHECK(again.err.find("2 already in") != std::string::npos);
  CHECK(slurp(dir / "fit.csv") == csv);
  fs::remove_all(dir);
}

TEST_CASE("fabricsim sweep: an unknown or ill-typed generator parameter in any point fails before the first runs") {
  const fs::path dir = cli_test::scratch_dir("sweep_params_test");
  write_inputs(dir);
  const std::string bin = cli_test::quoted(FABRICSIM_BINARY);
  // Point 2 misspells a Megatron-LM argument; points 0 and 1 are fine and would take real simulation time.
  std::ofstream(dir / "typo.json") << R"({
  "scenario": "base.json",
  "mode": "list",
  "points": [
    {"label": "a", "set": {"/workload/params/num_layers": 2}},
    {"label": "b", "set": {"/workload/params/num_layers": 4}},
    {"label": "c", "set": {"/workload/params/num_layres": 4}}
  ],
  "output": "typo.csv"
})";
  Proc typo = sh(bin + " sweep typo.json --threads 1 --quiet", dir);
  CHECK(typo.rc == 2);
  CHECK_MESSAGE(typo.err.find("typo.json: point 2 (label=c)") != std::string::npos, typo.err);
  CHECK(typo.err.find("unknown parameter(s): num_layres") != std::string::npos);
  CHECK(typo.err.find("nothing was run") != std::string::npos);
  CHECK(!fs::exists(dir / "typo.csv"));
  // An ill-typed value: the same, naming the parameter.
  std::ofstream(dir / "typed.json") << R"({
  "scenario": "base.json",
  "mode": "list",
  "points": [{"label": "a", "set": {"/workload/params/num_layers": 2}},
             {"label": "b", "set": {"/workload/params/micro_batch_size": "two"}}],
  "output": "typed.csv"
})";
  Proc typed = sh(bin + " sweep typed.json --threads 1 --quiet", dir);
  CHECK(typed.rc == 2);
  CHECK_MESSAGE(typed.err.find("/workload/params/micro_batch_size: expected a number, found the string \"two\"") != std::string::npos, typed.err);
  CHECK(!fs::exists(dir / "typed.csv"));
  fs::remove_all(dir);
}

TEST_CASE("fabricsim sweep --points: only those rows, the same figures, and a later run adds the rest") {
  const fs::path dir = cli_test::scratch_dir("sweep_points");
  write_inputs(dir);
  const std::string bin = cli_test::quoted(FABRICSIM_BINARY);
  Proc full = sh(bin + " sweep sweep.json --threads 1 --quiet -o full.csv", dir);
  CHECK(full.rc == 1);  // point 2 fails
  const std::string all = slurp(dir / "full.csv");
  std::istringstream in(all);
  std::string header, line;
  std::getline(in, header);
  std::vector<std::string> rows;
  while (std::getline(in, line)) rows.push_back(line + "\n");
  REQUIRE(rows.size() == 6);

  // Points 0 and 3-4: those rows, as the full run wrote them; exit 0 (the failing point 2 did not run).
  Proc sub = sh(bin + " sweep sweep.json --threads 1 --points 3-4,0", dir);
  CHECK_MESSAGE(sub.rc == 0, sub.err);
  CHECK(slurp(dir / "out.csv") == header + "\n" + rows[0] + rows[3] + rows[4]);
  CHECK(sub.err.find("6 points, 0 already in out.csv, 3 of the 3 --points to run") != std::string::npos);
  CHECK(sub.err.find("3 rows (3 ok,") != std::string::npos);
  // Without --points the rest runs and the file is the full sweep's.
  Proc rest = sh(bin + " sweep sweep.json --threads 1 --quiet", dir);
  CHECK(rest.rc == 1);
  CHECK(slurp(dir / "out.csv") == all);

  // An index the sweep does not have, a backwards range or a non-number: exit 2, nothing run.
  for (const char* bad : {"6", "4-2", "1,,2", "x", "-1"}) {
    CAPTURE(bad);
    Proc p = sh(bin + " sweep sweep.json --quiet -o bad.csv --points " + cli_test::quoted(bad), dir);
    CHECK(p.rc == 2);
    CHECK(p.err.find("--points") != std::string::npos);
    CHECK(!fs::exists(dir / "bad.csv"));
  }
  fs::remove_all(dir);
}

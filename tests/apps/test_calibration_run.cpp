// scripts/calibration-run.sh, the documented calibration procedure (docs/validation.md): the launch lines
// it would run on a Slurm or Open MPI cluster, and its fit + report stage on measurements.
#include <doctest/doctest.h>

#include "cli_test_util.hpp"

using namespace fabricsim::cli_test;

namespace {
std::string script() { return quoted(std::string(FABRICSIM_SOURCE_DIR) + "/scripts/calibration-run.sh"); }
std::string build_dir() { return fs::path(FABRICSIM_BINARY).parent_path().parent_path().string(); }
int count(const std::string& s, const std::string& what) {
  int n = 0;
  for (auto p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}
}  // namespace

TEST_CASE("calibration-run.sh: a 4-node Slurm run launches the self-test per node and one rank per GPU") {
  fs::path d = scratch_dir("calrun_slurm");
  Run r = run_in(d, script() + " --launcher slurm --nodes 4 --gpus-per-node 8 --out res --dry-run --bin " +
                        quoted(build_dir()));
  CHECK(r.rc == 0);
  CHECK(count(r.err, "srun -N 4 --ntasks-per-node=1 --gpus-per-node=8 --cpu-bind=none") == 1);
  CHECK(r.err.find("fabricsim-nccl-bench --self-test -g 8") != std::string::npos);
  // Seven collectives, each one process per GPU with its own unique-id file on the shared output folder.
  CHECK(count(r.err, "srun -N 4 --ntasks-per-node=8 --gpus-per-node=8") == 7);
  CHECK(count(r.err, "--uid-file res/.uid.") == 7);
  CHECK(r.err.find("--op sendrecv -b 8 -e 8G -f 2 -n 20 --json res/sendrecv.json") != std::string::npos);
  CHECK(r.err.find("calibrate") != std::string::npos);
  CHECK(r.err.find("validate --loo") != std::string::npos);
}

TEST_CASE("calibration-run.sh: mpirun places G ranks per node; local runs one process") {
  fs::path d = scratch_dir("calrun_mpi");
  Run r = run_in(d, script() + " --launcher mpirun --nodes 2 --gpus-per-node 4 --ops all_reduce --out res --dry-run");
  CHECK(r.rc == 0);
  CHECK(r.err.find("mpirun -np 8 --map-by ppr:4:node") != std::string::npos);
  CHECK(r.err.find("mpirun -np 2 --map-by ppr:1:node") != std::string::npos);  // the self-test, one per node
  Run l = run_in(d, script() + " --launcher local --gpus-per-node 8 --ops all_reduce --out res --dry-run");
  CHECK(l.rc == 0);
  CHECK(l.err.find("-g 8 --op all_reduce") != std::string::npos);
  CHECK(l.err.find("--uid-file") == std::string::npos);
  Run bad = run_in(d, script() + " --launcher local --nodes 2 --out res --dry-run");
  CHECK(bad.rc == 2);
  CHECK(bad.err.find("--launcher local runs on one node") != std::string::npos);
  Run bad2 = run_in(d, script() + " --launcher pbs --out res");
  CHECK(bad2.rc == 2);
  CHECK(bad2.err.find("expected slurm, mpirun or local") != std::string::npos);
}

TEST_CASE("calibration-run.sh --analyse-only: calibration file and leave-one-out report from measurements") {
  // Stand-in measurements: `fabricsim coll --json` tables (the bench's JSON schema) of three collectives.
  fs::path d = scratch_dir("calrun_fit");
  fs::create_directories(d / "res");
  for (const char* op : {"all_reduce", "all_gather", "reduce_scatter"})
    REQUIRE(run_in(d, fabricsim::cli_test::fabricsim(std::string("coll -t dgx-h100 --op ") + op + " -b 64K -e 64M -f 4 --json res/" +
                                op + ".json")).rc == 0);
  Run r = run_in(d, script() + " --analyse-only --out res --bin " + quoted(build_dir()));
  CHECK(r.rc == 0);
  CHECK(fs::exists(d / "res/calibration.json"));
  CHECK(fs::exists(d / "res/validate.svg"));
  const std::string report = slurp(d / "res/report.txt");
  CHECK(count(report, "calibration: loo-without-") == 3);  // each run predicted by a fit on the other two
  CHECK(report.find("calibration: " + (d / "res/calibration.json").string()) == std::string::npos);
  Run none = run_in(d, "mkdir -p empty && " + script() + " --analyse-only --out empty --bin " + quoted(build_dir()));
  CHECK(none.rc == 2);
  CHECK(none.err.find("holds no measurements") != std::string::npos);
}

// `fabricsim validate` and `fabricsim calibrate` end to end through the binary.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_test_util.hpp"

namespace {

namespace fs = std::filesystem;
namespace cli_test = fabricsim::cli_test;
const std::string kData = std::string(FABRICSIM_SOURCE_DIR) + "/tests/data/nccl-tests/";

using cli_test::Run;
using cli_test::slurp;

Run run(const std::string& args, const fs::path& dir) { return cli_test::run_in(dir, cli_test::fabricsim(args)); }

fs::path tmpdir(const std::string& name) { return cli_test::scratch_dir("test_validate_" + name); }

}  // namespace

TEST_CASE("fabricsim validate: text, JSON and SVG for two logs") {
  auto d = tmpdir("v");
  Run r = run("validate --calibration default " + kData + "abci_intra_vnode_job4_7280532_4gpu_all_reduce.meta.json " + kData +
                  "together_h100_1node_8gpu_reduce_scatter_ring.meta.json --json " + (d / "r.json").string() +
                  " --svg " + (d / "r.svg").string(),
              d);
  REQUIRE(r.rc == 0);
  CHECK(r.out.find("sizes >= 1 MiB") != std::string::npos);
  CHECK(r.out.find("reduce_scatter, 8 ranks on 1 host(s)") != std::string::npos);
  auto j = nlohmann::json::parse(slurp((d / "r.json").string()));
  CHECK(j["logs"].size() == 2);
  CHECK(j["summary"]["large"]["points"].get<int>() + j["summary"]["small"]["points"].get<int>() == 24 + 27);
  CHECK(slurp((d / "r.svg").string()).rfind("<svg", 0) == 0);
  // Host launch floor: ABCI ran one process per GPU (nGpus 1), Together one thread on 8 GPUs (nGpus 8).
  CHECK(j["logs"][0]["gpus_per_thread"] == 1);
  CHECK(j["logs"][1]["gpus_per_thread"] == 8);
  CHECK(j["logs"][1]["host_launch_floor_s"].get<double>() == doctest::Approx(34.28e-6));
  CHECK(r.out.find("host launch floor: 34.28 us at one channel + 0.313 us per extra channel (8 GPU(s) per host thread)") !=
        std::string::npos);
  // With the built-in calibration the Together log's smallest sizes sit on the floor, its largest do not.
  const auto& pts = j["logs"][1]["points"];
  CHECK(pts[0]["at_host_launch_floor"] == true);
  CHECK(pts[0]["simulated_time_s"].get<double>() == doctest::Approx(34.28e-6));
  CHECK(pts[pts.size() - 1]["at_host_launch_floor"] == false);
  for (const auto& p : j["logs"][0]["points"]) CHECK(p["at_host_launch_floor"] == false);
  fs::remove_all(d);
}

TEST_CASE("fabricsim calibrate writes a calibration that validate --calibration loads") {
  auto d = tmpdir("c");
  std::string cal = (d / "cal.json").string();
  Run c = run("calibrate " + kData + "abci_intra_vnode_job4_7280532_4gpu_all_reduce.meta.json --iterations 3 -o " + cal +
                  " --name test-v100",
              d);
  REQUIRE(c.rc == 0);
  CHECK(c.out.find("nvlink_efficiency.v100") != std::string::npos);
  auto cj = nlohmann::json::parse(slurp(cal));
  CHECK(cj["name"] == "test-v100");
  Run v = run("validate -q --calibration " + cal + " " + kData + "abci_intra_vnode_job4_7280532_4gpu_all_reduce.meta.json", d);
  REQUIRE(v.rc == 0);
  CHECK(v.out.find("calibration test-v100") != std::string::npos);
  // One process per GPU (ABCI, nGpus 1): no note. Only -g 8 runs (Together): NCCL's latencies cannot be
  // fitted, and calibrate says so on stderr.
  CHECK(c.err.find("keep their start values") == std::string::npos);
  Run g = run("calibrate " + kData + "together_h100_1node_8gpu_all_gather_ring.meta.json --iterations 0 -o " + cal, d);
  REQUIRE(g.rc == 0);
  CHECK(g.err.find("keep their start values") != std::string::npos);
  fs::remove_all(d);
}

TEST_CASE("fabricsim run --calibration: a fitted file prices a run's collectives, as coll --calibration does") {
  auto d = tmpdir("run_cal");
  const std::string cal = (d / "cal.json").string();
  Run c = run("calibrate " + kData + "nvidia_dgxc_dgxh100_1node_8gpu_all_reduce.meta.json --iterations 3 -o " + cal +
                  " --name fit-h100",
              d);
  REQUIRE_MESSAGE(c.rc == 0, c.err);
  // One 1 MiB all_reduce over 8 H100 (ASTRA-sim 1.0's MICRO workload).
  const std::string trace = "run --trace " + std::string(FABRICSIM_SOURCE_DIR) +
                            "/tests/data/foreign-workloads/astra-sim-1.0-text/microAllReduce.txt --topology dgx-h100 "
                            "--param npus=8 -q --json ";
  auto result = [&](const std::string& extra) {
    const std::string out = (d / "r.json").string();
    Run r = run(trace + cli_test::quoted(out) + extra, d);
    REQUIRE_MESSAGE(r.rc == 0, r.err);
    return nlohmann::json::parse(slurp(out));
  };
  const auto fitted = result(" --calibration " + cli_test::quoted(cal));
  const auto builtin = result(" --calibration default");
  const auto automatic = result("");
  CHECK(fitted.at("calibration").get<std::string>().find("fit-h100") != std::string::npos);
  CHECK(builtin.at("calibration").get<std::string>().rfind("default", 0) == 0);
  CHECK(automatic.at("calibration").get<std::string>().rfind("h100", 0) == 0);  // the scenario's auto
  const double tf = fitted.at("iteration_s").get<double>(), tb = builtin.at("iteration_s").get<double>();
  CHECK(tf > 0);
  CHECK(std::abs(tf / tb - 1) > 1e-3);  // the fitted constants move the all_reduce
  // coll with the same file gives the fitted all_reduce time too: both sides use models::System.
  Run cf = run("coll -t dgx-h100 --op all_reduce -b 1M --calibration " + cli_test::quoted(cal) + " --json c.json", d);
  Run cb = run("coll -t dgx-h100 --op all_reduce -b 1M --calibration default --json cb.json", d);
  REQUIRE(cf.rc == 0);
  REQUIRE(cb.rc == 0);
  const double cft = nlohmann::json::parse(slurp((d / "c.json").string())).at("rows")[0].at("time_us").get<double>();
  const double cbt = nlohmann::json::parse(slurp((d / "cb.json").string())).at("rows")[0].at("time_us").get<double>();
  // The trace is that one all_reduce: the run's step is coll's time for it, calibration by calibration.
  CHECK(tf * 1e6 == doctest::Approx(cft).epsilon(1e-9));
  CHECK(tb * 1e6 == doctest::Approx(cbt).epsilon(1e-9));
  // A file that is not there: one line naming it, exit 2.
  Run bad = run(trace + "x.json --calibration missing.json", d);
  CHECK(bad.rc == 2);
  CHECK(bad.err.find("missing.json") != std::string::npos);
  fs::remove_all(d);
}

TEST_CASE("bad inputs: one error line, exit 2, no output file") {
  auto d = tmpdir("e");
  std::string out = (d / "x.json").string();
  Run a = run("validate " + kData + "raw/abci_intra_vnode_job04.sh.7280532.nccl.txt --json " + out, d);
  CHECK(a.rc == 2);
  CHECK(a.err.find("--op") != std::string::npos);
  CHECK(!fs::exists(out));
  Run b = run("calibrate " + kData + "abci_intra_vnode_job4_7280532_4gpu_all_reduce.meta.json", d);
  CHECK(b.rc == 2);
  CHECK(b.err.find("--output") != std::string::npos);
  Run c = run("validate", d);
  CHECK(c.rc == 2);
  Run e = run("validate --calibration /nonexistent.json " + kData + "liplus_a100_8gpu_nvlink_sendrecv.meta.json", d);
  CHECK(e.rc == 2);
  // A fitting option without a fit is an error, not silently ignored.
  Run f = run("validate --nccl-eras --json " + out + " " + kData + "liplus_a100_8gpu_nvlink_sendrecv.meta.json", d);
  CHECK(f.rc == 2);
  CHECK(f.err.find("--nccl-eras") != std::string::npos);
  CHECK(f.err.find("--loo") != std::string::npos);
  CHECK(!fs::exists(out));
  // calibrate's size range: no row in it, a reversed range, a malformed size.
  const std::string log = kData + "liplus_a100_8gpu_nvlink_sendrecv.meta.json";  // 128 MiB .. 1 GiB
  Run g = run("calibrate --min-bytes 2G " + log + " -o " + out, d);
  CHECK(g.rc == 2);
  CHECK(g.err.find("--min-bytes") != std::string::npos);
  Run h = run("calibrate --min-bytes 1G --max-bytes 1M " + log + " -o " + out, d);
  CHECK(h.rc == 2);
  CHECK(h.err.find("--max-bytes") != std::string::npos);
  Run i = run("calibrate --max-bytes 12Q " + log + " -o " + out, d);
  CHECK(i.rc == 2);
  CHECK(i.err.find("--max-bytes") != std::string::npos);
  CHECK(!fs::exists(out));
  // In range: only those rows are fitted and reported.
  Run k = run("calibrate --iterations 0 --min-bytes 256M --max-bytes 512M " + log + " -o " + out, d);
  REQUIRE(k.rc == 0);
  CHECK(k.out.find("1 runs, 2 rows") != std::string::npos);
  fs::remove_all(d);
}

TEST_CASE("a fabricsim coll --json result reads back into validate and matches itself (shared schema)") {
  auto d = tmpdir("s");
  std::string sim = (d / "sim.json").string();
  // coll and validate resolve the calibration by the same policy (models/system.hpp; both default to auto).
  Run c = run("coll --topology dgx-h100 --calibration default --op all_gather -b 1M -e 64M --json " + sim, d);
  REQUIRE(c.rc == 0);
  Run v = run("validate --calibration default --json " + (d / "r.json").string() + " " + sim, d);
  REQUIRE(v.rc == 0);
  auto j = nlohmann::json::parse(slurp((d / "r.json").string()));
  REQUIRE(j["logs"].size() == 1);
  CHECK(j["logs"][0]["points"].size() == 7);
  // Same topology, calibration and tuner: the re-simulation reproduces the file's times.
  CHECK(j["summary"]["large"]["max_abs_busbw_error"].get<double>() < 1e-9);
  fs::remove_all(d);
}

TEST_CASE("coll --json broadcast reads back into validate as itself: one call, or the loop with --iters") {
  // validate simulates a rooted collective as nccl-tests' back-to-back loop unless the file says it holds
  // single calls (a coll --json without --iters, no system.iters); with --iters the file records the loop.
  auto d = tmpdir("b");
  for (const std::string flags : {"", " --iters 50"}) {
    CAPTURE(flags);
    std::string sim = (d / "sim.json").string();
    Run c = run("coll --topology superpod -p nodes=2 --calibration default --op broadcast -b 4 -e 4M -f 32" + flags +
                    " --json " + sim,
                d);
    REQUIRE(c.rc == 0);
    auto file = nlohmann::json::parse(slurp(sim));
    CHECK(file["system"].contains("iters") == !flags.empty());
    if (!flags.empty()) CHECK(file["system"]["iters"].get<int>() == 50);
    Run v = run("validate --calibration default --json " + (d / "r.json").string() + " " + sim, d);
    REQUIRE(v.rc == 0);
    auto j = nlohmann::json::parse(slurp((d / "r.json").string()));
    CHECK(j["logs"][0]["points"].size() == 5);
    CHECK(j["summary"]["large"]["max_abs_busbw_error"].get<double>() < 1e-9);
    CHECK(j["summary"]["small"]["max_abs_busbw_error"].get<double>() < 1e-9);
  }
  // A negative iteration count in the file is an error naming the field.
  std::string bad = (d / "bad.json").string();
  {
    auto f = nlohmann::json::parse(slurp((d / "sim.json").string()));
    f["system"]["iters"] = -1;
    std::ofstream(bad) << f.dump();
  }
  Run e = run("validate " + bad, d);
  CHECK(e.rc == 2);
  CHECK(e.err.find("/system/iters") != std::string::npos);
  fs::remove_all(d);
}

TEST_CASE("coll --gpus-per-thread: nccl-tests -g host launch floor, written to JSON and honoured by validate") {
  auto d = tmpdir("g");
  std::string sim = (d / "sim.json").string();
  Run c = run("coll --topology dgx-h100 --calibration default --op all_reduce -b 8 -e 64M --gpus-per-thread 8 --json " +
                  sim,
              d);
  REQUIRE(c.rc == 0);
  CHECK(c.out.find("host launch floor 34.28 us at one channel + 0.313 us per extra channel (8 GPUs per thread)") !=
        std::string::npos);
  auto s = nlohmann::json::parse(slurp(sim));
  CHECK(s["system"]["gpus_per_thread"] == 8);
  // Small sizes sit on the floor (8 x 4.285 us, docs/calibration.md); large ones are untouched.
  CHECK(s["rows"][0]["time_us"].get<double>() == doctest::Approx(34.28));
  // ... and the floor rises with the channels the call runs on: Ring LL on 8 ranks uses all 24 of an H100's
  // channels from 768 KiB (models::nccl_call_channels), 8 x (4.285 + 23 x 0.039) us.
  CHECK(s["rows"][17]["size_bytes"].get<double>() == 1048576);
  CHECK(s["rows"][17]["time_us"].get<double>() == doctest::Approx(41.47));
  Run plain = run("coll --topology dgx-h100 --calibration default --op all_reduce -b 8 -e 8 --json " +
                      (d / "plain.json").string(),
                  d);
  REQUIRE(plain.rc == 0);
  auto p = nlohmann::json::parse(slurp((d / "plain.json").string()));
  CHECK(p["rows"][0]["time_us"].get<double>() < 34.28);
  CHECK(!p["system"].contains("gpus_per_thread"));
  const auto& rows = s["rows"];
  CHECK(rows[rows.size() - 1]["time_us"].get<double>() > 100.0);
  // validate reads gpus_per_thread back and applies the same floor: the re-simulation matches exactly.
  Run v = run("validate --calibration default --json " + (d / "r.json").string() + " " + sim, d);
  REQUIRE(v.rc == 0);
  auto j = nlohmann::json::parse(slurp((d / "r.json").string()));
  CHECK(j["summary"]["small"]["max_abs_busbw_error"].get<double>() < 1e-9);
  CHECK(j["summary"]["large"]["max_abs_busbw_error"].get<double>() < 1e-9);
  for (const char* bad : {"0", "x", "5000"}) {
    Run b = run(std::string("coll --topology dgx-h100 -b 8 --gpus-per-thread ") + bad, d);
    CHECK(b.rc == 2);
    CHECK(b.err.find("--gpus-per-thread") != std::string::npos);
  }
  fs::remove_all(d);
}

TEST_CASE("fabricsim validate --loo piped: progress lines on stderr, results on stdout") {
  auto d = tmpdir("loo_progress");
  // Two logs (two fits, ~0.5 s of CPU); stderr is a file here, so progress comes as whole lines.
  Run r = run("validate --loo " + kData + "abci_intra_vnode_job4_7280532_4gpu_all_reduce.meta.json " + kData +
                  "abci_inter_vnode_job2_7194532_8gpu_all_reduce.meta.json",
              d);
  REQUIRE_MESSAGE(r.rc == 0, r.err);
  CHECK(r.err.find("validate --loo fits [") != std::string::npos);
  CHECK(r.err.find("100.0% 2/2") != std::string::npos);  // the last line, at the end
  CHECK(r.err.find('\r') == std::string::npos);           // no terminal redraws in a file
  CHECK(r.out.find("validate --loo fits") == std::string::npos);
  Run q = run("validate --loo --quiet " + kData + "abci_intra_vnode_job4_7280532_4gpu_all_reduce.meta.json " + kData +
                  "abci_inter_vnode_job2_7194532_8gpu_all_reduce.meta.json",
              d);
  REQUIRE(q.rc == 0);
  CHECK(q.err.find("validate --loo fits") == std::string::npos);
  fs::remove_all(d);
}

// The "shared" communication model: every collective and message of a replay runs on one shared flow-level
// network, so communication that overlaps in time contends (the "engine" model prices each collective alone
// on an idle fabric). Checked against the idle-fabric model on the same traces.
#include <doctest/doctest.h>

#include <string>

#include "models/calibration.hpp"
#include "models/system.hpp"
#include "models/collectives.hpp"
#include "models/compute.hpp"
#include "models/gpu.hpp"
#include "sim/base/error.hpp"
#include "replay/engine_comm_model.hpp"
#include "replay/executor.hpp"
#include "topologies/io.hpp"
#include "workloads/scenario.hpp"
#include "workloads/trace.hpp"

using namespace fabricsim;
using namespace fabricsim::workloads;

namespace {

models::ComputeModel cm() {
  models::ComputeModel m;
  m.gpu = models::gpu_spec("h100-sxm");
  return m;
}

Trace parse(const std::string& s) { return trace_from_json(Json::parse(s), "t.json"); }

// Two 256 MiB all_reduces over all 8 GPUs of a DGX H100. `overlap`: each on its own stream, both starting
// at t = 0 (they share every NVLink); otherwise the second waits for the first on one stream.
Trace two_all_reduces(bool overlap) {
  std::string ranks;
  for (int r = 0; r < 8; ++r) {
    if (r) ranks += ",";
    ranks += R"({"rank":)" + std::to_string(r) + R"(,"streams":["a","b"],"ops":[
        {"type":"collective","op":"all_reduce","comm":"w","bytes":268435456,"stream":"a"},
        {"type":"collective","op":"all_reduce","comm":"w","bytes":268435456,"stream":")" +
             (overlap ? "b" : "a") + R"("}]})";
  }
  return parse(R"({"format":"fabricsim-trace","version":1,"world_size":8,
    "communicators":[{"name":"w","ranks":[0,1,2,3,4,5,6,7],"category":"dp"}],
    "ranks":[)" + ranks + "]}");
}

// The defaults with every per-call and per-step latency zeroed: collectives that only move bytes.
models::Calibration latency_free() {
  models::Calibration c = models::default_calibration();
  for (auto& [k, v] : c.algo) v.base_latency_s = v.step_latency_s = v.net_step_latency_s = 0;
  return c;
}

sim::RunResult run(const Trace& t, bool shared, const models::Calibration& calib = models::default_calibration()) {
  static const models::System sys(models::system_spec("dgx-h100", {}, "default"));
  const topo::Topology& topo = sys.topology();
  if (shared) {
    sim::SharedNetworkCommModel comm(topo, calib);
    return sim::replay(t, topo, cm(), comm);
  }
  sim::EngineCommModel comm(topo, calib);
  return sim::replay(t, topo, cm(), comm);
}

}  // namespace

TEST_CASE("shared network: overlapping all_reduces share the links, sequential ones do not") {
  const sim::RunResult idle_overlap = run(two_all_reduces(true), false);
  const sim::RunResult shared_overlap = run(two_all_reduces(true), true);
  const sim::RunResult idle_seq = run(two_all_reduces(false), false);
  const sim::RunResult shared_seq = run(two_all_reduces(false), true);
  const double one = idle_overlap.iteration_s;  // priced alone: both finish after one all_reduce time
  REQUIRE(one > 1e-3);
  // One after the other: the same on both models (nothing overlaps), two all_reduce times.
  CHECK(idle_seq.iteration_s == doctest::Approx(2 * one).epsilon(1e-9));
  CHECK(shared_seq.iteration_s == doctest::Approx(idle_seq.iteration_s).epsilon(1e-9));
  // Together on the shared network: each gets half of every link while both move data, so both end at
  // 2x the time of one minus the latency terms, which overlap (at 256 MiB the tuner picks NVLS, whose 32
  // loops of per-loop latency are ~17 % of one call: calibration.cpp).
  CHECK(shared_overlap.iteration_s > one);
  CHECK(shared_overlap.iteration_s <= 2 * one * (1 + 1e-9));
  // Without NCCL's latencies only the bytes remain (and the NVLink hops' own latency): exactly 2x then.
  const double one_bw = run(two_all_reduces(true), false, latency_free()).iteration_s;
  const double overlap_bw = run(two_all_reduces(true), true, latency_free()).iteration_s;
  MESSAGE("overlap / one, default calibration: " << shared_overlap.iteration_s / one
                                                 << "; without NCCL latencies: " << overlap_bw / one_bw);
  CHECK(overlap_bw > 1.99 * one_bw);
  CHECK(overlap_bw <= 2 * one_bw * (1 + 1e-9));
  // both collectives of a rank end at the same time (equal sizes, equal shares)
  REQUIRE(shared_overlap.ops.size() == 16);
  CHECK(shared_overlap.ops[0].end_s == doctest::Approx(shared_overlap.ops[1].end_s).epsilon(1e-9));
  // deterministic
  CHECK(run(two_all_reduces(true), true).iteration_s == shared_overlap.iteration_s);
  // Both calls are on communicator "w", whose links nothing else uses: the shared model first prices it as
  // isolated, finds two of its calls in flight at once and reruns the replay with it sharing; the first call
  // then finds its links free and is priced on an idle window, the second starts on them and goes on the
  // network, so the replay reruns once more with the first call on the network too.
  CHECK(shared_overlap.metrics.at("replay.restarts") == 2);
  CHECK(shared_seq.metrics.count("replay.restarts") == 0);
}

TEST_CASE("shared network: send/recv contend with a collective on the same NVLinks") {
  // rank 0 sends 1 GiB to rank 1 while all 8 ranks run a 1 GiB all_reduce: the message is slower than alone.
  std::string ranks;
  for (int r = 0; r < 8; ++r) {
    std::string extra;
    if (r == 0) extra = R"(,{"type":"send","peer":1,"tag":7,"bytes":1073741824,"stream":"p","category":"pp"})";
    if (r == 1) extra = R"(,{"type":"recv","peer":0,"tag":7,"bytes":1073741824,"stream":"p","category":"pp"})";
    if (r) ranks += ",";
    ranks += R"({"rank":)" + std::to_string(r) + R"(,"streams":["a","p"],"ops":[
        {"type":"collective","op":"all_reduce","comm":"w","bytes":1073741824,"stream":"a"})" + extra + "]}";
  }
  const Trace t = parse(R"({"format":"fabricsim-trace","version":1,"world_size":8,
    "communicators":[{"name":"w","ranks":[0,1,2,3,4,5,6,7],"category":"dp"}],"ranks":[)" + ranks + "]}");
  const sim::RunResult idle = run(t, false), shared = run(t, true);
  REQUIRE(idle.ops.size() == 10);
  REQUIRE(shared.ops.size() == 10);
  const double send_idle = idle.ops[1].end_s - idle.ops[1].start_s;
  const double send_shared = shared.ops[1].end_s - shared.ops[1].start_s;
  CHECK(send_shared > 1.05 * send_idle);
  CHECK(shared.iteration_s > idle.iteration_s);
  CHECK(shared.ops[1].algorithm == "p2p");
}

TEST_CASE("comm_model names: shared is accepted, unknown names are errors listing the choices") {
  CHECK(is_comm_model("shared"));
  CHECK(is_comm_model("engine"));
  CHECK(is_comm_model("analytic"));
  CHECK_FALSE(is_comm_model("contended"));
  const Json doc = Json::parse(R"({"topology":{"preset":"dgx-h100"},
    "workload":{"generator":"dataparallel","params":{"parameters":"1G","step_compute":"10ms"}},
    "comm_model":"contended"})");
  try {
    scenario_from_json(doc, "s.json");
    FAIL("expected an InputError");
  } catch (const InputError& e) {
    const std::string m = e.what();
    CHECK(m.find("/comm_model") != std::string::npos);
    CHECK(m.find("shared, engine or analytic") != std::string::npos);
  }
}

// Compute beside communication kernels (replay/executor.hpp, models/compute_contention.hpp): a compute op
// progresses at 1 / comm_sm_slowdown(C) while its rank's collectives and p2p ops hold C CTAs, re-timed when
// they start or end during it; nothing changes without overlap or with the option off.
#include <doctest/doctest.h>

#include <string>

#include "models/compute.hpp"
#include "models/compute_contention.hpp"
#include "models/gpu.hpp"
#include "replay/comm_model.hpp"
#include "replay/executor.hpp"
#include "replay/run_scenario.hpp"
#include "tests/replay/scenario_test_util.hpp"
#include "topologies/io.hpp"
#include "workloads/scenario.hpp"
#include "workloads/trace.hpp"

using namespace fabricsim;
using namespace fabricsim::workloads;

namespace {

class FixedComm final : public sim::CommModel {
 public:
  double coll_s = 2e-3, p2p_s = 1e-3;
  sim::CommTiming collective(const Communicator&, CollOp, double, const std::string&) override {
    return {coll_s, "fixed", "simple"};
  }
  sim::CommTiming p2p(std::int32_t, std::int32_t, double) override { return {p2p_s, "p2p", "simple"}; }
  std::string describe() const override { return "fixed"; }
};

models::ComputeModel cm() {
  models::ComputeModel m;
  m.gpu = models::gpu_spec("h100");
  return m;
}

sim::RunResult run(const std::string& json, bool contention = true) {
  static const topo::Topology t = topo::load_topology("dgx-h100", {});
  FixedComm comm;
  sim::ReplayOptions o;
  o.comm_sm_contention = contention;
  return sim::replay(trace_from_json(Json::parse(json), "t.json"), t, cm(), comm, o);
}

// End of rank `rank`'s op named `name`.
double end_of(const sim::RunResult& r, int rank, const std::string& name) {
  for (const auto& op : r.ops)
    if (op.rank == rank && op.name == name) return op.end_s;
  FAIL("no op " << name);
  return 0;
}

// Two ranks, each: a 10 ms compute op on the compute stream and, on stream "comm", `comm_ops` (JSON).
std::string two_ranks(const std::string& comm_ops) {
  std::string ranks;
  for (int r = 0; r < 2; ++r)
    ranks += std::string(r ? "," : "") + R"({"rank":)" + std::to_string(r) + R"(,"streams":["compute","comm"],"ops":[
        {"type":"compute","name":"gemm","duration_ns":10000000},)" + comm_ops + "]}";
  return R"({"format":"fabricsim-trace","version":1,"world_size":2,
    "communicators":[{"name":"w","ranks":[0,1],"category":"dp"}],"ranks":[)" + ranks + "]}";
}

}  // namespace

TEST_CASE("sm contention: a collective beside compute stretches it by the measured table") {
  // The all_reduce (16 CTAs, 2 ms) runs from 0 to 2 ms beside the 10 ms compute: 2 ms at 1 / s(16), the rest
  // of the work alone.
  const auto r = run(two_ranks(R"({"type":"collective","name":"ar","op":"all_reduce","comm":"w","bytes":1e6,
                                   "stream":"comm","sm_ctas":16})"));
  const double s16 = models::comm_sm_slowdown(16);
  CHECK(s16 == 1.2450);
  const double want = 2e-3 + (10e-3 - 2e-3 / s16);
  for (int rank : {0, 1}) CHECK(end_of(r, rank, "gemm") == doctest::Approx(want).epsilon(1e-12));
  CHECK(end_of(r, 0, "ar") == doctest::Approx(2e-3).epsilon(1e-12));
  CHECK(r.iteration_s == doctest::Approx(want).epsilon(1e-12));
  CHECK(r.metrics.at("replay.comm_sm_contention_s") == doctest::Approx(want - 10e-3).epsilon(1e-9));
  // Off: the compute has the whole GPU.
  const auto off = run(two_ranks(R"({"type":"collective","name":"ar","op":"all_reduce","comm":"w","bytes":1e6,
                                     "stream":"comm","sm_ctas":16})"), false);
  CHECK(end_of(off, 0, "gemm") == 10e-3);
}

TEST_CASE("sm contention: a collective starting and ending mid-compute re-times the compute twice") {
  // Rank 0 and 1: a 4 ms compute on stream "pre", then the all_reduce (8 CTAs, 2 ms, 4 -> 6 ms); the 10 ms
  // compute on the compute stream runs alone to 4 ms, at 1 / s(8) to 6 ms, then alone again.
  std::string ranks;
  for (int r = 0; r < 2; ++r)
    ranks += std::string(r ? "," : "") + R"({"rank":)" + std::to_string(r) + R"(,"streams":["compute","comm","pre"],"ops":[
        {"type":"compute","name":"gemm","duration_ns":10000000},
        {"type":"compute","name":"pre","duration_ns":4000000,"stream":"pre"},
        {"type":"collective","name":"ar","op":"all_reduce","comm":"w","bytes":1e6,"stream":"comm","deps":[1],
         "sm_ctas":8}]})";
  const auto r = run(R"({"format":"fabricsim-trace","version":1,"world_size":2,
    "communicators":[{"name":"w","ranks":[0,1],"category":"dp"}],"ranks":[)" + ranks + "]}");
  const double s8 = models::comm_sm_slowdown(8);
  CHECK(s8 == 1.1607);
  CHECK(end_of(r, 0, "pre") == doctest::Approx(4e-3).epsilon(1e-12));  // ended before the collective
  const double want = 6e-3 + (10e-3 - 4e-3 - 2e-3 / s8);
  CHECK(end_of(r, 0, "gemm") == doctest::Approx(want).epsilon(1e-12));
  CHECK(end_of(r, 1, "gemm") == doctest::Approx(want).epsilon(1e-12));
}

TEST_CASE("sm contention: send/recv hold their CTAs from the match, two comm ops add up") {
  // A send/recv (4 CTAs each side, 1 ms) beside an all_reduce (16 CTAs, 2 ms), all from 0: the compute runs
  // 0-1 ms at 1 / s(20), 1-2 ms at 1 / s(16), then alone, on both ranks.
  std::string r0 = R"({"rank":0,"streams":["compute","comm","send"],"ops":[
        {"type":"compute","name":"gemm","duration_ns":10000000},
        {"type":"collective","name":"ar","op":"all_reduce","comm":"w","bytes":1e6,"stream":"comm","sm_ctas":16},
        {"type":"send","name":"s","peer":1,"tag":1,"bytes":1e6,"stream":"send","sm_ctas":4}]})";
  std::string r1 = R"({"rank":1,"streams":["compute","comm","recv"],"ops":[
        {"type":"compute","name":"gemm","duration_ns":10000000},
        {"type":"collective","name":"ar","op":"all_reduce","comm":"w","bytes":1e6,"stream":"comm","sm_ctas":16},
        {"type":"recv","name":"r","peer":0,"tag":1,"bytes":1e6,"stream":"recv","sm_ctas":4}]})";
  const auto r = run(R"({"format":"fabricsim-trace","version":1,"world_size":2,
    "communicators":[{"name":"w","ranks":[0,1],"category":"dp"}],"ranks":[)" + r0 + "," + r1 + "]}");
  const double s20 = models::comm_sm_slowdown(20), s16 = models::comm_sm_slowdown(16);
  CHECK(s20 == doctest::Approx((1.2450 + 1.2895) / 2));
  const double want = 2e-3 + (10e-3 - 1e-3 / s20 - 1e-3 / s16);
  CHECK(end_of(r, 0, "gemm") == doctest::Approx(want).epsilon(1e-12));
  CHECK(end_of(r, 1, "gemm") == doctest::Approx(want).epsilon(1e-12));
}

TEST_CASE("sm contention: no overlap, or no CTAs, changes nothing") {
  // The collective after the compute on the same rank (dependency): nothing runs beside it.
  const std::string seq = two_ranks(R"({"type":"collective","name":"ar","op":"all_reduce","comm":"w","bytes":1e6,
                                        "stream":"comm","deps":[0]})");
  const auto on = run(seq), off = run(seq, false);
  CHECK(end_of(on, 0, "gemm") == 10e-3);
  CHECK(on.iteration_s == off.iteration_s);
  for (std::size_t i = 0; i < on.ops.size(); ++i) CHECK(on.ops[i].end_s == off.ops[i].end_s);
  CHECK(on.metrics.at("replay.comm_sm_contention_s") == 0.0);
  // Beside the compute but holding no SMs (sm_ctas 0: a copy-engine transfer, or a userbuffers collective
  // whose SM cost the compute op already carries).
  const auto zero = run(two_ranks(R"({"type":"collective","name":"ar","op":"all_reduce","comm":"w","bytes":1e6,
                                      "stream":"comm","sm_ctas":0})"));
  CHECK(end_of(zero, 0, "gemm") == 10e-3);
  // Without sm_ctas: NCCL's channels for a 1 MB ring all_reduce on 2 H100s of one host (FixedComm names no
  // NCCL algorithm: a ring with the simple protocol).
  const auto dflt = run(two_ranks(R"({"type":"collective","name":"ar","op":"all_reduce","comm":"w","bytes":1e6,
                                      "stream":"comm"})"));
  const int c = models::nccl_collective_ctas("h100", 1, 2, models::Algorithm::Ring, models::Protocol::Simple, 1e6);
  CHECK(c > 0);
  CHECK(end_of(dflt, 0, "gemm") ==
        doctest::Approx(2e-3 + (10e-3 - 2e-3 / models::comm_sm_slowdown(c))).epsilon(1e-12));
}

TEST_CASE("sm contention: sm_ctas round-trips through trace JSON and is checked") {
  const std::string t = two_ranks(R"({"type":"collective","name":"ar","op":"all_reduce","comm":"w","bytes":1e6,
                                      "stream":"comm","sm_ctas":7})");
  const Trace a = trace_from_json(Json::parse(t), "t.json");
  CHECK(a.ranks[0].ops[1].sm_ctas == 7);
  const Trace b = trace_from_json(trace_to_json(a), "t2.json");
  CHECK(b.ranks[0].ops[1].sm_ctas == 7);
  CHECK(trace_to_json(a) == trace_to_json(b));
  const std::string bad = two_ranks(R"({"type":"collective","op":"all_reduce","comm":"w","bytes":1e6,"sm_ctas":-1})");
  CHECK_THROWS_WITH_AS(trace_from_json(Json::parse(bad), "t.json"), doctest::Contains("sm_ctas"), InputError);
}

namespace {
std::string fsdp_scenario(const std::string& extra) { return replay_test::fsdp_llama8b_scenario(extra, "none"); }
sim::RunResult run_scenario_json(const std::string& text, bool contention = true) {
  return replay_test::run_scenario_text(text, [contention](sim::ReplayOptions& r) { r.comm_sm_contention = contention; });
}
}  // namespace

TEST_CASE("sm contention: an FSDP step is longer with it, unchanged with it off either way") {
  const auto on = run_scenario_json(fsdp_scenario(""));
  const auto off_key = run_scenario_json(fsdp_scenario(R"("comm_sm_contention":false,)"));
  const auto off_opt = run_scenario_json(fsdp_scenario(""), false);
  CHECK(off_key.iteration_s == off_opt.iteration_s);
  CHECK(off_key.metrics.count("replay.comm_sm_contention_s") == 0);
  CHECK(on.iteration_s > off_key.iteration_s);
  CHECK(on.metrics.at("replay.comm_sm_contention_s") > 0.0);
  // Only compute grows; the memory model does not see it.
  CHECK(on.breakdown.compute_s > off_key.breakdown.compute_s);
  CHECK(on.metrics.at("memory_per_gpu_bytes.max") == off_key.metrics.at("memory_per_gpu_bytes.max"));
  CHECK_THROWS_AS(run_scenario_json(fsdp_scenario(R"("comm_sm_contention":"no",)")), InputError);
}

TEST_CASE("sm contention: tp_comm_overlap's userbuffers collectives hold no SMs in the replay") {
  Scenario s = scenario_from_json(Json::parse(R"({"topology":{"preset":"superpod","params":{"nodes":2,"node":"dgx-h100"}},
      "workload":{"generator":"gpt","params":{"model":"llama3-8b","tensor_model_parallel_size":2,
      "pipeline_model_parallel_size":1,"sequence_parallel":true,"tp_comm_overlap":true,"use_distributed_optimizer":true,"global_batch_size":32,
      "micro_batch_size":1,"recompute_granularity":"none"}}})"), "sc.json");
  const models::System sys = sim::scenario_system(s);
  const models::ComputeModel m = scenario_compute_model(s, sys.topology(), sys.calibration().named_factors());
  const Trace tr = build_workload(s, sys.topology(), m);
  int tp = 0, dp = 0;
  for (const auto& op : tr.ranks[0].ops) {
    if (op.kind != OpKind::Collective) continue;
    if (op.category == "tp") {
      ++tp;
      CHECK(op.sm_ctas == 0);
    } else if (op.category == "dp") {
      ++dp;
      CHECK(op.sm_ctas == -1);  // NCCL's channels
    }
  }
  CHECK(tp > 0);
  CHECK(dp > 0);
}

TEST_CASE("sm contention: by default only on the GPUs it was measured on; true applies it to every GPU") {
  auto a100 = [](const std::string& extra) { return replay_test::fsdp_llama8b_scenario(extra, "full", "dgx-a100"); };
  const auto dflt = run_scenario_json(a100(""));
  const auto off = run_scenario_json(a100(R"("comm_sm_contention":false,)"));
  const auto all = run_scenario_json(a100(R"("comm_sm_contention":true,)"));
  CHECK(dflt.iteration_s == off.iteration_s);  // A100: not measured, unchanged by default
  CHECK(all.iteration_s > off.iteration_s);
  CHECK(all.metrics.at("replay.comm_sm_contention_s") > 0.0);
  // H100 (the FSDP scenario above): on by default, and "true" gives the same step there.
  CHECK(run_scenario_json(fsdp_scenario("")).iteration_s ==
        run_scenario_json(fsdp_scenario(R"("comm_sm_contention":true,)")).iteration_s);
}

// Start delay (replay/executor.hpp, models/compute_contention.hpp): a collective or send/recv launched while a
// compute op of its rank runs starts when that op's running kernel leaves the SMs (Op::kernel_wait_s, at most
// the rest of the op); one launched on an idle rank, or beside an op whose kernels are unknown, starts at once.
// Plus the held-out check of the gpt generator's figures against whole layers measured on an H100.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "models/compute.hpp"
#include "models/compute_contention.hpp"
#include "models/gpu.hpp"
#include "replay/comm_model.hpp"
#include "replay/executor.hpp"
#include "replay/run_scenario.hpp"
#include "tests/csv_test_util.hpp"
#include "tests/replay/scenario_test_util.hpp"
#include "topologies/io.hpp"
#include "workloads/scenario.hpp"
#include "workloads/trace.hpp"

using namespace fabricsim;
using namespace fabricsim::workloads;

namespace {

class FixedComm final : public sim::CommModel {
 public:
  sim::CommTiming collective(const Communicator&, CollOp, double, const std::string&) override {
    return {2e-3, "fixed", "simple"};
  }
  sim::CommTiming p2p(std::int32_t, std::int32_t, double) override { return {1e-3, "p2p", "simple"}; }
  std::string describe() const override { return "fixed"; }
};

sim::RunResult run(const std::string& json, bool delay = true, bool contention = false,
                   const std::string& topology = "dgx-h100") {
  const topo::Topology t = topo::load_topology(topology, {});
  models::ComputeModel cm;
  cm.gpu = models::gpu_spec("h100");
  FixedComm comm;
  sim::ReplayOptions o;
  o.comm_sm_contention = contention;
  o.comm_start_delay = delay;
  return sim::replay(trace_from_json(Json::parse(json), "t.json"), t, cm, comm, o);
}

const sim::OpRecord& rec(const sim::RunResult& r, int rank, const std::string& name) {
  for (const auto& op : r.ops)
    if (op.rank == rank && op.name == name) return op;
  FAIL("no op " << name);
  return r.ops.front();
}

// Two ranks: a 10 ms compute op "gemm" (with `gemm_extra` keys, e.g. its kernel_wait_ns), a 4 ms op "pre" on
// its own stream, and a 1 MB all_reduce (16 CTAs unless `coll_extra` says otherwise) on stream "comm" that
// rank r launches when its "pre" ends (`pre_ns[r]`).
std::string trace(const std::string& gemm_extra, const std::string& coll_extra = "", long pre0 = 4000000,
                  long pre1 = 4000000) {
  std::string ranks;
  for (int r = 0; r < 2; ++r)
    ranks += std::string(r ? "," : "") + R"({"rank":)" + std::to_string(r) + R"(,"streams":["compute","comm","pre"],"ops":[
        {"type":"compute","name":"gemm","duration_ns":10000000)" + gemm_extra + R"(},
        {"type":"compute","name":"pre","stream":"pre","duration_ns":)" + std::to_string(r ? pre1 : pre0) + R"(},
        {"type":"collective","name":"ar","op":"all_reduce","comm":"w","bytes":1e6,"stream":"comm","deps":[1])" +
             (coll_extra.empty() ? R"(,"sm_ctas":16)" : coll_extra) + "}]}";
  return R"({"format":"fabricsim-trace","version":1,"world_size":2,
    "communicators":[{"name":"w","ranks":[0,1],"category":"dp"}],"ranks":[)" + ranks + "]}";
}

}  // namespace

TEST_CASE("start delay: a collective launched mid-op waits for the running kernel, not on an idle rank") {
  // Launched at 4 ms into a 10 ms op whose kernels leave 1 ms on average: it starts at 5 ms, ends at 7 ms.
  const auto r = run(trace(R"(,"kernel_wait_ns":1000000)"));
  CHECK(rec(r, 0, "ar").start_s == doctest::Approx(5e-3).epsilon(1e-12));
  CHECK(rec(r, 0, "ar").end_s == doctest::Approx(7e-3).epsilon(1e-12));
  CHECK(r.metrics.at("replay.comm_start_delay_s") == doctest::Approx(1e-3).epsilon(1e-9));  // per rank
  // Off: it starts when launched.
  const auto off = run(trace(R"(,"kernel_wait_ns":1000000)"), false);
  CHECK(rec(off, 0, "ar").start_s == doctest::Approx(4e-3).epsilon(1e-12));
  CHECK(off.metrics.count("replay.comm_start_delay_s") == 0);
  // On an idle rank (launched after the op ended: "pre" of 12 ms) it starts when launched.
  const auto idle = run(trace(R"(,"kernel_wait_ns":1000000)", "", 12000000, 12000000));
  CHECK(rec(idle, 0, "ar").start_s == doctest::Approx(12e-3).epsilon(1e-12));
  CHECK(idle.metrics.at("replay.comm_start_delay_s") == 0.0);
  // A rendezvous: rank 1 is idle at launch (14 ms), rank 0 launched at 4 ms waits 1 ms; the collective starts
  // when the last member arrives, so the delay costs nothing here.
  const auto mixed = run(trace(R"(,"kernel_wait_ns":1000000)", "", 4000000, 14000000));
  CHECK(rec(mixed, 0, "ar").start_s == doctest::Approx(14e-3).epsilon(1e-12));
}

TEST_CASE("start delay: at most the rest of the op; none without known kernels or without CTAs") {
  // A kernel wait longer than the op's 6 ms left: it starts when the op ends (the next compute op's kernel
  // comes after it).
  const auto capped = run(trace(R"(,"kernel_wait_ns":8000000)"));
  CHECK(rec(capped, 0, "ar").start_s == doctest::Approx(10e-3).epsilon(1e-12));
  // Kernels not known (no kernel_wait_ns): no delay.
  CHECK(rec(run(trace("")), 0, "ar").start_s == doctest::Approx(4e-3).epsilon(1e-12));
  // A communication op holding no SMs (sm_ctas 0: copy engine, userbuffers) needs none to start.
  CHECK(rec(run(trace(R"(,"kernel_wait_ns":1000000)", R"(,"sm_ctas":0)")), 0, "ar").start_s ==
        doctest::Approx(4e-3).epsilon(1e-12));
  // Not on GPUs where it was not measured (A100) unless asked for.
  const std::string a100 = trace(R"(,"kernel_wait_ns":1000000)");
  CHECK(rec(run(a100, true, false, "dgx-a100"), 0, "ar").start_s == doctest::Approx(4e-3).epsilon(1e-12));
}

TEST_CASE("start delay: with compute contention the running kernel is slower and the CTAs come later") {
  // A first all_reduce of 16 CTAs is launched at 0, when the op starts too: the op's stream had its kernel
  // queued, so the collective waits 1 ms and runs 1-3 ms beside the op. The second, launched at 1 ms, waits
  // 1 ms x s(16) for the kernel slowed by the first one's CTAs.
  std::string ranks;
  for (int r = 0; r < 2; ++r)
    ranks += std::string(r ? "," : "") + R"({"rank":)" + std::to_string(r) + R"(,"streams":["compute","c1","c2","pre"],"ops":[
        {"type":"collective","name":"ar1","op":"all_reduce","comm":"w","bytes":1e6,"stream":"c1","sm_ctas":16},
        {"type":"compute","name":"gemm","duration_ns":10000000,"kernel_wait_ns":1000000},
        {"type":"compute","name":"pre","stream":"pre","duration_ns":1000000},
        {"type":"collective","name":"ar2","op":"all_reduce","comm":"w2","bytes":1e6,"stream":"c2","deps":[2],"sm_ctas":8}]})";
  const auto r = run(R"({"format":"fabricsim-trace","version":1,"world_size":2,
    "communicators":[{"name":"w","ranks":[0,1]},{"name":"w2","ranks":[0,1]}],"ranks":[)" + ranks + "]}", true, true);
  const double s16 = models::comm_sm_slowdown(16);
  CHECK(rec(r, 0, "ar1").start_s == doctest::Approx(1e-3).epsilon(1e-12));
  CHECK(rec(r, 0, "ar2").start_s == doctest::Approx(1e-3 + 1e-3 * s16).epsilon(1e-12));
}

TEST_CASE("start delay: kernel_wait_ns round-trips through trace JSON and is checked") {
  const Trace a = trace_from_json(Json::parse(trace(R"(,"kernel_wait_ns":1234567)")), "t.json");
  CHECK(a.ranks[0].ops[0].kernel_wait_s == doctest::Approx(1.234567e-3).epsilon(1e-12));
  CHECK(a.ranks[0].ops[1].kernel_wait_s < 0);  // absent: unknown
  const Trace b = trace_from_json(trace_to_json(a), "t2.json");
  CHECK(trace_to_json(a) == trace_to_json(b));
  CHECK_THROWS_WITH_AS(trace_from_json(Json::parse(trace(R"(,"kernel_wait_ns":-5)")), "t.json"),
                       doctest::Contains("kernel_wait_ns"), InputError);
}

namespace {
std::string fsdp_scenario(const std::string& extra, const std::string& node = "dgx-h100") {
  return replay_test::fsdp_llama8b_scenario(extra, "full", node);
}
sim::RunResult run_scenario_json(const std::string& text, bool delay = true) {
  return replay_test::run_scenario_text(text, [delay](sim::ReplayOptions& r) { r.comm_start_delay = delay; });
}
}  // namespace

TEST_CASE("start delay: the scenario key; on by default where measured") {
  const auto on = run_scenario_json(fsdp_scenario(""));
  const auto off_key = run_scenario_json(fsdp_scenario(R"("comm_start_delay":false,)"));
  const auto off_opt = run_scenario_json(fsdp_scenario(""), false);
  CHECK(off_key.iteration_s == off_opt.iteration_s);
  CHECK(off_key.metrics.count("replay.comm_start_delay_s") == 0);
  CHECK(on.metrics.at("replay.comm_start_delay_s") > 0.0);
  CHECK(on.iteration_s >= off_key.iteration_s);
  CHECK(on.iteration_s == run_scenario_json(fsdp_scenario(R"("comm_start_delay":true,)")).iteration_s);
  CHECK_THROWS_AS(run_scenario_json(fsdp_scenario(R"("comm_start_delay":"no",)")), InputError);
  // A100: not measured, no delay unless "true".
  const auto a100 = run_scenario_json(fsdp_scenario("", "dgx-a100"));
  CHECK(a100.metrics.at("replay.comm_start_delay_s") == 0.0);
  CHECK(run_scenario_json(fsdp_scenario(R"("comm_start_delay":true,)", "dgx-a100")).metrics.at(
            "replay.comm_start_delay_s") > 0.0);
}

namespace {
// The mean start delay the gpt generator's ops give a launch at a uniformly random instant of decoder layer
// 0's forward + backward (micro-batch 0, rank 0): sum over its compute ops of kernel_wait_s x duration over
// their total duration (each op's kernel_wait_s is the mean over its own instants).
double layer_mean_wait_s(const std::string& params) {
  Scenario s = scenario_from_json(Json::parse(R"({"topology":{"preset":"superpod","params":{"nodes":1,"node":"dgx-h100"}},
      "workload":{"generator":"gpt","params":)" + params + "}}"), "sc.json");
  const models::System sys = sim::scenario_system(s);
  const models::ComputeModel m = scenario_compute_model(s, sys.topology(), sys.calibration().named_factors());
  const Trace tr = build_workload(s, sys.topology(), m);
  double sum = 0, weighted = 0;
  for (const auto& op : tr.ranks[0].ops) {
    if (op.kind != OpKind::Compute || op.name.rfind("mb0.l0.", 0) != 0 || !(op.duration_s > 0)) continue;
    REQUIRE(op.kernel_wait_s >= 0);
    CHECK(op.kernel_wait_s <= op.duration_s);
    sum += op.duration_s;
    weighted += op.duration_s * op.kernel_wait_s;
  }
  REQUIRE(sum > 0);
  return weighted / sum;
}
}  // namespace

TEST_CASE("start delay: whole layers on an H100 (held out)") {
  // tests/data/hardware/h100-comm-overlap/layers_queued.csv (validate/tools/layer_overlap.py): a stand-in
  // launched 3-31 ms after three queued Llama-3-8B TP-1 / 70B TP-8-slice layer steps (seq 8192, forward +
  // backward, eager PyTorch, cuDNN / flash SDPA) starts start_delay_us late. Nothing was fitted on them: the
  // rule comes from the GEMM rows of overlap.csv, the kernel times from the compute model. The offsets land
  // at unrelated instants of the steps, so the 18 delays per layer sample the delay of a random launch
  // instant; the simulated mean must lie in the 95 % confidence interval of their mean (t, 17 dof: 2.110).
  // Measured when this was written: 70B slice simulated 420 us in 342 +- 154 us; the 8B layer is missed:
  // simulated 948 us against 527 +- 199 us (no measured delay exceeds 1267 us, while the 8B layer's fc1 GEMMs
  // and attention backward run 2-3 ms each, so a launch inside them would wait longer in the rule), pinned
  // below as a known overestimate so that a change to it is seen (docs/workloads.md).
  const std::string dir = std::string(FABRICSIM_SOURCE_DIR) + "/tests/data/hardware/h100-comm-overlap/";
  struct Case {
    const char* name;
    std::string params;
  };
  struct Known {
    bool overestimate;  // the simulated mean is above the interval (known miss), else inside it
  };
  const std::vector<Known> known = {{true}, {false}};
  const std::vector<Case> cases = {
      {"llama3-8b tp1", R"({"model":"llama3-8b","gpu":"h100","world_size":8,"tensor_model_parallel_size":1,"pipeline_model_parallel_size":1,
         "seq_length":8192,"micro_batch_size":1,"global_batch_size":8,"num_layers":2,"attention_backend":"fused",
         "recompute_granularity":"none"})"},
      {"llama3-70b tp8 slice", R"({"model":"llama3-70b","gpu":"h100","world_size":8,"tensor_model_parallel_size":8,"pipeline_model_parallel_size":1,
         "seq_length":8192,"micro_batch_size":1,"global_batch_size":1,"num_layers":2,"attention_backend":"fused",
         "recompute_granularity":"none"})"}};
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    std::vector<double> v;
    for (const auto& r : test::read_csv_rows(dir + "layers_queued.csv"))
      if (r.at("case") == c.name) v.push_back(std::stod(r.at("start_delay_us")) * 1e-6);
    REQUIRE(v.size() == 18);
    double mean = 0, ss = 0;
    for (double x : v) mean += x;
    mean /= double(v.size());
    for (double x : v) ss += (x - mean) * (x - mean);
    const double half = 2.110 * std::sqrt(ss / double(v.size() - 1)) / std::sqrt(double(v.size()));
    const double sim = layer_mean_wait_s(c.params);
    INFO(c.name << ": measured mean " << mean * 1e6 << " us +- " << half * 1e6 << ", simulated " << sim * 1e6 << " us");
    MESSAGE(c.name << ": measured mean " << mean * 1e6 << " us +- " << half * 1e6 << ", simulated " << sim * 1e6 << " us");
    if (known[i].overestimate) {
      CHECK(sim > mean + half);
    } else {
      CHECK(sim >= mean - half);
      CHECK(sim <= mean + half);
    }
  }
}

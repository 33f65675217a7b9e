// Cluster scenarios (workloads/cluster.hpp, replay/cluster_run.hpp): several jobs on one shared fabric,
// placement policies, faults, jitter. Hand-computed expectations on small fat trees.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>

#include "replay/outputs.hpp"
#include "replay/run_scenario.hpp"
#include "sim/base/error.hpp"
#include "topologies/io.hpp"
#include "workloads/cluster.hpp"
#include "workloads/scenario.hpp"

using namespace fabricsim;

namespace {

const std::string kDir = std::string(FABRICSIM_SOURCE_DIR) + "/tests/data/cluster/";
const std::string kFile = kDir + "scenario.json";  // relative paths resolve in tests/data/cluster

// One GPU and one 400 Gb/s NIC per server, so every transfer between servers crosses the fat tree.
Json superpod(int nodes, int radix, double oversubscription) {
  return Json{{"preset", "superpod"},
              {"params", {{"nodes", nodes}, {"node", "dgx-h100"}, {"gpus_per_node", 1}, {"nics_per_node", 1},
                          {"radix", radix}, {"oversubscription", oversubscription}, {"tiers", 2}}}};
}

Json job(const std::string& name, const std::string& trace, std::vector<int> gpus) {
  return Json{{"name", name}, {"workload", {{"trace", trace}}}, {"gpus", gpus}};
}

// Relative comparison (doctest's Approx adds an absolute scale of 1.0 by default, too loose for seconds).
doctest::Approx rel(double v, double eps) { return doctest::Approx(v).epsilon(eps).scale(0); }

// Effective line rate of a 400 Gb/s NIC port in the engine: 50 GB/s x network_efficiency 48.5 / 50
// (models/calibration.cpp, from NVIDIA's "CX-7 NICs at NDR rate should achieve up to 48-49GB/s").
constexpr double kPortBps = 48.5e9;

sim::RunResult run(const Json& doc) {
  workloads::Scenario s = workloads::scenario_from_json(doc, kFile);
  return sim::run_scenario(s).result;
}

const sim::JobResult& job_of(const sim::RunResult& r, const std::string& name) {
  auto it = std::find_if(r.jobs.begin(), r.jobs.end(), [&](const sim::JobResult& j) { return j.name == name; });
  REQUIRE(it != r.jobs.end());
  return *it;
}

}  // namespace

TEST_CASE("cluster: two jobs on a 2:1 oversubscribed fat tree get the max-min share of the shared uplinks") {
  // radix 6, 2:1: each leaf has 4 server ports and 2 uplinks (one per spine), 50 GB/s each. Job A sends
  // server 0 -> 4 and 1 -> 5, job B 2 -> 6 and 3 -> 7 (leaf 0 -> leaf 1). Destination-based routing puts
  // 4 and 6 on spine 0, 5 and 7 on spine 1. Alone, each flow has an uplink to itself: 50 GB/s. Together,
  // each uplink carries one flow of each job: the max-min share is 50 / 2 = 25 GB/s per flow, so the
  // bandwidth term of the transfer doubles.
  Json doc = {{"topology", superpod(16, 6, 2)},
              {"jobs", {job("a", "pair_sends.json", {0, 1, 4, 5}), job("b", "pair_sends.json", {2, 3, 6, 7})}}};
  sim::RunResult r = run(doc);
  REQUIRE(r.jobs.size() == 2);
  const double S = 1073741824.0;
  for (const char* n : {"a", "b"}) {
    const auto& j = job_of(r, n);
    // Alone: S / 48.5 GB/s plus the message latency; together: S / (48.5 / 2) GB/s plus the same latency.
    const double latency = j.iteration_s_alone - S / kPortBps;
    CHECK(latency > 0);
    CHECK(latency < 1e-4);
    CHECK(j.iteration_s == rel(S / (kPortBps / 2) + latency, 1e-3));
    CHECK(j.slowdown == rel(2.0, 0.005));
  }
  // The interference is reported on the two leaf-0 uplinks (and the two spine -> leaf-1 downlinks).
  CHECK(r.metrics.at("cluster.alone_replays") == 2);
  REQUIRE(r.shared_links.size() == 4);
  int uplinks = 0;
  for (const auto& l : r.shared_links) {
    CHECK(l.bytes_by_job.size() == 2);
    CHECK(l.bytes_by_job.at("a") == doctest::Approx(S));
    uplinks += l.from == "leaf.r0.0";
  }
  CHECK(uplinks == 2);
  // Text and JSON carry the jobs side by side.
  Json j = sim::result_json(r, 5);
  REQUIRE(j.contains("jobs"));
  CHECK(j["jobs"][0]["slowdown"].get<double>() == rel(2.0, 0.005));
  CHECK(sim::summary_text(r, 0).find("step alone") != std::string::npos);
}

TEST_CASE("cluster: comm model engine prices every call alone: each job's step is its shared-model step alone") {
  // The jobs of the first test (each uplink of leaf 0 carries one flow of each job): under the idle-fabric tier
  // nothing contends, so each job's step together is the shared model's step alone, slowdown 1, no alone
  // replay; the link directions both jobs use are still listed.
  Json doc = {{"topology", superpod(16, 6, 2)},
              {"jobs", {job("a", "pair_sends.json", {0, 1, 4, 5}), job("b", "pair_sends.json", {2, 3, 6, 7})}}};
  const sim::RunResult shared = run(doc);
  doc["comm_model"] = "engine";
  const sim::RunResult engine = run(doc);
  for (const char* n : {"a", "b"}) {
    CHECK(job_of(engine, n).iteration_s == rel(job_of(shared, n).iteration_s_alone, 1e-9));
    CHECK(job_of(engine, n).iteration_s_alone == job_of(engine, n).iteration_s);
    CHECK(job_of(engine, n).slowdown == 1.0);
    CHECK(job_of(shared, n).slowdown == rel(2.0, 0.005));
  }
  CHECK(engine.metrics.at("cluster.alone_replays") == 0);
  CHECK(engine.metrics.count("replay.shared.network_calls") == 0);  // no shared network was built
  CHECK(engine.shared_links.size() == shared.shared_links.size());
  REQUIRE(!engine.notes.empty());
  CHECK(engine.notes.front().find("comm model engine") != std::string::npos);
}

TEST_CASE("cluster: the same jobs on a full-bisection tree share no link and do not slow each other") {
  // radix 4, 1:1: leaves of 2 servers with 2 uplinks; job A leaf 0 -> leaf 2, job B leaf 1 -> leaf 3.
  Json doc = {{"topology", superpod(8, 4, 1)},
              {"jobs", {job("a", "pair_sends.json", {0, 1, 4, 5}), job("b", "pair_sends.json", {2, 3, 6, 7})}}};
  sim::RunResult r = run(doc);
  CHECK(r.shared_links.empty());
  CHECK(r.metrics.at("cluster.alone_replays") == 0);  // they cannot meet: alone = together, not replayed
  for (const auto& j : r.jobs) {
    CHECK(j.slowdown == rel(1.0, 1e-12));
    CHECK(j.iteration_s_alone == rel(1073741824.0 / kPortBps, 0.005));
  }
}

TEST_CASE("cluster: a link at 50 % bandwidth on a ring's path gives NCCL's ring time with that link") {
  // Four servers of one GPU; the ring all-reduce sends 2 (n-1)/n x S through every ring link, one step
  // after the other, so its bandwidth term is 2 (n-1)/n x S / (slowest link on the ring). Server 1's NIC
  // uplink at 50 % (25 GB/s) is on the ring: the term doubles from 1.5 S / 50 GB/s to 1.5 S / 25 GB/s.
  Json healthy = {{"topology", superpod(4, 4, 1)}, {"jobs", {job("ring", "ring_allreduce.json", {0, 1, 2, 3})}}};
  Json slow = healthy;
  slow["faults"] = Json::array({Json{{"link", {"n1.nic0", "leaf.r0.0"}}, {"bandwidth", "50%"}}});
  sim::RunResult h = run(healthy), d = run(slow);
  const double S = 1073741824.0, n = 4;
  const double th = h.jobs[0].iteration_s, td = d.jobs[0].iteration_s;
  const double term_h = 2 * (n - 1) / n * S / kPortBps, term_d = 2 * (n - 1) / n * S / (kPortBps / 2);
  const double latency = th - term_h;  // the ring's 2 (n-1) step latencies, as the healthy run gives them
  CHECK(latency > 0);
  CHECK(latency < 1e-3);
  CHECK(td == rel(term_d + latency, 1e-3));
  CHECK(d.jobs[0].slowdown == rel(1.0, 1e-12));  // alone = together for one job
  bool noted = false;
  for (const auto& note : d.notes) noted = noted || note.find("n1.nic0 <-> leaf.r0.0 at 50 %") != std::string::npos;
  CHECK(noted);
}

TEST_CASE("cluster: a lost server shrinks the data-parallel job by one replica and lengthens its step") {
  Json w = {{"generator", "dataparallel"},
            {"params", {{"num_parameters", 1e9}, {"global_batch_size", 48}, {"world_size", 4}, {"tokens_per_sample", 2048}}}};
  // Compute beside the gradient all-reduce off: the compute ratios below are the fault model's arithmetic
  // (tests/replay/test_replay_sm_contention.cpp covers the contention).
  Json healthy = {{"topology", superpod(4, 4, 1)}, {"comm_sm_contention", false},
                  {"jobs", {Json{{"name", "dp"}, {"workload", w}, {"placement", "packed"}}}}};
  Json lost = healthy;
  lost["faults"] = Json::array({Json{{"node", 3}, {"policy", "shrink"}}});
  sim::RunResult h = run(healthy), l = run(lost);
  CHECK(h.jobs[0].gpus == 4);
  CHECK(l.jobs[0].gpus == 3);
  // Same global batch over 3 instead of 4 replicas: 16 instead of 12 samples per GPU, 4/3 the compute.
  // (within 2 %: the per-kernel launch overhead does not grow with the batch).
  CHECK(l.jobs[0].compute_s / h.jobs[0].compute_s == rel(4.0 / 3.0, 0.02));
  CHECK(l.jobs[0].compute_s / h.jobs[0].compute_s < 4.0 / 3.0);
  CHECK(l.jobs[0].iteration_s > h.jobs[0].iteration_s * 1.2);
  // Same tokens per step, so throughput falls with the step time.
  CHECK(l.jobs[0].tokens_per_s * l.jobs[0].iteration_s == rel(h.jobs[0].tokens_per_s * h.jobs[0].iteration_s, 1e-9));
  bool noted = false;
  for (const auto& n : l.notes) noted = noted || n.find("4 -> 3 data-parallel replicas") != std::string::npos;
  CHECK(noted);
  // With a spare server the job keeps its 4 GPUs.
  Json spare = {{"topology", superpod(5, 4, 1)}, {"comm_sm_contention", false},
                {"jobs", {Json{{"name", "dp"}, {"workload", w}, {"placement", "packed"}}}},
                {"faults", {Json{{"node", 3}, {"policy", "spare"}}}}};
  sim::RunResult s = run(spare);
  CHECK(s.jobs[0].gpus == 4);
  CHECK(s.jobs[0].compute_s == rel(h.jobs[0].compute_s, 1e-12));
}

TEST_CASE("cluster: a slower GPU and compute jitter lengthen the step; same seed, same result") {
  Json w = {{"generator", "dataparallel"},
            {"params", {{"num_parameters", 1e9}, {"global_batch_size", 32}, {"world_size", 4}}}};
  // Compute beside the gradient all-reduce off, as above: the 1.2x below is the slowdown fault's arithmetic.
  Json base = {{"topology", superpod(4, 4, 1)}, {"comm_sm_contention", false},
               {"jobs", {Json{{"name", "dp"}, {"workload", w}, {"placement", "spread"}}}}};
  sim::RunResult b = run(base);
  Json slow = base;
  slow["faults"] = Json::array({Json{{"gpu", 2}, {"slowdown", "20%"}}});
  sim::RunResult s = run(slow);
  CHECK(s.jobs[0].compute_s == rel(1.2 * b.jobs[0].compute_s, 1e-9));
  Json jit = base;
  jit["jitter"] = {{"sigma", "5%"}, {"seed", 7}};
  sim::RunResult j1 = run(jit), j2 = run(jit);
  CHECK(j1.jobs[0].compute_s > b.jobs[0].compute_s);  // max over 4 GPUs per kernel: E[max] = 1.03 sigma
  CHECK(j1.jobs[0].iteration_s == j2.jobs[0].iteration_s);
  CHECK(workloads::normal_quantile(0.975) == rel(1.959964, 1e-6));
  CHECK(workloads::normal_quantile(1e-6) == rel(-4.753424, 1e-6));
}

TEST_CASE("cluster: placement policies and strict parsing") {
  topo::Topology t = topo::build_preset("superpod", {{"nodes", "8"}, {"radix", "4"}, {"gpus_per_node", "2"},
                                                     {"nics_per_node", "1"}, {"tiers", "2"}});
  auto jobs_with = [](const std::string& pl) {
    workloads::JobSpec j;
    j.name = "x";
    j.placement = pl;
    j.where = "t";
    return std::vector<workloads::JobSpec>{j};
  };
  // 8 servers of 2 GPUs, racks (leaf groups) of 2 servers: 0-1, 2-3, 4-5, 6-7.
  CHECK(workloads::place_jobs(t, jobs_with("packed"), {4})[0] == std::vector<std::int32_t>{0, 1, 2, 3});
  CHECK(workloads::place_jobs(t, jobs_with("spread"), {4})[0] == std::vector<std::int32_t>{0, 1, 4, 5});
  CHECK(workloads::place_jobs(t, jobs_with("fill-racks"), {4})[0] == std::vector<std::int32_t>{0, 1, 2, 3});
  auto r1 = workloads::place_jobs(t, jobs_with("random"), {6})[0];
  CHECK(r1.size() == 6);
  CHECK_THROWS_AS(workloads::place_jobs(t, jobs_with("rail-aligned"), {3}), InputError);
  CHECK_THROWS_AS(workloads::place_jobs(t, jobs_with("packed"), {17}), InputError);

  auto err = [](const Json& doc) {
    try {
      workloads::scenario_from_json(doc, "c.json");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  Json ok = {{"topology", superpod(4, 4, 1)}, {"jobs", {job("a", "pair_sends.json", {0, 1, 2, 3})}}};
  CHECK(err(ok).empty());
  Json bad = ok;
  bad["jobs"][0]["priority"] = 1;
  CHECK(err(bad).find("c.json: /jobs/0") != std::string::npos);
  bad = ok;
  bad["jobs"][0]["placement"] = "packed";
  CHECK(err(bad).find("exactly one of \"gpus\"") != std::string::npos);
  bad = ok;
  bad["faults"] = Json::array({Json{{"link", {"a", "b"}}, {"bandwidth", "150%"}}});
  CHECK(err(bad).find("c.json: /faults/0/bandwidth") != std::string::npos);
  bad = ok;
  bad["stand_in_traffic"] = "yes";
  CHECK(err(bad).find("c.json: /stand_in_traffic") != std::string::npos);
  bad = ok;
  bad["workload"] = {{"trace", "x.json"}};
  CHECK(err(bad).find("not both") != std::string::npos);
}

TEST_CASE("cluster: a start offset that separates the jobs in time removes the interference; iterations repeat") {
  // The 2:1 case of the first test, but job b starts after job a's transfers are over (22.2 ms alone).
  Json jb = job("b", "pair_sends.json", {2, 3, 6, 7});
  jb["start_offset"] = "30ms";
  Json doc = {{"topology", superpod(16, 6, 2)}, {"jobs", {job("a", "pair_sends.json", {0, 1, 4, 5}), jb}}};
  sim::RunResult r = run(doc);
  CHECK(job_of(r, "a").slowdown == rel(1.0, 1e-12));
  CHECK(job_of(r, "b").slowdown == rel(1.0, 1e-12));
  CHECK(job_of(r, "b").iteration_s == rel(job_of(r, "a").iteration_s, 1e-12));
  CHECK(r.iteration_s == rel(0.030 + job_of(r, "b").iteration_s, 1e-12));  // the makespan includes the offset
  // Two iterations of job a: each step as long as the single one; job b (one step) overlaps only the first.
  Json two = {{"topology", superpod(16, 6, 2)}, {"jobs", {job("a", "pair_sends.json", {0, 1, 4, 5}), job("b", "pair_sends.json", {2, 3, 6, 7})}}};
  two["jobs"][0]["iterations"] = 2;
  sim::RunResult t = run(two);
  const auto& a = job_of(t, "a");
  CHECK(a.iterations == 2);
  CHECK(a.iteration_s_alone == rel(job_of(r, "a").iteration_s_alone, 1e-9));
  // First step shared (2x), second alone (1x): mean 1.5x.
  CHECK(a.slowdown == rel(1.5, 0.005));
}

TEST_CASE("cluster: stand-in ranks' traffic is on the fabric, as in the run that simulates every rank") {
  // 2:1 tree of the first test: leaf 0 uplinks to spine 0 carry traffic to servers 4 and 6, to spine 1 to
  // 5 and 7. Job a sends 0 -> 4 and 1 -> 5 (pair_sends, every rank listed) or only 0 -> 4 with rank 1 the
  // stand-in of rank 0 (pair_sends_sym: its send 1 -> 5 is a stand-in copy); job b sends 3 -> 7, sharing the
  // spine-1 uplink with a's 1 -> 5 only. With the copy on the fabric the symmetric run is the full run: both
  // jobs get half the uplink (slowdown 2). Without it (stand_in_traffic false, the former behaviour) a and b
  // share nothing and neither slows down.
  auto doc = [](const std::string& trace_a) {
    return Json{{"topology", superpod(16, 6, 2)},
                {"jobs", {job("a", trace_a, {0, 1, 4, 5}), job("b", "one_send.json", {3, 7})}}};
  };
  sim::RunResult full = run(doc("pair_sends.json")), sym = run(doc("pair_sends_sym.json"));
  Json off_doc = doc("pair_sends_sym.json");
  off_doc["stand_in_traffic"] = false;
  sim::RunResult off = run(off_doc);
  for (const char* n : {"a", "b"}) {
    CHECK(job_of(full, n).slowdown == rel(2.0, 0.005));
    CHECK(job_of(sym, n).iteration_s == rel(job_of(full, n).iteration_s, 1e-9));
    CHECK(job_of(sym, n).iteration_s_alone == rel(job_of(full, n).iteration_s_alone, 1e-9));
    CHECK(job_of(off, n).slowdown == rel(1.0, 1e-12));
  }
  CHECK(sym.metrics.at("cluster.stand_in_message_pairs") == 1);
  CHECK(sym.shared_links.size() == full.shared_links.size());
  CHECK(off.shared_links.empty());

  // A collective: the all-reduce of {0, 2} with {1, 3} as its stand-in copy against both groups listed.
  sim::RunResult cfull = run(doc("pair_allreduce_full.json")), csym = run(doc("pair_allreduce_sym.json"));
  CHECK(job_of(cfull, "b").slowdown > 1.2);
  for (const char* n : {"a", "b"}) {
    CHECK(job_of(csym, n).iteration_s == rel(job_of(cfull, n).iteration_s, 1e-9));
    CHECK(job_of(csym, n).slowdown == rel(job_of(cfull, n).slowdown, 1e-9));
  }
  CHECK(csym.metrics.at("cluster.stand_in_groups") == 1);
}

TEST_CASE("cluster: a server that lost a NIC gives the ring one channel fewer, as NCCL aligns its channels") {
  // Two DGX H100 (8 GPUs, 8 x 400 Gb/s NICs, one per GPU), one 1 GiB ring all-reduce over the 16 GPUs.
  // Healthy: 8 channels, each leaving every server through its own NIC; the bandwidth term is
  // 2 (n-1)/n x S / (8 x 48.5 GB/s). NIC n1.nic7 down: GPU 7 of server 1 leaves through a neighbour's NIC,
  // so that server's search finds 7 channels (one per usable NIC) and every rank takes the minimum
  // (NCCL src/init.cc): the term becomes 2 (n-1)/n x S / (7 x 48.5 GB/s), 8/7 of the healthy one. (Keeping 8
  // channels would put two on one NIC of server 1 and double the term.)
  const Json topo = {{"preset", "superpod"}, {"params", {{"nodes", 2}, {"node", "dgx-h100"}, {"tiers", 2}}}};
  std::vector<int> all(16);
  for (int i = 0; i < 16; ++i) all[i] = i;
  Json healthy = {{"topology", topo}, {"jobs", {job("ring", "ring_allreduce16.json", all)}}};
  Json lost = healthy;
  lost["faults"] = Json::array({Json{{"nic", "n1.nic7"}}});
  sim::RunResult h = run(healthy), d = run(lost);
  const double S = 1073741824.0, n = 16;
  const double term8 = 2 * (n - 1) / n * S / (8 * kPortBps), term7 = 2 * (n - 1) / n * S / (7 * kPortBps);
  const double th = h.jobs[0].iteration_s, td = d.jobs[0].iteration_s;
  const double latency = th - term8;
  CHECK(latency > 0);
  CHECK(latency < 1e-3);
  CHECK(td == rel(term7 + latency, 2e-3));
}

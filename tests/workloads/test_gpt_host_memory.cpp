// Host memory as a checked resource (docs/workloads.md "Host memory"): the topology gives each server's host memory
// (its CPU nodes' "memory": the presets' datasheet figures or --param host_memory), `fabricsim run` passes the
// capacity per GPU to the gpt generator, which refuses offloads that need more and reports the need beside the HBM
// peak.
#include <doctest/doctest.h>

#include "workloads_test_util.hpp"

#include <string>

#include "sim/base/json_reader.hpp"
#include "topologies/io.hpp"
#include "topologies/topology.hpp"
#include "workloads/gpt.hpp"
#include "workloads/scenario.hpp"

using namespace fabricsim;
using namespace fabricsim::workloads;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// The small Llama of the other offload tests (TP 2, PP 2, DP 4 on 16 H100s) with the distributed optimizer and
// its state offloaded.
ParamMap offload(ParamMap over = {}) {
  ParamMap p = workloads_test::small_llama(16, 16, {{"use_distributed_optimizer", "true"},
                                                    {"precision", "bf16"},
                                                    {"offload_optimizer_states", "true"}});
  for (const auto& [k, v] : over) p[k] = v;
  return p;
}

// What `fabricsim run` passes the gpt generator for topology `t`.
ParamMap run_params(const topo::Topology& t, ParamMap params) {
  Scenario s;
  s.workload.kind = "generator";
  s.workload.generator = "gpt";
  s.workload.params = std::move(params);
  s.workload.where = "scenario /workload/params";
  return generator_params(s, t, workloads_test::h100());
}

std::string bytes_param(double b) { return std::to_string(static_cast<unsigned long long>(b)) + "B"; }

}  // namespace

TEST_CASE("host memory: the presets' servers give their datasheet figure on their CPUs; host_memory overrides it") {
  // DGX H100 / H200 / B200 and DGX A100: 2 TB per server over 2 sockets.
  for (const char* preset : {"dgx-h100", "dgx-h200", "dgx-b200", "dgx-a100"}) {
    CAPTURE(preset);
    const topo::Topology t = topo::load_topology(preset, {});
    CHECK(t.host_memory_bytes(0) == 2e12);
  }
  // GB200 NVL72: 480 GB of LPDDR5X per Grace, 2 Grace per 4-GPU compute tray (= host).
  const topo::Topology nvl = topo::load_topology("gb200-nvl72", {});
  for (int h = 0; h < nvl.num_hosts(); ++h) CHECK(nvl.host_memory_bytes(h) == 960e9);
  // Not given where no source was found: not known, not checked.
  for (const char* preset : {"gb300-nvl72", "dgx-b300", "dgx1-v100", "pcie-server", "mi300x-node"}) {
    CAPTURE(preset);
    CHECK(topo::load_topology(preset, {}).host_memory_bytes(0) == 0.0);
  }
  // host_memory states another figure per server (or tray), with its unit, for presets and superpods alike.
  CHECK(topo::load_topology("dgx-h100", {{"host_memory", "1TB"}}).host_memory_bytes(0) == 1e12);
  CHECK(topo::load_topology("dgx-b300", {{"host_memory", "4TiB"}}).host_memory_bytes(0) == 4.0 * 1099511627776.0);
  const topo::Topology pod = topo::load_topology("superpod", {{"nodes", "2"}, {"node", "gb300-nvl72"}, {"host_memory", "1TB"}});
  CHECK(pod.host_memory_bytes(17) == 1e12);
  CHECK(pod.params().at("host_memory") == "1TB");
  CHECK(error_of([] { topo::load_topology("dgx-h100", {{"host_memory", "1024"}}); }) ==
        "--param host_memory=1024: a size needs its unit, e.g. \"1024TB\" or \"1024GiB\"");
  CHECK(contains(error_of([] { topo::load_topology("dgx-h100", {{"host_memory", "1TB/s"}}); }), "--param host_memory"));
}

TEST_CASE("host memory: a topology file gives it on cpu nodes only, and export keeps it") {
  const topo::Topology t = topo::load_topology("dgx-h100", {});
  const Json j = topo::topology_to_json(t);
  const topo::Topology back = topo::topology_from_json(j, "export.json");
  CHECK(back.host_memory_bytes(0) == 2e12);
  // A unit string on a cpu node; on any other node it is an error naming the JSON path.
  Json edited = j;
  std::size_t cpu = 0, gpu = 0;
  for (std::size_t i = 0; i < edited["nodes"].size(); ++i) {
    if (edited["nodes"][i]["kind"].get<std::string>() == "cpu") cpu = i;
    if (edited["nodes"][i]["kind"].get<std::string>() == "gpu") gpu = i;
  }
  edited["nodes"][cpu]["memory"] = "1.5TB";
  CHECK(topo::topology_from_json(edited, "f.json").host_memory_bytes(0) == 1e12 + 1.5e12);
  Json bad = j;
  bad["nodes"][gpu]["memory"] = "80GB";
  const std::string e = error_of([&] { topo::topology_from_json(bad, "f.json"); });
  CHECK(contains(e, "f.json: /nodes/" + std::to_string(gpu) + "/memory"));
  CHECK(contains(e, "host memory belongs to cpu nodes"));
}

TEST_CASE("host memory: run passes the servers' memory per GPU to gpt; a workload cannot state it") {
  const ParamMap p = offload();
  const topo::Topology h100 = topo::load_topology("superpod", {{"nodes", "2"}});
  CHECK(run_params(h100, p).at("host_memory_per_gpu") == bytes_param(2e12 / 8));
  const topo::Topology small = topo::load_topology("superpod", {{"nodes", "2"}, {"host_memory", "1TB"}});
  CHECK(run_params(small, p).at("host_memory_per_gpu") == bytes_param(1e12 / 8));
  const topo::Topology nvl = topo::load_topology("gb200-nvl72", {});
  CHECK(run_params(nvl, p).at("host_memory_per_gpu") == bytes_param(960e9 / 4));
  CHECK(run_params(topo::load_topology("gb300-nvl72", {}), p).count("host_memory_per_gpu") == 0);
  ParamMap given = p;
  given["host_memory_per_gpu"] = "100GB";
  CHECK(contains(error_of([&] { run_params(h100, given); }), "no workload parameter: host memory is the topology's"));
}

TEST_CASE("host memory: an offload needing more than the servers have is refused, naming the largest term") {
  const GptConfig c = gpt_config_from_params(offload(), "--param");
  double need = 0;  // the largest stage's offloaded state per GPU
  for (std::int64_t st = 0; st < c.pipeline_model_parallel_size; ++st)
    need = std::max(need, gpt_memory_of_stage(c, st).host_bytes());
  REQUIRE(need > 0);
  const GptMemory peak = gpt_memory_per_gpu(c);
  CHECK(peak.host_bytes() == peak.optimizer_offloaded_bytes);
  // 1 % short: refused as does-not-fit (sweeps and plan record it as an answer), naming the term and the capacity.
  const std::string e = error_of([&] {
    check_gpt_layout_and_memory(gpt_config_from_params(offload({{"host_memory_per_gpu", bytes_param(need * 0.99)}}), "--param"), "w");
  });
  CHECK(contains(e, "model does not fit in host memory"));
  CHECK(contains(e, "largest: chunked_optimizer_state_offload's optimizer state"));
  CHECK(contains(e, "host_memory parameter"));
  try {
    check_gpt_layout_and_memory(gpt_config_from_params(offload({{"host_memory_per_gpu", bytes_param(need * 0.99)}}), "--param"), "w");
    FAIL("not refused");
  } catch (const DoesNotFitError&) {
  }
  // 1 % to spare: it runs, and reports the need and the capacity beside the HBM peak.
  const Trace tr = workloads_test::gen(offload({{"host_memory_per_gpu", bytes_param(need * 1.01)}}));
  CHECK(tr.metadata.at("host_memory_per_gpu_bytes.max") == doctest::Approx(peak.host_bytes()));
  CHECK(tr.metadata.at("host_memory_per_gpu_bytes.capacity") == doctest::Approx(need * 1.01).epsilon(1e-6));
  bool note = false;
  for (const auto& n : tr.notes) note = note || contains(n, "gpt: host memory:");
  CHECK(note);
  // Without the offload nothing is pinned: no host figure, and any capacity passes.
  const Trace plain = workloads_test::gen(offload({{"offload_optimizer_states", "false"}, {"host_memory_per_gpu", "1B"}}));
  CHECK(plain.metadata.count("host_memory_per_gpu_bytes.max") == 0);
  // optimizer_cpu_offload's shard counts too.
  const ParamMap cpu = offload({{"offload_optimizer_states", "false"},
                                {"optimizer_cpu_offload", "true"},
                                {"use_precision_aware_optimizer", "true"},
                                {"host_memory_per_gpu", "1MB"}});
  CHECK(contains(error_of([&] { check_gpt_layout_and_memory(gpt_config_from_params(cpu, "--param"), "w"); }),
                 "largest: optimizer_cpu_offload's optimizer shard"));
  CHECK(contains(error_of([&] { gpt_config_from_params(offload({{"host_memory_per_gpu", "240"}}), "--param"); }),
                 "expected a size > 0 with its unit"));
}

TEST_CASE("host memory: the Llama-3-70B optimizer_cpu_offload example fits a DGX H100's 2 TB, not a 512 GB server") {
  Scenario s = load_scenario(std::string(FABRICSIM_SOURCE_DIR) + "/examples/workloads/llama3-70b-optimizer-offload-8-h100.json");
  auto memory_on = [&](const std::map<std::string, std::string>& topo_params) {
    const topo::Topology t = topo::load_topology(s.topology, topo_params);
    const ParamMap p = generator_params(s, t, workloads_test::h100());
    return check_gpt_layout_and_memory(gpt_config_from_params(p, s.workload.where), s.workload.where);
  };
  // 0.8 of the 8-way shard of 70.6 B parameters, 16 bytes per element: 105.2 GiB per GPU (docs/workloads.md).
  const GptMemory m = memory_on(s.topology_params);
  CHECK(m.host_bytes() / 1073741824.0 == doctest::Approx(105.2).epsilon(0.001));
  CHECK(2e12 / 8 > m.host_bytes());
  // A 512 GB server has 59.6 GiB per GPU: refused, naming the shard.
  std::map<std::string, std::string> small = s.topology_params;
  small["host_memory"] = "512GB";
  const std::string e = error_of([&] { memory_on(small); });
  CAPTURE(e);
  CHECK(contains(e, "model does not fit in host memory: needs 105.1 GiB of pinned host memory per GPU"));
  CHECK(contains(e, "largest: optimizer_cpu_offload's optimizer shard"));
  CHECK(contains(e, "59.6 GiB per GPU (476.8 GiB per 8-GPU server"));
}

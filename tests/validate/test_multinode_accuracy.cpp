// Held-out accuracy on every visible multi-node nccl-tests log (issue 22), per collective.
//
// The split: the built-in default calibration cites its sources (datasheets, NCCL's tables, an external 8x
// H100 sweep) and is fitted on none of these logs, so predicting them with it is a held-out prediction for
// every one of them (docs/validation.md "Multi-node logs"; the leave-one-out-by-system refit, `fabricsim
// validate --loo --loo-by-system`, is the last test case, a long one). The bounds
// (median |busbw error| <= 8 % >= 1 MiB and <= 15 % below, per collective) are NOT met pooled; the checks
// below are regression guards at the measured values (2026-11-26 and -27, rounded up), and checks of what the fabric
// mapping and NVLS_TREE fixed. docs/validation.md "Multi-node logs" explains what is left, per log.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include "models/calibration.hpp"
#include "sim/base/error.hpp"
#include "validate/inputs.hpp"
#include "validate/report.hpp"
#include "validate/simulate.hpp"

using namespace fabricsim;
using namespace fabricsim::validate;

namespace {
// Every multi-host log's sidecar: tests/data/nccl-tests-multinode and the multi-host logs of tests/data/nccl-tests.
std::vector<std::string> multinode_metas() {
  const std::string d = std::string(FABRICSIM_SOURCE_DIR) + "/tests/data/";
  std::vector<std::string> metas;
  for (const char* sub : {"nccl-tests-multinode/", "nccl-tests/"})
    for (const auto& e : std::filesystem::directory_iterator(d + sub)) {
      const std::string p = e.path().string();
      const std::string f = e.path().filename().string();
      if (p.size() < 10 || p.compare(p.size() - 10, 10, ".meta.json") != 0) continue;
      if (std::string(sub) == "nccl-tests/" && f.find("_inter_") == std::string::npos && f.find("2node") == std::string::npos)
        continue;  // single-host logs
      metas.push_back(p);
    }
  std::sort(metas.begin(), metas.end());
  return metas;
}
}  // namespace

TEST_CASE("multi-node logs: held-out busbw error per collective with the cited defaults") {
  const std::vector<std::string> metas = multinode_metas();
  REQUIRE(metas.size() == 16);  // 10 in nccl-tests-multinode, ABCI inter 5, B200 1
  auto cases = make_cases(load_all(metas, {}));
  const models::Calibration def = models::default_calibration();
  Report r = compare(cases, [&](std::size_t) -> const models::Calibration& { return def; }, "defaults");
  REQUIRE(r.logs.size() == 17);
  std::map<std::string, std::vector<LogCompare>> by_op;
  for (const auto& l : r.logs) {
    CHECK(l.nodes > 1);
    by_op[l.op].push_back(l);
  }
  auto log_of = [&](const char* needle) {
    for (const auto& l : r.logs)
      if (l.source.find(needle) != std::string::npos) return summarize({l});
    FAIL("no log " << needle);
    return ErrorSummary{};
  };
  for (const auto& [op, logs] : by_op) {
    ErrorSummary s = summarize(logs);
    MESSAGE(op << ": >= 1 MiB median " << s.large.median << " p90 " << s.large.p90 << " (" << s.large.count
               << " points); < 1 MiB median " << s.small.median << " p90 " << s.small.p90 << " (" << s.small.count << ")");
  }
  // Guards at the values measured 2026-11-26 (docs/validation.md "Multi-node logs"); issue bounds 8 % / 15 %.
  ErrorSummary ar = summarize(by_op.at("all_reduce"));
  CHECK(ar.large.count == 127);
  // measured 11.6 % (12.1 % with the NVLS_TREE per-loop cost alone, 13.1 % with EFA's 20 us per inter-node step
  // alone, 13.2 % before both, 15.9 % before NCCL_MIN_CTAS was honoured, 20.3 % before NVLS_TREE, 24.4 % before
  // the fabric mapping); the points around the median are sparse, docs/validation.md.
  CHECK(ar.large.median <= 0.117);
  // measured 25.8 % (25.9 % with EFA's latency held at every Ring LL step, 29.2 % before EFA's per-step latency,
  // 39.7 % before NCCL's net overhead in the ring's price)
  CHECK(ar.small.median <= 0.259);
  // EFA's per-message latency from aws-ofi-nccl's own cost model (20 us per inter-node step, topologies/
  // fabrics.cpp): the AWS p5 log's 8 B-128 KiB Tree LL rows were 2.6-3.9x faster than measured with the RoCE
  // estimate (0.6 us per NIC); measured 12.0 % >= 1 MiB and 24.5 % below (22.8 and 174.3 % before; 27.0 % below
  // with the 20 us held at every Ring LL step).
  CHECK(log_of("aws_p5").large.median <= 0.121);
  CHECK(log_of("aws_p5").small.median <= 0.25);
  // Its 256 KiB row runs Ring LL: EFA's latency beyond NCCL's per-step latency in flight (models/ring_stream.hpp),
  // 117.7 us against 104.7 measured (-11.0 % busbw); 639.1 us (-83.6 %) with the 20 us held at all 30 steps.
  for (const auto& l : r.logs)
    if (l.source.find("aws_p5") != std::string::npos)
      for (const auto& p : l.points)
        if (p.size_bytes == (256u << 10)) {
          CHECK(p.algorithm == "ring");
          CHECK(std::abs(p.busbw_error) <= 0.12);
        }
  // NCCL's net overhead (>= 1 us per intra-node step of a multi-node ring) makes 8 ranks on 2 hosts a Tree LL
  // call, as NCCL's model does: ABCI V and Polaris below 1 MiB (45.5 and 53.3 % on Ring LL before).
  CHECK(log_of("abci_inter_vnode_job02").small.median <= 0.12);                    // measured 11.8 %
  CHECK(log_of("polaris_a100_slingshot11_2node_8gpu_all_reduce").small.median <= 0.10);  // measured 9.5 %
  // scatter (AWS p4d, EFA, NCCL 2.18.3): NCCL's p2p sends from the root, simulated since 2026-11-26; measured
  // 46.6 % >= 1 MiB (the 2 GiB plateau +12 %: EFA v1 at 89 % of 4 x 100 Gb/s) and 199.2 % below (86-89 us
  // measured from 64 B to 8 KiB against 29.7 simulated, 22.4 before EFA's 20 us per step; 48.1 and 296.7 %
  // before; what is left: docs/validation.md "Known limits").
  ErrorSummary sc = summarize(by_op.at("scatter"));
  CHECK(sc.large.count == 12);
  CHECK(sc.large.median <= 0.47);
  CHECK(sc.small.median <= 2.00);
  const LogCompare* p4d = nullptr;
  for (const auto& l : r.logs)
    if (l.source.find("aws_p4d") != std::string::npos) p4d = &l;
  REQUIRE(p4d != nullptr);
  for (const auto& p : p4d->points) {
    CHECK(p.algorithm == "direct");
    if (p.size_bytes >= (1ull << 30)) CHECK(std::abs(p.busbw_error) <= 0.14);  // measured +13.1 %, +12.0 %
  }
  ErrorSummary sr = summarize(by_op.at("sendrecv"));
  CHECK(sr.large.median <= 0.12);  // measured 11.5 %
  // The fabric mapping: OCI's 16 RoCE VFs of 100 Gb/s were 4 HDR NICs (the ABCI A100-40GB rule) before.
  CHECK(log_of("oci_a100_roce").large.median <= 0.15);  // measured 14.3 % (47.4 % before)
  // Polaris maps to a 4-GPU server with 2 NICs (one per GPU pair) since 2026-11-26; simulated at the NICs'
  // line rate it is now too fast where it was too slow (all four GPUs on one NIC of an 8-GPU DGX): measured
  // 50.6 % (39.1 % with the wrong server); the Slingshot plateau (36 of 50 GB/s) is what is left.
  CHECK(log_of("polaris_a100_slingshot11_8node").large.median <= 0.51);
  // NVLS_TREE: the three default-setting 2-node H100 logs (whose busbw passes the NICs' line rate) run on it
  // from 4 MiB up; the two InfiniBand ones are now at the bound at >= 1 MiB.
  // XE9680 (NCCL 2.26.2): NVLS_TREE from 1 MiB since its release's NVLS_TREE network latency is priced (14 us, not
  // 20.9), as NCCL 2.26.2 chooses; its 1-8 MiB within -7..0 % since the NVLS per-loop cost is paid on a loop's path
  // only at the kernel's two hand-offs inside a host (18-24 % slow when all six hops paid it; docs/validation.md).
  CHECK(log_of("nvtests309_xe9680").large.median <= 0.060);  // measured 5.94 % (8.92 % with six hops)
  CHECK(log_of("nvtests309_h100_ib400_2node_16gpu_all_reduce.txt").large.median <= 0.061);  // 6.09 % (8.03 %)
  // gj-aion's 8-node log with NCCL_MIN_CTAS=24, honoured since 2026-11-27 (NVLS_TREE on 24 channels). The per-loop
  // fix moved it from 13.2 %: 64-512 MiB +16..+20 % (was +17..+24 %), 1-8 GiB -12..-14 % (was -12..-13 %), the
  // points around its median being those two groups.
  MESSAGE("8-node NCCL_MIN_CTAS=24 log >= 1 MiB median " << log_of("nvtests309_h100_ib400_8node").large.median);
  CHECK(log_of("nvtests309_h100_ib400_8node").large.median <= 0.145);  // measured 14.4 % (16.0 % with 16 channels)
  for (const auto& l : r.logs)
    if (l.source.find("xe9680") != std::string::npos || l.source.find("aws_p5") != std::string::npos)
      for (const auto& p : l.points)
        if (p.size_bytes >= (128ull << 20)) {
          CAPTURE(l.source);
          CAPTURE(p.size_bytes);
          CHECK(p.algorithm == "nvls_tree");
        }
}

TEST_CASE("a log's NCCL settings that fabricsim does not model are reported, the honoured ones named") {
  const std::string p = std::string(FABRICSIM_SOURCE_DIR) +
                        "/tests/data/nccl-tests-multinode/nvtests309_h100_ib400_2node_16gpu_all_reduce_ring_minctas24_qps2.meta.json";
  std::vector<Measurement> ms = load_measurements(p);
  auto cases = make_cases(ms);
  const models::Calibration def = models::default_calibration();
  const Report rep = compare(cases, [&](std::size_t) -> const models::Calibration& { return def; }, "defaults");
  REQUIRE(rep.logs.size() == 1u);
  const auto& l = rep.logs[0];
  REQUIRE(l.env_honoured.size() == 2u);
  CHECK(l.env_honoured[0] == "NCCL_ALGO=Ring");
  CHECK(l.env_honoured[1] == "NCCL_MIN_CTAS=24");
  REQUIRE(l.env_not_modelled.size() == 1u);
  CHECK(l.env_not_modelled[0].rfind("NCCL_IB_QPS_PER_CONNECTION=2: ", 0) == 0);
  for (const auto& pt : l.points) CHECK(pt.algorithm == "ring");
  const std::string text = report_text(rep);
  CHECK(text.find("#   NCCL settings honoured: NCCL_ALGO=Ring NCCL_MIN_CTAS=24\n") != std::string::npos);
  CHECK(text.find("NOT modelled: NCCL_MIN_CTAS") == std::string::npos);
}

TEST_CASE("NCCL channel settings in a log's env: parsed as NCCL does, a non-integer is an error naming the log") {
  const auto e = nccl_channel_env({{"NCCL_MIN_CTAS", "24"}, {"NCCL_MAX_NCHANNELS", "0"}, {"NCCL_MAX_CTAS", "-3"}}, "x.log");
  CHECK(e.min_ctas == 24);
  CHECK(e.max_nchannels == 1);  // ncclMaxNchannels: < 1 becomes 1
  CHECK(e.max_ctas == 0);       // <= 0: NCCL leaves the config's value
  CHECK(e.min_nchannels == 0);
  try {
    (void)nccl_channel_env({{"NCCL_MIN_NCHANNELS", "lots"}}, "x.log");
    FAIL("expected an InputError");
  } catch (const InputError& err) {
    const std::string w = err.what();
    CHECK(w.find("x.log") != std::string::npos);
    CHECK(w.find("NCCL_MIN_NCHANNELS=lots: expected an integer channel count") != std::string::npos);
  }
}

namespace {
// One log's only run, its env edited by `edit`, compared under the built-in defaults.
template <class Edit>
Report run_defaults_with_env(const std::string& path, Edit edit) {
  const models::Calibration def = models::default_calibration();
  std::vector<Measurement> ms = load_measurements(path);
  REQUIRE(ms.size() == 1u);
  edit(ms[0].env);
  auto cases = make_cases(ms);
  return compare(cases, [&](std::size_t) -> const models::Calibration& { return def; }, "defaults");
}
}  // namespace

TEST_CASE("NCCL_NVLS_ENABLE=0 in a run's env removes NVLS and NVLS_TREE from the simulated choices") {
  const std::string p = std::string(FABRICSIM_SOURCE_DIR) +
                        "/tests/data/nccl-tests-multinode/nvtests309_xe9680_h100_ib400_2node_16gpu_all_reduce.meta.json";
  const Report on = run_defaults_with_env(p, [](auto&) {});
  const Report off = run_defaults_with_env(p, [](auto& env) { env["NCCL_NVLS_ENABLE"] = "0"; });
  int nvls_rows = 0;
  for (const auto& pt : on.logs[0].points) nvls_rows += pt.algorithm == "nvls_tree";
  CHECK(nvls_rows > 0);  // the default run takes NVLS_TREE from 4 MiB
  for (const auto& pt : off.logs[0].points) CHECK(pt.algorithm.rfind("nvls", 0) != 0);
  CHECK(off.logs[0].env_honoured == std::vector<std::string>{"NCCL_NVLS_ENABLE=0"});
}

TEST_CASE("the NCCL release a log states sets NVLS_TREE's network latency, and with it NCCL's choice at 1-2 MiB") {
  // NCCL's hwLatencies NET NVLS_TREE is 14 us per tree level and direction from v2.19.1-1 to v2.28.7-1 and 20.9 us
  // from v2.28.9-1 (src/graph/tuning.cc). On 2 x 8 H100 with 8 NDR NICs NCCL 2.26.2's model prices NVLS_TREE at
  // 25 + 2 x 14 = 53 us + S / 266.7 GB/s and Tree LL128 at 48.5 us + S / (146.8 GB/s x treeCorrectionFactor), so it
  // takes NVLS_TREE from 1 MiB (56.9 against 60.4 us); with 20.9 us Tree LL128 keeps 1-2 MiB.
  const std::string p = std::string(FABRICSIM_SOURCE_DIR) +
                        "/tests/data/nccl-tests-multinode/nvtests309_xe9680_h100_ib400_2node_16gpu_all_reduce.meta.json";
  const models::Calibration def = models::default_calibration();
  auto run = [&](const std::string& version) {
    std::vector<Measurement> ms = load_measurements(p);
    REQUIRE(ms.size() == 1u);
    REQUIRE(ms[0].nccl_version.rfind("2.26.2", 0) == 0);
    if (!version.empty()) ms[0].nccl_version = version;
    auto cases = make_cases(ms);
    return compare(cases, [&](std::size_t) -> const models::Calibration& { return def; }, "defaults");
  };
  const Report stated = run("");
  const Report current = run("2.29.7");
  REQUIRE(stated.logs[0].points.size() == current.logs[0].points.size());
  for (std::size_t i = 0; i < stated.logs[0].points.size(); ++i) {
    const auto& a = stated.logs[0].points[i];
    const auto& b = current.logs[0].points[i];
    CAPTURE(a.size_bytes);
    if (a.size_bytes >= (1u << 20) && a.size_bytes <= (2u << 20)) {
      CHECK(a.algorithm == "nvls_tree");
      CHECK(b.algorithm == "tree");
      CHECK(b.protocol == "ll128");
    } else if (a.size_bytes >= (4u << 20)) {
      REQUIRE(a.algorithm == "nvls_tree");
      REQUIRE(b.algorithm == "nvls_tree");
      // 2 x (20.9 - 14) us less latency per call: 13.8 us
      CHECK(b.simulated_s - a.simulated_s == doctest::Approx(13.8e-6).epsilon(0.01));
    } else {
      CHECK(a.algorithm == b.algorithm);
      CHECK(a.simulated_s == b.simulated_s);
    }
  }
}

TEST_CASE("NCCL 2.8.4's tuner rules with NCCL's eras: Ring LL on 2 V100 nodes, Ring LL128 at 8 MiB on 4 A100 nodes") {
  // NCCL 2.8.4's model (src/graph/tuning.cc at v2.8.4-1) for 2 x 4 V100: Ring LL 3.6 + 12 x 0.47 x 1.8 + 2 x 2.7
  // = 19.2 us against Tree LL 4.4 + 2 x (3 x 0.52 x 1.8 + 5.0) = 20.0 us, and Ring LL's bandwidth is the higher,
  // so it runs Ring LL at small sizes (the log: 18.0 us at 4 B); the 2.18+ rules' 1 us floor per intra-node step
  // turn that to Tree LL. For 4 x 8 A100 at 8 MiB: Ring LL128 140.4 + 240.3 = 380.7 us against Tree LL128 55.9 +
  // 8 MiB / (29.3 GB/s x 0.7) = 465 us with 2.8's treeCorrectionFactor (0.9 from 2.10: 374 us, Tree). The rules
  // of a release apply with a calibration that carries NCCL's eras (validate/simulate.cpp); the built-in
  // defaults carry none and price every release with the current rules (docs/validation.md, known limits).
  const std::string d = std::string(FABRICSIM_SOURCE_DIR) + "/tests/data/nccl-tests/";
  models::Calibration eras = models::default_calibration();
  eras.nccl_eras = models::default_nccl_eras();
  const models::Calibration def = models::default_calibration();
  auto run = [&](const std::string& file, const std::string& version, const models::Calibration& c) {
    std::vector<Measurement> ms = load_measurements(d + file);
    REQUIRE(ms.size() == 1u);
    REQUIRE(ms[0].nccl_version.rfind("2.8.4-1", 0) == 0);
    if (!version.empty()) ms[0].nccl_version = version;
    auto cases = make_cases(ms);
    return compare(cases, [&](std::size_t) -> const models::Calibration& { return c; }, "c");
  };
  const std::string v2 = "abci_inter_vnode_job2_7194532_8gpu_all_reduce.meta.json";
  const Report stated = run(v2, "", eras), later = run(v2, "2.18.5", eras), defaults = run(v2, "", def);
  int small = 0;
  for (std::size_t i = 0; i < stated.logs[0].points.size(); ++i) {
    const auto& a = stated.logs[0].points[i];
    const auto& b = later.logs[0].points[i];
    const auto& c = defaults.logs[0].points[i];
    CAPTURE(a.size_bytes);
    if (a.size_bytes > 8192) continue;
    ++small;
    CHECK(a.algorithm == "ring");
    CHECK(a.protocol == "ll");
    CHECK(b.algorithm == "tree");
    CHECK(b.protocol == "ll");
    CHECK(c.algorithm == "tree");
    CHECK(c.protocol == "ll");
  }
  CHECK(small == 12);  // 4 B to 8 KiB
  const std::string a4 = "abci_inter_anode_job4_7194285_32gpu_all_reduce.meta.json";
  const Report a28 = run(a4, "", eras), a210 = run(a4, "2.10.3", eras);
  int found = 0;
  for (std::size_t i = 0; i < a28.logs[0].points.size(); ++i) {
    if (a28.logs[0].points[i].size_bytes != (8u << 20)) continue;
    ++found;
    CHECK(a28.logs[0].points[i].algorithm == "ring");
    CHECK(a28.logs[0].points[i].protocol == "ll128");
    CHECK(a210.logs[0].points[i].algorithm == "tree");
    CHECK(a210.logs[0].points[i].protocol == "ll128");
  }
  CHECK(found == 1);
}

TEST_CASE("NCCL_MIN_CTAS=24 in a run's env: the same NCCL choice, NVLS_TREE on 24 channels instead of 16") {
  // gj-aion's 8-node log (NCCL_MIN_CTAS=24): NCCL's tuner choice does not see the setting (graphs[a]->nChannels,
  // src/graph/tuning.cc at v2.26.2-1), its NVLS channels do (src/transport/nvls.cc), so fewer, larger NVLS_TREE
  // loops: at 8 GiB 51613 us with 16 channels, 49870 us with 24 (docs/validation.md, 8-node H100 limit).
  const std::string p = std::string(FABRICSIM_SOURCE_DIR) +
                        "/tests/data/nccl-tests-multinode/nvtests309_h100_ib400_8node_64gpu_all_reduce_minctas24_qps2.meta.json";
  auto require_set = [](auto& env) { REQUIRE(env.count("NCCL_MIN_CTAS") == 1u); };
  const Report with = run_defaults_with_env(p, require_set);
  const Report without = run_defaults_with_env(p, [&](auto& env) {
    require_set(env);
    env.erase("NCCL_MIN_CTAS");
  });
  REQUIRE(with.logs[0].points.size() == without.logs[0].points.size());
  int faster = 0;
  for (std::size_t i = 0; i < with.logs[0].points.size(); ++i) {
    const auto& a = with.logs[0].points[i];
    const auto& b = without.logs[0].points[i];
    CAPTURE(a.size_bytes);
    CHECK(a.algorithm == b.algorithm);
    CHECK(a.protocol == b.protocol);
    if (a.size_bytes >= (std::uint64_t{2} << 30)) {
      REQUIRE(a.algorithm == "nvls_tree");
      // 2-8 GiB: 2.4, 0.8, 3.4 % faster (3.2-5.3 % before the NVLS_TREE first chunk stopped paying the per-loop
      // cost on the head's and the tree's hops: the phase schedule's heads then start those hops earlier, which
      // moves how the merged bodies share the heads' links by up to 3 % either way at these sizes).
      CHECK(a.simulated_s < 0.995 * b.simulated_s);
      ++faster;
    }
  }
  CHECK(faster == 3);
}

TEST_CASE("leave-one-out by system: multi-node logs, each system predicted by a fit on the others") {
  // `fabricsim validate --loo --loo-by-system` with the files of the defaults' command above (docs/validation.md
  // "Leave one system out"): every multi-host log of one system held out together, the fit on the rest of its
  // hardware family; the held-out system's fabric properties and host-side latencies fitted on runs of its own
  // fabric only (FitOptions::fabric). A long test (about 30 s of CPU, label "long").
  const std::vector<std::string> metas = multinode_metas();
  REQUIRE(metas.size() == 16);
  auto cases = make_cases(load_all(metas, {}));
  FitOptions opt;
  opt.loo_by_system = true;
  const Report r = leave_one_out(cases, models::default_calibration(), opt);
  REQUIRE(r.logs.size() == 17);
  const ErrorSummary s = summarize(r.logs);
  MESSAGE(">= 1 MiB median " << s.large.median << " (" << s.large.count << "), < 1 MiB median " << s.small.median
                             << " (" << s.small.count << ")");
  std::map<std::string, std::vector<LogCompare>> by_op;
  for (const auto& l : r.logs) by_op[l.op].push_back(l);
  const ErrorSummary ar = summarize(by_op.at("all_reduce"));
  MESSAGE("all_reduce >= 1 MiB median " << ar.large.median << ", < 1 MiB median " << ar.small.median);
  auto log_of = [&](const char* needle) {
    for (const auto& l : r.logs)
      if (l.source.find(needle) != std::string::npos) return summarize({l});
    FAIL("no log " << needle);
    return ErrorSummary{};
  };
  const ErrorSummary xe = log_of("nvtests309_xe9680");
  MESSAGE("XE9680 >= 1 MiB " << xe.large.median << ", < 1 MiB " << xe.small.median);
  CHECK(s.large.count == 174);
  CHECK(s.small.count == 204);
  // Measured 2026-11-27 (docs/validation.md "Leave one system out"), bounds at the measured values rounded up.
  // The pooled < 1 MiB median rose from 17.4 % when the host's latencies stopped learning from other fabrics'
  // multi-host runs (FitOptions::fabric) and EFA's cited per-message latency entered the fabric: systems whose
  // per-message cost exceeds NCCL's tables (RoCE, NCCL 2.8.4 over HDR, Slingshot) no longer borrow another
  // fabric's excess, and the held-out folds land near the defaults (15.9 % / 33.2 % on the same points).
  CHECK(s.large.median <= 0.155);   // measured 15.4 % (19.5 % before the split, EFA's latency and NVLS_TREE)
  CHECK(s.small.median <= 0.334);   // measured 33.3 % (17.4 %)
  CHECK(ar.large.median <= 0.115);  // measured 11.4 % (16.6 %)
  CHECK(ar.small.median <= 0.26);   // measured 25.9 % (14.9 %)
  CHECK(xe.small.median <= 0.117);  // measured 11.6 % (73.7 %; 11.6 % with the defaults)
}

TEST_CASE("multinode-ib.json is one network efficiency for systems that differ 2.3x: ABCI A100 fitted on its own sibling") {
  // docs/validation.md "Shipped calibrations": the shipped multi-host file is fitted on the ABCI A100 and V100
  // inter-node logs and the Together B200 log together, with one network_efficiency for all of them. Fitted
  // alone, the two ABCI A100 logs put it at a third of line rate, the file at 0.86 (V100 and B200 pull it),
  // so the file misses the ABCI A100 2-node log by far more than a fit on that system's other log, which is
  // the user's remedy (`fabricsim calibrate` on the 4-node log, `fabricsim validate --calibration` the 2-node
  // one). Measured 2026-11-29: network_efficiency 0.374 (ABCI A100 alone) against 0.860 (shipped); the 2-node
  // log >= 1 MiB median 34.1 % with the shipped file, 4.6 % (< 1 MiB 7.9 %) from the 4-node log's fit.
  const std::string d = std::string(FABRICSIM_SOURCE_DIR) + "/tests/data/nccl-tests/";
  const std::string a2 = d + "abci_inter_anode_job2_7194279_16gpu_all_reduce.meta.json";
  const std::string a4 = d + "abci_inter_anode_job4_7194285_32gpu_all_reduce.meta.json";
  const models::Calibration shipped =
      models::load_calibration(std::string(FABRICSIM_SOURCE_DIR) + "/validate/calibrations/multinode-ib.json");
  CHECK(shipped.source.find("abci_inter_vnode") != std::string::npos);
  CHECK(shipped.source.find("abci_inter_anode_job02") != std::string::npos);
  CHECK(shipped.factor("network_efficiency") > 0.8);

  auto both = make_cases(load_all({a2, a4}, {}));
  const FitResult own = fit_calibration(both, models::default_calibration(), FitOptions{});
  CHECK(own.calib.factor("network_efficiency") < 0.5);

  auto two_node = make_cases(load_all({a2}, {}));
  auto four_node = make_cases(load_all({a4}, {}));
  const FitResult sibling = fit_calibration(four_node, models::default_calibration(), FitOptions{});
  const ErrorSummary with_shipped =
      summarize(compare(two_node, [&](std::size_t) -> const models::Calibration& { return shipped; }, "shipped").logs);
  const ErrorSummary held_out =
      summarize(compare(two_node, [&](std::size_t) -> const models::Calibration& { return sibling.calib; }, "own").logs);
  MESSAGE("ABCI A100 2 nodes, >= 1 MiB / < 1 MiB: multinode-ib.json " << with_shipped.large.median << " / "
          << with_shipped.small.median << ", fitted on the 4-node log " << held_out.large.median << " / "
          << held_out.small.median);
  REQUIRE(with_shipped.large.count == 6);
  CHECK(with_shipped.large.median > 0.25);
  CHECK(held_out.large.median < 0.06);
  CHECK(held_out.small.median < 0.09);
}

TEST_CASE("in sample, per system: all_gather, scatter and sendrecv miss issue 22's bounds even fitted on themselves") {
  // The most favourable case a held-out prediction can only approach: each system's logs fitted on
  // themselves (`fabricsim calibrate [--split-fit] LOGS -o fit.json`, then `fabricsim validate --calibration
  // fit.json LOGS`; docs/validation.md "Multi-node logs", "In sample"). For the three collectives other than
  // all_reduce the visible logs come from one or two systems each, and on them the model's structure misses
  // the bounds (8 % >= 1 MiB, 15 % below) with every parameter fitted to the very points it is checked on;
  // a leave-one-system-out fit, which sees none of them, cannot do better than this by construction of the
  // bound. Measured 2026-11-27 (default fit / --split-fit): all_gather (Polaris 8 nodes, GCP A4) 10.0 / 25.2 %
  // and 29.1 / 30.5 %; scatter (AWS p4d) >= 1 MiB 10.9 / 10.9 %; sendrecv (Together B200) < 1 MiB 18.7 / 18.6 %.
  const std::string d = std::string(FABRICSIM_SOURCE_DIR) + "/tests/data/";
  const std::vector<std::vector<std::string>> systems = {
      {d + "nccl-tests-multinode/polaris_a100_slingshot11_2node_8gpu_all_reduce.meta.json",
       d + "nccl-tests-multinode/polaris_a100_slingshot11_8node_32gpu_all_gather.meta.json"},
      {d + "nccl-tests-multinode/gcp_a4_b200_roce_2node_16gpu_all_gather.meta.json"},
      {d + "nccl-tests-multinode/aws_p4d_2node_16gpu_scatter.meta.json"},
      {d + "nccl-tests/together_b200_2node_16gpu_sendrecv.meta.json"}};
  for (bool split : {false, true}) {
    CAPTURE(split);
    std::map<std::string, std::vector<LogCompare>> by_op;
    for (const auto& files : systems) {
      auto cases = make_cases(load_all(files, {}));
      FitOptions opt;
      opt.split_identification = split;
      const FitResult fr = fit_calibration(cases, models::default_calibration(), opt);
      Report r = compare(cases, [&](std::size_t) -> const models::Calibration& { return fr.calib; }, "in sample");
      for (auto& l : r.logs) by_op[l.op].push_back(std::move(l));
    }
    const ErrorSummary ag = summarize(by_op.at("all_gather")), sc = summarize(by_op.at("scatter")),
                       sr = summarize(by_op.at("sendrecv"));
    MESSAGE((split ? "--split-fit" : "default fit") << ": all_gather " << ag.large.median << " / " << ag.small.median
                                                    << ", scatter " << sc.large.median << " / " << sc.small.median
                                                    << ", sendrecv " << sr.large.median << " / " << sr.small.median);
    CHECK(ag.large.count == 25);
    CHECK(ag.small.count == 21);
    CHECK(ag.large.median > 0.08);
    CHECK(ag.small.median > 0.15);
    CHECK(sc.large.median > 0.08);
    CHECK(sr.small.median > 0.15);
  }
}

// Mapping measured runs to topologies, the comparison report, the calibration fit (on synthetic data with a
// known answer) and the report formats.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "models/calibration.hpp"
#include "sim/base/error.hpp"
#include "validate/calibrate.hpp"
#include "validate/report.hpp"

using namespace fabricsim;
using namespace fabricsim::validate;

namespace {
const std::string kData = std::string(FABRICSIM_SOURCE_DIR) + "/tests/data/nccl-tests/";

Measurement load1(const std::string& meta) {
  auto ms = load_measurements(kData + meta);
  REQUIRE(!ms.empty());
  return ms[0];
}
}  // namespace

TEST_CASE("nearest-rank quantiles and the 1 MiB split") {
  CHECK(quantile_abs({}, 0.5) == 0);
  CHECK(quantile_abs({0.3, -0.1, 0.2}, 0.5) == doctest::Approx(0.2));
  CHECK(quantile_abs({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 0.9) == doctest::Approx(9));
  CHECK(quantile_abs({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 0.5) == doctest::Approx(5));
  CHECK(quantile_abs({-4, 1}, 1.0) == doctest::Approx(4));
  LogCompare l;
  for (std::uint64_t s : {1024ull, 1048575ull, 1048576ull, 8388608ull}) {
    PointCompare p;
    p.size_bytes = s;
    p.busbw_error = s >= kLargeMessageBytes ? -0.2 : 0.05;
    l.points.push_back(p);
  }
  auto sum = summarize({l});
  CHECK(sum.large.count == 2);
  CHECK(sum.small.count == 2);
  CHECK(sum.large.median == doctest::Approx(0.2));
  CHECK(sum.small.p90 == doctest::Approx(0.05));
}

TEST_CASE("machine mapping: ABCI A/V nodes, H100, multi-host superpod, errors") {
  auto a = map_system(load1("abci_inter_anode_job2_7194279_16gpu_all_reduce.meta.json"));
  CHECK(a.preset == "superpod");
  CHECK(a.params.at("node") == "dgx-a100");
  CHECK(a.params.at("nodes") == "2");
  CHECK(a.params.at("gpu") == "a100-40gb");
  CHECK(a.params.at("nics_per_node") == "4");
  CHECK(a.ranks_per_host == 8);
  CHECK(a.family == "a100");
  auto v = map_system(load1("abci_intra_vnode_job4_7280532_4gpu_all_reduce.meta.json"));
  CHECK(v.preset == "dgx-a100");
  CHECK(v.params.at("gpu") == "v100");
  CHECK(v.params.at("gpus_per_node") == "4");
  CHECK(v.params.at("nic_bandwidth") == "100Gbps");
  CHECK(v.ranks_per_host == 4);
  auto intra4 = map_system(load1("abci_intra_anode_job4_7280520_4gpu_all_reduce.meta.json"));
  CHECK(intra4.preset == "dgx-a100");
  CHECK(intra4.ranks_per_host == 4);
  auto h = map_system(load1("together_h100_1node_8gpu_all_reduce_ring.meta.json"));
  CHECK(h.preset == "dgx-h100");
  CHECK(h.family == "h100");
  Measurement odd = load1("together_h100_1node_8gpu_all_reduce_ring.meta.json");
  odd.gpu_model = "Radeon Instinct MI250X";
  CHECK_THROWS_AS(map_system(odd), InputError);
  // "NVIDIA GB200" contains "b200": it is not mapped to an 8-GPU DGX B200 but refused, naming the rack preset.
  Measurement gb = load1("together_h100_1node_8gpu_all_reduce_ring.meta.json");
  gb.gpu_model = "NVIDIA GB200";
  std::string err;
  try {
    map_system(gb);
  } catch (const InputError& e) {
    err = e.what();
  }
  CHECK(err.find("'NVIDIA GB200'") != std::string::npos);
  CHECK(err.find("--param node=gb200-nvl72") != std::string::npos);
  gb.gpu_model = "NVIDIA B200";
  CHECK(map_system(gb).preset == "dgx-b200");
  Measurement uneven = load1("abci_inter_anode_job2_7194279_16gpu_all_reduce.meta.json");
  uneven.num_nodes = 3;
  CHECK_THROWS_AS(map_system(uneven), InputError);
}

TEST_CASE("compare: one point per usable row, error convention, measured busbw from the log") {
  auto cases = make_cases({load1("together_h100_1node_8gpu_all_reduce_ring.meta.json")});
  REQUIRE(cases.size() == 1);
  CHECK(cases[0].sizes.size() == 31);
  auto def = models::default_calibration();
  Report r = compare(cases, [&](std::size_t) -> const models::Calibration& { return def; }, "t");
  REQUIRE(r.logs.size() == 1);
  const auto& pts = r.logs[0].points;
  REQUIRE(pts.size() == 31);
  for (const auto& p : pts) {
    CHECK(p.simulated_s > 0);
    CHECK(p.busbw_error == doctest::Approx(p.measured_s / p.simulated_s - 1));
    CHECK(p.algorithm == "ring");  // the sidecar records NCCL_ALGO=Ring
  }
  // 8 GiB row: min(oop 40838.9, ip 40780.5) us -> busbw 8 GiB / 40780.5 us * 1.75 = 368.6 GB/s as printed.
  CHECK(pts.back().measured_busbw_GBps == doctest::Approx(368.62).epsilon(1e-3));
  CHECK(r.summary.large.count + r.summary.small.count == 31);
}

TEST_CASE("the fit recovers a known calibration from synthetic measurements") {
  // Truth: the defaults with NVLink efficiency for H100 and the LL base latency changed. "Measurements" are
  // simulations under the truth; the fit starts from the defaults and must find the truth again.
  models::Calibration truth = models::default_calibration();
  truth.factors.nvlink_efficiency_h100 = 0.65;
  for (auto& [ap, v] : truth.algo)
    if (ap.second == models::Protocol::LL) v.base_latency_s *= 2.0;
  Measurement m = load1("together_h100_1node_8gpu_all_reduce_ring.meta.json");
  // As if run with one process per GPU: NCCL latencies are identified only from such runs
  // (validate/calibrate.cpp `relevant`; the log itself is nccl-tests -g 8).
  m.gpus_per_thread = 1;
  auto cases0 = make_cases({m});
  for (std::size_t i = 0; i < m.rows.size(); ++i) {
    auto& r = m.rows[i];
    if (r.size_bytes == 0) continue;
    double t = cases0[0].sys->simulate(r.size_bytes, truth).time_s;
    r.oop.time_us = r.ip.time_us = t * 1e6;
  }
  auto cases = make_cases({m});
  FitResult fr = fit_calibration(cases, models::default_calibration());
  CHECK(fr.final_objective < fr.start_objective);
  CHECK(fr.calib.factors.nvlink_efficiency_h100 == doctest::Approx(0.65).epsilon(0.03));
  const double base_ll = fr.calib.of(models::Algorithm::Ring, models::Protocol::LL).base_latency_s;
  CHECK(base_ll == doctest::Approx(truth.of(models::Algorithm::Ring, models::Protocol::LL).base_latency_s).epsilon(0.1));
  for (const auto& r : fr.residuals) CHECK(std::fabs(r.log_residual) < 0.03);
  // Parameters no row depends on stay where they started.
  CHECK(fr.calib.factors.network_efficiency == models::default_calibration().factors.network_efficiency);
}

TEST_CASE("nccl-tests -g 8: the host floor grows with the channels NCCL runs the call on") {
  // Together 8x H100, -g 8, Ring LL (24 coll channels, models::nccl_coll_channels): measured 35.33 us at
  // 32 KiB (one channel), 39.14 us at 512 KiB (16), 41.47 us at 1 MiB (24).
  auto cases = make_cases({load1("together_h100_1node_8gpu_all_gather_ring.meta.json")});
  const models::Calibration def = models::default_calibration();
  SimPoint a = cases[0].sys->simulate(32 << 10, def);
  SimPoint b = cases[0].sys->simulate(512 << 10, def);
  SimPoint c = cases[0].sys->simulate(1 << 20, def);
  CHECK(a.at_host_floor);
  CHECK(b.at_host_floor);
  CHECK(c.at_host_floor);
  CHECK(a.protocol == "ll");
  CHECK(a.time_s == doctest::Approx(models::host_launch_floor_s(def, 8, 1)));
  CHECK(b.time_s == doctest::Approx(models::host_launch_floor_s(def, 8, 16)));
  CHECK(c.time_s == doctest::Approx(41.47e-6));
  // One GPU per host thread: no floor above the simulated time.
  Measurement one = load1("together_h100_1node_8gpu_all_gather_ring.meta.json");
  one.gpus_per_thread = 1;
  CHECK_FALSE(make_cases({one})[0].sys->simulate(1 << 20, def).at_host_floor);
}

TEST_CASE("NCCL latencies are not fitted on nccl-tests -g N runs (host-floor bound), kernel_launch_s is") {
  Measurement m = load1("together_h100_1node_8gpu_all_gather_ring.meta.json");
  REQUIRE(m.gpus_per_thread == 8);
  FitOptions opt;
  opt.max_iterations = 2;
  const models::Calibration def = models::default_calibration();
  FitResult fr = fit_calibration(make_cases({m}), def, opt);
  bool launch = false, channel = false;
  for (const auto& p : fr.params) {
    CAPTURE(p.name);
    CHECK(p.name.find("latency") == std::string::npos);
    launch = launch || p.name == "kernel_launch_s";
    channel = channel || p.name == "channel_launch_s";
  }
  CHECK(launch);
  CHECK(channel);
  for (const auto& [ap, v] : fr.calib.algo) CHECK(v.base_latency_s == def.algo.at(ap).base_latency_s);
  // The same run as if made with one process per GPU: its latencies move.
  m.gpus_per_thread = 1;
  FitResult one = fit_calibration(make_cases({m}), def, opt);
  bool moved = false;
  for (const auto& p : one.params) moved = moved || p.name.find("latency") != std::string::npos;
  CHECK(moved);
}

TEST_CASE("FitOptions::nccl_eras: an NCCL 2.8.4 run moves its generation's latency table, not the current one") {
  auto cases = make_cases({load1("abci_intra_vnode_job4_7280532_4gpu_all_reduce.meta.json")});
  const models::Calibration def = models::default_calibration();
  FitOptions opt;
  opt.max_iterations = 3;
  opt.nccl_eras = true;
  FitResult fr = fit_calibration(cases, def, opt);
  REQUIRE(fr.calib.nccl_eras.size() == models::default_nccl_eras().size());
  const auto era0 = models::default_nccl_eras()[0].algo;
  bool era_moved = false;
  for (const auto& [ap, v] : fr.calib.nccl_eras[0].algo) {
    const auto& d = era0.at(ap);
    if (v.base_latency_s != d.base_latency_s || v.step_latency_s != d.step_latency_s) era_moved = true;
  }
  CHECK(era_moved);
  // The run is NCCL 2.8.4: the current table's latencies have no row to fit and stay at their defaults.
  for (const auto& [ap, v] : fr.calib.algo) {
    CHECK(v.base_latency_s == def.algo.at(ap).base_latency_s);
    CHECK(v.step_latency_s == def.algo.at(ap).step_latency_s);
  }
  bool named = false;
  for (const auto& p : fr.params) named = named || p.name.rfind("nccl_eras.2.8-2.17.", 0) == 0;
  CHECK(named);
  // Without the option the default fit has no era table.
  opt.nccl_eras = false;
  CHECK(fit_calibration(cases, def, opt).calib.nccl_eras.empty());
}

TEST_CASE("FitOptions::fabric: network and per-call latencies only from runs on that fabric (and single-host runs)") {
  // --loo --loo-by-system sets it to the held-out system's fabric: a fit on other fabrics' runs must not carry
  // their efficiency and latency to it, neither through the network's own parameters nor through the base
  // and per-step latencies, which a multi-host run cannot tell from its fabric's (docs/validation.md "Leave
  // one system out").
  auto cases = make_cases({load1("abci_inter_vnode_job2_7194532_8gpu_all_reduce.meta.json")});
  REQUIRE(cases[0].sys->mapping().params.at("fabric") == "infiniband-edr");
  const models::Calibration def = models::default_calibration();
  FitOptions opt;
  opt.max_iterations = 2;
  auto network = [](const std::string& name) {
    return name == "network_efficiency" || name.rfind("net_step_latency", 0) == 0;
  };
  auto host_latency = [](const std::string& name) {
    return name.rfind("base_latency", 0) == 0 || name.rfind("step_latency", 0) == 0;
  };
  opt.fabric = "efa";
  FitResult other = fit_calibration(cases, def, opt);
  CHECK_FALSE(other.params.empty());  // the other parameters still move
  for (const auto& p : other.params) {
    CAPTURE(p.name);
    CHECK_FALSE(network(p.name));
    CHECK_FALSE(host_latency(p.name));
  }
  CHECK(other.calib.factors.network_efficiency == def.factors.network_efficiency);
  for (const auto& [ap, v] : other.calib.algo) {
    CHECK(v.net_step_latency_s == def.algo.at(ap).net_step_latency_s);
    CHECK(v.base_latency_s == def.algo.at(ap).base_latency_s);
    CHECK(v.step_latency_s == def.algo.at(ap).step_latency_s);
  }
  opt.fabric = "infiniband-edr";
  FitResult same = fit_calibration(cases, def, opt);
  bool moved = false, host_moved = false;
  for (const auto& p : same.params) {
    moved = moved || network(p.name);
    host_moved = host_moved || host_latency(p.name);
  }
  CHECK(moved);
  CHECK(host_moved);
  // A single-host run identifies the host's latencies whatever the held-out fabric.
  auto intra = make_cases({load1("abci_intra_vnode_job4_7280532_4gpu_all_reduce.meta.json")});
  opt.fabric = "efa";
  FitResult single = fit_calibration(intra, def, opt);
  host_moved = false;
  for (const auto& p : single.params) host_moved = host_moved || host_latency(p.name);
  CHECK(host_moved);
}

TEST_CASE("report formats: text summary lines, JSON fields, SVG with one series per log") {
  auto cases = make_cases({load1("abci_intra_vnode_job4_7280532_4gpu_all_reduce.meta.json"),
                           load1("liplus_a100_8gpu_nvlink_sendrecv.meta.json")});
  auto def = models::default_calibration();
  Report r = compare(cases, [&](std::size_t) -> const models::Calibration& { return def; }, "a<b");
  std::string text = report_text(r);
  CHECK(text.find("sizes >= 1 MiB") != std::string::npos);
  CHECK(text.find("sizes <  1 MiB") != std::string::npos);
  Json j = report_json(r);
  CHECK(j["schema"] == "fabricsim.validation_report/1");
  CHECK(j["logs"].size() == 2);
  CHECK(j["logs"][1]["points"].size() == 4);
  CHECK(j["summary"]["large"]["points"].get<int>() == static_cast<int>(r.summary.large.count));
  // Per-log statistics: each log's own sizes only (li-plus has no size below 1 MiB), and in the text one
  // row per log with its file name.
  for (std::size_t i = 0; i < r.logs.size(); ++i) {
    const ErrorSummary own = summarize({r.logs[i]});
    const Json& s = j["logs"][i]["summary"];
    CHECK(s["large"]["points"].get<std::size_t>() == own.large.count);
    CHECK(s["small"]["points"].get<std::size_t>() == own.small.count);
    CHECK(s["large"]["median_abs_busbw_error"].get<double>() == own.large.median);
    CHECK(s["small"]["p90_abs_busbw_error"].get<double>() == own.small.p90);
  }
  CHECK(j["logs"][1]["summary"]["small"]["points"].get<int>() == 0);
  CHECK(j["logs"][1]["summary"]["large"]["points"].get<int>() == 4);
  CHECK(j["logs"][0]["summary"]["large"]["points"].get<std::size_t>() + j["logs"][1]["summary"]["large"]["points"].get<std::size_t>() ==
        r.summary.large.count);
  const std::size_t per_log = text.find("# per log:");
  REQUIRE(per_log != std::string::npos);
  CHECK(per_log < text.find("# summary ("));
  CHECK(text.find("| abci_intra_vnode_job04.sh.7280532.nccl.txt\n", per_log) != std::string::npos);
  CHECK(text.find("      -      - | liplus_a100_8gpu_sendrecv.txt\n", per_log) != std::string::npos);
  // Per hardware family: V100 (ABCI V) and A100 (li-plus), each one run; the JSON groups match summarize().
  REQUIRE(j["families"].size() == 2);
  for (const char* fam : {"a100", "v100"}) {
    CAPTURE(fam);
    std::vector<LogCompare> mine;
    for (const auto& l : r.logs)
      if (l.family == fam) mine.push_back(l);
    REQUIRE(mine.size() == 1);
    const ErrorSummary s = summarize(mine);
    CHECK(j["families"][fam]["runs"].get<std::size_t>() == 1);
    CHECK(j["families"][fam]["large"]["points"].get<std::size_t>() == s.large.count);
    CHECK(j["families"][fam]["small"]["median_abs_busbw_error"].get<double>() == s.small.median);
  }
  const std::size_t per_family = text.find("# per hardware family");
  REQUIRE(per_family != std::string::npos);
  CHECK(per_log < per_family);
  CHECK(per_family < text.find("# summary ("));
  CHECK(text.find(" | a100 (1)\n", per_family) != std::string::npos);
  CHECK(text.find(" | v100 (1)\n", per_family) != std::string::npos);
  std::string svg = report_svg(r);
  CHECK(svg.rfind("<svg", 0) == 0);
  CHECK(svg.find("</svg>") != std::string::npos);
  CHECK(svg.find("a&lt;b") != std::string::npos);  // title escaped
  auto count = [&](const std::string& needle) {
    std::size_t c = 0;
    for (std::size_t p = svg.find(needle); p != std::string::npos; p = svg.find(needle, p + 1)) ++c;
    return c;
  };
  // One panel per log with its simulated line, and one error line per log in the error panel.
  CHECK(count("<g class=\"panel\">") == r.logs.size());
  CHECK(count("<path class=\"sim\"") == 2);
  CHECK(count("<path class=\"err\"") == 2);
  CHECK(count("<g class=\"error-panel\">") == 1);
  std::size_t measured = 0;
  for (const auto& l : r.logs)
    for (const auto& p : l.points) measured += p.measured_busbw_GBps > 0;
  CHECK(count("<circle class=\"meas\"") == measured);
}

TEST_CASE("log_unit groups the runs of one file") {
  Measurement m;
  m.source = "x/raw/b200.txt#run2";
  CHECK(log_unit(m) == "x/raw/b200.txt");
  m.source = "y.txt";
  CHECK(log_unit(m) == "y.txt");
}

namespace {
// The Together all_gather log (8x H100, nccl-tests -g 8) with NCCL_DEBUG_SUBSYS=TUNING lines inserted before
// three of its rows, in the form NCCL >= 2.24 prints them on rank 0 (one per call; NCCL logs all_gather's
// bytes per rank). The lines are written here for the test; the shared log has none.
std::string with_tuning_lines(const std::string& extra_line = "") {
  std::ifstream f(kData + "raw/together_h100_1node_all_gather_ring.txt");
  REQUIRE(f.good());
  std::ostringstream out;
  std::string line;
  auto info = [](const std::string& rest) { return "h100-node:4242:4250 [0] NCCL INFO AllGather: " + rest + "\n"; };
  while (std::getline(f, line)) {
    std::istringstream ls(line);
    std::string first;
    ls >> first;
    if (first == "1048576") {  // 1 MiB total = 131072 B per rank: three calls on LL128 / 4 channels, one on LL
      for (int i = 0; i < 3; ++i) out << info("131072 Bytes -> Algo RING proto LL128 channel{Lo..Hi}={0..3}");
      out << info("131072 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..23}");
      out << extra_line;
    }
    if (first == "4194304") out << info("524288 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..23}");
    if (first == "8388608") out << info("1048576 Bytes -> Algo NVLS_TREE proto SIMPLE channel{Lo..Hi}={0..15}");
    out << line << "\n";
  }
  return out.str();
}
}  // namespace

TEST_CASE("NCCL TUNING lines: NCCL's own algorithm, protocol and channels per size are simulated") {
  const std::string src = "together_all_gather_with_tuning.txt";
  auto plain = load_measurements(kData + "raw/together_h100_1node_all_gather_ring.txt");
  auto ms = parse_nccl_tests_text(with_tuning_lines(), src);
  REQUIRE(ms.size() == 1);
  const Measurement& m = ms[0];
  CHECK(m.rows.size() == plain[0].rows.size());  // the INFO lines do not end the table
  REQUIRE(m.nccl_choices.size() == 3);
  const auto& c1 = m.nccl_choices.at(1048576);  // keyed by the nccl-tests size: 131072 B x 8 ranks
  CHECK(c1.algorithm == "ring");
  CHECK(c1.protocol == "ll128");  // three calls against one
  CHECK(c1.channels == 4);
  CHECK(c1.calls == 3);
  CHECK(m.nccl_choices.at(4194304).protocol == "simple");
  CHECK(m.nccl_choices.at(8388608).algorithm == "nvls_tree");

  auto cases = make_cases({m});
  const models::Calibration def = models::default_calibration();
  SimPoint a = cases[0].sys->simulate(1 << 20, def);
  CHECK(a.from_log);
  CHECK(a.algorithm == "ring");
  CHECK(a.protocol == "ll128");  // the tuner alone picks LL here (see the host-floor test above)
  CHECK(a.time_s >= models::host_launch_floor_s(def, 8, 4) * (1 - 1e-12));
  if (a.at_host_floor) CHECK(a.time_s == doctest::Approx(models::host_launch_floor_s(def, 8, 4)));
  SimPoint b = cases[0].sys->simulate(4 << 20, def);
  CHECK(b.from_log);
  CHECK(b.protocol == "simple");
  SimPoint c = cases[0].sys->simulate(8 << 20, def);  // NVLS_TREE needs two hosts: the tuner's choice
  CHECK_FALSE(c.from_log);
  CHECK_FALSE(cases[0].sys->simulate(2 << 20, def).from_log);  // no TUNING line for 2 MiB

  // The validate report marks these rows and says so in its JSON.
  Report r = compare(cases, [&](std::size_t) -> const models::Calibration& { return def; }, "t");
  int marked = 0;
  for (const auto& p : r.logs[0].points) marked += p.from_log ? 1 : 0;
  CHECK(marked == 2);
  CHECK(report_text(r).find("ring/ll128 nccl") != std::string::npos);

  // A TUNING line for another collective inside the run is an error naming the file and line.
  CHECK_THROWS_WITH_AS(
      parse_nccl_tests_text(
          with_tuning_lines("x:1:2 [0] NCCL INFO AllReduce: 8 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..0}\n"), src),
      doctest::Contains("together_all_gather_with_tuning.txt"), InputError);
  // Other NCCL INFO lines are skipped; malformed TUNING lines are not choices.
  std::string op;
  std::uint64_t bytes = 0;
  NcclChoice ch;
  CHECK_FALSE(parse_nccl_tuning_line("x [0] NCCL INFO comm 0x1 rank 0 nranks 8 - Init COMPLETE", op, bytes, ch));
  CHECK_FALSE(parse_nccl_tuning_line("x [0] NCCL INFO AllGather: 12 Bytes -> Algo RING proto LL channel{Lo..Hi}={3..1}",
                                     op, bytes, ch));
  REQUIRE(parse_nccl_tuning_line("x [0] NCCL INFO ReduceScatter: 4096 Bytes -> Algo PAT proto SIMPLE channel{Lo..Hi}={0..1}",
                                 op, bytes, ch));
  CHECK(op == "reduce_scatter");
  CHECK(bytes == 4096);
  CHECK(ch.algorithm == "pat");
  CHECK(ch.channels == 2);
}

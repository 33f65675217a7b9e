// The nccl-tests parser against every shared raw log (tests/data/nccl-tests, copied from
// ../shared/data/nccl-tests with provenance): header fields, rank lines, row counts, and every value against
// the CSV transcription made independently of this parser.
#include <doctest/doctest.h>

#include <filesystem>
#include <map>
#include <fstream>
#include <sstream>

#include "sim/base/error.hpp"
#include "validate/nccl_log.hpp"

using namespace fabricsim;
using namespace fabricsim::validate;
namespace fs = std::filesystem;

namespace {

const std::string kData = std::string(FABRICSIM_SOURCE_DIR) + "/tests/data/nccl-tests/";

struct CsvRow {
  std::string cells[10];
};

std::vector<CsvRow> read_csv(const std::string& path) {
  std::ifstream f(path);
  REQUIRE(f.good());
  std::string line;
  std::getline(f, line);
  if (!line.empty() && line.back() == '\r') line.pop_back();
  CHECK(line == "size_bytes,count,type,redop,oop_time_us,oop_algbw,oop_busbw,ip_time_us,ip_algbw,ip_busbw");
  std::vector<CsvRow> rows;
  while (std::getline(f, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    CsvRow r;
    std::size_t c = 0, pos = 0;
    while (c < 10) {
      auto comma = line.find(',', pos);
      r.cells[c++] = line.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
      if (comma == std::string::npos) break;
      pos = comma + 1;
    }
    REQUIRE(c == 10);
    rows.push_back(r);
  }
  return rows;
}

double d(const std::string& s) { return std::stod(s); }

ParseHints hint(const std::string& op, int nranks = 0, int nodes = 0) {
  ParseHints h;
  h.op = op;
  h.nranks = nranks;
  h.nodes = nodes;
  return h;
}

std::vector<std::string> meta_files() {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(kData)) {
    std::string p = e.path().string();
    if (p.size() > 10 && p.compare(p.size() - 10, 10, ".meta.json") == 0) out.push_back(p);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("every shared log parses and matches its CSV transcription value by value") {
  auto metas = meta_files();
  REQUIRE(metas.size() == 15);
  for (const auto& meta : metas) {
    CAPTURE(meta);
    auto ms = load_measurements(meta);
    REQUIRE(!ms.empty());
    const Measurement& m = ms.front();
    std::string csv = meta.substr(0, meta.size() - 10) + ".csv";
    auto rows = read_csv(csv);
    REQUIRE(m.rows.size() == rows.size());
    CHECK(!m.op.empty());
    CHECK(m.nranks >= 4);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      CAPTURE(i);
      const auto& c = rows[i].cells;
      const Row& r = m.rows[i];
      CHECK(r.size_bytes == std::stoull(c[0]));
      if (!c[1].empty()) CHECK(r.count == std::stoull(c[1]));
      CHECK(r.type == c[2]);
      CHECK(r.redop == c[3]);
      if (!c[4].empty()) {
        REQUIRE(r.oop.present);
        CHECK(r.oop.time_us == doctest::Approx(d(c[4])).epsilon(1e-12));
        CHECK(r.oop.algbw_GBps == doctest::Approx(d(c[5])).epsilon(1e-12));
        CHECK(r.oop.busbw_GBps == doctest::Approx(d(c[6])).epsilon(1e-12));
      } else {
        CHECK(!r.oop.present);
      }
      if (!c[7].empty()) {
        CHECK(r.ip.time_us == doctest::Approx(d(c[7])).epsilon(1e-12));
        CHECK(r.ip.algbw_GBps == doctest::Approx(d(c[8])).epsilon(1e-12));
      }
      REQUIRE(r.ip.present);
      CHECK(r.ip.busbw_GBps == doctest::Approx(d(c[9])).epsilon(1e-12));
    }
  }
}

TEST_CASE("every raw log parses directly (op from the text or given), with its rank lines") {
  // Logs that do not name their collective in the text need the op as a hint.
  const std::map<std::string, ParseHints> need_hint = {
      {"abci", hint("all_reduce")},
      {"nvidia_dgxc", hint("all_reduce")},
      {"together_b200", hint("sendrecv")},
      {"azure", hint("all_reduce", 8, 1)},
      {"liplus", hint("", 8, 1)},
  };
  int n = 0;
  for (const auto& e : fs::directory_iterator(kData + "raw")) {
    std::string p = e.path().string();
    std::string name = e.path().filename().string();
    CAPTURE(name);
    ParseHints h;
    for (const auto& [prefix, hint] : need_hint)
      if (name.rfind(prefix, 0) == 0) h = hint;
    auto ms = load_measurements(p, h);
    CHECK(!ms.empty());
    for (const auto& m : ms) {
      CHECK(!m.rows.empty());
      CHECK(m.nranks > 0);
    }
    ++n;
  }
  CHECK(n == 15);
}

TEST_CASE("legacy ABCI layout: header, rank lines, hosts, summary") {
  auto ms = load_measurements(kData + "raw/abci_inter_anode_job04.sh.7194285.nccl.txt", hint("all_reduce_perf"));
  REQUIRE(ms.size() == 1);
  const auto& m = ms[0];
  CHECK(m.format == "nccl-tests-legacy");
  CHECK(m.op == "all_reduce");
  REQUIRE(m.header);
  CHECK(m.header->nthread == 1);
  CHECK(m.header->ngpus == 1);
  CHECK(m.header->min_bytes == 4);
  CHECK(m.header->max_bytes == 33554432);
  CHECK(m.header->step == "2(factor)");
  CHECK(m.header->warmup_iters == 5);
  CHECK(m.header->iters == 100);
  CHECK(m.header->validation == 1);
  CHECK(m.header->extra.empty());
  CHECK(m.nranks == 32);
  CHECK(m.num_nodes == 4);
  CHECK(m.hosts == std::vector<std::string>{"a0008", "a0009", "a0010", "a0013"});
  CHECK(m.gpu_model == "A100-SXM4-40GB");
  REQUIRE(m.ranks.size() == 32);
  CHECK(m.ranks[24].host == "a0013");
  CHECK(m.ranks[24].pid == 2153338);
  CHECK(m.ranks[24].device == 0);
  CHECK(m.ranks[24].bus_id == "0x27");
  CHECK(m.ranks[24].group == -1);
  CHECK(m.rows.size() == 24);
  CHECK(!m.rows[0].root);
  REQUIRE(m.rows[0].oop.error);
  CHECK(*m.rows[0].oop.error == 0.0);
  CHECK(*m.rows[0].ip.error == doctest::Approx(2e-7));
  CHECK(!m.rows[0].oop.wrong);
  CHECK(m.rows.back().oop.time_us == doctest::Approx(2075.4));
  REQUIRE(m.avg_busbw_GBps);
  CHECK(*m.avg_busbw_GBps == doctest::Approx(6.74639));
  REQUIRE(m.out_of_bounds);
  CHECK(*m.out_of_bounds == 0);
}

TEST_CASE("UCX warnings before the header are skipped (ABCI V nodes)") {
  auto ms = load_measurements(kData + "raw/abci_inter_vnode_job02.sh.7194532.nccl.txt", hint("all_reduce"));
  REQUIRE(ms.size() == 1);
  CHECK(ms[0].nranks == 8);
  CHECK(ms[0].num_nodes == 2);
  CHECK(ms[0].gpu_model == "Tesla V100-SXM2-16GB");
  CHECK(ms[0].rows.size() == 24);
}

TEST_CASE("current layout with version preamble, Group field, root column and #wrong") {
  auto ms = load_measurements(kData + "raw/together_h100_1node_all_reduce_ring.txt");
  REQUIRE(ms.size() == 1);
  const auto& m = ms[0];
  CHECK(m.format == "nccl-tests");
  CHECK(m.op == "all_reduce");  // from "# Collective test starting: all_reduce_perf"
  CHECK(m.nccl_tests_version == "2.17.9");
  CHECK(m.nccl_version == "22602");
  CHECK(m.header->ngpus == 8);
  CHECK(m.header->agg_iters == 1);
  CHECK(m.header->iters == 20);
  CHECK(m.header->graph == 0);
  CHECK(m.nranks == 8);
  CHECK(m.num_nodes == 1);
  CHECK(m.ranks[3].group == 0);
  CHECK(m.ranks[3].bus_id == "0000:3b:00");
  CHECK(m.gpu_model == "NVIDIA H100 80GB HBM3");
  CHECK(m.rows.size() == 31);
  REQUIRE(m.rows[0].root);
  CHECK(*m.rows[0].root == -1);
  REQUIRE(m.rows[0].oop.wrong);
  CHECK(*m.rows[0].oop.wrong == 0);
  CHECK(m.rows.back().size_bytes == 8589934592ULL);
  CHECK(m.rows.back().count == 2147483648ULL);
  CHECK(m.rows.back().ip.busbw_GBps == doctest::Approx(368.62));
  CHECK(*m.avg_busbw_GBps == doctest::Approx(122.955));
}

TEST_CASE("NVIDIA-modified header keeps its extra keys") {
  auto ms = load_measurements(kData + "raw/nvidia_dgxc_benchmarking_dgxh100_1node_all_reduce_sample.txt", hint("all_reduce"));
  REQUIRE(ms.size() == 1);
  const auto& h = *ms[0].header;
  CHECK(h.max_bytes == 17179869184ULL);
  CHECK(h.extra.at("side_work") == "0");
  CHECK(h.extra.at("work_sms") == "0");
  CHECK(h.extra.at("direction") == "H2D");
  CHECK(ms[0].hosts == std::vector<std::string>{"pool0-01806"});
  CHECK(ms[0].rows.size() == 32);
  CHECK(ms[0].rows.back().oop.time_us == doctest::Approx(62648));
}

TEST_CASE("a file with two runs gives two measurements; N/A #wrong is absent; NCCL version line") {
  auto ms = load_measurements(kData + "raw/together_b200_2node_sendrecv.txt", hint("sendrecv_perf"));
  REQUIRE(ms.size() == 2);
  CHECK(ms[0].rows.size() == 19);
  CHECK(ms[1].rows.size() == 1);
  CHECK(ms[1].header->step == "1048576(bytes)");
  CHECK(ms[1].header->iters == 50);
  CHECK(ms[1].rows[0].oop.time_us == doctest::Approx(1606.3));
  for (const auto& m : ms) {
    CHECK(m.nranks == 16);
    CHECK(m.num_nodes == 2);
    CHECK(m.gpu_model == "NVIDIA B200");
    CHECK(m.nccl_version == "2.29.7+cuda12.9");
    CHECK(!m.rows[0].ip.wrong);
    REQUIRE(m.rows[0].oop.wrong);
  }
  CHECK(ms[0].source != ms[1].source);
}

TEST_CASE("the op comes from a printed command line when there is no header") {
  auto ms = load_measurements(kData + "raw/liplus_a100_8gpu_sendrecv.txt", hint("", 8, 1));
  REQUIRE(ms.size() == 1);
  CHECK(ms[0].op == "sendrecv");
  CHECK(!ms[0].header);
  CHECK(ms[0].rows.size() == 4);
  CHECK(ms[0].rows[3].oop.busbw_GBps == doctest::Approx(195.10));
}

TEST_CASE("busbw-only markdown table: size labels map to powers of two, algbw and time derived") {
  auto ms = load_measurements(kData + "azure_ndv4_a100_1node_8gpu_all_reduce_busbw_only.meta.json");
  REQUIRE(ms.size() == 1);
  const auto& m = ms[0];
  CHECK(m.format == "busbw-markdown");
  CHECK(m.nranks == 8);
  CHECK(m.rows.size() == 24);
  CHECK(m.rows[6].size_bytes == 65536);     // "65K"
  CHECK(m.rows[7].size_bytes == 131072);    // "132K"
  CHECK(m.rows[23].size_bytes == 8589934592ULL);  // "8G"
  CHECK(!m.rows[23].oop.present);
  CHECK(m.rows[23].ip.busbw_GBps == doctest::Approx(231.58));
  CHECK(m.rows[23].ip.algbw_GBps == doctest::Approx(231.58 * 8 / 14.0));
  auto t = row_time_s(m, m.rows[23]);
  REQUIRE(t);
  CHECK(*t == doctest::Approx(8589934592.0 / (231.58e9 * 8 / 14.0)));
}

TEST_CASE("row_time_s takes the smaller of the two placements and skips zero-size rows") {
  auto ms = load_measurements(kData + "together_h100_1node_8gpu_all_gather_ring.meta.json");
  const auto& m = ms[0];
  CHECK(!row_time_s(m, m.rows[0]));  // size 0
  auto t = row_time_s(m, m.rows.back());
  REQUIRE(t);
  CHECK(*t == doctest::Approx(20684.4e-6));
}

TEST_CASE("malformed input: errors name the file and line") {
  const std::string head =
      "# nThread 1 nGpus 1 minBytes 4 maxBytes 8 step: 2(factor) warmup iters: 5 iters: 100 validation: 1\n"
      "#\n# Using devices\n#   Rank  0 Pid 1 on h device  0 [0x27] GPU\n#\n"
      "#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error\n";
  CHECK_NOTHROW(parse_nccl_tests_text(head + "4 1 float sum 1.0 0.0 0.0 0e+00 1.0 0.0 0.0 0e+00\n", "x.txt", hint("all_reduce")));
  try {
    parse_nccl_tests_text(head + "4 1 float sum 1.0 0.0 0.0 0e+00 1.0 0.0\n", "x.txt", hint("all_reduce"));
    FAIL("expected InputError");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find("x.txt:7") != std::string::npos);
    CHECK(std::string(e.what()).find("expected 12") != std::string::npos);
  }
  try {
    parse_nccl_tests_text(head + "4 1 float sum abc 0.0 0.0 0e+00 1.0 0.0 0.0 0e+00\n", "x.txt", hint("all_reduce"));
    FAIL("expected InputError");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find("time") != std::string::npos);
  }
  CHECK_THROWS_AS(parse_nccl_tests_text("hello\nworld\n", "y.txt"), InputError);
  // The rank list's problems name the line (the file alone before): a rank given twice at its second line, a
  // rank or host count that contradicts the hint at the list's first line; in a log of several runs too.
  const std::string two_ranks =
      "# nThread 1 nGpus 1 minBytes 4 maxBytes 8 step: 2(factor) warmup iters: 5 iters: 100 validation: 1\n"
      "#\n# Using devices\n#   Rank  0 Pid 1 on h device  0 [0x27] GPU\n#   Rank  1 Pid 2 on h device  1 [0x2a] GPU\n#\n"
      "#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error\n"
      "4 1 float sum 1.0 0.0 0.0 0e+00 1.0 0.0 0.0 0e+00\n";
  std::string twice = two_ranks;
  twice.replace(twice.find("Rank  1"), 7, "Rank  0");
  CHECK_THROWS_WITH_AS(parse_nccl_tests_text(twice, "x.txt", hint("all_reduce")), "x.txt:5: rank 0 listed twice", InputError);
  CHECK_THROWS_WITH_AS(parse_nccl_tests_text(two_ranks, "x.txt", hint("all_reduce", 4)),
                       "x.txt:4: the log lists 2 ranks but the hint says 4", InputError);
  CHECK_THROWS_WITH_AS(parse_nccl_tests_text(two_ranks, "x.txt", hint("all_reduce", 0, 2)),
                       "x.txt:4: the log lists 1 hosts but the hint says 2", InputError);
  CHECK_THROWS_WITH_AS(parse_nccl_tests_text(two_ranks + twice, "x.txt", hint("all_reduce")), "x.txt:13: rank 0 listed twice",
                       InputError);
  // The hint may not contradict the log.
  CHECK_THROWS_AS(load_measurements(kData + "raw/together_h100_1node_all_reduce_ring.txt", hint("all_gather")), InputError);
  CHECK_THROWS_AS(load_measurements(kData + "raw/together_h100_1node_all_reduce_ring.txt", hint("", 16)), InputError);
  // Without a hint, a log that does not name its collective is an error, not a guess.
  CHECK_THROWS_AS(load_measurements(kData + "raw/abci_intra_anode_job04.sh.7280520.nccl.txt"), InputError);
  CHECK_THROWS_AS(load_measurements(kData + "raw/does_not_exist.txt"), InputError);
}

TEST_CASE("a simulation written by fabricsim coll --json reads as a measurement-shaped run") {
  Json doc = {{"schema", "fabricsim.collective_results/1"},
              {"source", "simulation"},
              {"system", {{"topology", "dgx-h100"}, {"params", Json::object()}, {"gpus", 8}, {"hosts", 1}, {"gpu_model", "h100"}}},
              {"collective", "all_reduce"}, {"datatype", "float"}, {"redop", "sum"}, {"root", -1}, {"nranks", 8},
              {"communicator", Json::array({"n0.gpu0"})}, {"engine", "fabricsim"}, {"calibration", "default"},
              {"requested_algorithm", "ring"}, {"requested_protocol", "auto"},
              {"rows", Json::array({{{"size_bytes", 1048576}, {"count", 262144}, {"time_us", 50.0}, {"algbw_GBps", 20.97},
                                     {"busbw_GBps", 36.7}, {"algorithm", "ring"}, {"protocol", "ll128"},
                                     {"fidelity", "step"}, {"predicted_time_us", 49.0}, {"transfers", 112}}})},
              {"avg_busbw_GBps", 36.7}};
  Measurement m = measurement_from_json(doc, "sim.json");
  CHECK(m.format == "fabricsim-json-simulation");
  CHECK(m.algorithm == "ring");
  CHECK(m.protocol.empty());
  REQUIRE(m.rows.size() == 1);
  CHECK(m.rows[0].oop.time_us == doctest::Approx(50.0));
  CHECK(!m.rows[0].ip.present);
}

TEST_CASE("our JSON round-trips and rejects unknown keys") {
  auto ms = load_measurements(kData + "together_h100_1node_8gpu_all_reduce_ring.meta.json");
  Json j = measurement_to_json(ms[0]);
  CHECK(j["schema"] == "fabricsim.collective_results/1");
  CHECK(j["source"] == "measurement");
  CHECK(j["collective"] == "all_reduce");
  CHECK(j["rows"][30]["time_us"].get<double>() == doctest::Approx(40838.9));
  CHECK(j["rows"][30]["busbw_GBps"].get<double>() == doctest::Approx(368.09));
  CHECK(j["rows"][30]["in_place"]["busbw_GBps"].get<double>() == doctest::Approx(368.62));
  CHECK(j["system"]["gpus_per_thread"] == 8);
  Measurement back = measurement_from_json(j, "mem.json");
  CHECK(back.gpus_per_thread == 8);
  CHECK(back.op == "all_reduce");
  CHECK(back.nranks == 8);
  CHECK(back.num_nodes == 1);
  REQUIRE(back.rows.size() == ms[0].rows.size());
  CHECK(back.rows[30].oop.time_us == doctest::Approx(40838.9));
  CHECK(back.rows[30].ip.busbw_GBps == doctest::Approx(368.62));
  CHECK(*back.rows[30].oop.wrong == 0);
  for (std::size_t i = 0; i < back.rows.size(); ++i) {
    CHECK(back.rows[i].size_bytes == ms[0].rows[i].size_bytes);
    CHECK(back.rows[i].ip.time_us == doctest::Approx(ms[0].rows[i].ip.time_us).epsilon(1e-12));
    CHECK(back.rows[i].oop.algbw_GBps == doctest::Approx(ms[0].rows[i].oop.algbw_GBps).epsilon(1e-12));
  }
  Json bad = j;
  bad["rows"][0]["in_place"]["speed"] = 1;
  try {
    measurement_from_json(bad, "bad.json");
    FAIL("expected InputError");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find("bad.json") != std::string::npos);
    CHECK(std::string(e.what()).find("/rows/0/in_place") != std::string::npos);
  }
  Json bad2 = j;
  bad2["schema"] = "other";
  CHECK_THROWS_AS(measurement_from_json(bad2, "bad2.json"), InputError);
}

TEST_CASE("GPUs per thread: header nGpus, a printed -g, or the sidecar's quoted command") {
  // Expected values read off the raw files / sidecars by eye.
  const std::map<std::string, int> expect = {
      {"abci_inter_anode_job2_7194279_16gpu_all_reduce", 1},   // header nGpus 1 (one process per GPU)
      {"nvidia_dgxc_dgxh100_1node_8gpu_all_reduce", 1},        // header nGpus 1
      {"together_b200_2node_16gpu_sendrecv", 1},               // header nGpus 1 (both runs)
      {"together_h100_1node_8gpu_all_gather_ring", 8},         // header nGpus 8
      {"liplus_a100_8gpu_nvlink_sendrecv", 8},                 // "./build/sendrecv_perf ... -g 8" in the text
      {"azure_ndv4_a100_1node_8gpu_all_reduce_busbw_only", 8}, // sidecar notes: "all_reduce_perf ... -g 8 -n 40"
  };
  for (const auto& [name, g] : expect) {
    CAPTURE(name);
    auto ms = load_measurements(kData + name + ".meta.json");
    REQUIRE(!ms.empty());
    for (const auto& m : ms) CHECK(m.gpus_per_thread == g);
  }
  // The raw li-plus log alone (no sidecar) still says -g 8; the Azure markdown alone does not say.
  CHECK(load_measurements(kData + "raw/liplus_a100_8gpu_sendrecv.txt", hint("", 8, 1))[0].gpus_per_thread == 8);
  CHECK(load_measurements(kData + "raw/azure_ai_benchmarking_guide_ND_A100_v4_results.md", hint("all_reduce", 8, 1))[0]
            .gpus_per_thread == 0);
  CHECK(nccl_tests_gpus_flag("mpirun -np 8 ./all_reduce_perf -b 8 -e 1G -g 1", "w") == 1);
  CHECK(nccl_tests_gpus_flag("sendrecv_perf (float), -g 8", "w") == 8);
  CHECK(nccl_tests_gpus_flag("-g 8 but no test binary", "w") == 0);
  CHECK_THROWS_WITH_AS(nccl_tests_gpus_flag("all_reduce_perf -g x", "cmd.txt"), doctest::Contains("cmd.txt"), InputError);
  // A hint that contradicts the log is an error.
  ParseHints h = hint("all_reduce");
  h.gpus_per_thread = 4;
  CHECK_THROWS_WITH_AS(load_measurements(kData + "raw/together_h100_1node_all_reduce_ring.txt", h),
                       doctest::Contains("GPUs per thread"), InputError);
  ParseHints l = hint("", 8, 1);
  l.gpus_per_thread = 1;
  CHECK_THROWS_WITH_AS(load_measurements(kData + "raw/liplus_a100_8gpu_sendrecv.txt", l), doctest::Contains("-g 8"),
                       InputError);
}

TEST_CASE("op names and bus-bandwidth factors") {
  CHECK(normalize_op("all_reduce_perf") == "all_reduce");
  CHECK(normalize_op("./build/alltoall_perf") == "all_to_all");
  CHECK(normalize_op("ReduceScatter") == "reduce_scatter");
  CHECK(normalize_op("sendrecv") == "sendrecv");
  CHECK(normalize_op("gather_perf") == "");
  CHECK(busbw_factor("all_reduce", 8) == doctest::Approx(1.75));
  CHECK(busbw_factor("all_gather", 8) == doctest::Approx(0.875));
  CHECK(busbw_factor("broadcast", 8) == doctest::Approx(1.0));
  // One table with models::busbw_factor: all_to_allv is (n-1)/n like all_to_all (it was 1 here before issue 20).
  CHECK(busbw_factor("all_to_allv", 8) == doctest::Approx(0.875));
  CHECK(busbw_factor("all_to_all", 8) == doctest::Approx(0.875));
}

TEST_CASE("mpirun --tag-output and srun --label prefixes are stripped before parsing") {
  const std::string path = kData + "raw/abci_inter_anode_job02.sh.7194279.nccl.txt";
  std::ifstream f(path);
  REQUIRE(f.good());
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string plain = ss.str();
  auto prefixed = [&](const std::string& pre) {
    std::istringstream in(plain);
    std::string line, out;
    while (std::getline(in, line)) out += pre + line + "\n";
    return out;
  };
  const auto base = parse_nccl_tests_text(plain, "plain.txt");
  REQUIRE(!base.empty());
  REQUIRE(!base[0].rows.empty());
  for (const std::string pre : {"[1,0]<stdout>:", "[12,3]<stderr>:", "0: ", " 3: "}) {
    CAPTURE(pre);
    const auto ms = parse_nccl_tests_text(prefixed(pre), "prefixed.txt");
    REQUIRE(ms.size() == base.size());
    CHECK(ms[0].nranks == base[0].nranks);
    REQUIRE(ms[0].rows.size() == base[0].rows.size());
    for (std::size_t i = 0; i < ms[0].rows.size(); ++i) {
      CHECK(ms[0].rows[i].size_bytes == base[0].rows[i].size_bytes);
      CHECK(ms[0].rows[i].oop.time_us == base[0].rows[i].oop.time_us);
    }
  }
  // Only real prefixes go: a table row, an NCCL INFO line and a bracketed non-prefix stay as they are.
  const std::string keep = "           8             2     float     sum      -1    36.01\nnode1:123:456 [0] NCCL INFO x\n[x]<stdout>:y\n";
  CHECK(strip_launcher_prefixes(keep) == keep);
  CHECK(strip_launcher_prefixes("[1,0]<stdout>:#  nThread 1\n12: # Rank 0") == "#  nThread 1\n# Rank 0");
}

TEST_CASE("NCCL_* settings a sidecar quotes become the run's env; NCCL_ALGO and NCCL_PROTO set algorithm and protocol") {
  const auto env = nccl_env_settings(
      "mpirun -np 64 -N 8 -x NCCL_MIN_CTAS=24 -x NCCL_IB_QPS_PER_CONNECTION=2 ./build/all_reduce_perf\n"
      "Env: NCCL_NET_GDR_LEVEL=1, NCCL_IB_HCA=mlx5_0..7:1, NCCL_ALGO=Ring FORCED; which NCCL_PROTO row; "
      "forces NCCL_PROTO=simple. MY_NCCL_X=1 NCCL_MIN_CTAS=8");
  CHECK(env.size() == 6u);
  CHECK(env.at("NCCL_MIN_CTAS") == "24");  // the first mention wins
  CHECK(env.at("NCCL_IB_QPS_PER_CONNECTION") == "2");
  CHECK(env.at("NCCL_NET_GDR_LEVEL") == "1");
  CHECK(env.at("NCCL_IB_HCA") == "mlx5_0..7:1");
  CHECK(env.at("NCCL_ALGO") == "Ring");
  CHECK(env.at("NCCL_PROTO") == "simple");
  CHECK(env.count("NCCL_X") == 0u);  // part of a longer name

  const std::string mn = std::string(FABRICSIM_SOURCE_DIR) + "/tests/data/nccl-tests-multinode/";
  auto ms = load_measurements(mn + "nvtests309_h100_ib400_2node_16gpu_all_reduce_ring_minctas24_qps2.meta.json");
  REQUIRE(ms.size() == 1u);
  CHECK(ms[0].algorithm == "ring");
  CHECK(ms[0].env.at("NCCL_MIN_CTAS") == "24");
  CHECK(ms[0].env.at("NCCL_IB_QPS_PER_CONNECTION") == "2");
  ms = load_measurements(mn + "aws_p4d_2node_16gpu_scatter.meta.json");  // aws-ofi-nccl forces Simple
  REQUIRE(ms.size() == 1u);
  CHECK(ms[0].protocol == "simple");
}

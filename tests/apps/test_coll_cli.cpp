// `fabricsim coll` end to end: peak all_reduce busbw with the default calibration lands in the range of
// the shared nccl-tests logs, the table has nccl-tests' columns, --json follows docs/collectives.md, and
// bad input exits 2 with one line on stderr and no output file.
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_test_util.hpp"

namespace {

namespace fs = std::filesystem;
namespace cli_test = fabricsim::cli_test;
using Out = cli_test::Run;

// One scratch directory for this test program: every file the tests write goes there.
fs::path scratch() {
  static const fs::path d = cli_test::scratch_dir("coll_cli");
  return d;
}

Out run_cli(const std::string& args) { return cli_test::run_in(scratch(), cli_test::fabricsim("coll " + args)); }

struct RowV {
  double size, time_us, algbw, busbw;
  std::string algo;
};

std::vector<RowV> rows(const std::string& out) {
  std::vector<RowV> v;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream l(line);
    RowV r;
    std::string count, type, redop, root;
    l >> r.size >> count >> type >> redop >> root >> r.time_us >> r.algbw >> r.busbw >> r.algo;
    v.push_back(r);
  }
  return v;
}

double peak_busbw(const std::string& out) {
  double p = 0;
  for (const auto& r : rows(out)) p = std::max(p, r.busbw);
  return p;
}

}  // namespace

// Logs: /work/shared/data/nccl-tests (copied in tests/data/nccl-tests):
//   nvidia_dgxc_dgxh100_1node_8gpu_all_reduce   peak 480.16 GB/s (NVLS, 8 GiB)
//   together_h100_1node_8gpu_all_reduce_ring     peak 368.09 GB/s out-of-place (NCCL_ALGO=Ring, 8 GiB)
//   azure_ndv4_a100_1node_8gpu_all_reduce_busbw_only  peak 231.58 GB/s (8 GiB)
// "In the range" = within 10 % of the logged peak.
TEST_CASE("peak all_reduce busbw on dgx-h100 / dgx-a100 matches the nccl-tests logs") {
  Out h = run_cli("--topology dgx-h100 --op all_reduce -b 1G -e 8G -f 2");
  REQUIRE(h.rc == 0);
  CHECK(peak_busbw(h.out) >= 480.16 * 0.9);
  CHECK(peak_busbw(h.out) <= 480.16 * 1.1);
  CHECK(rows(h.out).back().algo == "nvls");

  Out r = run_cli("--topology dgx-h100 --op all_reduce --algo ring -b 1G -e 8G -f 2");
  REQUIRE(r.rc == 0);
  CHECK(peak_busbw(r.out) >= 368.09 * 0.9);
  CHECK(peak_busbw(r.out) <= 368.09 * 1.1);

  Out a = run_cli("--topology dgx-a100 --op all_reduce -b 1G -e 8G -f 2");
  REQUIRE(a.rc == 0);
  CHECK(peak_busbw(a.out) >= 231.58 * 0.9);
  CHECK(peak_busbw(a.out) <= 231.58 * 1.1);
}

TEST_CASE("table: nccl-tests columns, busbw factors, one row per size") {
  Out o = run_cli("--topology dgx-h100 --op all_gather -b 1M -e 8M -f 2 --algo ring");
  REQUIRE(o.rc == 0);
  CHECK(o.out.find("#       size         count      type   redop    root     time   algbw   busbw") != std::string::npos);
  auto v = rows(o.out);
  REQUIRE(v.size() == 4u);
  CHECK(v[0].size == 1048576);
  CHECK(v[3].size == 8388608);
  for (const auto& r : v) {
    CHECK(r.algbw == doctest::Approx(r.size / (r.time_us * 1e-6) / 1e9).epsilon(0.01));
    CHECK(r.busbw == doctest::Approx(r.algbw * 7.0 / 8.0).epsilon(0.01));  // (n-1)/n
    CHECK(r.algo == "ring");
  }
  CHECK(o.out.find("    float    none      -1") != std::string::npos);
  Out b = run_cli("--topology dgx-a100 --op broadcast -b 64M -r 3");
  REQUIRE(b.rc == 0);
  auto bv = rows(b.out);
  REQUIRE(bv.size() == 1u);
  CHECK(bv[0].busbw == doctest::Approx(bv[0].algbw).epsilon(0.01));
  CHECK(b.out.find("    float    none       3") != std::string::npos);
  // scatter has a root too: nccl-tests prints it (the p4d scatter log of tests/data prints root 0); before,
  // -1 was printed whatever -r said.
  Out sc = run_cli("--topology dgx-h100 --op scatter -b 8M -r 5");
  REQUIRE(sc.rc == 0);
  CHECK(sc.out.find("    float    none       5") != std::string::npos);
  CHECK(sc.out.find("      -1 ") == std::string::npos);
  CHECK(run_cli("--topology dgx-h100 --op scatter -b 8M -r 8").rc == 2);
}

TEST_CASE("sizes are rounded as nccl-tests rounds them, and the size column prints the size run") {
  // NVIDIA/nccl-tests src/alltoall.cu: (count / nranks) & ~(16 / eltSize - 1) elements per rank. 72 GPUs, 1 MiB of
  // float: 262144 / 72 = 3640 (a multiple of 4), x 72 x 4 B = 1048320 B.
  Out a = run_cli("--topology gb200-nvl72 --op all_to_all -b 1M");
  REQUIRE_MESSAGE(a.rc == 0, a.err);
  auto v = rows(a.out);
  REQUIRE(v.size() == 1u);
  CHECK(v[0].size == 1048320);
  CHECK(a.out.find("     1048320          3640     float") != std::string::npos);
  // 6 GPUs of a DGX H100, all_gather of 1 MiB: 262144 / 6 = 43690 -> 43688 (4-element multiple), 1048512 B.
  Out g = run_cli("--topology dgx-h100 -g 6 --op all_gather -b 1M");
  REQUIRE_MESSAGE(g.rc == 0, g.err);
  CHECK(rows(g.out).at(0).size == 1048512);
  // int8: 16-element multiples (1048576 / 6 = 174762 -> 174752).
  Out i8 = run_cli("--topology dgx-h100 -g 6 --op reduce_scatter -d int8 -b 1M");
  REQUIRE_MESSAGE(i8.rc == 0, i8.err);
  CHECK(rows(i8.out).at(0).size == 174752 * 6);
  // The whole-buffer ops run whole elements: 6 B of float is one element.
  Out ar = run_cli("--topology dgx-h100 --op all_reduce -b 6 -e 6");
  REQUIRE_MESSAGE(ar.rc == 0, ar.err);
  CHECK(rows(ar.out).at(0).size == 4);
  // Sizes that divide are run as given (every power of two from 1 MiB on 8 GPUs).
  Out p = run_cli("--topology dgx-h100 --op all_to_all -b 1M -e 4M -f 2");
  REQUIRE(p.rc == 0);
  auto pv = rows(p.out);
  REQUIRE(pv.size() == 3u);
  CHECK(pv[0].size == 1048576);
  CHECK(pv[2].size == 4194304);
}

TEST_CASE("every operation runs on every preset family") {
  for (const char* topo : {"dgx-a100", "dgx-h100", "superpod --param nodes=4", "dgx1-v100", "pcie-server"}) {
    for (const char* op : {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "all_to_all",
                           "all_to_allv", "send_recv"}) {
      CAPTURE(topo);
      CAPTURE(op);
      Out o = run_cli(std::string("--topology ") + topo + " --op " + op + " -b 1M -e 4M -f 4");
      CHECK(o.rc == 0);
      CHECK(o.err.empty());
      auto v = rows(o.out);
      REQUIRE(v.size() == 2u);
      CHECK(v[1].time_us > v[0].time_us);
      CHECK(v[1].busbw > 0);
    }
  }
}

TEST_CASE("--json writes the documented schema") {
  const std::string path = (scratch() / "test.json").string();
  fs::remove(path);
  Out o = run_cli("--topology dgx-h100 -g 4 --op reduce_scatter -b 1M -e 2M --json " + path);
  REQUIRE(o.rc == 0);
  std::ifstream f(path);
  nlohmann::json j = nlohmann::json::parse(f);
  CHECK(j["schema"] == "fabricsim.collective_results/1");
  CHECK(j["source"] == "simulation");
  CHECK(j["collective"] == "reduce_scatter");
  CHECK(j["nranks"] == 4);
  CHECK(j["communicator"].size() == 4u);
  REQUIRE(j["rows"].size() == 2u);
  const auto& r = j["rows"][1];
  CHECK(r["size_bytes"] == 2097152);
  CHECK(r["count"] == 2097152 / 4 / 4);
  CHECK(r["busbw_GBps"].get<double>() == doctest::Approx(r["algbw_GBps"].get<double>() * 0.75));
  for (const char* k : {"time_us", "algorithm", "protocol", "fidelity", "predicted_time_us", "transfers"})
    CHECK(r.contains(k));
  fs::remove(path);
}

TEST_CASE("bad input: one line on stderr, exit 2, no partial output") {
  const std::string path = (scratch() / "bad.json").string();
  struct Bad {
    std::string args, needle;
  };
  for (const auto& b : std::vector<Bad>{
           {"--topology dgx-h100 --op allreduce", "--op allreduce"},
           {"--topology dgx-h100 --algo warp", "--algo warp"},
           {"--topology dgx-h100 --proto fast", "--proto fast"},
           {"--topology no-such-topology", "no-such-topology"},
           {"--topology dgx-a100 --algo nvls -b 1M", "nvls"},
           {"--topology dgx-h100 --comm 0,1,99", "99"},
           {"--topology dgx-h100 --comm 0,1,1", "twice"},
           {"--topology dgx-h100 --op all_gather -b 12", "size 12 B runs 0 B: all_gather runs bytes / nranks per rank "
                                                          "rounded down to a multiple of 16 B, as nccl-tests does; the "
                                                          "smallest size is 128 B"},
           {"--topology dgx-h100 --op all_gather -b 48 -e 4M", "size 48 B runs 0 B"},
           {"--topology dgx-h100 --op all_reduce -b 3", "size 3 B runs 0 B: nccl-tests runs whole elements; the smallest size is 4 B"},
           {"--topology dgx-h100 --algo pat --op all_gather", "one rank per host"},
           {"--topology dgx-h100 --engine warp", "--engine warp"},
           {"--topology dgx-h100 -d float7", "--datatype"},
           {"--topology dgx-h100 --calibration /nonexistent.json", "/nonexistent.json"},
           {"--topology dgx-h100 --op broadcast --root 8", "--root: a rank of the communicator, 0..7"},
           {"--topology dgx-h100 --op reduce -g 4 --root -1", "--root: a rank of the communicator, 0..3"},
           {"--topology dgx-h100 -f 0", "-f: an integer >= 2"},
           {"--topology dgx-h100 -b 1M -e 4M -f 1", "-f: an integer >= 2"},
           {"--topology superpod -p nodes=128 -p oversubscription=1e9",
            "--param oversubscription: a number in [1, 63] for switches of radix 64 (got 1e+09)"},
           {"--topology superpod -p rail_optimized=maybe", "--param rail_optimized: one of true, false"},
           {"--topology dgx-h100 -p nic_bandwidth=400Tbps", "--param nic_bandwidth=400Tbps: at most 100Tbps per NIC"},
       }) {
    CAPTURE(b.args);
    fs::remove(path);
    Out o = run_cli(b.args + " --json " + path);
    CHECK(o.rc == 2);
    CHECK(o.out.empty());
    CHECK(o.err.find(b.needle) != std::string::npos);
    CHECK(std::count(o.err.begin(), o.err.end(), '\n') == 1);
    CHECK_FALSE(fs::exists(path));
  }
}

TEST_CASE("--timeline / --link-stats / --report describe the largest size") {
  const fs::path dir = scratch() / "outputs";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string tl = (dir / "t.json").string(), ls = (dir / "l.csv").string(), rp = (dir / "r.html").string();
  Out o = run_cli("--topology dgx-h100 --algo ring -b 1M -e 4M --timeline " + tl + " --link-stats " + ls +
                  " --report " + rp);
  REQUIRE(o.rc == 0);
  std::ifstream t(tl);
  nlohmann::json j = nlohmann::json::parse(t);
  CHECK(j["traceEvents"].size() > 8u);
  std::ifstream l(ls);
  std::string header, first;
  std::getline(l, header);
  std::getline(l, first);
  CHECK(header.rfind("link_id,direction,from,to,kind", 0) == 0);
  CHECK(first.find("nvlink") != std::string::npos);
  CHECK(fs::file_size(rp) > 1000u);
  // a bad size fails before anything is written
  fs::remove_all(dir);
  fs::create_directories(dir);
  Out bad = run_cli("--topology dgx-h100 --op all_gather -b 12 --timeline " + tl);
  CHECK(bad.rc == 2);
  CHECK_FALSE(fs::exists(tl));
  fs::remove_all(dir);
}

TEST_CASE("--iters: broadcast rows become the loop's period, all_reduce rows stay one call, bad counts exit 2") {
  // 4 nodes, 32 GPUs: one 4-byte broadcast passes 31 hops; back to back, rank 0 sees about one hop per call
  // (docs/validation.md, "Back-to-back calls"; the ABCI logs measure 7.4 us at 32 ranks, 7.35 at 8).
  const std::string base = "--topology superpod -p nodes=4 -b 4 -e 4M -f 1024 --calibration default ";
  Out one = run_cli(base + "--op broadcast");
  Out loop = run_cli(base + "--op broadcast -n 100");
  REQUIRE(one.rc == 0);
  REQUIRE(loop.rc == 0);
  CHECK(loop.out.find("time per call of 100 back-to-back calls (rank 0, calls overlapping)") != std::string::npos);
  auto r1 = rows(one.out), rl = rows(loop.out);
  REQUIRE(r1.size() == 3);
  REQUIRE(rl.size() == 3);
  CHECK(rl[0].time_us < 0.5 * r1[0].time_us);  // 4 B: the chain's latency is hidden
  for (std::size_t i = 0; i < 3; ++i) CHECK(rl[i].time_us <= r1[i].time_us * 1.001);
  Out ar1 = run_cli(base + "--op all_reduce");
  Out arl = run_cli(base + "--op all_reduce --iters 20");
  REQUIRE(arl.rc == 0);
  CHECK(arl.out.find("(= one call: calls do not overlap)") != std::string::npos);
  auto a1 = rows(ar1.out), al = rows(arl.out);
  REQUIRE(a1.size() == al.size());
  for (std::size_t i = 0; i < a1.size(); ++i) CHECK(al[i].time_us == a1[i].time_us);
  for (const char* bad : {"-n 0", "--iters -3", "--iters x"}) {
    Out e = run_cli(base + "--op broadcast " + bad);
    CHECK(e.rc == 2);
    CHECK(e.err.find("--iters") != std::string::npos);
  }
}

TEST_CASE("--fidelity step ring: the streamed run prints the materialised schedule's times") {
  // Without outputs a step-level ring runs streamed (docs/engine.md, "Streamed step-level rings"); with
  // --link-stats the largest size runs the materialised schedule (its per-link statistics need it).
  const std::string args = "-t superpod -p nodes=4 --op all_reduce -b 16M -e 64M -f 4 --algo ring --fidelity step";
  const fs::path dir = scratch() / "stream";
  fs::create_directories(dir);
  Out a = run_cli(args);
  Out b = run_cli(args + " --link-stats " + (dir / "l.csv").string());
  REQUIRE(a.rc == 0);
  REQUIRE(b.rc == 0);
  const auto ra = rows(a.out), rb = rows(b.out);
  REQUIRE(ra.size() == 2u);
  REQUIRE(rb.size() == 2u);
  CHECK(ra[1].time_us > ra[0].time_us);
  CHECK(ra[1].time_us == rb[1].time_us);  // printed digits equal
  fs::remove_all(dir);
}

// The first row of coll --ep's DeepEP-style block: total, NVLink and RDMA GB/s per rank.
static std::vector<double> ep_figures(const std::string& out) {
  std::istringstream in(out.substr(out.find("RDMA(GB/s)")));
  std::string line, hash;
  std::getline(in, line);
  std::getline(in, line);
  std::istringstream l(line);
  double size, us, total, nvl, rdma;
  l >> hash >> size >> us >> total >> nvl >> rdma;
  return std::vector<double>{total, nvl, rdma};
}

TEST_CASE("coll --ep: an expert-parallel all_to_all with DeepEP-style NVLink / RDMA bandwidth") {
  // EP 16 packed on two DGX H100: 7 of 15 peers over NVLink, 8 over RDMA.
  Out n = run_cli("--topology superpod -p nodes=2 --op all_to_all -b 64M -e 64M --ep 16");
  REQUIRE(n.rc == 0);
  CHECK(n.out.find("# EP 16 (node span: 8 GPUs per server, 2 servers)") != std::string::npos);
  auto f = ep_figures(n.out);
  CHECK(f[1] > 0);
  CHECK(f[2] > 0);
  CHECK(f[0] == doctest::Approx(f[1] + f[2]).epsilon(0.01));
  CHECK(f[1] / f[2] == doctest::Approx(7.0 / 8.0).epsilon(0.01));
  // rail span: one GPU per server, everything over RDMA.
  Out r = run_cli("--topology superpod -p nodes=2 --op all_to_all -b 64M -e 64M --ep 2 --ep-span rail");
  REQUIRE(r.rc == 0);
  CHECK(ep_figures(r.out)[1] == 0.0);
  CHECK(run_cli("--topology superpod -p nodes=2 --op all_reduce --ep 2").rc == 2);
  CHECK(run_cli("--topology superpod -p nodes=2 --op all_to_all --ep 2 --ep-span ring").rc == 2);
}

TEST_CASE("coll --ep on NVL72 racks: peers in the rank's NVLink domain are NVLink, whatever their tray") {
  // Two GB200 NVL72 racks: a tray (host) holds 4 GPUs, the NVLink domain 72. An EP group of 64 packed on
  // rack 0 reaches all 63 peers over NVLink (the split once took the tray for the server: 3 NVLink peers and
  // 60 "RDMA" peers, 566.62 GB/s of RDMA through 50 GB/s NICs); EP 144 over both racks: 71 NVLink, 72 RDMA.
  Out a = run_cli("--topology superpod -p nodes=2 -p node=gb200-nvl72 --op all_to_all -b 32M -e 32M --ep 64");
  REQUIRE(a.rc == 0);
  CHECK(a.out.find("# EP 64 (node span: 64 GPUs per NVLink domain, 1 NVLink domain of 16 trays)") != std::string::npos);
  auto f = ep_figures(a.out);
  CHECK(f[1] > 0);
  CHECK(f[2] == 0.0);
  Out b = run_cli("--topology superpod -p nodes=2 -p node=gb200-nvl72 --op all_to_all -b 32M -e 32M --ep 144");
  REQUIRE(b.rc == 0);
  CHECK(b.out.find("# EP 144 (node span: 72 GPUs per NVLink domain, 2 NVLink domains of 36 trays)") != std::string::npos);
  f = ep_figures(b.out);
  CHECK(f[1] / f[2] == doctest::Approx(71.0 / 72.0).epsilon(0.01));
  // The RDMA part leaves through the rack's NICs: 72 GPUs' worth at most, one 400 Gb/s NIC per GPU.
  CHECK(f[2] <= 50.0);
}

// The rail-optimised vs oversubscribed, rail-optimised vs host-based and hashed vs D-mod-k comparisons of
// docs/collectives.md ("Rail-optimised vs oversubscribed" / "Rail-optimised vs host-based leaves: 64 DGX H100
// over NDR" / "Multipath: 64 DGX H100 over RoCE"): the commands shown there, run as shown, and the differences
// the doc explains.
#include <doctest/doctest.h>

#include <sstream>
#include <string>
#include <vector>

#include "cli_test_util.hpp"

using namespace fabricsim::cli_test;

namespace {
// busbw (GB/s) of the last table row of `fabricsim coll`.
double last_busbw(const std::string& out) {
  std::istringstream in(out);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty() && line[0] != '#') last = line;
  std::istringstream row(last);
  std::string tok;
  std::vector<std::string> t;
  while (row >> tok) t.push_back(tok);
  REQUIRE(t.size() >= 8);
  return std::stod(t[7]);
}

// stdout of `fabricsim coll` on 64 DGX H100 over `fabric`.
std::string coll64(const std::string& fabric, const std::string& params, const std::string& op) {
  const fs::path d = scratch_dir("fabric_cli");
  Run r = run_in(d, fabricsim::cli_test::fabricsim("coll -t superpod -p nodes=64 -p fabric=" + fabric + " " + params +
                                                   " --op " + op + " -b 256M"));
  REQUIRE_MESSAGE(r.rc == 0, r.err);
  return r.out;
}

// busbw of `coll -t superpod -p nodes=64 -p fabric=infiniband-ndr PARAMS --op OP -b 256M` (or another fabric).
double busbw(const std::string& params, const std::string& op, const std::string& fabric = "infiniband-ndr") {
  return last_busbw(coll64(fabric, params, op));
}
}  // namespace

TEST_CASE("64 H100 over NDR: 2:1 oversubscription costs nothing on 64-port leaves, all_to_all loses 2/3 on 16-port ones") {
  const double ag1 = busbw("-p oversubscription=1", "all_gather");
  const double ag2 = busbw("-p oversubscription=2", "all_gather");
  // Rail-aligned rings cross a leaf boundary once per rail: the 21 uplinks of a 2:1 leaf carry it.
  CHECK(ag2 == doctest::Approx(ag1).epsilon(0.01));
  const double ag16 = busbw("-p radix=16 -p oversubscription=2", "all_gather");
  CHECK(ag16 < 0.95 * ag1);  // doc: 84.2 against 95.4 GB/s
  CHECK(ag16 > 0.80 * ag1);
  const double a1 = busbw("-p radix=16 -p oversubscription=1", "all_to_all");
  const double a2 = busbw("-p radix=16 -p oversubscription=2", "all_to_all");
  CHECK(a2 < 0.5 * a1);  // doc: 16.7 against 49.0 GB/s
  CHECK(a2 > 0.2 * a1);
  // all_reduce as the tuner runs it (nvls_tree): its trees' upper levels cross the oversubscribed uplinks.
  const double r1 = busbw("-p radix=16 -p oversubscription=1", "all_reduce");
  const double r2 = busbw("-p radix=16 -p oversubscription=2", "all_reduce");
  CHECK(r2 < 0.7 * r1);  // doc: 142.4 against 251.2 GB/s
  CHECK(r2 > 0.4 * r1);
}

TEST_CASE("64 H100 over NDR, host-based leaves: equal at 1:1; at 2:1 all_to_all and nvls_tree lose, rings do not, PXN buys nothing") {
  const std::string nr = "-p rail_optimized=false ";
  // Non-blocking: the leaves' shape does not matter.
  const double a1 = busbw("-p oversubscription=1", "all_to_all");
  CHECK(busbw(nr + "-p oversubscription=1", "all_to_all") == doctest::Approx(a1).epsilon(0.01));  // doc: 49.0
  // 2:1: the rail tree's PXN all_to_all stays on a rail and mostly at a leaf; the host-based tree sends 59/63 of
  // it through 20 uplinks per 40 NICs.
  const double r2 = busbw("-p oversubscription=2", "all_to_all");
  const double h2 = busbw(nr + "-p oversubscription=2", "all_to_all");
  CHECK(r2 == doctest::Approx(a1).epsilon(0.01));
  CHECK(h2 < 0.6 * r2);  // doc: 26.0 against 49.0 GB/s
  CHECK(h2 > 0.4 * r2);
  // PXN matters exactly where there are rails.
  CHECK(busbw("-p oversubscription=2 --pxn off", "all_to_all") < 0.6 * r2);  // doc: 23.0
  CHECK(busbw(nr + "-p oversubscription=2 --pxn off", "all_to_all") == doctest::Approx(h2).epsilon(0.01));
  // Rings cross a leaf boundary once per leaf and channel: unchanged.
  CHECK(busbw(nr + "-p oversubscription=2", "all_gather") ==
        doctest::Approx(busbw("-p oversubscription=2", "all_gather")).epsilon(0.01));  // doc: 95.4
  // nvls_tree's double binary trees span servers up to 32 apart: most edges cross a spine on the host-based tree.
  const double t2 = busbw(nr + "-p oversubscription=2", "all_reduce");
  const double tr2 = busbw("-p oversubscription=2", "all_reduce");
  CHECK(t2 < 0.92 * tr2);  // doc: 215.4 against 251.5 GB/s
  CHECK(t2 > 0.75 * tr2);
}

TEST_CASE("64 H100 over RoCE: hashed ECMP by default, slower than D-mod-k where spine links are loaded") {
  // `coll -t superpod -p nodes=64 -p fabric=roce ...`, and the same with -p routing=dmodk.
  const std::string d = " -p routing=dmodk";
  auto roce = [](const std::string& p, const std::string& op) { return busbw(p, op, "roce"); };
  // 64-port leaves, 1:1: the PXN all_to_all stays on a rail and sends about half its bytes across the spines,
  // which have room for hashing's uneven share.
  CHECK(roce("-p oversubscription=1", "all_to_all") == doctest::Approx(roce("-p oversubscription=1" + d, "all_to_all")));
  // 16-port leaves, 1:1: 8 leaves per rail, 56/63 of the bytes cross a spine; colliding pairs share a link.
  const double h16 = roce("-p radix=16 -p oversubscription=1", "all_to_all");
  const double d16 = roce("-p radix=16 -p oversubscription=1" + d, "all_to_all");
  CHECK(h16 < 0.85 * d16);  // doc: 38.1 against 49.0 GB/s
  CHECK(h16 > 0.6 * d16);
  // Host-based leaves: all_to_all at 1:1, and the ring (all_gather) at 2:1, whose 8 rails leave a leaf together.
  const std::string nr = "-p rail_optimized=false ";
  CHECK(roce(nr + "-p oversubscription=1", "all_to_all") < 0.95 * roce(nr + "-p oversubscription=1" + d, "all_to_all"));
  CHECK(roce(nr + "-p oversubscription=2", "all_gather") < 0.97 * roce(nr + "-p oversubscription=2" + d, "all_gather"));
  // 16-port leaves, 2:1: D-mod-k's 5 up-ports do not divide the destinations evenly and its busiest uplink
  // carries more than hashing's: there the hashed all_to_all is the faster (doc: 21.3 against 16.7 GB/s).
  CHECK(roce("-p radix=16 -p oversubscription=2", "all_to_all") > roce("-p radix=16 -p oversubscription=2" + d, "all_to_all"));
  // InfiniBand keeps D-mod-k: asking for it changes nothing.
  CHECK(coll64("infiniband-ndr", "-p radix=16", "all_to_all") == coll64("infiniband-ndr", "-p radix=16" + d, "all_to_all"));
}

TEST_CASE("docs/validation.md 'Multi-node logs': the validate command, and a multi-host log without a fabric") {
  const fs::path d = scratch_dir("fabric_validate");
  const std::string data = std::string(FABRICSIM_SOURCE_DIR) + "/tests/data/";
  Run r = run_in(d, fabricsim::cli_test::fabricsim(
                        "validate -q --calibration default " + data + "nccl-tests/abci_inter_*.meta.json " + data +
                        "nccl-tests/together_b200_*.meta.json " + data + "nccl-tests-multinode/*.meta.json"));
  REQUIRE_MESSAGE(r.rc == 0, r.err);
  CHECK(r.out.find("sizes >= 1 MiB: 174 points") != std::string::npos);  // 162 before the p4d scatter log
  // The raw text of an 8-node run names its hosts but not its fabric: an error that says what is missing.
  Run bad = run_in(d, fabricsim::cli_test::fabricsim("validate " + data +
                                                      "nccl-tests-multinode/raw/nvtests309_h100_ib400_8node_64gpu_all_reduce_minctas24_qps2.txt"));
  CHECK(bad.rc == 2);
  CHECK_MESSAGE(bad.err.find("does not say which system and network it ran on") != std::string::npos, bad.err);
  CHECK(bad.out.empty());
}

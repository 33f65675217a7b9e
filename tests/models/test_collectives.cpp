// Collective schedules without an engine: who sends what to whom, the bytes each GPU receives, acyclic
// dependencies, fidelity levels carrying the same bytes, and the errors for inputs that do not apply.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "models/calibration.hpp"
#include "models/collectives.hpp"
#include "models/system.hpp"
#include "models/tuner.hpp"
#include "sim/base/error.hpp"
#include "topologies/io.hpp"
#include "topologies/routing.hpp"

using namespace fabricsim;
using namespace fabricsim::models;

// Relative comparison (doctest's Approx adds an absolute margin of epsilon * 1.0 by default, far too
// loose for times in seconds); default tolerance 1e-12 relative.
static doctest::Approx approx(double v) { return doctest::Approx(v).epsilon(1e-12).scale(1e-300); }

namespace {

// A preset as every command builds it (models::System: NVSwitch planes merged, routing, calibration);
// `preset` when only the topology is needed.
std::shared_ptr<const System> system_of(const std::string& name, std::map<std::string, std::string> p = {}) {
  return std::make_shared<const System>(system_spec(name, std::move(p), "default"));
}
topo::Topology preset(const std::string& name, std::map<std::string, std::string> p = {}) {
  return system_of(name, std::move(p))->topology();
}

CollectiveSpec make(const topo::Topology& t, Op op, std::uint64_t bytes, Algorithm a, Protocol p,
                    Fidelity f = Fidelity::Step, int ngpus = -1) {
  CollectiveSpec s;
  s.op = op;
  s.bytes = bytes;
  s.algorithm = a;
  s.protocol = p;
  s.fidelity = f;
  const auto& g = t.gpus();
  s.communicator.assign(g.begin(), ngpus < 0 ? g.end() : g.begin() + ngpus);
  return s;
}

// Sum of payload bytes (all steps, weights and replicas) received per destination node.
std::map<topo::NodeId, double> received(const Schedule& s) {
  std::map<topo::NodeId, double> r;
  for (const auto& x : s.transfers) r[x.dst] += x.payload_bytes * x.steps * x.weight * x.replicas;
  return r;
}
std::map<topo::NodeId, double> sent(const Schedule& s) {
  std::map<topo::NodeId, double> r;
  for (const auto& x : s.transfers) r[x.src] += x.payload_bytes * x.steps * x.weight * x.replicas;
  return r;
}
double total_payload(const Schedule& s) {
  double t = 0;
  for (const auto& x : s.transfers) t += x.payload_bytes * x.steps * x.weight * x.replicas;
  return t;
}
double total_steps(const Schedule& s) {
  double t = 0;
  for (const auto& x : s.transfers) t += static_cast<double>(x.steps) * x.weight * x.replicas;
  return t;
}

void check_dag(const Schedule& s) {
  for (std::size_t i = 0; i < s.transfers.size(); ++i) {
    for (auto d : s.transfers[i].deps) REQUIRE(d < i);  // emitted in topological order -> acyclic
    REQUIRE(s.transfers[i].src != s.transfers[i].dst);
    REQUIRE(s.transfers[i].bytes >= s.transfers[i].payload_bytes);  // efficiencies <= 1
  }
}

bool is_gpu(const topo::Topology& t, topo::NodeId n) { return t.node(n).kind == topo::NodeKind::Gpu; }

// What every rank must receive (payload) for each op/algorithm, S = spec bytes, n ranks, g per host,
// H hosts. Checked only for GPU destinations (switch traffic of NVLS/CollNet is checked separately).
double expected_gpu_received(const CollectiveSpec& s, Algorithm a, int rank, int g, int H) {
  const double S = static_cast<double>(s.bytes), n = static_cast<double>(s.communicator.size());
  switch (s.op) {
    case Op::AllReduce:
      switch (a) {
        case Algorithm::Ring: return 2 * (n - 1) / n * S;
        case Algorithm::Nvls: return H > 1 ? S + S / g : S;  // across hosts (SHARP): each head gets its shard back
        case Algorithm::Hierarchical: return 2 * (g - 1.0) / g * S + 2 * (H - 1.0) / H * S / g;
        case Algorithm::CollNet: return 2 * (g - 1.0) / g * S + S / g;
        default: return -1;  // tree: depends on the rank's position, checked by totals
      }
    case Op::AllGather: return (n - 1) / n * S;
    case Op::ReduceScatter: return a == Algorithm::Nvls ? S / n : (n - 1) / n * S;
    case Op::Broadcast: return rank == s.root ? 0 : S;
    case Op::Reduce: return -1;
    case Op::AllToAll: return (n - 1) / n * S;
    case Op::AllToAllv: return -1;
    case Op::SendRecv: return S;
  }
  return -1;
}

struct Sys {
  std::string name;
  std::shared_ptr<const System> system;
  const topo::Topology& t;
  Sys(std::string n, std::shared_ptr<const System> s) : name(std::move(n)), system(std::move(s)), t(system->topology()) {}
};

std::vector<Sys> systems() {
  std::vector<Sys> v;
  v.emplace_back("dgx-a100", system_of("dgx-a100"));
  v.emplace_back("dgx-h100", system_of("dgx-h100"));
  // SHARP on, so that CollNet is built too (superpod's default is NCCL's: no SHARP plugin, no CollNet).
  v.emplace_back("superpod4", system_of("superpod", {{"nodes", "4"}, {"sharp", "true"}}));
  return v;
}

}  // namespace

TEST_CASE("every op x algorithm x protocol on dgx-a100, dgx-h100 and a 4-node superpod") {
  Calibration cal = default_calibration();
  int built = 0, rejected = 0;
  for (auto& sys : systems()) {
    topo::Routing& routing = sys.system->routing();
    for (Op op : kAllOps) {
      for (Algorithm a : algorithms_for(op)) {
        for (Protocol p : protocols_for(a)) {
          const std::uint64_t S = 64ull << 20;  // 64 MiB divides by every rank count here
          for (int pat_comm = 0; pat_comm < (a == Algorithm::Pat ? 2 : 1); ++pat_comm) {
            CollectiveSpec s = make(sys.t, op, S, a, p);
            if (pat_comm) {  // one GPU per host: every 8th GPU
              s.communicator.clear();
              for (std::size_t i = 0; i < sys.t.gpus().size(); i += 8) s.communicator.push_back(sys.t.gpus()[i]);
            }
            if (op == Op::Broadcast || op == Op::Reduce) s.root = 1 % static_cast<int>(s.communicator.size());
            std::string why = why_not_applicable(s, a, sys.t, routing);
            CAPTURE(sys.name);
            CAPTURE(std::string(to_string(op)));
            CAPTURE(std::string(to_string(a)));
            CAPTURE(std::string(to_string(p)));
            CAPTURE(why);
            if (!why.empty()) {
              CHECK_THROWS_AS(build_schedule(s, sys.t, routing, cal), InputError);
              ++rejected;
              continue;
            }
            Schedule sch = build_schedule(s, sys.t, routing, cal);
            ++built;
            CHECK(sch.algorithm == to_string(a));
            CHECK(sch.protocol == to_string(p));
            CHECK(sch.fidelity == "step");
            check_dag(sch);
            const int n = static_cast<int>(s.communicator.size());
            if (n > 1) CHECK(!sch.transfers.empty());
            std::set<topo::NodeId> comm(s.communicator.begin(), s.communicator.end());
            for (const auto& x : sch.transfers) {
              // GPU endpoints are members; non-GPU endpoints only for in-network reduction.
              if (is_gpu(sys.t, x.src)) CHECK(comm.count(x.src));
              if (is_gpu(sys.t, x.dst)) CHECK(comm.count(x.dst));
              if (!is_gpu(sys.t, x.src) || !is_gpu(sys.t, x.dst))
                CHECK((a == Algorithm::Nvls || a == Algorithm::NvlsTree || a == Algorithm::CollNet));
            }
            auto rec = received(sch);
            auto snd = sent(sch);
            std::map<int, int> per_host;
            for (auto gnode : s.communicator) per_host[sys.t.node(gnode).host]++;
            const int H = static_cast<int>(per_host.size());
            const int g = per_host.begin()->second;
            for (int r = 0; r < n; ++r) {
              double e = expected_gpu_received(s, a, r, g, H);
              if (e >= 0) CHECK(rec[s.communicator[r]] == approx(e).epsilon(1e-9));
            }
            const double Sd = static_cast<double>(S);
            if (op == Op::Reduce) {  // the root receives S; every other rank sends S
              for (int r = 0; r < n; ++r)
                CHECK(snd[s.communicator[r]] == approx(r == s.root ? 0.0 : Sd));
              CHECK(rec[s.communicator[s.root]] == approx(Sd));
            }
            if (op == Op::AllReduce && a == Algorithm::Tree) {
              // Each of the two trees (per channel) moves S/2 up and S/2 down over n-1 edges.
              CHECK(total_payload(sch) == approx(2.0 * (n - 1) * Sd));
              for (int r = 0; r < n; ++r) CHECK(rec[s.communicator[r]] >= Sd * 0.5 - 1);
            }
            if (op == Op::AllReduce && a == Algorithm::NvlsTree) {
              // Every GPU gets S from its NVSwitch (its reduced shard and the others' multicast); the heads of
              // each shard exchange S/g over two trees of H-1 edges, up and down: 2(H-1)S between GPUs in all.
              std::map<topo::NodeId, double> from_switch;
              double gpu_to_gpu = 0;
              for (const auto& x : sch.transfers) {
                const double b = x.payload_bytes * x.weight * x.steps * x.replicas;
                if (!is_gpu(sys.t, x.src)) from_switch[x.dst] += b;
                else if (is_gpu(sys.t, x.dst)) gpu_to_gpu += b;
              }
              for (int r = 0; r < n; ++r) CHECK(from_switch[s.communicator[r]] == approx(Sd).epsilon(1e-9));
              CHECK(gpu_to_gpu == approx(2.0 * (H - 1) * Sd).epsilon(1e-9));
            }
            if (op == Op::AllToAllv) {
              for (int r = 0; r < n; ++r) CHECK(rec[s.communicator[r]] == approx((n - 1.0) / n * Sd));
            }
          }
        }
      }
    }
  }
  CHECK(built > 80);
  CHECK(rejected > 5);  // nvls on dgx-a100 and the superpod, pat with 8 GPUs per host, collnet on one node
}

TEST_CASE("ring all_reduce step schedule: 2(n-1) steps of S/n, each rank sends to its ring successor") {
  topo::Topology t = preset("dgx-h100");
  CollectiveSpec s = make(t, Op::AllReduce, 8 << 20, Algorithm::Ring, Protocol::Simple);
  Schedule sch = build_schedule(s, t, default_calibration());
  const int n = 8;
  REQUIRE(sch.transfers.size() == static_cast<std::size_t>(2 * (n - 1) * n));
  std::map<std::pair<topo::NodeId, topo::NodeId>, int> pairs;
  for (const auto& x : sch.transfers) {
    CHECK(x.payload_bytes == approx((8 << 20) / 8.0));
    pairs[{x.src, x.dst}]++;
  }
  CHECK(pairs.size() == 8u);
  for (int r = 0; r < n; ++r) CHECK(pairs[{t.gpus()[r], t.gpus()[(r + 1) % n]}] == 2 * (n - 1));
  // step k > 0 of rank r waits for step k-1 of its predecessor (the data it forwards) and for its own
  // step k-1 (ring_credit_steps 1, the default: depth 1)
  const auto& x = sch.transfers[n + 3];  // step 1, position 3
  CHECK(x.step == 1);
  REQUIRE(x.deps.size() == 2u);
  CHECK(sch.transfers[x.deps[0]].dst == x.src);  // predecessor's step 0 (lower index first)
  CHECK(sch.transfers[x.deps[1]].src == x.src);  // own step 0
  CHECK(sch.transfers[x.deps[1]].step == 0);
  // ring_credit_steps 8: 1 MiB per step on the host's one channel is one NCCL chunk, so depth 2
  // (models::ring_depth). A step is a send and the receiver's delay; the send of step k waits for the
  // predecessor's step k-1 received, its own step k-1 sent and its own step k-2 received.
  Calibration c8 = default_calibration();
  c8.factors.ring_credit_steps = 8;
  Schedule s8 = build_schedule(s, t, c8);
  REQUIRE(s8.transfers.size() == 2 * sch.transfers.size());
  auto sent = [&](int k, int p) { return static_cast<std::uint32_t>(2 * (k * n + p)); };
  const auto& y = s8.transfers[sent(3, 3)];
  CHECK(y.step == 3);
  CHECK(y.src != y.dst);
  CHECK(s8.transfers[sent(3, 3) + 1].src == y.dst);  // the delay at the receiver
  CHECK(s8.transfers[sent(3, 3) + 1].dst == y.dst);
  CHECK(y.deps == std::vector<std::uint32_t>{sent(1, 3) + 1, sent(2, 2) + 1, sent(2, 3)});  // lower index first
}

TEST_CASE("fidelity levels carry the same bytes and steps") {
  Calibration cal = default_calibration();
  for (auto& sys : systems()) {
    topo::Routing& routing = sys.system->routing();
    for (Op op : {Op::AllReduce, Op::AllGather, Op::ReduceScatter, Op::Broadcast, Op::AllToAll}) {
      for (Algorithm a : algorithms_for(op)) {
        CollectiveSpec s = make(sys.t, op, 256ull << 20, a, Protocol::Simple);
        if (!why_not_applicable(s, a, sys.t, routing).empty()) continue;
        CAPTURE(sys.name);
        CAPTURE(std::string(to_string(op)));
        CAPTURE(std::string(to_string(a)));
        Schedule st = build_schedule(s, sys.t, routing, cal);
        s.fidelity = Fidelity::Phase;
        Schedule ph = build_schedule(s, sys.t, routing, cal);
        s.fidelity = Fidelity::Symmetry;
        Schedule sy = build_schedule(s, sys.t, routing, cal);
        check_dag(ph);
        check_dag(sy);
        CHECK(ph.fidelity == "phase");
        CHECK(sy.fidelity == "symmetry");
        CHECK(total_payload(ph) == approx(total_payload(st)).epsilon(1e-9));
        CHECK(total_payload(sy) == approx(total_payload(st)).epsilon(1e-9));
        CHECK(total_steps(ph) == approx(total_steps(st)).epsilon(1e-9));
        CHECK(total_steps(sy) == approx(total_steps(st)).epsilon(1e-9));
        CHECK(ph.transfers.size() <= st.transfers.size());
        CHECK(sy.transfers.size() <= ph.transfers.size());
      }
    }
  }
}

TEST_CASE("symmetry collapses isolated identical ring hops into replicas") {
  topo::Topology t = preset("dgx-h100");
  CollectiveSpec s = make(t, Op::AllReduce, 1 << 30, Algorithm::Ring, Protocol::Simple, Fidelity::Symmetry);
  Schedule sch = build_schedule(s, t, default_calibration());
  // 8 ring hops GPU i -> NVSwitch -> GPU i+1, every link direction used once: one transfer, 8 replicas.
  REQUIRE(sch.transfers.size() == 1u);
  CHECK(sch.transfers[0].replicas == 8u);
  CHECK(sch.transfers[0].steps == 14u);
  // all_to_all flows share GPU links: nothing may collapse.
  CollectiveSpec a = make(t, Op::AllToAll, 1 << 30, Algorithm::Direct, Protocol::Simple, Fidelity::Symmetry);
  Schedule sa = build_schedule(a, t, default_calibration());
  CHECK(sa.transfers.size() == 56u);
  for (const auto& x : sa.transfers) CHECK(x.replicas == 1u);
}

TEST_CASE("auto fidelity: step when small, symmetry for a large ring") {
  topo::Topology t = preset("dgx-h100");
  CollectiveSpec s = make(t, Op::AllReduce, 1 << 20, Algorithm::Ring, Protocol::Simple, Fidelity::Auto);
  CHECK(build_schedule(s, t, default_calibration()).fidelity == "step");
  CHECK(resolve_fidelity(s, Algorithm::Ring, Protocol::Simple, 1) == Fidelity::Step);
  topo::Topology big = preset("superpod", {{"nodes", "64"}});
  CollectiveSpec b = make(big, Op::AllReduce, 1 << 30, Algorithm::Ring, Protocol::Simple, Fidelity::Auto);
  CHECK(resolve_fidelity(b, Algorithm::Ring, Protocol::Simple, 8) == Fidelity::Symmetry);
}

TEST_CASE("errors: nvls without NVSwitch, bad communicators, sizes that do not divide") {
  Calibration cal = default_calibration();
  const auto a100_sys = system_of("dgx-a100");
  const topo::Topology& a100 = a100_sys->topology();
  topo::Routing& ra = a100_sys->routing();
  CollectiveSpec s = make(a100, Op::AllReduce, 1 << 20, Algorithm::Nvls, Protocol::Simple);
  CHECK_THROWS_WITH_AS(build_schedule(s, a100, ra, cal), doctest::Contains("nvls"), InputError);

  CollectiveSpec c = make(a100, Op::AllReduce, 1 << 20, Algorithm::Ring, Protocol::Simple);
  c.communicator.push_back(a100.find("n0.nic0"));
  CHECK_THROWS_WITH_AS(build_schedule(c, a100, ra, cal), doctest::Contains("not a GPU"), InputError);
  c.communicator.back() = 100000;
  CHECK_THROWS_WITH_AS(build_schedule(c, a100, ra, cal), doctest::Contains("does not exist"), InputError);
  c.communicator.back() = c.communicator.front();
  CHECK_THROWS_WITH_AS(build_schedule(c, a100, ra, cal), doctest::Contains("twice"), InputError);
  c.communicator.clear();
  CHECK_THROWS_AS(build_schedule(c, a100, ra, cal), InputError);

  CollectiveSpec ag = make(a100, Op::AllGather, 8 * 4 * 3 + 4, Algorithm::Ring, Protocol::Simple);
  CHECK_THROWS_WITH_AS(build_schedule(ag, a100, ra, cal), doctest::Contains("multiple of nranks"), InputError);
  ag.bytes = 8 * 4 * 3;
  CHECK_NOTHROW(build_schedule(ag, a100, ra, cal));
  CollectiveSpec ar = make(a100, Op::AllReduce, 10, Algorithm::Ring, Protocol::Simple);
  CHECK_THROWS_WITH_AS(build_schedule(ar, a100, ra, cal), doctest::Contains("element size"), InputError);

  CollectiveSpec pat = make(a100, Op::AllGather, 1 << 20, Algorithm::Pat, Protocol::Simple);
  CHECK_THROWS_WITH_AS(build_schedule(pat, a100, ra, cal), doctest::Contains("one rank per host"), InputError);
  CollectiveSpec ll = make(preset("dgx-h100"), Op::AllReduce, 1 << 20, Algorithm::Nvls, Protocol::LL);
  CHECK_THROWS_WITH_AS(build_schedule(ll, preset("dgx-h100"), cal), doctest::Contains("protocol ll"), InputError);
  CollectiveSpec wrong = make(a100, Op::Broadcast, 1 << 20, Algorithm::Tree, Protocol::Simple);
  CHECK_THROWS_WITH_AS(build_schedule(wrong, a100, ra, cal), doctest::Contains("does not implement"), InputError);
  CollectiveSpec root = make(a100, Op::Broadcast, 1 << 20, Algorithm::Ring, Protocol::Simple);
  root.root = 8;
  CHECK_THROWS_WITH_AS(build_schedule(root, a100, ra, cal), doctest::Contains("root"), InputError);
  CollectiveSpec cn = make(a100, Op::AllReduce, 1 << 20, Algorithm::CollNet, Protocol::Simple);
  CHECK_THROWS_WITH_AS(build_schedule(cn, a100, ra, cal), doctest::Contains("SHARP"), InputError);
  CollectiveSpec v = make(a100, Op::AllToAllv, 1 << 20, Algorithm::Direct, Protocol::Simple);
  v.matrix.assign(3, std::vector<std::uint64_t>(3, 4));
  CHECK_THROWS_WITH_AS(build_schedule(v, a100, ra, cal), doctest::Contains("matrix"), InputError);
}

TEST_CASE("tuner: fastest candidate, overrides respected, NCCL-like choices") {
  Calibration cal = default_calibration();
  const auto h_sys = system_of("dgx-h100");
  const topo::Topology& h = h_sys->topology();
  topo::Routing& rh = h_sys->routing();
  CollectiveSpec s = make(h, Op::AllReduce, 8ull << 30, Algorithm::Ring, Protocol::Simple);
  s.algorithm.reset();
  s.protocol.reset();
  TunerChoice big = tune(s, h, rh, cal);
  CHECK(to_string(big.algorithm) == std::string("nvls"));
  for (const auto& c : big.candidates) CHECK(c.predicted_s >= big.predicted_s);
  s.bytes = 8;
  TunerChoice small = tune(s, h, rh, cal);
  CHECK(small.protocol == Protocol::LL);  // latency-bound: LL, as NCCL
  s.algorithm = Algorithm::Ring;
  s.bytes = 8ull << 30;
  TunerChoice forced = tune(s, h, rh, cal);
  CHECK(forced.algorithm == Algorithm::Ring);
  CHECK(forced.protocol == Protocol::Simple);
  const auto a_sys = system_of("dgx-a100");
  const topo::Topology& a = a_sys->topology();
  topo::Routing& ra = a_sys->routing();
  CollectiveSpec n = make(a, Op::AllReduce, 1 << 20, Algorithm::Nvls, Protocol::Simple);
  n.protocol.reset();
  CHECK_THROWS_WITH_AS(tune(n, a, ra, cal), doctest::Contains("nvls"), InputError);
  // Bandwidths seen by the tuner: 12 NVLink3 x 25 GB/s x 0.8 on A100.
  CommBandwidths bw = comm_bandwidths(n, a, ra, cal);
  CHECK(bw.intra_Bps == approx(300e9 * 0.8));
}

TEST_CASE("merge_nvswitch_planes bundles the NVSwitch planes of a host") {
  topo::Topology raw = topo::build_preset("dgx-h100", {});
  topo::Topology m = merge_nvswitch_planes(raw);
  int sw = 0;
  for (const auto& nd : m.nodes()) sw += nd.kind == topo::NodeKind::NvSwitch;
  CHECK(sw == 1);
  REQUIRE(m.gpus().size() == raw.gpus().size());
  for (std::size_t i = 0; i < m.gpus().size(); ++i) CHECK(m.node(m.gpus()[i]).id == raw.node(raw.gpus()[i]).id);
  double nvl = 0;
  for (const auto& [l, nb] : m.adjacent(m.gpus()[0]))
    if (m.link(l).kind == topo::LinkKind::NVLink) nvl += m.link(l).bandwidth_Bps;
  CHECK(nvl == approx(18 * 25e9));
  topo::Routing r(m);
  CHECK(r.bottleneck_bandwidth(m.gpus()[0], m.gpus()[1]) == approx(18 * 25e9));
  // Two NVL72 racks: 18 NVSwitch chips per rack become one switch per rack, never one across racks.
  topo::Topology racks = merge_nvswitch_planes(topo::build_preset("superpod", {{"nodes", "2"}, {"node", "gb200-nvl72"}}));
  int rsw = 0;
  for (const auto& nd : racks.nodes()) rsw += nd.kind == topo::NodeKind::NvSwitch;
  CHECK(rsw == 2);
  topo::Routing rr(racks);
  CHECK(why_not_applicable(make(racks, Op::AllReduce, 1 << 20, Algorithm::Nvls, Protocol::Simple), Algorithm::Nvls,
                           racks, rr)
            .find("several NVLink domains") != std::string::npos);
  // The fabric's multipath rule survives the merge (a RoCE superpod keeps routing by hashed ECMP).
  const topo::Topology roce = merge_nvswitch_planes(topo::build_preset("superpod", {{"nodes", "2"}, {"fabric", "roce"}}));
  CHECK(roce.routing() == topo::FabricRouting::Hash);
  CHECK(topo::Routing(roce).options().fabric == topo::FabricRouting::Hash);
  CHECK(roce.params().at("routing") == "hash");
}

TEST_CASE("nccl-tests busbw factors and counts") {
  CHECK(busbw_factor(Op::AllReduce, 8) == approx(14.0 / 8));
  CHECK(busbw_factor(Op::AllGather, 8) == approx(7.0 / 8));
  CHECK(busbw_factor(Op::ReduceScatter, 8) == approx(7.0 / 8));
  CHECK(busbw_factor(Op::AllToAll, 8) == approx(7.0 / 8));
  CHECK(busbw_factor(Op::Broadcast, 8) == 1.0);
  CHECK(busbw_factor(Op::SendRecv, 8) == 1.0);
  // together_h100 all_gather log: size 8589934592 B -> count 268435456 (per rank) with 8 ranks
  CHECK(nccl_tests_count(Op::AllGather, 8589934592ull, 8, 4) == 268435456ull);
  CHECK(nccl_tests_count(Op::AllReduce, 8589934592ull, 8, 4) == 2147483648ull);
  Op op;
  CHECK(parse_op("sendrecv", op));
  CHECK(op == Op::SendRecv);
  CHECK_FALSE(parse_op("allreduce", op));
  // scatter (nccl-tests src/scatter.cu): factor (n-1)/n, count per rank; the p4d log prints count 1 for 64 B
  // on 16 ranks.
  CHECK(parse_op("scatter", op));
  CHECK(op == Op::Scatter);
  CHECK(busbw_factor(Op::Scatter, 16) == approx(15.0 / 16));
  CHECK(nccl_tests_count(Op::Scatter, 64, 16, 4) == 1);
}

TEST_CASE("scatter: NCCL's p2p sends of bytes/n from the root to every other rank") {
  const auto sys = system_of("superpod", {{"nodes", "2"}});
  const topo::Topology& t = sys->topology();
  topo::Routing& routing = sys->routing(true);
  const Calibration cal = default_calibration();
  CollectiveSpec s = make(t, Op::Scatter, 16ull << 20, Algorithm::Direct, Protocol::Simple);
  s.root = 3;
  const int n = static_cast<int>(s.communicator.size());
  REQUIRE(n == 16);
  const Schedule sch = build_schedule(s, t, routing, cal);
  CHECK(sch.transfers.size() == 15u);
  for (const auto& x : sch.transfers) {
    CHECK(x.src == s.communicator[3]);
    CHECK(x.dst != s.communicator[3]);
    CHECK(x.payload_bytes == approx((16 << 20) / 16.0));
  }
  // The tuner has one candidate (direct) and NCCL's p2p protocol rule picks it.
  s.algorithm.reset();
  s.protocol.reset();
  const TunerChoice tc = tune(s, t, routing, cal);
  CHECK(tc.algorithm == Algorithm::Direct);
  CHECK(tc.protocol == Protocol::Simple);  // across hosts the shared network buffers carry Simple only
  // The root is checked like broadcast's, and the size must divide into n blocks of whole elements.
  s.root = 16;
  CHECK_THROWS_AS(build_schedule(s, t, routing, cal), InputError);
  s.root = 0;
  s.bytes = 16 * 4 + 4;
  CHECK_THROWS_AS(build_schedule(s, t, routing, cal), InputError);
}

TEST_CASE("tuner: Tree is priced with NCCL's model (algorithm bandwidth = busBw / 2 at every host count)") {
  // [NCCL-T] ratio .5 for non-ring algorithms: a 2-host all_reduce never goes to Tree at large sizes, as in
  // NCCL, although the simulated double binary tree moves only S per NIC there. (On DGX H100 hosts NVLS_TREE
  // wins, as NCCL's does on the 2-node H100 logs; on DGX A100 hosts, without NVLS, Ring.)
  Calibration cal = default_calibration();
  for (const char* nodes : {"2", "4"}) {
    CAPTURE(nodes);
    const auto a_sys = system_of("superpod", {{"nodes", nodes}, {"node", "dgx-a100"}});
    const topo::Topology& a = a_sys->topology();
    topo::Routing& ra = a_sys->routing();
    CollectiveSpec sa = make(a, Op::AllReduce, 1ull << 30, Algorithm::Ring, Protocol::Simple);
    sa.algorithm.reset();
    sa.protocol.reset();
    CHECK(tune(sa, a, ra, cal).algorithm == Algorithm::Ring);
    const auto t_sys = system_of("superpod", {{"nodes", nodes}});
    const topo::Topology& t = t_sys->topology();
    topo::Routing& r = t_sys->routing();
    CollectiveSpec s = make(t, Op::AllReduce, 1ull << 30, Algorithm::Ring, Protocol::Simple);
    s.algorithm.reset();
    s.protocol.reset();
    TunerChoice c = tune(s, t, r, cal);
    CHECK(c.algorithm == Algorithm::NvlsTree);
    CommBandwidths bw = comm_bandwidths(s, t, r, cal);
    const double S = static_cast<double>(s.bytes);
    const double B = std::min(bw.intra_Bps, std::min(bw.host_net_Bps, default_channels(s, t, r) * bw.nic_Bps));
    bool seen = false;
    for (const auto& k : c.candidates)
      if (k.algorithm == Algorithm::Tree && k.protocol == Protocol::Simple) {
        seen = true;
        CHECK(k.predicted_s - k.latency_s == doctest::Approx(2 * S / (B * cal.factor("tree_efficiency"))));
      }
    CHECK(seen);
  }
}

TEST_CASE("nvls_tree: NCCL's NVLS_TREE across hosts (applicability, tuner model, schedule latency)") {
  Calibration cal = default_calibration();
  // Only across hosts, and only where every host's ranks share an NVLS NVSwitch.
  topo::Topology h = preset("dgx-h100");
  topo::Routing rh(h);
  CHECK(why_not_applicable(make(h, Op::AllReduce, 1 << 20, Algorithm::NvlsTree, Protocol::Simple), Algorithm::NvlsTree,
                           h, rh)
            .find("two hosts") != std::string::npos);
  topo::Topology a = preset("superpod", {{"nodes", "2"}, {"node", "dgx-a100"}});
  topo::Routing ra(a);
  CHECK(why_not_applicable(make(a, Op::AllReduce, 1 << 20, Algorithm::NvlsTree, Protocol::Simple), Algorithm::NvlsTree,
                           a, ra)
            .find("NVLink SHARP") != std::string::npos);
  for (const char* nodes : {"2", "4"}) {
    CAPTURE(nodes);
    const double H = std::atof(nodes);
    topo::Topology t = preset("superpod", {{"nodes", nodes}});
    topo::Routing r(t);
    CollectiveSpec s = make(t, Op::AllReduce, 1ull << 30, Algorithm::NvlsTree, Protocol::Simple);
    CHECK(why_not_applicable(s, Algorithm::NvlsTree, t, r).empty());
    TunerChoice c = tune(s, t, r, cal);
    REQUIRE(c.candidates.size() == 1);
    // [NCCL-T] latency 25 us + 2 log2(nodes) x 20.9 us; bandwidth: the slower of NVLS inside the host (S per GPU
    // at nvls_efficiency of nominal NVLink) and head k's shard S/8 through its NIC, once on 2 hosts, twice beyond.
    CommBandwidths bw = comm_bandwidths(s, t, r, cal);
    const double S = static_cast<double>(s.bytes);
    CHECK(c.candidates[0].latency_s == approx(25e-6 + 2 * std::log2(H) * 20.9e-6));
    const double intra = S / (bw.nvlink_Bps * cal.factor("nvls_efficiency"));
    const double inter = (H <= 2 ? 1 : 2) * S / 8 / bw.nic_Bps;
    CHECK(c.candidates[0].predicted_s - c.candidates[0].latency_s == approx(std::max(intra, inter)));
    // The network latency is the calibration's (`fabricsim validate` sets NCCL's value for the log's release
    // there: 14 us in NCCL 2.19.1-2.28.7), so the tuner's choice moves with the schedule's price.
    Calibration c14 = cal;
    c14.algo[{Algorithm::NvlsTree, Protocol::Simple}].net_step_latency_s = 14e-6;
    CHECK(tune(s, t, r, c14).candidates[0].latency_s == approx(25e-6 + 2 * std::log2(H) * 14e-6));
    // The schedule pays the network latency once per tree level and direction per call, not per chunk.
    Schedule sch = build_schedule(s, t, r, cal);
    const auto& ap = cal.of(Algorithm::NvlsTree, Protocol::Simple);
    CHECK(sch.fixed_latency_s == approx(ap.base_latency_s + 2 * std::log2(H) * ap.net_step_latency_s));
    // The NVLS per-loop cost (the transfers' step latency): every chunk after the first pays it on every hop; the
    // first pays it only on the rank -> switch and switch -> rank hops, the NVLS kernel's two hand-offs inside a
    // host (they carry (g-1)/g of S, the head's hops S/g and the tree hops S/2g), none on the others.
    double loop = 0, biggest_first = 0;
    for (const auto& x : sch.transfers) {
      loop = std::max(loop, x.step_latency_s);
      if (x.step == 0) biggest_first = std::max(biggest_first, x.payload_bytes);
    }
    CHECK(loop > 0);
    int handoffs = 0, free_hops = 0;
    for (const auto& x : sch.transfers) {
      if (x.step != 0) {
        CHECK(x.step_latency_s == approx(loop));
        continue;
      }
      const bool handoff = x.payload_bytes == approx(biggest_first);
      CHECK(x.step_latency_s == (handoff ? approx(loop) : approx(0.0)));
      (handoff ? handoffs : free_hops)++;
    }
    CHECK(handoffs > 0);
    CHECK(free_hops > 0);
  }
}

TEST_CASE("tuner: NCCL's LL busBw ceiling (llMaxBws) per GPU generation and host count") {
  CHECK(ll_max_busbw_Bps("a100-40gb", 1) == approx(87.7e9));
  CHECK(ll_max_busbw_Bps("a100-80gb", 2) == approx(22.5e9));
  CHECK(ll_max_busbw_Bps("v100", 8) == approx(20.4e9));
  CHECK(ll_max_busbw_Bps("h100", 1) == approx(141.0e9));
  CHECK(ll_max_busbw_Bps("gb200", 4) == approx(70.0e9));
  CHECK(ll_max_busbw_Bps("mi300x", 1) == 0.0);
  // 8x A100 (240 GB/s usable NVLink per GPU): Ring LL's bandwidth term uses 87.7 GB/s, not 0.5 x 240.
  Calibration cal = default_calibration();
  const auto a_sys = system_of("dgx-a100");
  const topo::Topology& a = a_sys->topology();
  topo::Routing& ra = a_sys->routing();
  CollectiveSpec s = make(a, Op::AllReduce, 64ull << 20, Algorithm::Ring, Protocol::LL);
  TunerChoice c = tune(s, a, ra, cal);
  REQUIRE(c.candidates.size() == 1);
  CHECK(c.candidates[0].predicted_s - c.candidates[0].latency_s == approx(14.0 / 8 * (64 << 20) / 87.7e9));
}

TEST_CASE("tuner: NCCL's release-specific rules (src/graph/tuning.cc, tag by tag)") {
  // Current (and unknown) releases: the 2.18+ rules.
  for (int v : {-1, 218, 226, 229}) {
    const NcclTunerRules r = nccl_tuner_rules(v);
    CAPTURE(v);
    CHECK(r.ring_net_overhead);
    CHECK(r.plateau_per_channel);
    CHECK(r.plateau_factor_sm80 == 1.4);
    CHECK(r.plateau_factor_sm90 == 1.4);
    CHECK_FALSE(r.tree_ll128_row_2_8);
  }
  // 2.8-2.16: no net-overhead floor, plateau x1.9 from ranks / 16 x 64 KiB; 2.17: x1.5 on Hopper.
  const NcclTunerRules r28 = nccl_tuner_rules(208), r212 = nccl_tuner_rules(212), r217 = nccl_tuner_rules(217);
  CHECK_FALSE(r28.ring_net_overhead);
  CHECK_FALSE(r28.plateau_per_channel);
  CHECK(r28.plateau_factor_sm80 == 1.9);
  CHECK(r28.plateau_factor_sm90 == 1.9);
  CHECK(r217.plateau_factor_sm80 == 1.9);
  CHECK(r217.plateau_factor_sm90 == 1.5);
  // treeCorrectionFactor's LL128 row: 2.8-2.9 differ from 2.10 on at 512 KiB (k = 13), 4-16 MiB and >= 128 MiB.
  CHECK(r28.tree_ll128_row_2_8);
  CHECK_FALSE(r212.tree_ll128_row_2_8);
  CHECK(nccl_tree_correction(Protocol::LL128, 512 << 10, r28) == approx(0.5));
  CHECK(nccl_tree_correction(Protocol::LL128, 512 << 10, r212) == approx(0.6));
  CHECK(nccl_tree_correction(Protocol::LL128, 8 << 20, r28) == approx(0.7));
  CHECK(nccl_tree_correction(Protocol::LL128, 8 << 20, r212) == approx(0.9));
  CHECK(nccl_tree_correction(Protocol::LL128, 128ull << 20, r28) == approx(0.92));
  CHECK(nccl_tree_correction(Protocol::LL, 64 << 10, r28) == approx(0.6));  // the other rows are the same
  // In the tuner: a multi-node ring's intra-node LL steps pay the 1 us floor only under the 2.18+ rules.
  Calibration cal = default_calibration();
  const auto t_sys = system_of("superpod", {{"nodes", "2"}});
  const topo::Topology& t = t_sys->topology();
  topo::Routing& r = t_sys->routing();
  CollectiveSpec s = make(t, Op::AllReduce, 4096, Algorithm::Ring, Protocol::LL);
  const double li = cal.of(Algorithm::Ring, Protocol::LL).step_latency_s;
  REQUIRE(li < 1e-6);
  const double now = tune(s, t, r, cal).candidates.at(0).latency_s;
  s.nccl_version = 208;
  const double then = tune(s, t, r, cal).candidates.at(0).latency_s;
  // 2 x 16 - 2 ranks' steps, 2 of them across the network: 28 intra-node steps at max(li, 1 us) against li.
  CHECK(now - then == approx(28 * (1e-6 - li)));
}

TEST_CASE("tuner: Tree all_reduce bandwidth scaled by NCCL's treeCorrectionFactor") {
  // Column k covers [64 * 2^k, 64 * 2^(k+1)) bytes; NCCL applies columns 0..22 only.
  CHECK(nccl_tree_correction(Protocol::LL, 8) == 1.0);                  // below 64 B
  CHECK(nccl_tree_correction(Protocol::LL, 64 << 10) == approx(0.6));   // k = 10
  CHECK(nccl_tree_correction(Protocol::LL, (64 << 10) - 1) == approx(0.7));  // k = 9
  CHECK(nccl_tree_correction(Protocol::LL128, 4 << 20) == approx(0.8));  // k = 16
  CHECK(nccl_tree_correction(Protocol::Simple, 1 << 20) == approx(0.5));  // k = 14
  CHECK(nccl_tree_correction(Protocol::Simple, 256ull << 20) == approx(0.9));  // k = 22, the last applied
  CHECK(nccl_tree_correction(Protocol::Simple, 512ull << 20) == 1.0);          // k = 23: not applied
  // In the tuner: a 4-node tree at 1 MiB gets half the bandwidth it gets uncorrected.
  Calibration cal = default_calibration();
  const auto t_sys = system_of("superpod", {{"nodes", "4"}});
  const topo::Topology& t = t_sys->topology();
  topo::Routing& r = t_sys->routing();
  CollectiveSpec s = make(t, Op::AllReduce, 1 << 20, Algorithm::Tree, Protocol::Simple);
  TunerChoice c = tune(s, t, r, cal);
  REQUIRE(c.candidates.size() == 1);
  CommBandwidths bw = comm_bandwidths(s, t, r, cal);
  const double B = std::min(bw.intra_Bps, std::min(bw.host_net_Bps, default_channels(s, t, r) * bw.nic_Bps));
  CHECK(c.candidates[0].predicted_s - c.candidates[0].latency_s ==
        doctest::Approx(2.0 * (1 << 20) / (B * cal.factor("tree_efficiency") * 0.5)));
}

TEST_CASE("tuner: p2p protocol follows NCCL's rule (LL up to 16 KiB per peer inside a host, else Simple)") {
  Calibration cal = default_calibration();
  const auto h_sys = system_of("dgx-h100");
  const topo::Topology& h = h_sys->topology();
  topo::Routing& rh = h_sys->routing();
  auto choose = [&](Op op, std::uint64_t bytes, const topo::Topology& t, topo::Routing& r) {
    CollectiveSpec s = make(t, op, bytes, Algorithm::Direct, Protocol::Simple);
    s.protocol.reset();
    return tune(s, t, r, cal);
  };
  CHECK(choose(Op::SendRecv, 16384, h, rh).protocol == Protocol::LL);
  CHECK(choose(Op::SendRecv, 16384 + 4, h, rh).protocol == Protocol::Simple);
  CHECK(choose(Op::SendRecv, 8, h, rh).candidates.size() == 1);  // not a cost comparison
  // all_to_all: bytes / n to each peer (8 GPUs: 128 KiB total is 16 KiB per peer).
  CHECK(choose(Op::AllToAll, 128 << 10, h, rh).protocol == Protocol::LL);
  CHECK(choose(Op::AllToAll, 256 << 10, h, rh).protocol == Protocol::Simple);
  // Across hosts the network connections have no LL buffers: Simple at any size.
  const auto sp_sys = system_of("superpod", {{"nodes", "2"}});
  const topo::Topology& sp = sp_sys->topology();
  topo::Routing& rs = sp_sys->routing();
  CHECK(choose(Op::SendRecv, 8, sp, rs).protocol == Protocol::Simple);
  // A forced protocol still wins.
  CollectiveSpec f = make(h, Op::SendRecv, 1 << 20, Algorithm::Direct, Protocol::LL);
  CHECK(tune(f, h, rh, cal).protocol == Protocol::LL);
}

TEST_CASE("NCCL channel counts: per communicator, and per call by size") {
  // Logged "coll channels" (models/tuner.cpp cites each).
  CHECK(nccl_coll_channels("h100", 1) == 24);
  CHECK(nccl_coll_channels("h100", 2) == 16);
  CHECK(nccl_coll_channels("a100-40gb", 1) == 24);
  CHECK(nccl_coll_channels("a100-80gb", 4) == 0);  // not measured
  CHECK(nccl_coll_channels("v100", 1) == 0);
  // Ring LL on 8 ranks: a channel per 512 threads x 8 B x 8 ranks = 32 KiB.
  CHECK(nccl_call_channels(Algorithm::Ring, Protocol::LL, 1 << 20, 8, 24) == 24);
  CHECK(nccl_call_channels(Algorithm::Ring, Protocol::LL, 768 << 10, 8, 24) == 24);
  CHECK(nccl_call_channels(Algorithm::Ring, Protocol::LL, (768 << 10) - 1, 8, 24) == 23);
  CHECK(nccl_call_channels(Algorithm::Ring, Protocol::LL, 512 << 10, 8, 24) == 16);
  CHECK(nccl_call_channels(Algorithm::Ring, Protocol::LL, 32 << 10, 8, 24) == 1);
  CHECK(nccl_call_channels(Algorithm::Ring, Protocol::LL, 8, 8, 24) == 1);
  CHECK(nccl_call_channels(Algorithm::Ring, Protocol::LL, 512 << 10, 4, 24) == 24);  // 16 KiB per channel
  // Simple: 512 x 64 B = 32 KiB per channel; LL128: 640 x 8 B = 5 KiB; Tree LL: 512 x 8 B = 4 KiB.
  CHECK(nccl_call_channels(Algorithm::Ring, Protocol::Simple, 256 << 10, 8, 24) == 8);
  CHECK(nccl_call_channels(Algorithm::Ring, Protocol::LL128, 60 << 10, 8, 24) == 12);
  CHECK(nccl_call_channels(Algorithm::Tree, Protocol::LL, 40 << 10, 16, 16) == 10);
  // Algorithms with their own channel rules, and unknown channel counts: one channel.
  CHECK(nccl_call_channels(Algorithm::Nvls, Protocol::Simple, 1 << 30, 8, 24) == 1);
  CHECK(nccl_call_channels(Algorithm::Ring, Protocol::Simple, 1 << 30, 8, 0) == 1);
}

TEST_CASE("NCCL channel settings: NCCL_MIN/MAX_NCHANNELS and NCCL_MIN/MAX_CTAS as ncclTopoPostset and ncclNvlsInit apply them") {
  NcclChannelEnv none;
  CHECK(!none.any());
  CHECK(nccl_channels_with_env(16, none) == 16);
  CHECK(nccl_channels_with_env(0, none) == 0);  // count unknown stays unknown
  NcclChannelEnv ctas;
  ctas.min_ctas = 24;
  CHECK(ctas.any());
  CHECK(nccl_channels_with_env(16, ctas) == 24);  // channels duplicated up to the minimum
  CHECK(nccl_channels_with_env(32, ctas) == 32);  // a minimum never lowers
  CHECK(nccl_channels_with_env(0, ctas) == 24);
  CHECK(nccl_nvls_channels_with_env(16, ctas) == 24);
  NcclChannelEnv maxmin;  // "max, then min": the first 8 channels, duplicated to 12
  maxmin.max_nchannels = 8;
  maxmin.min_nchannels = 12;
  CHECK(nccl_channels_with_env(16, maxmin) == 12);
  CHECK(nccl_nvls_channels_with_env(16, maxmin) == 16);  // NCHANNELS do not enter NVLS's count
  NcclChannelEnv cap;
  cap.max_ctas = 8;
  CHECK(nccl_channels_with_env(16, cap) == 8);
  CHECK(nccl_nvls_channels_with_env(16, cap) == 8);
  NcclChannelEnv huge;
  huge.min_nchannels = 100;
  CHECK(nccl_channels_with_env(16, huge) == 64);  // MAXCHANNELS
  // The per-call drop by size works on the raised count: Simple keeps a channel per 32 KiB.
  CHECK(nccl_call_channels(Algorithm::Ring, Protocol::Simple, 1 << 20, 64, nccl_channels_with_env(16, ctas)) == 24);
}

TEST_CASE("NVLS: NCCL's loop and chunk rule, a latency per loop, efficiency independent of the ring's NVLink one") {
  CHECK(nccl_nvls_channels("h100") == 16);
  CHECK(nccl_nvls_channels("h200") == 16);
  CHECK(nccl_nvls_channels("b200") == 24);
  CHECK(nccl_nvls_channels("gb200") == 24);
  // 16 channels x 8 heads = 128 concurrent ops: 16 KiB chunks below 2 x 128 x 32 KiB = 8 MiB, 32 KiB below
  // 8 x 128 x 64 KiB = 64 MiB, 64 KiB below 64 x 128 x 128 KiB = 1 GiB, 128 KiB from there.
  auto loops = [](double bytes) { return nccl_nvls_loops(bytes, 16, 8); };
  CHECK(loops(8).chunk_bytes == 16384);
  CHECK(loops(8).loops == 1);
  CHECK(loops((8 << 20) - 1).chunk_bytes == 16384);
  CHECK(loops((8 << 20) - 1).loops == 4);  // 2 MiB per loop
  CHECK(loops(8 << 20).chunk_bytes == 32768);
  CHECK(loops(8 << 20).loops == 2);
  CHECK(loops(64 << 20).chunk_bytes == 65536);
  CHECK(loops(64 << 20).loops == 8);
  CHECK(loops(1 << 30).chunk_bytes == 131072);
  CHECK(loops(1 << 30).loop_bytes == 16 << 20);
  CHECK(loops(16.0 * (1 << 30)).loops == 1024);
  CHECK(nccl_nvls_loops(8.0 * (1 << 30), 16, 64).loop_bytes == 16 * 32 * 131072.0);  // heads capped at 32
  // NVLS_TREE (16 channels x 8 heads = 128 ops): 128 KiB chunks on 2 nodes from 4 x 128 x 128 KiB = 64 MiB,
  // 64 KiB from 128 x 64 KiB = 8 MiB, 32 KiB below; 64 KiB at most on >= 4 nodes.
  auto tree = [](double bytes, int nodes) { return nccl_nvls_tree_loops(bytes, 16, 8, nodes); };
  CHECK(tree(64 << 20, 2).chunk_bytes == 131072);
  CHECK(tree(64 << 20, 2).loops == 4);
  CHECK(tree((64 << 20) - 1, 2).chunk_bytes == 65536);
  CHECK(tree(8 << 20, 2).chunk_bytes == 65536);
  CHECK(tree((8 << 20) - 1, 2).chunk_bytes == 32768);
  CHECK(tree(1 << 30, 4).chunk_bytes == 65536);
  CHECK(tree((8 << 20) - 1, 4).chunk_bytes == 32768);

  const auto h_sys = system_of("dgx-h100");

  const topo::Topology& h = h_sys->topology();

  topo::Routing& rh = h_sys->routing();
  Calibration cal = default_calibration();
  const double lat = cal.of(Algorithm::Nvls, Protocol::Simple).step_latency_s;
  REQUIRE(lat > 0);
  // 8 MiB: 2 loops, 2 pipeline chunks, each paying one loop's latency on every hop.
  Schedule s8 = build_schedule(make(h, Op::AllReduce, 8 << 20, Algorithm::Nvls, Protocol::Simple), h, rh, cal);
  check_dag(s8);
  std::set<int> steps8;
  for (const auto& x : s8.transfers) {
    CHECK(x.step_latency_s == approx(lat));
    steps8.insert(x.step);
  }
  CHECK(steps8.size() == 2);
  // 16 GiB: 1024 loops in 64 chunks (max_pipeline_chunks), each chunk paying 16 loops' latency.
  Schedule s16 = build_schedule(make(h, Op::AllReduce, 16ull << 30, Algorithm::Nvls, Protocol::Simple), h, rh, cal);
  for (const auto& x : s16.transfers) CHECK(x.step_latency_s == approx(16 * lat));
  // The wire bytes follow nvls_efficiency alone: changing the ring's NVLink efficiency changes nothing.
  Calibration other = cal;
  other.factors.nvlink_efficiency_h100 = 0.5;
  Schedule o8 = build_schedule(make(h, Op::AllReduce, 8 << 20, Algorithm::Nvls, Protocol::Simple), h, rh, other);
  REQUIRE(o8.transfers.size() == s8.transfers.size());
  for (std::size_t i = 0; i < o8.transfers.size(); ++i) {
    CHECK(o8.transfers[i].bytes == approx(s8.transfers[i].bytes));
    CHECK(s8.transfers[i].bytes == approx(s8.transfers[i].payload_bytes / cal.factor("nvls_efficiency")));
  }
  // The tuner keeps NCCL's crossover on 8x H100 (Ring LL at 1 MiB, NVLS from 2 MiB; DGX H100 and p5 sweeps).
  CollectiveSpec t = make(h, Op::AllReduce, 1 << 20, Algorithm::Ring, Protocol::Simple);
  t.algorithm.reset();
  t.protocol.reset();
  CHECK(tune(t, h, rh, cal).algorithm == Algorithm::Ring);
  t.bytes = 2 << 20;
  CHECK(tune(t, h, rh, cal).algorithm == Algorithm::Nvls);
}

TEST_CASE("tuner: NCCL's algorithms only; hierarchical only when asked for") {
  Calibration cal = default_calibration();
  for (const char* nodes : {"2", "4"}) {
    const auto sys = system_of("superpod", {{"nodes", nodes}});
    const topo::Topology& t = sys->topology();
    topo::Routing& r = sys->routing();
    for (std::uint64_t bytes : {std::uint64_t{1} << 10, std::uint64_t{1} << 20, std::uint64_t{256} << 20}) {
      CAPTURE(nodes);
      CAPTURE(bytes);
      CollectiveSpec s = make(t, Op::AllReduce, bytes, Algorithm::Ring, Protocol::Simple);
      s.algorithm.reset();
      s.protocol.reset();
      TunerChoice c = tune(s, t, r, cal);
      CHECK(c.algorithm != Algorithm::Hierarchical);
      CHECK(c.algorithm != Algorithm::CollNet);  // no SHARP by default
      for (const auto& x : c.candidates) CHECK(x.algorithm != Algorithm::Hierarchical);
      bool said = false;
      for (const auto& why : c.rejected) said = said || why.rfind("hierarchical: fabricsim's own", 0) == 0;
      CHECK(said);
      // Asked for, it runs.
      s.algorithm = Algorithm::Hierarchical;
      CHECK(tune(s, t, r, cal).algorithm == Algorithm::Hierarchical);
    }
  }
}

TEST_CASE("collnet: only with SHARP (NCCL's collNetSupport), priced with NCCL's CollNet Direct latency") {
  Calibration cal = default_calibration();
  const auto plain = system_of("superpod", {{"nodes", "4"}});
  CollectiveSpec s0 = make(plain->topology(), Op::AllReduce, 256 << 20, Algorithm::CollNet, Protocol::Simple);
  CHECK(why_not_applicable(s0, Algorithm::CollNet, plain->topology(), plain->routing()).find("sharp=true") !=
        std::string::npos);
  const auto sys = system_of("superpod", {{"nodes", "4"}, {"sharp", "true"}});
  const topo::Topology& t = sys->topology();
  topo::Routing& r = sys->routing();
  CollectiveSpec s = make(t, Op::AllReduce, 256 << 20, Algorithm::CollNet, Protocol::Simple);
  REQUIRE(why_not_applicable(s, Algorithm::CollNet, t, r).empty());
  TunerChoice c = tune(s, t, r, cal);
  REQUIRE(c.candidates.size() == 1);
  // [NCCL-T] 2 (min(1, ppn-1) x 3.7 + (ppn-1) x 0.4) + 31 us, ppn = 8.
  CHECK(c.candidates[0].latency_s == approx(2 * (3.7e-6 + 7 * 0.4e-6) + 31e-6));
  // The schedule: the 31 us once per call, the per-step latency (3.7 us) per chunk on the SHARP hops.
  Schedule sch = build_schedule(s, t, r, cal);
  const auto& ap = cal.of(Algorithm::CollNet, Protocol::Simple);
  CHECK(sch.fixed_latency_s == approx(ap.base_latency_s + ap.net_step_latency_s));
  int sharp_hops = 0;
  for (const auto& x : sch.transfers)
    if (!is_gpu(t, x.src) || !is_gpu(t, x.dst)) {
      ++sharp_hops;
      CHECK(x.step_latency_s == approx(ap.step_latency_s));
    }
  CHECK(sharp_hops > 0);
  // More than 8 ranks per host: NCCL's CollNet Direct does not run.
  const auto b = system_of("superpod", {{"nodes", "2"}, {"gpus_per_node", "16"}, {"nics_per_node", "16"}, {"sharp", "true"}});
  CollectiveSpec s16 = make(b->topology(), Op::AllReduce, 1 << 20, Algorithm::CollNet, Protocol::Simple);
  CHECK(why_not_applicable(s16, Algorithm::CollNet, b->topology(), b->routing()).find("at most 8") != std::string::npos);
}

TEST_CASE("nvls across hosts: NCCL's NVLS with SHARP (all_reduce only, only with sharp=true)") {
  Calibration cal = default_calibration();
  const auto plain = system_of("superpod", {{"nodes", "2"}});
  CollectiveSpec p = make(plain->topology(), Op::AllReduce, 64 << 20, Algorithm::Nvls, Protocol::Simple);
  CHECK(why_not_applicable(p, Algorithm::Nvls, plain->topology(), plain->routing()).find("SHARP") != std::string::npos);
  const auto sys = system_of("superpod", {{"nodes", "4"}, {"sharp", "true"}});
  const topo::Topology& t = sys->topology();
  topo::Routing& r = sys->routing();
  CollectiveSpec ag = make(t, Op::AllGather, 64 << 20, Algorithm::Nvls, Protocol::Simple);
  CHECK(why_not_applicable(ag, Algorithm::Nvls, t, r).find("all_gather") != std::string::npos);
  CollectiveSpec s = make(t, Op::AllReduce, 64 << 20, Algorithm::Nvls, Protocol::Simple);
  REQUIRE(why_not_applicable(s, Algorithm::Nvls, t, r).empty());
  // [NCCL-T] latency intraLat (25 us) + interLat (the Nvls row's network latency, 18 us) once per call.
  TunerChoice c = tune(s, t, r, cal);
  REQUIRE(c.candidates.size() == 1);
  CHECK(c.candidates[0].latency_s == approx(25e-6 + cal.of(Algorithm::Nvls, Protocol::Simple).net_step_latency_s));
  Schedule sch = build_schedule(s, t, r, cal);
  const auto& ap = cal.of(Algorithm::Nvls, Protocol::Simple);
  CHECK(sch.fixed_latency_s == approx(ap.base_latency_s + ap.net_step_latency_s));
  // Each head k sends its NVLS-reduced shard S/8 up to its rail's SHARP leaf and gets it back; the NVLink side moves
  // the single-host NVLS bytes.
  const double S = static_cast<double>(s.bytes);
  std::map<topo::NodeId, double> to_ib, from_ib, from_nvs;
  for (const auto& x : sch.transfers) {
    const double b = x.payload_bytes * x.weight * x.steps * x.replicas;
    const auto ks = t.node(x.src).kind, kd = t.node(x.dst).kind;
    if (ks == topo::NodeKind::Gpu && kd == topo::NodeKind::IbSwitch) to_ib[x.src] += b;
    if (ks == topo::NodeKind::IbSwitch && kd == topo::NodeKind::Gpu) from_ib[x.dst] += b;
    if (ks == topo::NodeKind::NvSwitch && kd == topo::NodeKind::Gpu) from_nvs[x.dst] += b;
  }
  for (auto gpu : s.communicator) {
    CHECK(to_ib[gpu] == approx(S / 8));
    CHECK(from_ib[gpu] == approx(S / 8));
    CHECK(from_nvs[gpu] == approx(S));
  }
}

// NCCL's MNNVL: the communicator's ranks of one multi-node NVLink domain (an NVL72 rack) are one NCCL node
// (src/mnnvl.cc, src/graph/topo.cc at v2.26.2-1 / v2.28.9-1), so rings cross InfiniBand only between racks, on
// as many channels (each on its own NIC) as NCCL's search gives the node (src/graph/search.cc ncclTopoCompute).
TEST_CASE("MNNVL: an NVL72 rack is one NCCL node; its ring channels each leave through their own NIC") {
  const auto sys = system_of("superpod", {{"nodes", "4"}, {"node", "gb200-nvl72"}, {"gpu", "gb200"}});
  const topo::Topology& t = sys->topology();
  topo::Routing& r = sys->routing();
  const auto& g = t.gpus();
  REQUIRE(g.size() == 288);
  // 64 GPUs per rack (the Llama 4 Scout scenario's placement) and the expert data-parallel group of EP 16:
  // GPUs 0, 16, 32, 48 of every rack, each on its own tray.
  std::vector<topo::NodeId> all, edp;
  for (int k = 0; k < 4; ++k)
    for (int i = 0; i < 64; ++i) {
      all.push_back(g[static_cast<std::size_t>(72 * k + i)]);
      if (i % 16 == 0) edp.push_back(g[static_cast<std::size_t>(72 * k + i)]);
    }
  const std::vector<int> nodes = nccl_nodes(all, t);
  CHECK(std::set<int>(nodes.begin(), nodes.end()).size() == 4);
  for (int k = 0; k < 4; ++k)
    for (int i = 0; i < 64; ++i) CHECK(nodes[static_cast<std::size_t>(64 * k + i)] == t.node(g[static_cast<std::size_t>(72 * k)]).host);
  // A DGX superpod's nodes are its servers.
  const topo::Topology dgx = preset("superpod", {{"nodes", "2"}});
  const std::vector<int> dn = nccl_nodes(dgx.gpus(), dgx);
  for (std::size_t i = 0; i < dn.size(); ++i) CHECK(dn[i] == dgx.node(dgx.gpus()[i]).host);
  // One GPU per tray in one rack: still one node (one NVLink clique), not four.
  std::vector<topo::NodeId> trays = {g[0], g[4], g[8], g[12]};
  const std::vector<int> tn = nccl_nodes(trays, t);
  CHECK(std::set<int>(tn.begin(), tn.end()).size() == 1);

  // NCCL's search (v2.28.9-1): a rack's 64 NICs of 400 Gb/s give 16 channels of 45.1 GB/s (18 NVLinks x 40.1
  // GB/s; 15 at 48 would leave 1.8 GB/s unused); a server's NICs all get one: 8 on an H100 or B200 server
  // (18 x 20.6 GB/s: 8 x 45), 4 on a GB200 tray; 800 Gb/s NICs (GB300) reach the same 16; no NVLink: the NICs.
  CHECK(nccl_search_channels("gb200", 18, 50e9, 64) == 16);
  CHECK(nccl_search_channels("gb300", 18, 100e9, 64) == 16);
  CHECK(nccl_search_channels("h100", 18, 50e9, 8) == 8);
  CHECK(nccl_search_channels("b200", 18, 50e9, 8) == 8);
  CHECK(nccl_search_channels("a100", 12, 25e9, 8) == 8);
  CHECK(nccl_search_channels("gb200", 18, 50e9, 4) == 4);
  CHECK(nccl_search_channels("gb200", 0, 50e9, 4) == 4);

  CollectiveSpec s;
  s.op = Op::AllGather;
  s.bytes = 256ull << 20;
  s.algorithm = Algorithm::Ring;
  s.protocol = Protocol::Simple;
  s.fidelity = Fidelity::Phase;
  s.communicator = all;
  CHECK(default_channels(s, t, r) == 16);
  // Each channel crosses from rack to rack through one NIC of its own: 16 distinct sending GPUs per rack
  // boundary, on 16 distinct NICs.
  const Schedule sch = build_schedule(s, t, r, sys->calibration());
  std::map<std::pair<int, int>, std::set<topo::NodeId>> senders;  // (from rack, to rack) -> sending GPUs
  for (const auto& x : sch.transfers) {
    const int a = t.node(x.src).nvlink_domain, b = t.node(x.dst).nvlink_domain;
    if (a != b) senders[{a, b}].insert(x.src);
  }
  CHECK(senders.size() == 4);
  for (const auto& [k, v] : senders) {
    CHECK(v.size() == 16);
    std::set<topo::NodeId> nics;
    for (topo::NodeId x : v) nics.insert(r.rail_nic(x));
    CHECK(nics.size() == 16);
  }
  // The expert data-parallel group: 4 ranks per rack on 4 trays, so 4 NICs, 4 channels (was 1: one NIC per tray).
  s.communicator = edp;
  s.bytes = 64ull << 20;
  CHECK(default_channels(s, t, r) == 4);
  // PAT needs one rank per NCCL node; 4 share a rack here.
  CHECK_FALSE(why_not_applicable(s, Algorithm::Pat, t, r).empty());
}

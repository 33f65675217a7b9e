// Benchmark: NCCL collectives on a superpod of DGX H100 servers, built by models::build_schedule and run by
// an engine. One case per process, so the peak RSS (getrusage) belongs to that case alone.
//
//   bench_collectives --op all_reduce --gpus 4096 --bytes 1G [--algo ring] [--fidelity auto|step|phase|symmetry]
//                     [--stream 0|1 [--skip-periods 0|1] [--certify 0|1]] [--degrade F]
//                     [--engine fabricsim|simgrid] [--batch-tolerance SECONDS] [--routing dmodk|hash] [--pxn auto|0|1]
//                     [--star 0|1|sharp]
// --star 1 / sharp: on --gpus one-GPU servers on one InfiniBand switch (bench::one_switch_star; sharp: the switch
// reduces in the network, so --algo collnet runs) instead of the superpod.
// --pxn 1 routes cross-rail traffic through the peer GPU on the destination's rail, as NCCL does by default
// for point-to-point traffic on rail-optimised DGX systems; it also enables the aggregated all_to_all
// schedule at phase/symmetry fidelity (docs/engine.md). --pxn auto (default): on for all_to_all,
// all_to_allv and send_recv (NCCL's p2p-based operations), off for the others. --routing picks the fabric multipath rule (docs/topology.md).
// --stream 1 runs a step-level ring (all_reduce, all_gather, reduce_scatter) through sim::run_ring_stream
// (generated step by step, with exact period skipping unless --skip-periods 0) instead of materialising the
// schedule. --certify 1 (with --stream 1) first bounds the ring's makespan by the certified max-plus sandwich
// (sim/engine/ring_bounds.hpp) and simulates no event when the bounds close (method=certified, with the
// bounds), else the events (method=events, not_certified="why"). --degrade F gives the first NIC-to-leaf link F times its bandwidth (F = 0.5: one link at 50 %).
// --ep N --zipf S (all_to_allv): the GPUs form gpus/N expert-parallel groups of N consecutive GPUs, all
// dispatching at once; each sends --bytes per rank split by a Zipf(S) expert load drawn per group
// (bench::zipf_alltoallv_matrix, seed = group index + 1), so the groups differ. One schedule holds them all.
// --quotient auto|0|1: all_to_all(v) run through the exact quotient by the fabric's symmetry
// (sim/engine/quotient_flows.hpp; method=quotient) when it applies, else the flows (method=flows, with the
// reason); 0: always the flows; 1: the quotient or an error; refine: as auto, refining the classes when the
// one-pass check fails (partial symmetry, QuotientOptions::refine).
// Prints one line: op, GPUs, bytes, algorithm, protocol, fidelity, transfers, simulated time, wall times
// (topology, schedule build, engine run, total) and peak RSS. Results: docs/performance.md.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <map>
#include <string>

#include "bench/bench_util.hpp"
#include "models/calibration.hpp"
#include "models/collectives.hpp"
#include "sim/base/error.hpp"
#include "sim/base/units.hpp"
#include "models/ring_stream.hpp"
#include "sim/engine/ring_stream.hpp"
#include "sim/engine/quotient_flows.hpp"
#include "sim/engine/schedule_runner.hpp"
#include "topologies/io.hpp"
#include "topologies/routing.hpp"
#include "sim/base/allocator.hpp"

using namespace fabricsim;

using fabricsim::bench::cpu_s;
using fabricsim::bench::now_s;
using fabricsim::bench::peak_rss_MiB;

int main(int argc, char** argv) {
  fabricsim::retain_freed_memory();  // as the CLI does (sim/base/allocator.hpp)
  return bench::run_main("bench_collectives", [&] {
    std::map<std::string, std::string> a = bench::parse_flags(
        argc, argv,
        {{"--op", "all_reduce"}, {"--gpus", "64"}, {"--bytes", "1G"}, {"--fidelity", "auto"}, {"--engine", "fabricsim"},
         {"--algo", ""}, {"--batch-tolerance", "0"}, {"--routing", "dmodk"}, {"--pxn", "auto"},
         {"--stream", "0"}, {"--skip-periods", "1"}, {"--certify", "0"}, {"--degrade", "1"},
         {"--ep", "0"}, {"--zipf", "0"}, {"--quotient", "auto"}, {"--star", "0"}});
    const std::string opt_engine = a["--engine"];
    std::string method = "flows";
    const double t0 = now_s();
    models::CollectiveSpec spec;
    if (!models::parse_op(a["--op"], spec.op)) throw InputError("--op", "a collective name");
    if (!models::parse_fidelity(a["--fidelity"], spec.fidelity)) throw InputError("--fidelity", "auto/step/phase/symmetry");
    const long long gpus = parse_int(a["--gpus"], "--gpus");
    spec.bytes = parse_size(a["--bytes"], "--bytes");
    if (!a["--algo"].empty()) {
      models::Algorithm al;
      if (!models::parse_algorithm(a["--algo"], al)) throw InputError("--algo", "an algorithm name");
      spec.algorithm = al;
      spec.protocol = models::Protocol::Simple;
    }
    const std::string& star = a["--star"];
    if (star != "0" && star != "1" && star != "sharp") throw InputError("--star", "0, 1 or sharp");
    topo::Topology t = star == "0" ? bench::dgx_h100_superpod(gpus) : bench::one_switch_star(gpus, star == "sharp");
    const double degrade = parse_double(a["--degrade"], "--degrade");
    if (degrade != 1.0) t = bench::with_link_scaled(t, bench::first_nic_uplink(t), degrade);
    topo::RoutingOptions ropt;
    topo::FabricRouting fr;
    if (!topo::parse_fabric_routing(a["--routing"], fr)) throw InputError("--routing", "dmodk or hash");
    ropt.fabric = fr;
    if (a["--pxn"] == "auto") {
      const bool p2p = spec.op == models::Op::AllToAll || spec.op == models::Op::AllToAllv || spec.op == models::Op::SendRecv;
      a["--pxn"].assign(1, p2p ? '1' : '0');
    }
    if (a["--pxn"] != "0" && a["--pxn"] != "1") throw InputError("--pxn", "auto, 0 or 1");
    ropt.pxn = a["--pxn"] == "1";
    topo::Routing routing(t, ropt);
    spec.communicator = t.gpus();
    const models::Calibration calib = models::default_calibration();
    const double t1 = now_s();
    if (a["--certify"] != "0" && a["--stream"] != "1") throw InputError("--certify", "only with --stream 1");
    if (a["--stream"] == "1") {
      const auto rs = models::build_ring_stream(spec, t, routing, calib);
      if (!rs) throw InputError("--stream", "a step-level ring (all_reduce, all_gather or reduce_scatter)");
      const double t2 = now_s();
      sim::RingStreamOptions so;
      so.batch_tolerance_s = parse_double(a["--batch-tolerance"], "--batch-tolerance");
      so.skip_periods = a["--skip-periods"] != "0";
      if (a["--certify"] != "0" && a["--certify"] != "1") throw InputError("--certify", "0 or 1");
      so.certify = a["--certify"] == "1";
      const sim::RingStreamResult r = sim::run_ring_stream(*rs, t, routing, calib, so);
      const double t3 = now_s();
      std::printf(
          "op=%s gpus=%lld bytes=%s algo=%s proto=%s fidelity=step engine=fabricsim-stream degrade=%g transfers=%llu "
          "simulated_transfers=%llu skipped_steps=%llu period_s=%.9g period_steps=%llu period_at_step=%llu events=%zu simulated_s=%.9g "
          "method=%s lower_s=%.12g upper_s=%.12g "
          "topo_s=%.3f build_s=%.3f run_s=%.3f total_s=%.3f cpu_s=%.3f peak_rss_MiB=%.1f%s%s%s\n",
          a["--op"].c_str(), gpus, a["--bytes"].c_str(), rs->algorithm.c_str(), rs->protocol.c_str(), degrade,
          static_cast<unsigned long long>(r.transfers), static_cast<unsigned long long>(r.simulated),
          static_cast<unsigned long long>(r.skipped_steps), r.period_s, static_cast<unsigned long long>(r.period_steps), static_cast<unsigned long long>(r.period_at_step),
          r.events, r.makespan_s, r.certified ? "certified" : "events", r.lower_s, r.upper_s, t1 - t0, t2 - t1,
          t3 - t2, t3 - t0, cpu_s(), peak_rss_MiB(), r.certify_reason.empty() ? "" : " not_certified=\"",
          r.certify_reason.c_str(), r.certify_reason.empty() ? "" : "\"");
      return 0;
    }
    models::Schedule s;
    const long long ep = parse_int(a["--ep"], "--ep");
    if (ep > 0) {
      if (spec.op != models::Op::AllToAllv) throw InputError("--ep", "only with --op all_to_allv");
      if (ep < 2 || gpus % ep != 0) throw InputError("--ep", "a group size >= 2 that divides --gpus");
      const double skew = parse_double(a["--zipf"], "--zipf");
      const auto all = t.gpus();
      for (long long g = 0; g < gpus / ep; ++g) {
        models::CollectiveSpec gs = spec;
        gs.communicator.assign(all.begin() + g * ep, all.begin() + (g + 1) * ep);
        gs.matrix = bench::zipf_alltoallv_matrix(static_cast<std::size_t>(ep), spec.bytes, skew,
                                                 static_cast<std::uint64_t>(g) + 1);
        models::Schedule one = models::build_schedule(gs, t, routing, calib);
        if (g == 0) {
          s = std::move(one);
          continue;
        }
        const auto off = static_cast<std::uint32_t>(s.transfers.size());
        for (auto& tr : one.transfers) {
          for (auto& d : tr.deps) d += off;
          s.transfers.push_back(std::move(tr));
        }
      }
    } else {
      // all_to_all(v): the exact quotient by the fabric's symmetry (sim/engine/quotient_flows.hpp) unless
      // --quotient 0; when its check fails (or the schedule is not a direct all-to-all) the flows run.
      const std::string& qa = a["--quotient"];
      if (qa != "auto" && qa != "0" && qa != "1" && qa != "refine") throw InputError("--quotient", "auto, 0, 1 or refine");
      std::string why;
      if (qa != "0" && opt_engine == "fabricsim") {
        sim::QuotientOptions qo;
        qo.batch_tolerance_s = parse_double(a["--batch-tolerance"], "--batch-tolerance");
        qo.refine = qa == "refine";
        models::Schedule head;
        const sim::QuotientResult q = sim::run_collective_quotient(spec, t, routing, calib, qo, &head);
        if (q.applied) {
          const double t3 = now_s();
          std::printf(
              "op=%s gpus=%lld bytes=%s algo=%s proto=%s fidelity=%s engine=fabricsim method=quotient routing=%s pxn=%s "
              "transfers=%zu flow_classes=%zu link_classes=%zu refine_rounds=%d events=%zu simulated_s=%.9g topo_s=%.3f "
              "run_s=%.3f total_s=%.3f cpu_s=%.3f peak_rss_MiB=%.1f\n",
              a["--op"].c_str(), gpus, a["--bytes"].c_str(), head.algorithm.c_str(), head.protocol.c_str(),
              head.fidelity.c_str(), a["--routing"].c_str(), a["--pxn"].c_str(), q.flows, q.classes.size(),
              q.link_classes, q.refine_rounds, q.events, q.makespan_s, t1 - t0, t3 - t1, t3 - t0, cpu_s(), peak_rss_MiB());
          return 0;
        }
        if (qa == "1") throw InputError("--quotient 1", "the quotient does not apply: " + q.reason);
        why = q.reason;
      }
      s = models::build_schedule(spec, t, routing, calib);
      method = why.empty() ? "flows" : "flows(quotient: " + why + ")";
    }
    const double t2 = now_s();
    sim::RunOptions opt;
    opt.engine = a["--engine"];
    opt.batch_tolerance_s = parse_double(a["--batch-tolerance"], "--batch-tolerance");
    const sim::ScheduleResult r = sim::run_schedule(s, t, routing, calib, opt);
    const double t3 = now_s();
    std::printf(
        "op=%s gpus=%lld bytes=%s algo=%s proto=%s fidelity=%s engine=%s method=\"%s\" routing=%s pxn=%s transfers=%zu events=%zu simulated_s=%.9g "
        "topo_s=%.3f build_s=%.3f run_s=%.3f total_s=%.3f cpu_s=%.3f peak_rss_MiB=%.1f\n",
        a["--op"].c_str(), gpus, a["--bytes"].c_str(), s.algorithm.c_str(), s.protocol.c_str(), s.fidelity.c_str(),
        opt.engine.c_str(), method.c_str(), a["--routing"].c_str(), a["--pxn"].c_str(), models::counted_transfers(s), r.events, r.makespan_s, t1 - t0, t2 - t1, t3 - t2, t3 - t0, cpu_s(), peak_rss_MiB());
    return 0;
  });
}

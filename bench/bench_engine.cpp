// Benchmark: the network engine alone on synthetic transfer sets over a superpod of DGX H100 servers (no
// collective builder involved). One case per process (peak RSS per case).
//
//   bench_engine --pattern a2a|ring|random --gpus N [--bytes 64M] [--engine fabricsim|simgrid]
//                [--batch-tolerance SECONDS] [--seed S]
//   a2a:    every GPU sends bytes/N to every other GPU at once (N(N-1) concurrent flows, one step)
//   ring:   a 2(N-1)-step ring (each step every GPU sends bytes/N to its successor, after receiving)
//   random: 8N transfers between random GPU pairs with random sizes (up to bytes/N) and random DAG edges
// Prints: pattern, GPUs, transfers, simulated time, engine events, wall time and peak RSS.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <random>
#include <string>

#include "bench/bench_util.hpp"
#include "models/calibration.hpp"
#include "models/collectives.hpp"
#include "sim/base/error.hpp"
#include "sim/base/units.hpp"
#include "sim/engine/schedule_runner.hpp"
#include "topologies/io.hpp"
#include "topologies/routing.hpp"

using namespace fabricsim;

using fabricsim::bench::cpu_s;
using fabricsim::bench::now_s;
using fabricsim::bench::peak_rss_MiB;

int main(int argc, char** argv) {
  return bench::run_main("bench_engine", [&] {
    std::map<std::string, std::string> a = bench::parse_flags(
        argc, argv,
        {{"--pattern", "a2a"}, {"--gpus", "64"}, {"--bytes", "64M"}, {"--engine", "fabricsim"},
         {"--batch-tolerance", "0"}, {"--seed", "1"}});
    const long long n = parse_int(a["--gpus"], "--gpus");
    const double t0 = now_s();
    const topo::Topology t = bench::dgx_h100_superpod(n);
    const double bytes = static_cast<double>(parse_size(a["--bytes"], "--bytes"));
    topo::Routing routing(t);
    models::Calibration calib;  // neutral: no efficiency loss, no per-hop latency beyond the links'
    const auto& g = t.gpus();
    models::Schedule s;
    s.op = a["--pattern"];
    const std::string pat = a["--pattern"];
    auto add = [&](topo::NodeId src, topo::NodeId dst, double b, std::vector<std::uint32_t> deps) {
      models::Transfer tr;
      tr.src = src;
      tr.dst = dst;
      tr.bytes = tr.payload_bytes = b;
      tr.deps = std::move(deps);
      s.transfers.push_back(std::move(tr));
    };
    if (pat == "a2a") {
      for (long long i = 0; i < n; ++i)
        for (long long j = 0; j < n; ++j)
          if (i != j) add(g[i], g[j], bytes / n, {});
    } else if (pat == "ring") {
      for (long long step = 0; step < 2 * (n - 1); ++step)
        for (long long i = 0; i < n; ++i) {
          std::vector<std::uint32_t> deps;
          if (step > 0) deps.push_back(static_cast<std::uint32_t>((step - 1) * n + (i + n - 1) % n));
          add(g[i], g[(i + 1) % n], bytes / n, deps);
        }
    } else if (pat == "random") {
      std::mt19937_64 rng(static_cast<std::uint64_t>(parse_int(a["--seed"], "--seed")));
      for (long long k = 0; k < 8 * n; ++k) {
        const auto i = rng() % n, j = (i + 1 + rng() % (n - 1)) % n;
        std::vector<std::uint32_t> deps;
        if (k > 0 && rng() % 2) deps.push_back(static_cast<std::uint32_t>(rng() % k));
        add(g[i], g[j], 1 + static_cast<double>(rng() % static_cast<std::uint64_t>(bytes / n)), deps);
      }
    } else {
      throw InputError("--pattern", "a2a, ring or random");
    }
    const double t1 = now_s();
    sim::RunOptions opt;
    opt.engine = a["--engine"];
    opt.batch_tolerance_s = parse_double(a["--batch-tolerance"], "--batch-tolerance");
    const sim::ScheduleResult r = sim::run_schedule(s, t, routing, calib, opt);
    const double t2 = now_s();
    std::printf("pattern=%s gpus=%lld engine=%s transfers=%zu simulated_s=%.9g events=%zu setup_s=%.3f run_s=%.3f "
                "cpu_s=%.3f peak_rss_MiB=%.1f\n",
                pat.c_str(), n, opt.engine.c_str(), s.transfers.size(), r.makespan_s, r.events, t1 - t0, t2 - t1,
                cpu_s(), peak_rss_MiB());
    return 0;
  });
}

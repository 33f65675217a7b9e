// Builds a large superpod (default: 2048 DGX H100 = 16,384 GPUs on a 3-tier rail-optimised fat tree) and
// routes GPU pairs on demand, reporting wall times, route throughput and peak RSS (getrusage).
//
// usage: bench_topology [--nodes N] [--node PRESET] [--sources S | --all] [--threads T] [--cache-pairs P]
//   --sources S   route S source GPUs (spread evenly over the ranks) to every GPU, uncached (default 64)
//   --all         route every ordered GPU pair (N*8)^2, uncached
//   --threads T   routing threads, each with its own Routing (default 1)
//   --cache-pairs P  also insert P pairs into one Routing's per-pair cache to measure its memory (default 1e6)

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_util.hpp"
#include "topologies/io.hpp"
#include "topologies/routing.hpp"

using namespace fabricsim::topo;

namespace {
using fabricsim::bench::cpu_s;
using fabricsim::bench::peak_rss_MiB;
double since(double t0_s) { return fabricsim::bench::now_s() - t0_s; }
}  // namespace

int main(int argc, char** argv) {
  long nodes = 2048, sources = 64, threads = 1, cache_pairs = 1000000;
  bool all = false;
  std::string node = "dgx-h100";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "bench_topology: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--nodes") nodes = std::atol(next().c_str());
    else if (a == "--node") node = next();
    else if (a == "--sources") sources = std::atol(next().c_str());
    else if (a == "--all") all = true;
    else if (a == "--threads") threads = std::max(1L, std::atol(next().c_str()));
    else if (a == "--cache-pairs") cache_pairs = std::atol(next().c_str());
    else {
      std::fprintf(stderr, "bench_topology: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  auto t0 = fabricsim::bench::now_s();
  Topology t = build_preset("superpod", {{"nodes", std::to_string(nodes)}, {"node", node}});
  const double build_s = since(t0);
  const auto& g = t.gpus();
  const std::size_t n = g.size();
  std::printf("superpod: nodes=%ld node=%s tiers=%s radix=%s -> %zu GPUs, %zu graph nodes, %zu links\n", nodes,
              node.c_str(), t.params().at("tiers").c_str(), t.params().at("radix").c_str(), n, t.num_nodes(),
              t.num_links());
  std::printf("build: %.3f s, peak RSS %.1f MiB\n", build_s, peak_rss_MiB());

  t0 = fabricsim::bench::now_s();
  Routing probe(t);
  std::printf("routing setup (rail NICs of all GPUs): %.3f s\n", since(t0));

  std::vector<NodeId> srcs;
  if (all) {
    srcs = g;
  } else {
    const std::size_t s = std::min<std::size_t>(static_cast<std::size_t>(sources), n);
    for (std::size_t i = 0; i < s; ++i) srcs.push_back(g[i * n / s]);
  }
  std::atomic<std::size_t> next_src{0};
  std::atomic<unsigned long long> total_hops{0}, routes{0}, bad{0};
  std::atomic<int> max_hops{0};
  t0 = fabricsim::bench::now_s();
  const double cpu0 = cpu_s();
  auto worker = [&]() {
    Routing r(t);
    std::vector<LinkDir> path;
    unsigned long long hops = 0, cnt = 0, wrong = 0;
    int mx = 0;
    for (std::size_t i; (i = next_src.fetch_add(1)) < srcs.size();) {
      const NodeId a = srcs[i];
      for (NodeId b : g) {
        r.compute_route(a, b, path);
        hops += path.size();
        mx = std::max(mx, static_cast<int>(path.size()));
        if (a != b && (path.empty() || t.dir_src(path.front()) != a || t.dir_dst(path.back()) != b)) ++wrong;
        ++cnt;
      }
    }
    total_hops += hops;
    routes += cnt;
    bad += wrong;
    int cur = max_hops.load();
    while (mx > cur && !max_hops.compare_exchange_weak(cur, mx)) {
    }
  };
  std::vector<std::thread> pool;
  for (long k = 0; k < threads; ++k) pool.emplace_back(worker);
  for (auto& th : pool) th.join();
  const double route_s = since(t0);
  const double route_cpu_s = cpu_s() - cpu0;
  const double rate = routes / route_s;
  std::printf("routed %llu pairs (%zu sources x %zu destinations, %ld thread(s)) in %.3f s: %.3g routes/s, "
              "mean %.3f hops, max %d hops, %llu malformed\n",
              routes.load(), srcs.size(), n, threads, route_s, rate, double(total_hops) / routes, max_hops.load(),
              bad.load());
  if (!all)
    std::printf("all %zu ordered pairs at this rate: %.1f s (extrapolated, not measured)\n", n * n,
                double(n) * double(n) / rate);
  std::printf("routing CPU time (user+sys, all threads): %.3f s = %.3g routes per CPU-second\n", route_cpu_s,
              routes / route_cpu_s);
  std::printf("peak RSS after routing: %.1f MiB\n", peak_rss_MiB());

  if (cache_pairs > 0) {
    t0 = fabricsim::bench::now_s();
    // Distinct pseudo-random pairs: pair index k -> (k / n, k % n) with k from a fixed-seed LCG stepping
    // through [0, n*n) (full period as n*n is a power of two for these presets; duplicates are harmless).
    std::uint64_t k = 12345, mod = static_cast<std::uint64_t>(n) * n;
    for (long i = 0; i < cache_pairs; ++i) {
      k = (k * 6364136223846793005ull + 1442695040888963407ull) % mod;
      probe.route(g[k / n], g[k % n]);
    }
    std::printf("cached route(): %zu distinct pairs in %.3f s, peak RSS %.1f MiB\n", probe.cached_routes(),
                since(t0), peak_rss_MiB());
  }
  return bad == 0 ? 0 : 1;
}

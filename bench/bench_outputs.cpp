// Output writers on a large synthetic RunResult: how long the timeline, link statistics, result JSON and
// HTML report take, and how big they are. Usage: bench_outputs [ops=1000000] [links=20000]
// Results go in docs/performance.md ("Outputs").
#include <cstdio>
#include <cstdlib>
#include <string>

#include "bench/bench_util.hpp"
#include "replay/outputs.hpp"

using namespace fabricsim;

int main(int argc, char** argv) {
  long ops = argc > 1 ? std::atol(argv[1]) : 1000000;
  long links = argc > 2 ? std::atol(argv[2]) : 20000;
  sim::RunResult r;
  r.topology = "bench";
  r.workload = "bench";
  r.gpus = 1024;
  r.iteration_s = 1.0;
  r.breakdown.compute_s = 0.7;
  r.breakdown.exposed_comm_s = {{"tp", 0.2}, {"dp", 0.1}};
  const int ranks = 64;
  long per_rank = ops / ranks;
  for (int k = 0; k < ranks; ++k)
    for (long i = 0; i < per_rank; ++i) {
      sim::OpRecord o;
      o.rank = k;
      o.host = k / 8;
      bool comm = i % 2;
      o.stream = comm ? "comm.tp" : "compute";
      o.kind = comm ? "collective" : "compute";
      o.category = comm ? "tp" : "compute";
      o.name = comm ? "layer.tp.allreduce" : "layer.fwd";
      o.start_s = static_cast<double>(i) / per_rank;
      o.end_s = o.start_s + 0.5 / per_rank;
      o.bytes = comm ? 16e6 : 0;
      o.algorithm = comm ? "ring" : "";
      o.protocol = comm ? "simple" : "";
      r.ops.push_back(std::move(o));
    }
  for (long l = 0; l < links; ++l) {
    sim::LinkRecord x;
    x.link = static_cast<std::uint32_t>(l);
    x.a = "n" + std::to_string(l);
    x.b = "s" + std::to_string(l % 97);
    x.kind = l % 3 ? "nvlink" : "infiniband";
    x.tier = l % 3 ? 0 : 1;
    x.capacity_Bps = 50e9;
    x.bytes[0] = 1e9 * (l % 17);
    x.busy_s[0] = 0.5;
    for (int p = 0; p < 100; ++p) x.util_series[0].push_back({p * 0.01, (p % 10) / 10.0});
    r.links.push_back(std::move(x));
  }
  auto time = [](const char* what, auto fn) {
    const double t0 = fabricsim::bench::now_s();
    std::size_t bytes = fn();
    const double s = fabricsim::bench::now_s() - t0;
    std::printf("%-16s %8.3f s  %10.1f MB\n", what, s, bytes / 1e6);
  };
  std::printf("ops %ld, links %ld (100 series points each)\n", static_cast<long>(r.ops.size()), links);
  time("timeline", [&] { return sim::timeline_json(r, 16).size(); });
  time("link_stats_csv", [&] { return sim::link_stats_csv(r).size(); });
  time("result_json", [&] { return sim::result_json(r, 10).dump(1).size(); });
  time("report_html", [&] { return sim::report_html(r, 10).size(); });
  return 0;
}

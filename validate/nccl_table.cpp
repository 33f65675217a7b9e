#include "validate/nccl_table.hpp"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "sim/base/error.hpp"
#include "sim/base/units.hpp"

namespace fabricsim::validate {

std::string perf_binary_name(const std::string& op) {
  if (op == "all_to_all") return "alltoall_perf";
  return op + "_perf";
}

Side side_from_time(const std::string& op, int nranks, std::uint64_t size_bytes, double time_s,
                    std::optional<long long> wrong) {
  Side s;
  s.present = true;
  s.time_us = time_s * 1e6;
  double algbw = time_s > 0 ? static_cast<double>(size_bytes) / time_s / kGB : 0.0;
  s.algbw_GBps = algbw;
  s.busbw_GBps = algbw * busbw_factor(op, nranks);
  s.wrong = wrong;
  return s;
}

namespace {

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// nccl-tests prints times with 2 decimals below 10 ms and fewer beyond, keeping 7 characters.
std::string time_field(double us) {
  if (us >= 1e5) return fmt("%7.0f", us);
  if (us >= 1e4) return fmt("%7.1f", us);
  return fmt("%7.2f", us);
}

}  // namespace

std::string format_nccl_tests_text(const Measurement& m) {
  std::ostringstream o;
  o << "# Collective test starting: " << perf_binary_name(m.op) << "\n";
  // Read back by the parser (Measurement::slowest_rank_time): unlike nccl-tests, the rows are the slowest rank's.
  if (m.slowest_rank_time) o << "# " << kBenchTimeLine << "\n";
  if (m.header) {
    const RunHeader& h = *m.header;
    o << "# nThread " << h.nthread << " nGpus " << h.ngpus << " minBytes " << h.min_bytes << " maxBytes "
      << h.max_bytes << " step: " << h.step << " warmup iters: " << h.warmup_iters << " iters: " << h.iters
      << " agg iters: " << h.agg_iters << " validation: " << h.validation << " graph: " << h.graph;
    for (const auto& [k, v] : h.extra) o << " " << k << ": " << v;
    o << "\n";
  }
  o << "#\n# Using devices\n";
  for (const auto& r : m.ranks) {
    char buf[512];
    std::snprintf(buf, sizeof buf, "#  Rank %2d Group %2d Pid %6lld on %10s device %2d [%s] %s\n", r.rank,
                  r.group < 0 ? 0 : r.group, r.pid, r.host.c_str(), r.device, r.bus_id.c_str(), r.gpu_name.c_str());
    o << buf;
  }
  o << "#\n";
  o << "#                                                              out-of-place                       in-place\n";
  o << "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong\n";
  o << "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)\n";
  long long wrong_total = 0;
  double busbw_sum = 0;
  std::size_t busbw_n = 0;
  for (const auto& r : m.rows) {
    char buf[256];
    std::snprintf(buf, sizeof buf, "%12" PRIu64 "  %12" PRIu64 "  %8s  %6s  %6d", r.size_bytes, r.count,
                  r.type.c_str(), r.redop.c_str(), r.root ? *r.root : -1);
    o << buf;
    for (const Side* s : {&r.oop, &r.ip}) {
      if (!s->present) {
        o << "      N/A     N/A     N/A     N/A";
        continue;
      }
      o << "  " << time_field(s->time_us) << fmt(" %7.2f", s->algbw_GBps) << fmt(" %7.2f", s->busbw_GBps);
      if (s->wrong) {
        char w[32];
        std::snprintf(w, sizeof w, "  %6lld", *s->wrong);
        o << w;
        wrong_total += *s->wrong;
      } else {
        o << "     N/A";
      }
    }
    o << "\n";
    const Side& first = r.oop.present ? r.oop : r.ip;
    if (first.present) {
      busbw_sum += first.busbw_GBps;
      ++busbw_n;
    }
  }
  o << "# Out of bounds values : " << wrong_total << (wrong_total ? " FAILED" : " OK") << "\n";
  o << "# Avg bus bandwidth    : " << fmt("%g", busbw_n ? busbw_sum / busbw_n : 0.0) << "\n#\n";
  o << "# Collective test concluded: " << perf_binary_name(m.op) << "\n";
  return o.str();
}

std::string simulation_as_nccl_tests_text(const Json& doc, const std::string& where) {
  Measurement m = measurement_from_json(doc, where);
  if (!m.algorithm.empty() || !m.protocol.empty())
    throw InputError(where, "an nccl-tests log does not record a forced --algo / --proto; use --json to keep them");
  if (m.loop_iters == 0 && (m.op == "broadcast" || m.op == "reduce"))
    throw InputError(where, "an nccl-tests log holds the time per call of a loop of calls, which overlap for " + m.op +
                                "; simulate that loop with --iters N (nccl-tests -n)");
  if (m.num_nodes < 1 || m.nranks % m.num_nodes)
    throw InputError(where, std::to_string(m.nranks) + " ranks do not spread evenly over " + std::to_string(m.num_nodes) + " hosts");
  RunHeader h;
  h.nthread = 1;
  h.ngpus = std::max(1, m.gpus_per_thread);
  h.min_bytes = m.rows.empty() ? 0 : m.rows.front().size_bytes;
  h.max_bytes = m.rows.empty() ? 0 : m.rows.back().size_bytes;
  h.step = m.rows.size() > 1 && m.rows[0].size_bytes > 0
               ? std::to_string(m.rows[1].size_bytes / m.rows[0].size_bytes) + "(factor)"
               : "2(factor)";
  h.warmup_iters = 5;
  h.iters = m.loop_iters > 0 ? m.loop_iters : 20;  // nccl-tests' default -n (src/common.cu)
  h.agg_iters = 1;
  h.validation = 0;
  m.header = h;
  const int per_host = m.nranks / m.num_nodes;
  for (int r = 0; r < m.nranks; ++r) {
    RankInfo ri;
    ri.rank = r;
    ri.group = 0;
    ri.pid = 1000 + r / per_host;
    ri.host = "host" + std::to_string(r / per_host);
    ri.device = r % per_host;
    ri.bus_id = "0x00";
    ri.gpu_name = m.gpu_model.empty() ? "unknown" : m.gpu_model;
    m.ranks.push_back(ri);
  }
  for (auto& row : m.rows) {
    row.ip = row.oop;  // one simulated call stands for both placements
    row.oop.wrong = row.ip.wrong = 0;
  }
  return format_nccl_tests_text(m);
}

}  // namespace fabricsim::validate

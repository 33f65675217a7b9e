#include "replay/outputs.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "models/gpu.hpp"
#include "sim/base/csv.hpp"
#include "sim/base/units.hpp"

namespace fabricsim::sim {

namespace {

// How the MFU figure is defined (printed next to it).
const char* const kMfuConvention =
    "model FLOPs per GPU per second / dense tensor-core peak of the precision in use, metric peak_dense_flops_per_gpu";

// Fixed-precision number text; never "-0", "nan" or "inf" (non-finite values print as 0: JSON has none).
std::string fx(double v, int prec) {
  if (!std::isfinite(v)) v = 0;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", prec, v);
  std::string s = buf;
  bool all_zero = true;
  for (char c : s)
    if (c != '-' && c != '0' && c != '.') all_zero = false;
  if (all_zero && !s.empty() && s[0] == '-') s.erase(0, 1);
  return s;
}
// Shortest-ish general format for CSV (deterministic for equal doubles).
std::string gx(double v) {
  if (!std::isfinite(v)) v = 0;
  if (v == 0) return "0";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

std::string json_escape(const std::string& s) {
  std::string o;
  o.reserve(s.size() + 2);
  for (unsigned char c : s) {
    switch (c) {
      case '"': o += "\\\""; break;
      case '\\': o += "\\\\"; break;
      case '\n': o += "\\n"; break;
      case '\t': o += "\\t"; break;
      case '\r': o += "\\r"; break;
      default:
        if (c < 0x20) {
          char b[8];
          std::snprintf(b, sizeof b, "\\u%04x", c);
          o += b;
        } else {
          o += static_cast<char>(c);
        }
    }
  }
  return o;
}
std::string q(const std::string& s) {
  std::string o(1, '"');
  o += json_escape(s);
  o += '"';
  return o;
}

std::string html_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&#39;"; break;
      default: o += c;
    }
  }
  return o;
}

// Streams sort "compute" first, then by name.
bool stream_less(const std::string& a, const std::string& b) {
  bool ca = a == "compute", cb = b == "compute";
  if (ca != cb) return ca;
  return a < b;
}

struct RowKey {
  int host, rank;
  std::string stream;
  bool operator<(const RowKey& o) const {
    if (host != o.host) return host < o.host;
    if (rank != o.rank) return rank < o.rank;
    return stream_less(stream, o.stream);
  }
};

// Time-weighted mean of a change-point series over [t0, t1) (the last point holds until the end).
double series_mean(const std::vector<UtilPoint>& s, double t0, double t1) {
  if (s.empty() || t1 <= t0) return 0;
  double acc = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    double a = s[i].t_s;
    double b = i + 1 < s.size() ? s[i + 1].t_s : t1;
    double lo = std::max(a, t0), hi = std::min(b, t1);
    if (hi > lo) acc += s[i].util * (hi - lo);
  }
  return acc / (t1 - t0);
}

bool any_series(const RunResult& r) {
  for (const auto& l : r.links)
    if (!l.util_series[0].empty() || !l.util_series[1].empty()) return true;
  return false;
}

// Category colours (fixed order so reports are stable).
const char* category_color(const std::string& c) {
  static const std::pair<const char*, const char*> kColors[] = {
      {"compute", "#4e79a7"}, {"tp", "#f28e2b"},  {"pp", "#e15759"},     {"dp", "#76b7b2"},
      {"ep", "#59a14f"},      {"all_to_all", "#edc948"}, {"other", "#b07aa1"}, {"bubble", "#9c755f"},
      {"cp", "#d37295"},
      {"idle", "#d3d3d3"}};
  for (const auto& kv : kColors)
    if (c == kv.first) return kv.second;
  // Unknown categories: a stable colour from the name.
  static const char* kExtra[] = {"#ff9da7", "#8cd17d", "#86bcb6", "#f1ce63", "#a0cbe8", "#ffbe7d"};
  unsigned h = 0;
  for (char ch : c) h = h * 31u + static_cast<unsigned char>(ch);
  return kExtra[h % 6];
}

// Dark text on light fills, white on dark ones (relative luminance of "#rrggbb").
const char* text_color_on(const char* fill) {
  unsigned v = static_cast<unsigned>(std::strtoul(fill + 1, nullptr, 16));
  double lum = 0.2126 * ((v >> 16) & 255) + 0.7152 * ((v >> 8) & 255) + 0.0722 * (v & 255);
  return lum > 150 ? "#222" : "#fff";
}

std::string heat_color(double u) {
  u = std::clamp(u, 0.0, 1.0);
  // white (0) -> orange -> dark red (1)
  int r = static_cast<int>(std::lround(255 - 75 * u));
  int g = static_cast<int>(std::lround(255 - 235 * u));
  int b = static_cast<int>(std::lround(255 - 235 * u));
  char buf[16];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", r, g, b);
  return buf;
}

std::string ms(double s) { return fx(s * 1e3, 3) + " ms"; }

}  // namespace

// ---- options -----------------------------------------------------------------------------------------

std::vector<OutputFlag> output_flags() {
  return {
      {"--timeline", "FILE", "write the Chrome trace event timeline (open in Perfetto / chrome://tracing)"},
      {"--link-stats", "FILE", "write per-link statistics (CSV; JSON when FILE ends in .json)"},
      {"--json", "FILE", "write the result JSON (docs/result.schema.json)"},
      {"--report", "FILE", "write a self-contained HTML report"},
      {"--top-links", "N", "hottest link directions listed in the summary and report (default 10)"},
      {"--timeline-links", "N", "link directions with a utilisation track in the timeline (default 16)"},
      {"--quiet", "", "no progress bar on stderr"},
  };
}

OutputOptions output_options_from_json(const Json& outputs, const JsonPath& at) {
  if (!outputs.is_object()) json_fail(at, "an object with keys timeline, link_stats, json, report, top_links, "
                                          "timeline_links, quiet");
  ObjectReader r(outputs, at);
  OutputOptions o;
  o.timeline_path = r.string_or("timeline", "");
  o.link_stats_path = r.string_or("link_stats", "");
  o.json_path = r.string_or("json", "");
  o.report_path = r.string_or("report", "");
  auto top = r.integer_or("top_links", o.top_links);
  if (top < 0 || top > 100000) json_fail(at.child("top_links"), "an integer between 0 and 100000");
  o.top_links = static_cast<int>(top);
  auto tl = r.integer_or("timeline_links", o.timeline_links);
  if (tl < 0 || tl > 100000) json_fail(at.child("timeline_links"), "an integer between 0 and 100000");
  o.timeline_links = static_cast<int>(tl);
  o.quiet = r.boolean_or("quiet", false);
  r.finish();
  return o;
}

void merge_output_flags(OutputOptions& o,
                        const std::function<std::optional<std::string>(const std::string&)>& lookup) {
  if (auto v = lookup("--timeline")) o.timeline_path = *v;
  if (auto v = lookup("--link-stats")) o.link_stats_path = *v;
  if (auto v = lookup("--json")) o.json_path = *v;
  if (auto v = lookup("--report")) o.report_path = *v;
  if (auto v = lookup("--top-links")) {
    long long n = parse_int(*v, "--top-links");
    if (n < 0 || n > 100000) throw InputError("--top-links", "expected an integer between 0 and 100000");
    o.top_links = static_cast<int>(n);
  }
  if (auto v = lookup("--timeline-links")) {
    long long n = parse_int(*v, "--timeline-links");
    if (n < 0 || n > 100000) throw InputError("--timeline-links", "expected an integer between 0 and 100000");
    o.timeline_links = static_cast<int>(n);
  }
  if (lookup("--quiet")) o.quiet = true;
}

// ---- statistics --------------------------------------------------------------------------------------

double run_span_s(const RunResult& r) {
  double span = r.iteration_s;
  for (const auto& op : r.ops) span = std::max(span, op.end_s);
  for (const auto& l : r.links)
    for (int d = 0; d < 2; ++d)
      if (!l.util_series[d].empty()) span = std::max(span, l.util_series[d].back().t_s);
  return span;
}

std::vector<LinkDirSummary> link_dir_stats(const RunResult& r) {
  double span = run_span_s(r);
  std::vector<LinkDirSummary> out;
  for (const auto& l : r.links) {
    for (int d = 0; d < 2; ++d) {
      if (l.bytes[d] <= 0 && l.util_series[d].empty() && l.busy_s[d] <= 0) continue;
      LinkDirSummary s;
      s.link = l.link;
      s.dir = d;
      s.from = d == 0 ? l.a : l.b;
      s.to = d == 0 ? l.b : l.a;
      s.kind = l.kind;
      s.tier = l.tier;
      s.capacity_Bps = l.capacity_Bps;
      s.bytes = l.bytes[d];
      s.busy_s = l.busy_s[d];
      if (l.capacity_Bps > 0) {
        if (s.busy_s > 0) s.util_avg_busy = s.bytes / (l.capacity_Bps * s.busy_s);
        if (span > 0) s.util_avg_run = s.bytes / (l.capacity_Bps * span);
      }
      s.util_peak = l.peak_util[d];
      for (const auto& p : l.util_series[d]) s.util_peak = std::max(s.util_peak, p.util);
      out.push_back(std::move(s));
    }
  }
  std::sort(out.begin(), out.end(), [](const LinkDirSummary& a, const LinkDirSummary& b) {
    return std::tie(a.link, a.dir) < std::tie(b.link, b.dir);
  });
  return out;
}

std::vector<LinkDirSummary> hottest_links(const RunResult& r, int n) {
  auto all = link_dir_stats(r);
  std::sort(all.begin(), all.end(), [](const LinkDirSummary& a, const LinkDirSummary& b) {
    if (a.util_avg_run != b.util_avg_run) return a.util_avg_run > b.util_avg_run;
    if (a.bytes != b.bytes) return a.bytes > b.bytes;
    return std::tie(a.link, a.dir) < std::tie(b.link, b.dir);
  });
  if (n >= 0 && static_cast<std::size_t>(n) < all.size()) all.resize(static_cast<std::size_t>(n));
  return all;
}

// ---- timeline ----------------------------------------------------------------------------------------

std::string timeline_json(const RunResult& r, int counter_links) {
  // Processes: one per host (pid = host + 1); the link counters get their own process after the hosts.
  // Threads: one per (rank, stream), numbered 1.. within the host in (rank, stream) order.
  std::map<RowKey, int> tids;
  std::map<int, int> next_tid;
  for (const auto& op : r.ops) tids.emplace(RowKey{op.host, op.rank, op.stream}, 0);
  int max_host = -1;
  for (auto& [k, tid] : tids) {
    tid = ++next_tid[k.host];
    max_host = std::max(max_host, k.host);
  }
  const bool have_series = any_series(r);
  std::ostringstream o;
  o << "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"generator\":\"fabricsim\",\"topology\":" << q(r.topology)
    << ",\"workload\":" << q(r.workload) << ",\"iteration_s\":" << fx(r.iteration_s, 9)
    << ",\"link_counters\":"
    << q(have_series ? "instantaneous utilisation per link direction (0..1) from the engine's time series"
                     : "no per-link time series was recorded: each link track shows its average utilisation "
                       "over the run (bytes / capacity / run time, the link statistics' util_avg_run), held "
                       "over the whole run")
    << "},\n\"traceEvents\":[\n";
  bool first = true;
  auto sep = [&]() {
    if (!first) o << ",\n";
    first = false;
  };
  std::set<int> hosts;
  for (const auto& [k, tid] : tids) hosts.insert(k.host);
  for (int h : hosts) {
    sep();
    o << "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" << h + 1 << ",\"tid\":0,\"args\":{\"name\":\"host "
      << h << "\"}}";
    sep();
    o << "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":" << h + 1
      << ",\"tid\":0,\"args\":{\"sort_index\":" << h + 1 << "}}";
  }
  for (const auto& [k, tid] : tids) {
    sep();
    o << "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" << k.host + 1 << ",\"tid\":" << tid
      << ",\"args\":{\"name\":" << q("gpu" + std::to_string(k.rank) + " " + k.stream) << "}}";
    sep();
    o << "{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":" << k.host + 1 << ",\"tid\":" << tid
      << ",\"args\":{\"sort_index\":" << tid << "}}";
  }
  // Ops in (pid, tid, start, end, name) order.
  // Thread id of every op, looked up once (a row lookup compares strings).
  std::vector<int> op_tid(r.ops.size());
  {
    std::map<std::pair<int, std::string>, int> by_rank_stream;
    for (const auto& [k, tid] : tids) by_rank_stream[{k.rank, k.stream}] = tid;
    for (std::size_t i = 0; i < r.ops.size(); ++i) op_tid[i] = by_rank_stream.at({r.ops[i].rank, r.ops[i].stream});
  }
  std::vector<std::size_t> order(r.ops.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t ia, std::size_t ib) {
    const OpRecord& a = r.ops[ia];
    const OpRecord& b = r.ops[ib];
    return std::tie(a.host, op_tid[ia], a.start_s, a.end_s, a.name) <
           std::tie(b.host, op_tid[ib], b.start_s, b.end_s, b.name);
  });
  for (std::size_t oi : order) {
    const OpRecord* op = &r.ops[oi];
    sep();
    int tid = op_tid[oi];
    o << "{\"name\":" << q(op->name) << ",\"cat\":" << q(op->category.empty() ? op->kind : op->category)
      << ",\"ph\":\"X\",\"pid\":" << op->host + 1 << ",\"tid\":" << tid << ",\"ts\":" << fx(op->start_s * 1e6, 3)
      << ",\"dur\":" << fx(std::max(0.0, op->end_s - op->start_s) * 1e6, 3) << ",\"args\":{\"rank\":" << op->rank
      << ",\"kind\":" << q(op->kind) << ",\"category\":" << q(op->category);
    if (op->kind != "compute" || op->bytes > 0) o << ",\"bytes\":" << fx(op->bytes, 0);
    if (!op->algorithm.empty()) o << ",\"algorithm\":" << q(op->algorithm);
    if (!op->protocol.empty()) o << ",\"protocol\":" << q(op->protocol);
    if (op->flops > 0) o << ",\"flops\":" << fx(op->flops, 0);
    o << "}}";
  }
  // Link utilisation counters for the busiest link directions.
  auto hot = hottest_links(r, counter_links);
  if (!hot.empty()) {
    int pid = max_host + 2;
    double span = run_span_s(r);
    sep();
    o << "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" << pid
      << ",\"tid\":0,\"args\":{\"name\":\"fabric links (utilisation 0..1)\"}}";
    sep();
    o << "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":" << pid << ",\"tid\":0,\"args\":{\"sort_index\":"
      << pid << "}}";
    std::map<std::uint32_t, const LinkRecord*> by_id;
    for (const auto& l : r.links) by_id.emplace(l.link, &l);
    for (const auto& h : hot) {
      const LinkRecord* l = by_id.at(h.link);
      const auto& series = l->util_series[h.dir];
      std::string name = "link " + std::to_string(h.link) + " " + h.from + "->" + h.to + " (" + h.kind +
                         (series.empty() ? ", run average)" : ")");
      auto counter = [&](double t, double u) {
        sep();
        o << "{\"name\":" << q(name) << ",\"ph\":\"C\",\"pid\":" << pid << ",\"tid\":0,\"ts\":" << fx(t * 1e6, 3)
          << ",\"args\":{\"util\":" << fx(u, 4) << "}}";
      };
      if (!series.empty()) {
        std::string last;
        for (const auto& p : series) {
          std::string u = fx(p.util, 4);
          if (u == last) continue;
          last = u;
          counter(p.t_s, p.util);
        }
      } else {
        // No time series (the engine comm model prices each call on an idle fabric and does not place it in
        // time): the run average, which is what the link statistics report as util_avg_run. (The average
        // while busy, shown here before, read as e.g. 80 % all run long for a link busy a tenth of the time.)
        counter(0, h.util_avg_run);
        counter(span, 0);
      }
    }
  }
  o << "\n]}\n";
  return o.str();
}

// ---- link statistics ---------------------------------------------------------------------------------

std::string link_stats_csv(const RunResult& r) {
  std::ostringstream o;
  o << "link_id,direction,from,to,kind,tier,capacity_Bps,bytes,busy_s,util_avg_busy,util_avg_run,util_peak\n";
  for (const auto& s : link_dir_stats(r)) {
    o << s.link << "," << (s.dir == 0 ? "a->b" : "b->a") << "," << csv_field(s.from) << "," << csv_field(s.to)
      << "," << csv_field(s.kind) << "," << s.tier << "," << gx(s.capacity_Bps) << "," << gx(s.bytes) << ","
      << gx(s.busy_s) << "," << fx(s.util_avg_busy, 6) << "," << fx(s.util_avg_run, 6) << ","
      << fx(s.util_peak, 6) << "\n";
  }
  return o.str();
}

namespace {
Json link_json(const LinkDirSummary& s) {
  Json j = Json::object();
  j["link_id"] = s.link;
  j["direction"] = s.dir == 0 ? "a->b" : "b->a";
  j["from"] = s.from;
  j["to"] = s.to;
  j["kind"] = s.kind;
  j["tier"] = s.tier;
  j["capacity_Bps"] = s.capacity_Bps;
  j["bytes"] = s.bytes;
  j["busy_s"] = s.busy_s;
  j["util_avg_busy"] = s.util_avg_busy;
  j["util_avg_run"] = s.util_avg_run;
  j["util_peak"] = s.util_peak;
  return j;
}
}  // namespace

std::string link_stats_json(const RunResult& r) {
  Json j = Json::object();
  j["schema_version"] = 1;
  j["span_s"] = run_span_s(r);
  Json arr = Json::array();
  for (const auto& s : link_dir_stats(r)) arr.push_back(link_json(s));
  j["links"] = std::move(arr);
  return j.dump(1) + "\n";
}

std::string hottest_links_text(const RunResult& r, int top_links) {
  auto hot = hottest_links(r, top_links);
  std::ostringstream o;
  if (hot.empty()) {
    o << "hottest links: no link records in this result (the communication model reported no per-link "
         "traffic)\n";
    return o.str();
  }
  o << "hottest links (util = bytes / (capacity x time); run = whole run, busy = while carrying traffic):\n";
  char buf[512];
  std::snprintf(buf, sizeof buf, "  %-4s %-6s %-40s %-11s %4s %8s %8s %8s %12s %12s\n", "#", "link", "from -> to",
                "kind", "tier", "util_run", "util_bsy", "peak", "bytes", "busy");
  o << buf;
  int i = 0;
  for (const auto& h : hot) {
    std::string ft = h.from + " -> " + h.to;
    std::snprintf(buf, sizeof buf, "  %-4d %-6u %-40s %-11s %4d %8s %8s %8s %12s %12s\n", ++i, h.link, ft.c_str(),
                  h.kind.c_str(), h.tier, fx(h.util_avg_run, 4).c_str(), fx(h.util_avg_busy, 4).c_str(),
                  fx(h.util_peak, 4).c_str(), format_bytes(h.bytes).c_str(), format_time(h.busy_s).c_str());
    o << buf;
  }
  return o.str();
}

// ---- result JSON -------------------------------------------------------------------------------------

Json result_json(const RunResult& r, int top_links) {
  Json j = Json::object();
  j["schema_version"] = 1;
  j["topology"] = r.topology;
  j["topology_params"] = r.topology_params;
  j["calibration"] = r.calibration;
  j["workload"] = r.workload;
  j["workload_params"] = r.workload_params;
  j["gpus"] = r.gpus;
  if (!r.comm_model.empty()) j["comm_model"] = r.comm_model;
  j["iteration_s"] = r.iteration_s;
  j["span_s"] = run_span_s(r);
  // Not known (RunResult::samples_known / flops_known): left out, as docs/result.schema.json says.
  if (r.samples_known) j["samples_per_s"] = r.samples_per_s;
  j["tokens_per_s"] = r.tokens_per_s;
  if (r.flops_known) j["tflops_per_gpu"] = r.tflops_per_gpu;
  if (r.mfu > 0) {
    j["mfu"] = r.mfu;
    j["mfu_convention"] = kMfuConvention;
  }
  Json b = Json::object();
  b["compute_s"] = r.breakdown.compute_s;
  b["exposed_comm_s"] = r.breakdown.exposed_comm_s;
  b["bubble_s"] = r.breakdown.bubble_s;
  b["idle_s"] = r.breakdown.idle_s;
  double exposed = 0;
  for (const auto& [k, v] : r.breakdown.exposed_comm_s) exposed += v;
  b["exposed_comm_total_s"] = exposed;
  j["breakdown"] = std::move(b);
  // Ops by category: count, summed duration over all ranks' records, bytes.
  std::map<std::string, std::tuple<long long, double, double>> cats;
  std::set<int> ranks;
  for (const auto& op : r.ops) {
    auto& c = cats[op.category.empty() ? op.kind : op.category];
    std::get<0>(c) += 1;
    std::get<1>(c) += std::max(0.0, op.end_s - op.start_s);
    std::get<2>(c) += op.bytes;
    ranks.insert(op.rank);
  }
  Json ops = Json::object();
  ops["count"] = r.ops.size();
  ops["ranks_recorded"] = ranks.size();
  Json bc = Json::object();
  for (const auto& [k, c] : cats)
    bc[k] = Json{{"count", std::get<0>(c)}, {"total_s", std::get<1>(c)}, {"bytes", std::get<2>(c)}};
  ops["by_category"] = std::move(bc);
  j["ops"] = std::move(ops);
  Json links = Json::object();
  links["count"] = r.links.size();
  links["time_series"] = any_series(r);
  Json hot = Json::array();
  for (const auto& h : hottest_links(r, top_links)) hot.push_back(link_json(h));
  links["hottest"] = std::move(hot);
  // Utilisation by tier: mean util_avg_run over the tier's link directions that carried traffic.
  std::map<int, std::pair<double, int>> tiers;
  for (const auto& s : link_dir_stats(r)) {
    tiers[s.tier].first += s.util_avg_run;
    tiers[s.tier].second += 1;
  }
  Json bt = Json::array();
  for (const auto& [t, v] : tiers)
    bt.push_back(Json{{"tier", t}, {"directions", v.second}, {"util_avg_run_mean", v.first / v.second}});
  links["by_tier"] = std::move(bt);
  // By link class: directions, bytes, mean and max util_avg_run.
  struct ClassAcc {
    int n = 0;
    double bytes = 0, sum = 0, max = 0;
  };
  std::map<std::pair<int, std::string>, ClassAcc> classes;
  for (const auto& s : link_dir_stats(r)) {
    auto& c = classes[{s.tier, s.kind}];
    c.n += 1;
    c.bytes += s.bytes;
    c.sum += s.util_avg_run;
    c.max = std::max(c.max, s.util_avg_run);
  }
  Json bcl = Json::array();
  for (const auto& [k, c] : classes)
    bcl.push_back(Json{{"class", link_class(k.second, k.first)}, {"tier", k.first}, {"kind", k.second},
                       {"directions", c.n}, {"bytes", c.bytes}, {"util_avg_run_mean", c.sum / c.n},
                       {"util_avg_run_max", c.max}});
  links["by_class"] = std::move(bcl);
  j["links"] = std::move(links);
  j["metrics"] = r.metrics;
  j["notes"] = r.notes;
  if (!r.jobs.empty()) {
    Json jobs = Json::array();
    for (const auto& x : r.jobs)
      jobs.push_back(Json{{"name", x.name}, {"workload", x.workload}, {"placement", x.placement}, {"gpus", x.gpus},
                          {"hosts", x.hosts}, {"racks", x.racks}, {"start_offset_s", x.start_offset_s},
                          {"iterations", x.iterations}, {"iteration_s", x.iteration_s},
                          {"iteration_s_alone", x.iteration_s_alone}, {"slowdown", x.slowdown},
                          {"samples_per_s", x.samples_per_s}, {"tokens_per_s", x.tokens_per_s},
                          {"tflops_per_gpu", x.tflops_per_gpu}, {"compute_s", x.compute_s}, {"notes", x.notes}});
    j["jobs"] = std::move(jobs);
    Json sl = Json::array();
    for (const auto& x : r.shared_links)
      sl.push_back(Json{{"link", x.link}, {"dir", x.dir}, {"from", x.from}, {"to", x.to}, {"kind", x.kind},
                        {"tier", x.tier}, {"capacity_Bps", x.capacity_Bps}, {"bytes_by_job", x.bytes_by_job},
                        {"util_by_job", x.util_by_job}, {"util_together", x.util_together}});
    j["shared_links"] = std::move(sl);
  }
  return j;
}

// ---- summary -----------------------------------------------------------------------------------------

namespace {
std::string params_text(const std::map<std::string, std::string>& p) {
  if (p.empty()) return "";
  std::string s = " (";
  bool first = true;
  for (const auto& [k, v] : p) {
    if (!first) s += ", ";
    first = false;
    s += k + "=" + v;
  }
  return s + ")";
}

// Breakdown segments in a fixed order: compute, exposed comm by category, bubble, idle.
std::vector<std::pair<std::string, double>> breakdown_segments(const Breakdown& b) {
  std::vector<std::pair<std::string, double>> seg;
  seg.emplace_back("compute", b.compute_s);
  for (const auto& [k, v] : b.exposed_comm_s) seg.emplace_back(k, v);
  seg.emplace_back("bubble", b.bubble_s);
  seg.emplace_back("idle", b.idle_s);
  return seg;
}
}  // namespace

std::string jobs_text(const RunResult& r) {
  std::ostringstream o;
  char buf[320];
  if (r.comm_model == "shared" || r.comm_model.empty())
    o << "jobs (step time together on the shared fabric vs alone on the same GPUs):\n";
  else  // replay/cluster_run.hpp: only the shared model lets the jobs contend
    o << "jobs (comm model " << r.comm_model << ": every call priced alone on an idle fabric, so the jobs do not contend):\n";
  std::snprintf(buf, sizeof buf, "  %-16s %-12s %7s %6s %6s %14s %14s %9s %14s\n", "job", "placement", "GPUs", "hosts",
                "racks", "step", "step alone", "slowdown", "tokens/s");
  o << buf;
  for (const auto& j : r.jobs) {
    std::snprintf(buf, sizeof buf, "  %-16s %-12s %7d %6d %6d %14s %14s %9s %14s\n", j.name.c_str(), j.placement.c_str(),
                  j.gpus, j.hosts, j.racks, ms(j.iteration_s).c_str(), ms(j.iteration_s_alone).c_str(),
                  fx(j.slowdown, 4).c_str(), fx(j.tokens_per_s, 0).c_str());
    o << buf;
  }
  if (r.shared_links.empty()) {
    o << "links used by two or more jobs: none\n";
  } else {
    auto it = r.metrics.find("cluster.shared_link_directions");
    o << "links used by two or more jobs: " << (it != r.metrics.end() ? static_cast<long long>(it->second) : 0)
      << " directions; busiest (utilisation over the shared run, per job alone bytes):\n";
    for (std::size_t i = 0; i < r.shared_links.size() && i < 5; ++i) {
      const auto& l = r.shared_links[i];
      o << "  " << l.from << " -> " << l.to << " (tier " << l.tier << "): together " << fx(100 * l.util_together, 1) << " %";
      for (const auto& [n, u] : l.util_by_job) o << ", " << n << " " << fx(100 * u, 1) << " %";
      o << "\n";
    }
  }
  return o.str();
}

// What a workload does not state (RunResult::samples_known / flops_known), as the summary and report print it.
constexpr const char* kNoSamples = "n/a (the workload states no samples per step)";
constexpr const char* kNoFlops = "n/a (the workload states no model FLOPs and its compute ops carry none)";

// "shared (one shared network: overlapping communication contends)", ...
static std::string comm_model_text(const std::string& m) {
  if (m == "shared") return m + " (one shared network: overlapping communication contends)";
  if (m == "engine") return m + " (each collective priced alone on an idle fabric: no contention between them)";
  if (m == "analytic") return m + " (closed-form NCCL costs)";
  return m;
}

std::string summary_text(const RunResult& r, int top_links) {
  std::ostringstream o;
  char buf[256];
  o << "topology     " << r.topology << params_text(r.topology_params) << "\n";
  if (!r.calibration.empty()) o << "calibration  " << r.calibration << "\n";
  o << "workload     " << r.workload << params_text(r.workload_params) << "\n";
  o << "GPUs         " << r.gpus << "\n";
  if (!r.comm_model.empty()) o << "comm model   " << comm_model_text(r.comm_model) << "\n";
  o << "step time    " << ms(r.iteration_s) << "\n";
  o << "throughput   " << (r.samples_known ? fx(r.samples_per_s, 1) + " samples/s" : std::string("samples/s ") + kNoSamples);
  if (r.tokens_per_s > 0) o << ", " << fx(r.tokens_per_s, 0) << " tokens/s";
  o << ", " << (r.flops_known ? fx(r.tflops_per_gpu, 1) + " TFLOP/s per GPU" : std::string("TFLOP/s per GPU ") + kNoFlops);
  if (r.mfu > 0) o << ", MFU " << fx(100.0 * r.mfu, 1) << " % (of the dense peak, metric peak_dense_flops_per_gpu)";
  o << "\n";
  if (auto mem = r.metrics.find("memory_per_gpu_bytes.max"); mem != r.metrics.end()) {
    // The GPU the workload priced (its "gpu" parameter), whose HBM the generator checked the peak against.
    const auto gpu = r.workload_params.find("gpu");
    const bool known = gpu != r.workload_params.end() && models::is_known_gpu(gpu->second);
    o << "memory       " << format_bytes(mem->second) << " per GPU at the peak"
      << (known ? ", of " + format_bytes(models::gpu_spec(gpu->second).hbm_capacity_bytes) + " on " + gpu->second
                : std::string())
      << " (the largest over the GPUs; terms: metrics memory_per_gpu_bytes.*)\n";
  }
  o << "breakdown (per-rank average; exposed = communication not hidden behind compute):\n";
  for (const auto& [name, v] : breakdown_segments(r.breakdown)) {
    std::string label = (name == "compute" || name == "bubble" || name == "idle") ? name : "exposed " + name;
    std::snprintf(buf, sizeof buf, "  %-22s %14s %6s %%\n", label.c_str(), ms(v).c_str(),
                  fx(r.iteration_s > 0 ? 100.0 * v / r.iteration_s : 0, 1).c_str());
    o << buf;
  }
  {
    // MoE routing skew: expert compute (the generator's) and all-to-all (replay/a2a_imbalance.hpp) parts.
    const auto c = r.metrics.find("moe.imbalance_compute_s"), a = r.metrics.find("moe.imbalance_all_to_all_s");
    if (c != r.metrics.end() || a != r.metrics.end()) {
      o << "imbalance    time lost to routing skew vs a uniform router: expert compute "
        << (c != r.metrics.end() ? ms(c->second) : std::string("n/a"));
      if (a != r.metrics.end()) o << ", all-to-all " << ms(a->second) << " (call time on an idle fabric, hidden or not)";
      o << "\n";
    }
  }
  if (!r.jobs.empty()) o << jobs_text(r);
  if (top_links > 0) o << hottest_links_text(r, top_links);
  for (const auto& [k, v] : r.metrics) o << "metric       " << k << " = " << gx(v) << "\n";
  for (const auto& n : r.notes) o << "note         " << n << "\n";
  return o.str();
}

// ---- HTML report -------------------------------------------------------------------------------------

std::string link_class(const std::string& kind, int tier) {
  switch (tier) {
    case 0:
      if (kind == "nvlink") return "NVLink";
      if (kind == "pcie") return "PCIe";
      return "in-host " + kind;
    case 1: return "NIC - leaf";
    case 2: return "leaf - spine uplink";
    case 3: return "spine - core uplink";
    default: return "tier " + std::to_string(tier) + " " + kind;
  }
}

std::string link_class_slug(const std::string& kind, int tier) {
  std::string out;
  for (char ch : link_class(kind, tier)) {
    if (std::isalnum(static_cast<unsigned char>(ch))) out += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    else if (!out.empty() && out.back() != '_') out += '_';
  }
  while (!out.empty() && out.back() == '_') out.pop_back();
  return out;
}

std::vector<RankRole> rank_roles(const RunResult& r) {
  // A rank's signature: its ops in (stream, start) order as (stream, kind, category, name). Times are left
  // out on purpose: contention makes symmetric ranks differ by nanoseconds, yet they run the same work.
  std::map<int, std::vector<const OpRecord*>> by_rank;
  for (const auto& op : r.ops) by_rank[op.rank].push_back(&op);
  std::map<std::uint64_t, std::size_t> role_of_sig;
  std::vector<RankRole> roles;
  for (auto& [rank, ops] : by_rank) {
    std::stable_sort(ops.begin(), ops.end(), [](const OpRecord* a, const OpRecord* b) {
      if (a->stream != b->stream) return stream_less(a->stream, b->stream);
      return a->start_s < b->start_s;
    });
    std::uint64_t h = 1469598103934665603ull;  // FNV-1a 64
    auto mix = [&](const std::string& s) {
      for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
      h = (h ^ 0xff) * 1099511628211ull;
    };
    for (const OpRecord* op : ops) {
      mix(op->stream);
      mix(op->kind);
      mix(op->category);
      mix(op->name);
    }
    auto [it, fresh] = role_of_sig.emplace(h, roles.size());
    if (fresh) {
      RankRole role;
      role.representative = rank;
      roles.push_back(role);
    }
    roles[it->second].ranks.push_back(rank);
  }
  return roles;
}

namespace {

// "0-7,16-23" for a sorted rank list.
std::string rank_ranges(const std::vector<int>& ranks) {
  std::string s;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!s.empty()) s += ",";
    s += std::to_string(ranks[i]);
    if (j > i) s += "-" + std::to_string(ranks[j]);
    i = j + 1;
  }
  return s;
}

// A time axis: tick step 1/2/5 x 10^k of the right unit, about 8 ticks over the span.
struct TimeAxis {
  double step_s = 0, unit_s = 1;
  const char* unit = "s";
};
TimeAxis time_axis(double span) {
  TimeAxis a;
  if (span < 1e-3) {
    a.unit_s = 1e-6;
    a.unit = "us";
  } else if (span < 1) {
    a.unit_s = 1e-3;
    a.unit = "ms";
  }
  double raw = span / 8;
  double p = std::pow(10.0, std::floor(std::log10(raw > 0 ? raw : 1)));
  a.step_s = p;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= raw) {
      a.step_s = m * p;
      break;
    }
  return a;
}
std::string time_label(double t, const TimeAxis& a) {
  double v = t / a.unit_s;
  char buf[48];
  std::snprintf(buf, sizeof buf, "%g %s", std::round(v * 1000) / 1000, a.unit);
  return buf;
}

// Rows of the timeline: one per (rank, stream) for the ranks given, binned into `bins` columns coloured by
// the category that occupied most of the bin (opacity = busy share). Returns the SVG.
std::string svg_rank_rows(const RunResult& r, const std::vector<std::pair<int, std::string>>& rank_labels,
                          std::size_t max_rows, std::string& note) {
  std::map<int, std::string> label_of(rank_labels.begin(), rank_labels.end());
  std::map<RowKey, std::vector<const OpRecord*>> all_rows;
  for (const auto& op : r.ops)
    if (label_of.count(op.rank)) all_rows[RowKey{op.host, op.rank, op.stream}].push_back(&op);
  // Order rows by the order of rank_labels (roles first-seen order), then stream.
  std::map<int, std::size_t> order;
  for (std::size_t i = 0; i < rank_labels.size(); ++i) order[rank_labels[i].first] = i;
  std::vector<std::pair<RowKey, const std::vector<const OpRecord*>*>> rows;
  for (const auto& [k, v] : all_rows) rows.push_back({k, &v});
  std::stable_sort(rows.begin(), rows.end(), [&](const auto& a, const auto& b) {
    if (order[a.first.rank] != order[b.first.rank]) return order[a.first.rank] < order[b.first.rank];
    return stream_less(a.first.stream, b.first.stream);
  });
  note.clear();
  if (rows.size() > max_rows) {
    note = "first " + std::to_string(max_rows) + " of " + std::to_string(rows.size()) + " rows shown";
    rows.resize(max_rows);
  }
  const int kBins = 450, W = 900, labelW = 230;
  const int rowH = rows.size() > 64 ? 8 : 14;
  const double span = run_span_s(r);
  const TimeAxis ax = time_axis(span);
  const int H = static_cast<int>(rows.size()) * rowH + 44;
  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W + labelW + 30 << "\" height=\"" << H
    << "\" role=\"img\" aria-label=\"timeline\">\n";
  if (rows.empty() || span <= 0) {
    o << "<text x=\"10\" y=\"20\" font-size=\"13\">no ops recorded</text></svg>\n";
    return o.str();
  }
  const double binw = span / kBins;
  // Time grid under the rows.
  const int y_axis = 8 + static_cast<int>(rows.size()) * rowH;
  for (double t = 0; t <= span * (1 + 1e-9); t += ax.step_s) {
    double x = labelW + t / span * W;
    o << "<line x1=\"" << fx(x, 2) << "\" y1=\"8\" x2=\"" << fx(x, 2) << "\" y2=\"" << y_axis + 4
      << "\" stroke=\"#ddd\"/><text x=\"" << fx(x, 2) << "\" y=\"" << y_axis + 17
      << "\" font-size=\"11\" text-anchor=\"middle\">" << time_label(t, ax) << "</text>\n";
  }
  o << "<text x=\"" << labelW + W / 2 << "\" y=\"" << y_axis + 34 << "\" font-size=\"11\" text-anchor=\"middle\">time ("
    << ax.unit << ") from the start of the step</text>\n";
  int prev_rank = -1;
  for (std::size_t ri = 0; ri < rows.size(); ++ri) {
    const RowKey& key = rows[ri].first;
    const int y = 8 + static_cast<int>(ri) * rowH;
    std::string label = (key.rank != prev_rank ? label_of[key.rank] + " " : std::string()) + key.stream;
    prev_rank = key.rank;
    o << "<text x=\"" << labelW - 4 << "\" y=\"" << y + rowH - 3 << "\" font-size=\"" << (rowH > 8 ? 11 : 7)
      << "\" text-anchor=\"end\">" << html_escape(label) << "</text>\n";
    std::vector<std::map<std::string, double>> occ(kBins);
    for (const OpRecord* op : *rows[ri].second) {
      double a = std::max(0.0, op->start_s), b = std::min(span, op->end_s);
      if (b <= a) continue;
      int i0 = std::clamp(static_cast<int>(a / binw), 0, kBins - 1);
      int i1 = std::clamp(static_cast<int>(b / binw), 0, kBins - 1);
      const std::string& cat = op->category.empty() ? op->kind : op->category;
      for (int i = i0; i <= i1; ++i) {
        double lo = std::max(a, i * binw), hi = std::min(b, (i + 1) * binw);
        if (hi > lo) occ[i][cat] += hi - lo;
      }
    }
    std::string run_cat;
    int run_op = -1, run_start = 0;
    auto flush = [&](int end) {
      if (run_op > 0)
        o << "<rect x=\"" << fx(labelW + static_cast<double>(run_start) * W / kBins, 2) << "\" y=\"" << y
          << "\" width=\"" << fx(static_cast<double>(end - run_start) * W / kBins, 2) << "\" height=\"" << rowH - 2
          << "\" fill=\"" << category_color(run_cat) << "\" fill-opacity=\"" << fx(run_op / 10.0, 1) << "\"><title>"
          << html_escape(run_cat) << " " << time_label(run_start * binw, ax) << " - " << time_label(end * binw, ax)
          << "</title></rect>\n";
    };
    for (int i = 0; i < kBins; ++i) {
      std::string best;
      double bv = 0, tot = 0;
      for (const auto& [c, v] : occ[i]) {
        tot += v;
        if (v > bv) {
          bv = v;
          best = c;
        }
      }
      int op = static_cast<int>(std::lround(std::min(1.0, tot / binw) * 10));
      if (best.empty()) op = 0;
      if (op > 0 && op < 3) op = 3;  // keep short ops visible
      if (best != run_cat || op != run_op) {
        flush(i);
        run_cat = best;
        run_op = op;
        run_start = i;
      }
    }
    flush(kBins);
  }
  o << "</svg>\n";
  return o.str();
}

// The categories the ops use, in the breakdown's colour order, as an HTML legend.
std::string category_legend(const RunResult& r) {
  std::set<std::string> cats;
  for (const auto& op : r.ops) cats.insert(op.category.empty() ? op.kind : op.category);
  std::ostringstream o;
  o << "<div class=\"legend\">";
  for (const auto& c : cats)
    o << "<span><i style=\"background:" << category_color(c) << "\"></i>" << html_escape(c) << "</span>";
  o << "<span>opacity = share of the time bin busy</span></div>\n";
  return o.str();
}

std::string svg_breakdown(const RunResult& r) {
  auto seg = breakdown_segments(r.breakdown);
  double total = 0;
  for (const auto& s : seg) total += std::max(0.0, s.second);
  const int W = 900, H = 54, x0 = 10;
  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W + 20 << "\" height=\"" << H + 30 * ((seg.size() + 3) / 4) + 20
    << "\" role=\"img\" aria-label=\"step time breakdown\">\n";
  double x = x0;
  for (const auto& [name, v] : seg) {
    if (v <= 0 || total <= 0) continue;
    double w = W * v / total;
    o << "<rect x=\"" << fx(x, 2) << "\" y=\"10\" width=\"" << fx(w, 2) << "\" height=\"" << H - 10
      << "\" fill=\"" << category_color(name) << "\"><title>" << html_escape(name) << ": " << ms(v) << " ("
      << fx(100 * v / total, 1) << " %)</title></rect>\n";
    if (w > 60)
      o << "<text x=\"" << fx(x + 4, 2) << "\" y=\"" << H / 2 + 10 << "\" font-size=\"12\" fill=\"" << text_color_on(category_color(name)) << "\">"
        << html_escape(name) << " " << fx(100 * v / total, 0) << " %</text>\n";
    x += w;
  }
  if (total <= 0)
    o << "<text x=\"10\" y=\"30\" font-size=\"13\">no breakdown recorded</text>\n";
  int i = 0;
  for (const auto& [name, v] : seg) {
    int lx = x0 + (i % 4) * 225, ly = H + 14 + (i / 4) * 30;
    o << "<rect x=\"" << lx << "\" y=\"" << ly << "\" width=\"14\" height=\"14\" fill=\"" << category_color(name)
      << "\"/><text x=\"" << lx + 20 << "\" y=\"" << ly + 12 << "\" font-size=\"12\">"
      << html_escape(name == "compute" || name == "bubble" || name == "idle" ? name : "exposed " + name) << " "
      << ms(v) << "</text>\n";
    ++i;
  }
  o << "</svg>\n";
  return o.str();
}

// Per link class: the distribution of the directions' whole-run utilisation as a histogram (10 bins from 0
// to the class maximum), which is informative with or without a time series.
std::string svg_util_histogram(const std::vector<double>& utils, double umax) {
  const int bins = 10, W = 220, H = 40;
  std::vector<int> count(bins, 0);
  double top = umax > 0 ? umax : 1;
  for (double u : utils) count[std::clamp(static_cast<int>(u / top * bins), 0, bins - 1)] += 1;
  int cmax = *std::max_element(count.begin(), count.end());
  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H + 12 << "\">";
  for (int i = 0; i < bins; ++i) {
    double h = cmax > 0 ? static_cast<double>(count[i]) / cmax * H : 0;
    o << "<rect x=\"" << i * (W / bins) << "\" y=\"" << fx(H - h, 1) << "\" width=\"" << W / bins - 2 << "\" height=\""
      << fx(h, 1) << "\" fill=\"#c0504d\"><title>" << count[i] << " directions at " << fx(100 * top * i / bins, 1)
      << "-" << fx(100 * top * (i + 1) / bins, 1) << " %</title></rect>";
  }
  o << "<text x=\"0\" y=\"" << H + 11 << "\" font-size=\"9\">0 %</text><text x=\"" << W << "\" y=\"" << H + 11
    << "\" font-size=\"9\" text-anchor=\"end\">" << fx(100 * top, 1) << " %</text></svg>";
  return o.str();
}

std::string svg_class_heatmap(const RunResult& r, double span) {
  const int kBins = 60, W = 900, rowH = 24, labelW = 190;
  std::map<std::pair<int, std::string>, std::vector<std::pair<const LinkRecord*, int>>> groups;
  for (const auto& l : r.links)
    for (int d = 0; d < 2; ++d)
      if (l.bytes[d] > 0 || !l.util_series[d].empty()) groups[{l.tier, l.kind}].push_back({&l, d});
  const TimeAxis ax = time_axis(span);
  std::ostringstream o;
  int H = static_cast<int>(groups.size()) * rowH + 66;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W + labelW + 30 << "\" height=\"" << H
    << "\" role=\"img\" aria-label=\"link utilisation over time by class\">\n";
  double binw = span / kBins;
  int gi = 0;
  for (const auto& [key, members] : groups) {
    int y = 4 + gi * rowH;
    o << "<text x=\"" << labelW - 6 << "\" y=\"" << y + rowH / 2 + 4 << "\" font-size=\"11\" text-anchor=\"end\">"
      << html_escape(link_class(key.second, key.first)) << " (" << members.size() << ")</text>\n";
    for (int i = 0; i < kBins; ++i) {
      double acc = 0;
      for (const auto& [l, d] : members) acc += series_mean(l->util_series[d], i * binw, (i + 1) * binw);
      double u = acc / static_cast<double>(members.size());
      o << "<rect x=\"" << fx(labelW + static_cast<double>(i) * W / kBins, 2) << "\" y=\"" << y << "\" width=\""
        << fx(static_cast<double>(W) / kBins, 2) << "\" height=\"" << rowH - 2 << "\" fill=\"" << heat_color(u)
        << "\"><title>" << html_escape(link_class(key.second, key.first)) << " " << time_label(i * binw, ax) << " - "
        << time_label((i + 1) * binw, ax) << ": " << fx(u * 100, 1) << " %</title></rect>\n";
    }
    ++gi;
  }
  int ya = 4 + gi * rowH;
  for (double t = 0; t <= span * (1 + 1e-9); t += ax.step_s)
    o << "<text x=\"" << fx(labelW + t / span * W, 2) << "\" y=\"" << ya + 13 << "\" font-size=\"11\" text-anchor=\"middle\">"
      << time_label(t, ax) << "</text>\n";
  int sy = ya + 24;
  for (int i = 0; i <= 10; ++i)
    o << "<rect x=\"" << labelW + i * 30 << "\" y=\"" << sy << "\" width=\"30\" height=\"12\" fill=\""
      << heat_color(i / 10.0) << "\" stroke=\"#999\" stroke-width=\"0.5\"/>\n";
  o << "<text x=\"" << labelW - 6 << "\" y=\"" << sy + 10 << "\" font-size=\"11\" text-anchor=\"end\">mean utilisation</text>"
    << "<text x=\"" << labelW << "\" y=\"" << sy + 25 << "\" font-size=\"11\">0 %</text><text x=\"" << labelW + 330
    << "\" y=\"" << sy + 25 << "\" font-size=\"11\" text-anchor=\"end\">100 %</text>\n";
  o << "</svg>\n";
  return o.str();
}

// A metric's value with its unit, from the metric's name.
std::string metric_text(const std::string& name, double v) {
  auto ends = [&](const char* suf) {
    std::size_t n = std::strlen(suf);
    return name.size() >= n && name.compare(name.size() - n, n, suf) == 0;
  };
  if (name.find("bytes") != std::string::npos) return format_bytes(v);
  if (ends("_s") || name.find("_s.") != std::string::npos) return format_time(v);
  if (name.find("flops") != std::string::npos)
    return gx(v / 1e12) + " TFLOP" + (ends("per_s") || name.find("peak") != std::string::npos ? "/s" : "");
  return gx(v) + (name.find("ops") != std::string::npos || name.find("events") != std::string::npos ||
                          name.find("ranks") != std::string::npos || name.find("schedules") != std::string::npos
                      ? " (count)"
                      : "");
}

std::string gbps(double Bps) { return fx(Bps * 8 / 1e9, 0) + " Gb/s"; }

}  // namespace

std::string svg_jobs(const RunResult& r) {
  double mx = 0;
  for (const auto& j : r.jobs) mx = std::max({mx, j.iteration_s, j.iteration_s_alone});
  const int labelW = 170, W = 600, rowH = 44;
  const int H = 20 + rowH * static_cast<int>(r.jobs.size()) + 30;
  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << labelW + W + 140 << "\" height=\"" << H
    << "\" role=\"img\" aria-label=\"step time per job, alone and together\">\n";
  int y = 10;
  for (const auto& j : r.jobs) {
    const double wa = mx > 0 ? W * j.iteration_s_alone / mx : 0, wt = mx > 0 ? W * j.iteration_s / mx : 0;
    o << "<text x=\"" << labelW - 6 << "\" y=\"" << y + 24 << "\" font-size=\"12\" text-anchor=\"end\">"
      << html_escape(j.name) << "</text>\n";
    o << "<rect x=\"" << labelW << "\" y=\"" << y << "\" width=\"" << fx(wa, 2) << "\" height=\"16\" fill=\"#9ecae1\"/>"
      << "<text x=\"" << fx(labelW + wa + 4, 2) << "\" y=\"" << y + 12 << "\" font-size=\"11\">alone " << ms(j.iteration_s_alone)
      << "</text>\n";
    o << "<rect x=\"" << labelW << "\" y=\"" << y + 18 << "\" width=\"" << fx(wt, 2) << "\" height=\"16\" fill=\"#e6550d\"/>"
      << "<text x=\"" << fx(labelW + wt + 4, 2) << "\" y=\"" << y + 30 << "\" font-size=\"11\">together " << ms(j.iteration_s)
      << " (x" << fx(j.slowdown, 3) << ")</text>\n";
    y += rowH;
  }
  o << "</svg>\n";
  return o.str();
}

std::string jobs_html(const RunResult& r) {
  std::ostringstream o;
  o << svg_jobs(r);
  o << "<table>\n<tr><th>job</th><th>workload</th><th>placement</th><th>GPUs</th><th>servers</th><th>racks</th>"
       "<th>step together</th><th>step alone</th><th>slowdown</th><th>tokens/s</th></tr>\n";
  for (const auto& j : r.jobs)
    o << "<tr><td>" << html_escape(j.name) << "</td><td>" << html_escape(j.workload) << "</td><td>"
      << html_escape(j.placement) << "</td><td class=\"n\">" << j.gpus << "</td><td class=\"n\">" << j.hosts
      << "</td><td class=\"n\">" << j.racks << "</td><td class=\"n\">" << ms(j.iteration_s) << "</td><td class=\"n\">"
      << ms(j.iteration_s_alone) << "</td><td class=\"n\">" << fx(j.slowdown, 4) << "</td><td class=\"n\">"
      << fx(j.tokens_per_s, 0) << "</td></tr>\n";
  o << "</table>\n";
  if (!r.shared_links.empty()) {
    o << "<p class=\"cap\">Links used by two or more jobs (utilisation over the shared run; per job: its bytes when "
         "alone over the same span).</p>\n<table>\n<tr><th>from &rarr; to</th><th>tier</th><th>together</th><th>per job</th></tr>\n";
    for (std::size_t i = 0; i < r.shared_links.size() && i < 16; ++i) {
      const auto& l = r.shared_links[i];
      std::string per;
      for (const auto& [n, u] : l.util_by_job) per += (per.empty() ? "" : ", ") + n + " " + fx(100 * u, 1) + " %";
      o << "<tr><td>" << html_escape(l.from + " -> " + l.to) << "</td><td class=\"n\">" << l.tier
        << "</td><td class=\"n\">" << fx(100 * l.util_together, 1) << " %</td><td>" << html_escape(per) << "</td></tr>\n";
    }
    o << "</table>\n";
  } else {
    o << "<p>No link was used by two or more jobs.</p>\n";
  }
  return o.str();
}

std::string report_html(const RunResult& r, int top_links) {
  std::ostringstream o;
  const std::string model = r.workload_params.count("model") ? r.workload_params.at("model") : r.workload;
  o << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>fabricsim report: "
    << html_escape(model) << " on " << html_escape(r.topology) << "</title>\n<style>\n"
    << "body{font-family:sans-serif;margin:20px;color:#222;max-width:1180px}\n"
    << "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}\n"
    << "th{background:#f2f2f2}td.n{text-align:right;font-variant-numeric:tabular-nums}\n"
    << "h2{margin-top:26px;border-bottom:1px solid #ddd}p.cap{font-size:12px;color:#555}\n"
    << "table.head td.big{font-size:20px;font-weight:bold}span.p{font-size:11px;font-weight:normal;color:#666}\n"
    << ".legend{font-size:12px;margin:4px 0 6px}.legend span{margin-right:14px}"
       ".legend i{display:inline-block;width:12px;height:12px;margin-right:4px;vertical-align:-1px}\n"
    << "summary{cursor:pointer;font-size:13px;color:#245}\n"
    << "</style>\n</head>\n<body>\n";

  // Header: the question answered.
  o << "<section id=\"header\">\n<h1>" << html_escape(model) << " on " << html_escape(r.topology) << ": "
    << ms(r.iteration_s) << " per step</h1>\n<table class=\"head\">\n";
  auto row = [&](const std::string& k, const std::string& v, bool big = false, const std::string& small = "") {
    o << "<tr><th>" << html_escape(k) << "</th><td" << (big ? " class=\"big\"" : "") << ">" << html_escape(v);
    if (!small.empty()) o << " <span class=\"p\">" << html_escape(small) << "</span>";
    o << "</td></tr>\n";
  };
  row("model", r.workload, false, params_text(r.workload_params));
  row("cluster", std::to_string(r.gpus) + " GPUs, " + r.topology, false, params_text(r.topology_params));
  if (!r.calibration.empty()) row("calibration", r.calibration);
  if (!r.comm_model.empty()) row("communication model", comm_model_text(r.comm_model));
  row("step time", ms(r.iteration_s), true);
  if (r.tokens_per_s > 0) row("tokens/s", fx(r.tokens_per_s, 0) + " tokens/s", true);
  row("samples/s", r.samples_known ? fx(r.samples_per_s, 2) + " samples/s" : std::string(kNoSamples));
  row("model FLOP/s per GPU", r.flops_known ? fx(r.tflops_per_gpu, 1) + " TFLOP/s" : std::string(kNoFlops));
  row("MFU", r.mfu > 0 ? fx(100.0 * r.mfu, 1) + " %" : std::string("not computed: the workload names no dense peak"),
      r.mfu > 0, r.mfu > 0 ? std::string("(") + kMfuConvention + ")" : std::string());
  auto mem = r.metrics.find("memory_per_gpu_bytes.max");
  row("memory per GPU", mem != r.metrics.end() ? format_bytes(mem->second) + " (largest over the GPUs)"
                                               : std::string("not estimated by this workload"),
      mem != r.metrics.end());
  if (auto host = r.metrics.find("host_memory_per_gpu_bytes.max"); host != r.metrics.end()) {
    auto cap = r.metrics.find("host_memory_per_gpu_bytes.capacity");
    row("host memory per GPU", format_bytes(host->second) + " pinned (offloaded state)" +
                                   (cap != r.metrics.end() ? " of " + format_bytes(cap->second) : std::string(", capacity not known")),
        true);
  }
  o << "</table>\n</section>\n";

  o << "<section id=\"breakdown\">\n<h2>Step time breakdown</h2>\n<p class=\"cap\">Per-rank average: compute, "
       "communication not hidden behind compute (by category), pipeline bubble and other idle time.</p>\n"
    << svg_breakdown(r) << "</section>\n";

  // Timeline: one representative rank per role, the full set behind a <details>.
  const auto roles = rank_roles(r);
  std::set<int> ranks_seen;
  for (const auto& op : r.ops) ranks_seen.insert(op.rank);
  std::vector<std::pair<int, std::string>> rep_labels;
  char rl[32];
  for (std::size_t k = 0; k < roles.size(); ++k) {
    std::snprintf(rl, sizeof rl, "role %zu: gpu%d", k + 1, roles[k].representative);
    rep_labels.emplace_back(roles[k].representative, rl);
  }
  std::string note;
  o << "<section id=\"timeline\">\n<h2>Timeline</h2>\n<p class=\"cap\">One representative GPU per role: ranks that "
       "run the same sequence of ops (by stream, kind, category and name) share a role. "
    << roles.size() << (roles.size() == 1 ? " role" : " roles") << " among " << ranks_seen.size()
    << " recorded ranks";
  if (static_cast<int>(ranks_seen.size()) < r.gpus) o << " (of " << r.gpus << " GPUs; the replay simulated a representative subset)";
  o << ". Each row is split into time bins coloured by the category that occupied most of the bin.</p>\n";
  o << "<table>\n<tr><th>role</th><th>representative</th><th>ranks</th><th>count</th></tr>\n";
  for (std::size_t k = 0; k < roles.size(); ++k)
    o << "<tr><td class=\"n\">" << k + 1 << "</td><td>gpu" << roles[k].representative << "</td><td>"
      << html_escape(rank_ranges(roles[k].ranks)) << "</td><td class=\"n\">" << roles[k].ranks.size()
      << (roles[k].ranks.size() == 1 ? " rank" : " ranks") << "</td></tr>\n";
  o << "</table>\n" << category_legend(r);
  o << svg_rank_rows(r, rep_labels, 64, note);
  if (!note.empty()) o << "<p class=\"cap\">" << html_escape(note) << "</p>\n";
  {
    std::vector<std::pair<int, std::string>> all;
    std::map<int, std::size_t> role_of;
    for (std::size_t k = 0; k < roles.size(); ++k)
      for (int rk : roles[k].ranks) role_of[rk] = k;
    for (int rk : ranks_seen) all.emplace_back(rk, "gpu" + std::to_string(rk) + " (role " + std::to_string(role_of[rk] + 1) + ")");
    std::string all_note;
    std::string svg = svg_rank_rows(r, all, 256, all_note);
    o << "<details><summary>All " << ranks_seen.size() << " recorded ranks" << (all_note.empty() ? "" : " (" + all_note + ")")
      << "</summary>\n" << svg << "</details>\n";
  }
  o << "</section>\n";

  // Link classes.
  const auto stats = link_dir_stats(r);
  const double span = run_span_s(r);
  o << "<section id=\"links\">\n<h2>Link utilisation by class</h2>\n";
  if (stats.empty()) {
    o << "<p>No link carried traffic in this result (the communication model reported no per-link traffic).</p>\n";
  } else {
    o << "<p class=\"cap\">Per class of link (NVLink and PCIe inside a host, NIC to leaf switch, leaf to spine and "
         "spine to core uplinks), over the link directions that carried traffic. util (run) = bytes / (capacity x "
      << ms(span) << " run span); util (busy) = bytes / (capacity x time carrying traffic). The histogram shows how "
         "the directions' util (run) spread between 0 and the class maximum.</p>\n";
    struct Cls {
      std::vector<double> run, busy;
      double bytes = 0, cap = 0, peak = 0, busy_s = 0;
    };
    std::map<std::pair<int, std::string>, Cls> cls;
    for (const auto& s : stats) {
      auto& c = cls[{s.tier, s.kind}];
      c.run.push_back(s.util_avg_run);
      c.busy.push_back(s.util_avg_busy);
      c.bytes += s.bytes;
      c.cap = std::max(c.cap, s.capacity_Bps);
      c.peak = std::max(c.peak, s.util_peak);
      c.busy_s = std::max(c.busy_s, s.busy_s);
    }
    o << "<table>\n<tr><th>class</th><th>directions</th><th>capacity per direction</th><th>bytes carried</th>"
         "<th>util (run) mean</th><th>util (run) max</th><th>util (busy) mean</th><th>peak</th>"
         "<th>spread of util (run)</th></tr>\n";
    for (const auto& [key, c] : cls) {
      double mean_run = 0, max_run = 0, mean_busy = 0;
      for (double u : c.run) {
        mean_run += u;
        max_run = std::max(max_run, u);
      }
      for (double u : c.busy) mean_busy += u;
      mean_run /= static_cast<double>(c.run.size());
      mean_busy /= static_cast<double>(c.busy.size());
      o << "<tr class=\"linkclass\"><td>" << html_escape(link_class(key.second, key.first)) << "</td><td class=\"n\">"
        << c.run.size() << "</td><td class=\"n\">" << gbps(c.cap) << "</td><td class=\"n\">" << format_bytes(c.bytes)
        << "</td><td class=\"n\">" << fx(100 * mean_run, 1) << " %</td><td class=\"n\">" << fx(100 * max_run, 1)
        << " %</td><td class=\"n\">" << fx(100 * mean_busy, 1) << " %</td><td class=\"n\">" << fx(100 * c.peak, 1)
        << " %</td><td>" << svg_util_histogram(c.run, max_run) << "</td></tr>\n";
    }
    o << "</table>\n";
    if (any_series(r)) {
      o << "<p class=\"cap\">Over time: mean instantaneous utilisation of each class's directions per time bin "
           "(the engine's per-link time series).</p>\n"
        << svg_class_heatmap(r, span);
    } else {
      o << "<p class=\"cap\">This communication model records no per-link time series, so utilisation over time is "
           "not shown; the whole-run figures above are exact (bytes carried / capacity / time).</p>\n";
    }
  }
  o << "</section>\n";

  if (!r.jobs.empty())
    o << "<section id=\"jobs\">\n<h2>Jobs</h2>\n<p class=\"cap\">Step time of each job with the others on the shared "
         "fabric and alone on the same GPUs (same faults).</p>\n"
      << jobs_html(r) << "</section>\n";

  // Hottest links per class; directions tied at the same utilisation are one row.
  o << "<section id=\"hottest\">\n<h2>Hottest links by class</h2>\n";
  if (stats.empty()) {
    o << "<p>No link carried traffic.</p>\n";
  } else {
    o << "<p class=\"cap\">The busiest link directions of each class by util (run), at most " << top_links
      << " rows per class; directions with the same utilisation and bytes are one row.</p>\n";
    std::map<std::pair<int, std::string>, std::vector<LinkDirSummary>> by_cls;
    for (const auto& s : hottest_links(r, -1)) by_cls[{s.tier, s.kind}].push_back(s);
    o << "<table>\n<tr><th>class</th><th>link direction(s)</th><th>util (run)</th><th>util (busy)</th><th>peak</th>"
         "<th>bytes</th><th>busy time</th><th>capacity</th></tr>\n";
    for (const auto& [key, v] : by_cls) {
      int shown = 0;
      for (std::size_t i = 0; i < v.size() && shown < top_links;) {
        std::size_t j = i;
        while (j + 1 < v.size() && fx(v[j + 1].util_avg_run * 100, 1) == fx(v[i].util_avg_run * 100, 1) &&
               format_bytes(v[j + 1].bytes) == format_bytes(v[i].bytes))
          ++j;
        const auto& h = v[i];
        std::string who = "link " + std::to_string(h.link) + " " + h.from + " -> " + h.to;
        if (j > i) who = std::to_string(j - i + 1) + " directions, e.g. " + who;
        o << "<tr><td>" << html_escape(link_class(key.second, key.first)) << "</td><td>" << html_escape(who)
          << "</td><td class=\"n\">" << fx(h.util_avg_run * 100, 1) << " %</td><td class=\"n\">"
          << fx(h.util_avg_busy * 100, 1) << " %</td><td class=\"n\">" << fx(h.util_peak * 100, 1)
          << " %</td><td class=\"n\">" << html_escape(format_bytes(h.bytes)) << "</td><td class=\"n\">"
          << html_escape(format_time(h.busy_s)) << "</td><td class=\"n\">" << gbps(h.capacity_Bps) << "</td></tr>\n";
        ++shown;
        i = j + 1;
      }
    }
    o << "</table>\n";
  }
  o << "</section>\n";

  o << "<section id=\"notes\">\n<h2>Metrics and notes</h2>\n";
  if (!r.metrics.empty()) {
    o << "<table>\n<tr><th>metric</th><th>value</th></tr>\n";
    for (const auto& [k, v] : r.metrics)
      o << "<tr><td>" << html_escape(k) << "</td><td class=\"n\">" << html_escape(metric_text(k, v)) << "</td></tr>\n";
    o << "</table>\n";
  }
  o << "<h3>Model limits and notes</h3>\n<ul>\n";
  for (const auto& n : r.notes) o << "<li>" << html_escape(n) << "</li>\n";
  if (r.notes.empty()) o << "<li>none recorded for this run</li>\n";
  o << "</ul>\n</section>\n";
  o << "</body>\n</html>\n";
  return o.str();
}

// ---- files -------------------------------------------------------------------------------------------

void write_outputs(const RunResult& r, const OutputOptions& opts) {
  auto put = [](const std::string& path, const std::string& text) {
    try {
      write_file_atomic(path, text);
    } catch (const InputError&) {
      throw;
    } catch (const std::exception& e) {
      throw InputError(path, std::string("cannot write output file: ") + e.what());
    }
  };
  if (!opts.timeline_path.empty()) put(opts.timeline_path, timeline_json(r, opts.timeline_links));
  if (!opts.link_stats_path.empty()) {
    const std::string& p = opts.link_stats_path;
    bool js = p.size() >= 5 && p.compare(p.size() - 5, 5, ".json") == 0;
    put(p, js ? link_stats_json(r) : link_stats_csv(r));
  }
  if (!opts.json_path.empty()) put(opts.json_path, result_json(r, opts.top_links).dump(1) + "\n");
  if (!opts.report_path.empty()) put(opts.report_path, report_html(r, opts.top_links));
}

void check_output_paths(const OutputOptions& opts) {
  const std::pair<const std::string*, const char*> files[] = {
      {&opts.timeline_path, "--timeline (outputs.timeline)"},
      {&opts.link_stats_path, "--link-stats (outputs.link_stats)"},
      {&opts.json_path, "--json (outputs.json)"},
      {&opts.report_path, "--report (outputs.report)"}};
  for (const auto& [path, what] : files)
    if (!path->empty()) check_output_path(*path, what);
}

}  // namespace fabricsim::sim

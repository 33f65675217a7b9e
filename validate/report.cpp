#include "validate/report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "sim/base/error.hpp"
#include "sim/base/units.hpp"

namespace fabricsim::validate {
namespace {

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string basename_of(const std::string& p) {
  auto s = p.find_last_of('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}

std::string xml_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<') o += "&lt;";
    else if (c == '>') o += "&gt;";
    else if (c == '&') o += "&amp;";
    else if (c == '"') o += "&quot;";
    else o += c;
  }
  return o;
}

}  // namespace

double quantile_abs(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  for (auto& x : v) x = std::fabs(x);
  std::sort(v.begin(), v.end());
  std::size_t rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size())));
  rank = std::clamp<std::size_t>(rank, 1, v.size());
  return v[rank - 1];
}

ErrorSummary summarize(const std::vector<LogCompare>& logs) {
  std::vector<double> large, small;
  for (const auto& l : logs)
    for (const auto& p : l.points) (p.size_bytes >= kLargeMessageBytes ? large : small).push_back(p.busbw_error);
  auto stats = [](const std::vector<double>& v) {
    ErrorStats s;
    s.count = v.size();
    s.median = quantile_abs(v, 0.5);
    s.p90 = quantile_abs(v, 0.9);
    s.max = quantile_abs(v, 1.0);
    return s;
  };
  return {stats(large), stats(small)};
}

Report compare(const std::vector<Case>& cases,
               const std::function<const models::Calibration&(std::size_t)>& calib_for, const std::string& title) {
  Report rep;
  rep.title = title;
  for (std::size_t ci = 0; ci < cases.size(); ++ci) {
    const Case& cs = cases[ci];
    const models::Calibration& c = calib_for(ci);
    LogCompare lc;
    lc.source = cs.m.source;
    lc.op = cs.m.op;
    lc.gpu = cs.m.gpu_model;
    lc.mapping = cs.sys->mapping().rule;
    lc.family = cs.sys->mapping().family;
    lc.calibration = c.name;
    lc.nranks = cs.m.nranks;
    lc.nodes = cs.m.num_nodes;
    lc.gpus_per_thread = cs.m.gpus_per_thread;
    lc.host_launch_floor_s = models::host_launch_floor_s(c, cs.m.gpus_per_thread);
    lc.host_channel_launch_s = models::host_channel_launch_s(c, cs.m.gpus_per_thread);
    {
      NcclEnvEffects fx = nccl_env_effects(cs.m.env);
      lc.env_honoured = fx.honoured;
      lc.env_not_modelled = fx.not_modelled;
    }
    const double factor = busbw_factor(cs.m.op, cs.m.nranks);
    for (std::size_t i = 0; i < cs.sizes.size(); ++i) {
      SimPoint sp = cs.sys->simulate(cs.sizes[i], c);
      PointCompare p;
      p.size_bytes = cs.sizes[i];
      p.measured_s = cs.measured_s[i];
      p.simulated_s = sp.time_s;
      p.measured_busbw_GBps = static_cast<double>(p.size_bytes) / p.measured_s / kGB * factor;
      p.simulated_busbw_GBps = static_cast<double>(p.size_bytes) / p.simulated_s / kGB * factor;
      p.busbw_error = p.measured_s / p.simulated_s - 1.0;
      p.algorithm = sp.algorithm;
      p.protocol = sp.protocol;
      p.at_host_floor = sp.at_host_floor;
      p.from_log = sp.from_log;
      lc.points.push_back(p);
    }
    rep.logs.push_back(std::move(lc));
  }
  rep.summary = summarize(rep.logs);
  return rep;
}

std::string log_unit(const Measurement& m) {
  auto h = m.source.find("#run");
  return h == std::string::npos ? m.source : m.source.substr(0, h);
}

std::string loo_unit(const Case& c, bool by_system) {
  if (!by_system) return log_unit(c.m);
  const SystemMapping& map = c.sys->mapping();
  if (map.preset != "superpod") return log_unit(c.m);
  std::string key = "system:" + map.preset;
  for (const auto& [k, v] : map.params)
    if (k != "nodes") key += " " + k + "=" + v;
  for (const auto& g : c.sys->gpu_models()) key += " " + g;
  return key;
}

namespace {
// The units held out, in order of first appearance: log files, or with by_system every multi-host log of one
// system together.
std::vector<std::string> units_of(const std::vector<Case>& cases, bool by_system) {
  std::vector<std::string> units;
  for (const auto& c : cases)
    if (std::find(units.begin(), units.end(), loo_unit(c, by_system)) == units.end())
      units.push_back(loo_unit(c, by_system));
  return units;
}
}  // namespace

std::size_t loo_units(const std::vector<Case>& cases, bool by_system) { return units_of(cases, by_system).size(); }

Report leave_one_out(const std::vector<Case>& cases, const models::Calibration& start, const FitOptions& opt,
                     std::vector<std::pair<std::string, FitResult>>* fits, sim::Progress* progress) {
  auto unit_of = [&](const Case& c) { return loo_unit(c, opt.loo_by_system); };
  const std::vector<std::string> units = units_of(cases, opt.loo_by_system);
  std::map<std::string, models::Calibration> calib_of_unit;
  for (const auto& u : units) {
    std::string family;
    for (const auto& c : cases)
      if (unit_of(c) == u) family = c.sys->mapping().family;
    std::vector<Case> train;
    for (const auto& c : cases)
      if (unit_of(c) != u && c.sys->mapping().family == family) train.push_back(c);
    std::string scope = "family " + family;
    if (train.empty()) {
      for (const auto& c : cases)
        if (unit_of(c) != u) train.push_back(c);
      scope = "all other logs";
    }
    if (train.empty()) throw InputError(u, "leave-one-out needs at least two logs");
    FitOptions fo = opt;
    if (opt.loo_by_system && u.rfind("system:", 0) == 0)
      for (const auto& c : cases)
        if (unit_of(c) == u) fo.fabric = fabric_param(c);
    FitResult fr = fit_calibration(train, start, fo);
    fr.calib.name = (u.rfind("system:", 0) == 0 ? "loo-without-" + u : "loo-without-" + basename_of(u)) + " (" + scope + ")";
    calib_of_unit[u] = fr.calib;
    if (fits) fits->emplace_back(u, std::move(fr));
    if (progress) progress->advance();
  }
  if (progress) progress->finish();
  return compare(
      cases, [&](std::size_t i) -> const models::Calibration& { return calib_of_unit.at(unit_of(cases[i])); },
      "leave-one-out");
}

namespace {
// One row of the per-log / per-family tables: points, median, p90, max (percent), or dashes when empty.
std::string stats_cols(const ErrorStats& e) {
  char buf[64];
  if (e.count == 0)
    std::snprintf(buf, sizeof buf, "%12s%8s%7s%7s", "-", "-", "-", "-");
  else
    std::snprintf(buf, sizeof buf, "%12zu%8.1f%7.1f%7.1f", e.count, e.median * 100, e.p90 * 100, e.max * 100);
  return buf;
}
}  // namespace

std::map<std::string, std::vector<LogCompare>> families(const Report& r) {
  std::map<std::string, std::vector<LogCompare>> out;
  for (const auto& l : r.logs) out[l.family.empty() ? std::string("-") : l.family].push_back(l);
  return out;
}

std::string report_text(const Report& r) {
  std::ostringstream o;
  o << "# fabricsim validate: " << r.title << "\n";
  o << "# busbw error = simulated/measured - 1 (positive: simulation optimistic)\n";
  for (const auto& l : r.logs) {
    o << "#\n# " << l.source << "\n#   " << l.op << ", " << l.nranks << " ranks on " << l.nodes << " host(s), " << l.gpu
      << "\n#   topology: " << l.mapping << "\n#   calibration: " << l.calibration << "\n";
    o << "#   host launch floor: " << fmt("%.2f", l.host_launch_floor_s * 1e6) << " us at one channel + "
      << fmt("%.3f", l.host_channel_launch_s * 1e6) << " us per extra channel ("
      << (l.gpus_per_thread > 0 ? std::to_string(l.gpus_per_thread) + " GPU(s) per host thread"
                                : std::string("GPUs per host thread not recorded: 1 assumed"))
      << "); rows marked 'floor' are simulated at it, rows marked 'nccl' with NCCL's own algorithm and protocol "
         "from the log's TUNING lines\n";
    if (!l.env_honoured.empty()) {
      o << "#   NCCL settings honoured:";
      for (const auto& e : l.env_honoured) o << " " << e;
      o << "\n";
    }
    for (const auto& e : l.env_not_modelled) o << "#   NCCL setting NOT modelled: " << e << "\n";
    o << "#        size   meas_time   sim_time  meas_busbw  sim_busbw   error  algo/proto\n";
    o << "#         (B)        (us)       (us)      (GB/s)     (GB/s)     (%)\n";
    for (const auto& p : l.points) {
      char buf[256];
      const std::string marks = std::string(p.from_log ? " nccl" : "") + (p.at_host_floor ? " floor" : "");
      std::snprintf(buf, sizeof buf, "%13llu %11.2f %10.2f %11.2f %10.2f %7.1f  %s/%s%s\n",
                    static_cast<unsigned long long>(p.size_bytes), p.measured_s * 1e6, p.simulated_s * 1e6,
                    p.measured_busbw_GBps, p.simulated_busbw_GBps, p.busbw_error * 100, p.algorithm.c_str(),
                    p.protocol.c_str(), marks.c_str());
      o << buf;
    }
  }
  auto line = [&](const char* what, const ErrorStats& s) {
    o << "# " << what << ": " << s.count << " points, |busbw error| median " << fmt("%.1f", s.median * 100)
      << " %, p90 " << fmt("%.1f", s.p90 * 100) << " %, max " << fmt("%.1f", s.max * 100) << " %\n";
  };
  // Where the error comes from: the same statistics per log (a file with several runs has one row per run).
  o << "#\n# per log: |busbw error| (%) for sizes >= 1 MiB and < 1 MiB; '-' where a log has no such size\n";
  o << "#  >=1MiB pts  median    p90    max |   <1MiB pts  median    p90    max | log\n";
  for (const auto& l : r.logs) {
    const ErrorSummary s = summarize({l});
    o << "#" << stats_cols(s.large) << " |" << stats_cols(s.small) << " | " << basename_of(l.source) << "\n";
  }
  // The same per hardware family (SystemMapping::family: the logs a leave-one-out fit draws on together).
  const auto fams = families(r);
  if (fams.size() > 1) {
    o << "#\n# per hardware family\n";
    o << "#  >=1MiB pts  median    p90    max |   <1MiB pts  median    p90    max | family (runs)\n";
    for (const auto& [fam, logs] : fams) {
      const ErrorSummary s = summarize(logs);
      o << "#" << stats_cols(s.large) << " |" << stats_cols(s.small) << " | " << fam << " (" << logs.size()
        << ")\n";
    }
  }
  o << "#\n# summary (" << r.title << ")\n";
  line("sizes >= 1 MiB", r.summary.large);
  line("sizes <  1 MiB", r.summary.small);
  return o.str();
}

Json report_json(const Report& r) {
  Json logs = Json::array();
  for (const auto& l : r.logs) {
    Json pts = Json::array();
    for (const auto& p : l.points)
      pts.push_back({{"size_bytes", p.size_bytes},
                     {"measured_time_s", p.measured_s},
                     {"simulated_time_s", p.simulated_s},
                     {"measured_busbw_Bps", p.measured_busbw_GBps * kGB},
                     {"simulated_busbw_Bps", p.simulated_busbw_GBps * kGB},
                     {"busbw_error", p.busbw_error},
                     {"algorithm", p.algorithm},
                     {"protocol", p.protocol},
                     {"at_host_launch_floor", p.at_host_floor},
                     {"algorithm_from_log", p.from_log}});
    logs.push_back({{"source", l.source},
                    {"collective", l.op},
                    {"nranks", l.nranks},
                    {"hosts", l.nodes},
                    {"gpu", l.gpu},
                    {"topology", l.mapping},
                    {"family", l.family},
                    {"calibration", l.calibration},
                    {"gpus_per_thread", l.gpus_per_thread},
                    {"host_launch_floor_s", l.host_launch_floor_s},
                    {"host_channel_launch_s", l.host_channel_launch_s},
                    {"nccl_env_honoured", l.env_honoured},
                    {"nccl_env_not_modelled", l.env_not_modelled},
                    {"points", pts}});
  }
  auto stats = [](const ErrorStats& s) {
    return Json{{"points", s.count}, {"median_abs_busbw_error", s.median}, {"p90_abs_busbw_error", s.p90},
                {"max_abs_busbw_error", s.max}};
  };
  for (std::size_t i = 0; i < r.logs.size(); ++i) {
    const ErrorSummary s = summarize({r.logs[i]});
    logs[i]["summary"] = {{"large", stats(s.large)}, {"small", stats(s.small)}};
  }
  Json fam = Json::object();
  for (const auto& [name, ls] : families(r)) {
    const ErrorSummary s = summarize(ls);
    fam[name] = {{"runs", ls.size()}, {"large", stats(s.large)}, {"small", stats(s.small)}};
  }
  return {{"schema", "fabricsim.validation_report/1"},
          {"title", r.title},
          {"logs", logs},
          {"families", fam},
          {"summary", {{"large_min_bytes", kLargeMessageBytes},
                       {"large", stats(r.summary.large)},
                       {"small", stats(r.summary.small)}}}};
}

namespace {

const char* const kLogColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
                                  "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39",
                                  "#7b4173", "#3182bd"};
const char* log_color(std::size_t k) { return kLogColors[k % (sizeof kLogColors / sizeof *kLogColors)]; }

// "1KiB", "64MiB", ... for a power-of-two exponent (x axis ticks).
std::string pow2_label(int e) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  if (e < 0) return "";
  int u = std::min(4, e / 10);
  return std::to_string(1LL << (e - 10 * u)) + units[u];
}

// A label cut to `n` characters with an ellipsis (the full text goes in a <title> next to it).
std::string cut(const std::string& s, std::size_t n) {
  if (s.size() <= n) return s;
  return s.substr(0, n - 1) + "\u2026";
}

// Integer log2 range [lo, hi] of the report's sizes.
std::pair<int, int> size_range(const Report& r) {
  double lo = 1e300, hi = -1e300;
  for (const auto& l : r.logs)
    for (const auto& p : l.points) {
      double x = std::log2(static_cast<double>(std::max<std::uint64_t>(1, p.size_bytes)));
      lo = std::min(lo, x);
      hi = std::max(hi, x);
    }
  if (lo > hi) return {0, 1};
  int a = static_cast<int>(std::floor(lo)), b = static_cast<int>(std::ceil(hi));
  if (b <= a) b = a + 1;
  return {a, b};
}

// A "nice" axis maximum >= v (1, 2, 2.5, 5 x 10^k).
double nice_max(double v) {
  if (!(v > 0)) return 1;
  double p = std::pow(10.0, std::floor(std::log10(v)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (m * p >= v) return m * p;
  return 10 * p;
}

// X ticks every `step` powers of two, labelled, between lo and hi.
void x_ticks(std::ostringstream& o, int lo, int hi, const std::function<double(double)>& X, double y0, double y1,
             int font) {
  int step = (hi - lo) > 24 ? 8 : (hi - lo) > 12 ? 4 : 2;
  for (int e = lo; e <= hi; ++e) {
    if ((e - lo) % step != 0 && e != hi) continue;
    double x = X(e);
    o << "<line x1=\"" << fmt("%.1f", x) << "\" y1=\"" << fmt("%.1f", y0) << "\" x2=\"" << fmt("%.1f", x) << "\" y2=\""
      << fmt("%.1f", y1) << "\" stroke=\"#e4e4e4\"/>\n";
    if ((e - lo) % step == 0)
      o << "<text x=\"" << fmt("%.1f", x) << "\" y=\"" << fmt("%.1f", y1 + font + 3) << "\" font-size=\"" << font
        << "\" text-anchor=\"middle\">" << pow2_label(e) << "</text>\n";
  }
}

}  // namespace

std::string report_svg(const Report& r) {
  // Layout: a title line with the shared legend; one small panel per log (measured dots vs simulated line,
  // busbw in GB/s on a linear axis over message size on a log2 axis), three to a row; then one error panel
  // (signed busbw error in % vs size, every log in its colour) with a legend in columns under it.
  const auto xrange = size_range(r);  // not a structured binding: clang 14 cannot capture one in the lambdas below
  const int xlo = xrange.first, xhi = xrange.second;
  const double W = 960, M = 20;
  const int cols = 3;
  const double pw = (W - 2 * M) / cols;  // panel cell width
  const double cellH = 190, pl = 46, pr = 10, pt = 22, pb = 30;  // inner plot margins inside a cell
  const std::size_t n = r.logs.size();
  const std::size_t rows = (n + cols - 1) / cols;
  const double top = 54;
  const double errTop = top + static_cast<double>(rows) * cellH + 20;
  const double errH = 260, eL = 70, eR = 20, eT = 28, eB = 40;
  const int legendCols = 3;
  const double legendRowH = 15;
  const std::size_t legendRows = (n + legendCols - 1) / legendCols;
  const double H = errTop + errH + 12 + static_cast<double>(legendRows) * legendRowH + 40;

  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << fmt("%.0f", H)
    << "\" viewBox=\"0 0 " << W << " " << fmt("%.0f", H) << "\" font-family=\"sans-serif\" font-size=\"11\">\n";
  o << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  o << "<text x=\"" << M << "\" y=\"22\" font-size=\"15\">fabricsim validate: " << xml_escape(r.title) << " (" << n
    << (n == 1 ? " log" : " logs") << ")</text>\n";
  // Shared legend for the per-log panels.
  o << "<circle cx=\"" << M + 6 << "\" cy=\"38\" r=\"3\" fill=\"#444\"/><text x=\"" << M + 14
    << "\" y=\"42\">measured busbw</text>\n";
  o << "<line x1=\"" << M + 120 << "\" y1=\"38\" x2=\"" << M + 140 << "\" y2=\"38\" stroke=\"#444\" stroke-width=\"1.5\"/>"
    << "<text x=\"" << M + 146 << "\" y=\"42\">simulated busbw</text>\n";
  o << "<text x=\"" << M + 270 << "\" y=\"42\" fill=\"#555\">y: bus bandwidth (GB/s); x: message size (log scale)</text>\n";

  for (std::size_t k = 0; k < n; ++k) {
    const auto& l = r.logs[k];
    const char* col = log_color(k);
    const double cx = M + static_cast<double>(k % cols) * pw, cy = top + static_cast<double>(k / cols) * cellH;
    const double x0 = cx + pl, x1 = cx + pw - pr, y0 = cy + pt, y1 = cy + cellH - pb;
    double ymax = 0;
    for (const auto& p : l.points) ymax = std::max({ymax, p.measured_busbw_GBps, p.simulated_busbw_GBps});
    ymax = nice_max(ymax);
    auto X = [&](double e) { return x0 + (e - xlo) / (xhi - xlo) * (x1 - x0); };
    auto Y = [&](double v) { return y1 - v / ymax * (y1 - y0); };
    const ErrorSummary es = summarize({l});
    std::string title = basename_of(l.source);
    o << "<g class=\"panel\">\n";
    o << "<text x=\"" << fmt("%.1f", cx + 4) << "\" y=\"" << fmt("%.1f", cy + 12) << "\" font-size=\"10.5\" fill=\"" << col
      << "\"><title>" << xml_escape(title) << "</title>" << xml_escape(cut(title, 50)) << "</text>\n";
    // 4 or 5 intervals, whichever gives round tick labels (100 -> 25s, 25 -> 5s, 50 -> 10s, 20 -> 5s).
    const double mant = ymax / std::pow(10.0, std::floor(std::log10(ymax)));
    const int nt = (std::abs(mant - 2.5) < 1e-9 || std::abs(mant - 5) < 1e-9) ? 5 : 4;
    for (int t = 0; t <= nt; ++t) {
      double v = ymax * t / nt, y = Y(v);
      o << "<line x1=\"" << fmt("%.1f", x0) << "\" y1=\"" << fmt("%.1f", y) << "\" x2=\"" << fmt("%.1f", x1) << "\" y2=\""
        << fmt("%.1f", y) << "\" stroke=\"#eee\"/><text x=\"" << fmt("%.1f", x0 - 4) << "\" y=\"" << fmt("%.1f", y + 3)
        << "\" font-size=\"9\" text-anchor=\"end\">" << fmt("%g", v) << "</text>\n";
    }
    x_ticks(o, xlo, xhi, X, y0, y1, 9);
    o << "<rect x=\"" << fmt("%.1f", x0) << "\" y=\"" << fmt("%.1f", y0) << "\" width=\"" << fmt("%.1f", x1 - x0)
      << "\" height=\"" << fmt("%.1f", y1 - y0) << "\" fill=\"none\" stroke=\"#888\"/>\n";
    std::ostringstream path;
    bool first = true;
    for (const auto& p : l.points) {
      if (!(p.simulated_busbw_GBps > 0)) continue;
      path << (first ? "M" : " L") << fmt("%.1f", X(std::log2(static_cast<double>(p.size_bytes)))) << ","
           << fmt("%.1f", Y(p.simulated_busbw_GBps));
      first = false;
    }
    if (!first)
      o << "<path class=\"sim\" d=\"" << path.str() << "\" fill=\"none\" stroke=\"" << col << "\" stroke-width=\"1.5\"/>\n";
    for (const auto& p : l.points)
      if (p.measured_busbw_GBps > 0)
        o << "<circle class=\"meas\" cx=\"" << fmt("%.1f", X(std::log2(static_cast<double>(p.size_bytes)))) << "\" cy=\""
          << fmt("%.1f", Y(p.measured_busbw_GBps)) << "\" r=\"2.2\" fill=\"" << col << "\"/>\n";
    // Per-log error figures in the panel's corner (>= 1 MiB median absolute busbw error).
    if (es.large.count > 0)
      o << "<text x=\"" << fmt("%.1f", x0 + 4) << "\" y=\"" << fmt("%.1f", y0 + 11) << "\" font-size=\"9\" fill=\"#333\">"
        << "&gt;= 1 MiB: median |err| " << fmt("%.1f", es.large.median * 100) << " %</text>\n";
    o << "</g>\n";
  }

  // Error panel: signed busbw error (%) vs size, all logs.
  {
    const double x0 = M + eL, x1 = W - M - eR, y0 = errTop + eT, y1 = errTop + errH - eB;
    // The y range covers the errors (busbw error >= -100 % by definition) with round bounds, at least +-10 %.
    double ehi = 10, elo = -10;
    for (const auto& l : r.logs)
      for (const auto& p : l.points)
        if (std::isfinite(p.busbw_error) && p.measured_busbw_GBps > 0) {
          ehi = std::max(ehi, p.busbw_error * 100);
          elo = std::min(elo, p.busbw_error * 100);
        }
    const double estep = nice_max((ehi - elo) / 8);
    const double emax = std::ceil(ehi / estep) * estep, emin = std::floor(elo / estep) * estep;
    auto X = [&](double e) { return x0 + (e - xlo) / (xhi - xlo) * (x1 - x0); };
    auto Y = [&](double v) { return y0 + (emax - v) / (emax - emin) * (y1 - y0); };
    o << "<g class=\"error-panel\">\n";
    o << "<text x=\"" << M << "\" y=\"" << fmt("%.1f", errTop + 14) << "\" font-size=\"13\">signed busbw error = "
         "simulated / measured - 1 (positive: the simulator is optimistic), every log</text>\n";
    for (int t = static_cast<int>(std::lround(emin / estep)); t <= static_cast<int>(std::lround(emax / estep)); ++t) {
      double v = estep * t, y = Y(v);
      o << "<line x1=\"" << fmt("%.1f", x0) << "\" y1=\"" << fmt("%.1f", y) << "\" x2=\"" << fmt("%.1f", x1) << "\" y2=\""
        << fmt("%.1f", y) << "\" stroke=\"" << (t == 0 ? "#555" : "#eee") << "\"/><text x=\"" << fmt("%.1f", x0 - 5)
        << "\" y=\"" << fmt("%.1f", y + 3) << "\" font-size=\"10\" text-anchor=\"end\">" << fmt("%+g", v) << " %</text>\n";
    }
    x_ticks(o, xlo, xhi, X, y0, y1, 10);
    o << "<rect x=\"" << fmt("%.1f", x0) << "\" y=\"" << fmt("%.1f", y0) << "\" width=\"" << fmt("%.1f", x1 - x0)
      << "\" height=\"" << fmt("%.1f", y1 - y0) << "\" fill=\"none\" stroke=\"#888\"/>\n";
    o << "<text x=\"" << fmt("%.1f", (x0 + x1) / 2) << "\" y=\"" << fmt("%.1f", y1 + 30)
      << "\" text-anchor=\"middle\">message size (log scale)</text>\n";
    for (std::size_t k = 0; k < n; ++k) {
      const auto& l = r.logs[k];
      std::ostringstream path;
      bool first = true;
      for (const auto& p : l.points) {
        if (!(p.measured_busbw_GBps > 0) || !std::isfinite(p.busbw_error)) continue;
        double v = std::clamp(p.busbw_error * 100, emin, emax);
        path << (first ? "M" : " L") << fmt("%.1f", X(std::log2(static_cast<double>(p.size_bytes)))) << ","
             << fmt("%.1f", Y(v));
        first = false;
      }
      if (!first)
        o << "<path class=\"err\" d=\"" << path.str() << "\" fill=\"none\" stroke=\"" << log_color(k)
          << "\" stroke-width=\"1.2\" stroke-opacity=\"0.85\"/>\n";
    }
    // Legend in columns under the panel: every log's colour and name (cut to fit the column).
    const double lw = (W - 2 * M) / legendCols;
    for (std::size_t k = 0; k < n; ++k) {
      double lx = M + static_cast<double>(k % legendCols) * lw,
             ly = errTop + errH + 12 + static_cast<double>(k / legendCols) * legendRowH;
      std::string name = basename_of(r.logs[k].source);
      o << "<line x1=\"" << fmt("%.1f", lx) << "\" y1=\"" << fmt("%.1f", ly - 4) << "\" x2=\"" << fmt("%.1f", lx + 16)
        << "\" y2=\"" << fmt("%.1f", ly - 4) << "\" stroke=\"" << log_color(k) << "\" stroke-width=\"2\"/><text x=\""
        << fmt("%.1f", lx + 20) << "\" y=\"" << fmt("%.1f", ly) << "\" font-size=\"10\"><title>" << xml_escape(name)
        << "</title>" << xml_escape(cut(name, 46)) << "</text>\n";
    }
    const auto& s = r.summary;
    double sy = errTop + errH + 12 + static_cast<double>(legendRows) * legendRowH + 12;
    o << "<text x=\"" << M << "\" y=\"" << fmt("%.1f", sy) << "\">all logs: &gt;= 1 MiB median |error| "
      << fmt("%.1f", s.large.median * 100) << " %, p90 " << fmt("%.1f", s.large.p90 * 100) << " %; &lt; 1 MiB median "
      << fmt("%.1f", s.small.median * 100) << " %, p90 " << fmt("%.1f", s.small.p90 * 100) << " %</text>\n";
    o << "</g>\n";
  }
  o << "</svg>\n";
  return o.str();
}

}  // namespace fabricsim::validate

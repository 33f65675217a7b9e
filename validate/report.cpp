#include "validate/report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
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

Report leave_one_out(const std::vector<Case>& cases, const models::Calibration& start, const FitOptions& opt,
                     std::vector<std::pair<std::string, FitResult>>* fits) {
  // The unit held out: the log file, or with opt.loo_by_system every multi-host log of the same system.
  auto unit_of = [&](const Case& c) { return loo_unit(c, opt.loo_by_system); };
  std::vector<std::string> units;
  for (const auto& c : cases)
    if (std::find(units.begin(), units.end(), unit_of(c)) == units.end()) units.push_back(unit_of(c));
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
    FitResult fr = fit_calibration(train, start, opt);
    fr.calib.name = (u.rfind("system:", 0) == 0 ? "loo-without-" + u : "loo-without-" + basename_of(u)) + " (" + scope + ")";
    calib_of_unit[u] = fr.calib;
    if (fits) fits->emplace_back(u, std::move(fr));
  }
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

std::string report_svg(const Report& r) {
  // Axes: x = log2(size), y = log10(busbw GB/s); ranges from the data.
  double xmin = 1e300, xmax = -1e300, ymin = 1e300, ymax = -1e300;
  for (const auto& l : r.logs)
    for (const auto& p : l.points) {
      double x = std::log2(static_cast<double>(p.size_bytes));
      xmin = std::min(xmin, x);
      xmax = std::max(xmax, x);
      for (double b : {p.measured_busbw_GBps, p.simulated_busbw_GBps}) {
        if (!(b > 0)) continue;
        ymin = std::min(ymin, std::log10(b));
        ymax = std::max(ymax, std::log10(b));
      }
    }
  if (xmin > xmax) {
    xmin = 0;
    xmax = 1;
    ymin = 0;
    ymax = 1;
  }
  ymin = std::floor(ymin);
  ymax = std::ceil(ymax);
  if (ymax <= ymin) ymax = ymin + 1;
  xmin = std::floor(xmin);
  xmax = std::ceil(xmax);
  if (xmax <= xmin) xmax = xmin + 1;
  const double W = 960, H = 600, L = 80, R = 330, T = 50, B = 60;
  const double pw = W - L - R, ph = H - T - B;
  auto X = [&](double x) { return L + (x - xmin) / (xmax - xmin) * pw; };
  auto Y = [&](double y) { return T + ph - (y - ymin) / (ymax - ymin) * ph; };
  static const char* colors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
                                 "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39",
                                 "#7b4173", "#3182bd"};
  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H << "\" viewBox=\"0 0 " << W
    << " " << H << "\" font-family=\"sans-serif\" font-size=\"11\">\n";
  o << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  o << "<text x=\"" << L << "\" y=\"24\" font-size=\"15\">fabricsim validate: " << xml_escape(r.title)
    << " - busbw, measured (dots) vs simulated (lines)</text>\n";
  // Grid and ticks.
  for (int e = static_cast<int>(ymin); e <= static_cast<int>(ymax); ++e) {
    double y = Y(e);
    o << "<line x1=\"" << L << "\" y1=\"" << fmt("%.1f", y) << "\" x2=\"" << L + pw << "\" y2=\"" << fmt("%.1f", y)
      << "\" stroke=\"#ddd\"/>\n";
    o << "<text x=\"" << L - 6 << "\" y=\"" << fmt("%.1f", y + 4) << "\" text-anchor=\"end\">" << fmt("%g", std::pow(10.0, e))
      << "</text>\n";
  }
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  for (int e = static_cast<int>(xmin); e <= static_cast<int>(xmax); ++e) {
    double x = X(e);
    bool major = e % 10 == 0 || e == static_cast<int>(xmin) || e == static_cast<int>(xmax) || (xmax - xmin) <= 12;
    o << "<line x1=\"" << fmt("%.1f", x) << "\" y1=\"" << T << "\" x2=\"" << fmt("%.1f", x) << "\" y2=\"" << T + ph
      << "\" stroke=\"" << (e % 10 == 0 ? "#bbb" : "#eee") << "\"/>\n";
    if (major && e >= 0) {
      int u = std::min(4, e / 10);
      o << "<text x=\"" << fmt("%.1f", x) << "\" y=\"" << T + ph + 16 << "\" text-anchor=\"middle\">" << (1LL << (e - 10 * u))
        << units[u] << "</text>\n";
    }
  }
  o << "<rect x=\"" << L << "\" y=\"" << T << "\" width=\"" << pw << "\" height=\"" << ph
    << "\" fill=\"none\" stroke=\"black\"/>\n";
  o << "<text x=\"" << L + pw / 2 << "\" y=\"" << H - 18 << "\" text-anchor=\"middle\">message size (bytes, log scale)</text>\n";
  o << "<text transform=\"translate(20," << T + ph / 2 << ") rotate(-90)\" text-anchor=\"middle\">bus bandwidth (GB/s, log scale)</text>\n";
  // Series.
  for (std::size_t k = 0; k < r.logs.size(); ++k) {
    const auto& l = r.logs[k];
    const char* col = colors[k % (sizeof colors / sizeof *colors)];
    std::ostringstream path;
    bool first = true;
    for (const auto& p : l.points) {
      if (!(p.simulated_busbw_GBps > 0)) continue;
      path << (first ? "M" : " L") << fmt("%.1f", X(std::log2(static_cast<double>(p.size_bytes)))) << ","
           << fmt("%.1f", Y(std::log10(p.simulated_busbw_GBps)));
      first = false;
    }
    if (!first)
      o << "<path d=\"" << path.str() << "\" fill=\"none\" stroke=\"" << col << "\" stroke-width=\"1.5\"/>\n";
    for (const auto& p : l.points) {
      if (!(p.measured_busbw_GBps > 0)) continue;
      o << "<circle cx=\"" << fmt("%.1f", X(std::log2(static_cast<double>(p.size_bytes)))) << "\" cy=\""
        << fmt("%.1f", Y(std::log10(p.measured_busbw_GBps))) << "\" r=\"2.5\" fill=\"" << col << "\"/>\n";
    }
    double ly = T + 10 + 16.0 * static_cast<double>(k);
    o << "<circle cx=\"" << L + pw + 16 << "\" cy=\"" << fmt("%.1f", ly - 4) << "\" r=\"3\" fill=\"" << col << "\"/>\n";
    o << "<text x=\"" << L + pw + 26 << "\" y=\"" << fmt("%.1f", ly) << "\">" << xml_escape(basename_of(l.source).substr(0, 44))
      << "</text>\n";
  }
  const auto& s = r.summary;
  double sy = T + 10 + 16.0 * static_cast<double>(r.logs.size()) + 10;
  o << "<text x=\"" << L + pw + 16 << "\" y=\"" << fmt("%.1f", sy) << "\">&gt;= 1 MiB: median " << fmt("%.1f", s.large.median * 100)
    << " %, p90 " << fmt("%.1f", s.large.p90 * 100) << " %</text>\n";
  o << "<text x=\"" << L + pw + 16 << "\" y=\"" << fmt("%.1f", sy + 16) << "\">&lt; 1 MiB: median " << fmt("%.1f", s.small.median * 100)
    << " %, p90 " << fmt("%.1f", s.small.p90 * 100) << " %</text>\n";
  o << "</svg>\n";
  return o.str();
}

}  // namespace fabricsim::validate

#include "replay/outputs_compare.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

#include "replay/outputs_sweep.hpp"
#include "sim/base/error.hpp"
#include "sim/base/input_file.hpp"
#include "sim/base/json_reader.hpp"
#include "sim/base/json_schema.hpp"
#include "sim/base/units.hpp"

namespace fabricsim::sim {

namespace {

std::string basename_of(const std::string& p) {
  auto s = p.find_last_of('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}

bool ends_with(const std::string& s, const std::string& suf) {
  return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}

double num(const Json& j, const char* key, const JsonPath& at, bool required = true) {
  if (!j.contains(key)) {
    if (required) json_fail(at, std::string("a result JSON object with key '") + key + "' (fabricsim run --json)");
    return 0;
  }
  // Every figure compared is a count, a time or a rate (a negative one is not a result fabricsim writes).
  if (!j[key].is_number() || j[key].get<double>() < 0) json_fail(at.child(key), "a number >= 0");
  return j[key].get<double>();
}

CompareColumn from_result_json(const Json& j, const std::string& path) {
  JsonPath at{path, ""};
  if (!j.is_object() || !j.contains("schema_version") || !j.contains("breakdown"))
    json_fail(at, "a result JSON (fabricsim run --json, docs/result.schema.json) or a sweep CSV");
  CompareColumn c;
  c.label = basename_of(path);
  c.gpus = static_cast<int>(num(j, "gpus", at));
  c.iteration_s = num(j, "iteration_s", at);
  c.samples_per_s = num(j, "samples_per_s", at, false);
  c.tokens_per_s = num(j, "tokens_per_s", at, false);
  c.tflops_per_gpu = num(j, "tflops_per_gpu", at, false);
  c.mfu = num(j, "mfu", at, false);
  const Json& b = j["breakdown"];
  JsonPath bat = at.child("breakdown");
  if (!b.is_object()) json_fail(bat, "an object");
  c.breakdown.emplace_back("compute", num(b, "compute_s", bat));
  if (b.contains("exposed_comm_s")) {
    if (!b["exposed_comm_s"].is_object()) json_fail(bat.child("exposed_comm_s"), "an object of seconds by category");
    for (const auto& [k, v] : b["exposed_comm_s"].items()) {
      if (!v.is_number() || v.get<double>() < 0) json_fail(bat.child("exposed_comm_s").child(k), "a number of seconds >= 0");
      c.breakdown.emplace_back("exposed " + k, v.get<double>());
    }
  }
  c.breakdown.emplace_back("bubble", num(b, "bubble_s", bat, false));
  c.breakdown.emplace_back("idle", num(b, "idle_s", bat, false));
  if (j.contains("links") && j["links"].is_object() && j["links"].contains("by_class")) {
    c.has_links = true;
    JsonPath lat = at.child("links").child("by_class");
    std::size_t i = 0;
    for (const auto& e : j["links"]["by_class"]) {
      JsonPath eat = lat.index(i++);
      if (!e.is_object() || !e.contains("class") || !e["class"].is_string())
        json_fail(eat, "an object with a string 'class'");
      CompareLinkClass lc;
      if (e.contains("tier")) lc.tier = static_cast<int>(num(e, "tier", eat));
      lc.directions = static_cast<int>(num(e, "directions", eat));
      lc.bytes = num(e, "bytes", eat);
      lc.util_avg_run_mean = num(e, "util_avg_run_mean", eat);
      c.link_classes[e["class"].get<std::string>()] = lc;
    }
  }
  for (const char* k : {"topology", "calibration", "comm_model", "workload"})
    if (j.contains(k) && j[k].is_string()) c.inputs[k] = j[k].get<std::string>();
  for (const char* k : {"topology_params", "workload_params"})
    if (j.contains(k) && j[k].is_object())
      for (const auto& [name, v] : j[k].items()) c.inputs[std::string(k) + " " + name] = v.is_string() ? v.get<std::string>() : v.dump();
  // The keys and values compare does not read are still those of the format (unknown keys are errors).
  static const Json schema = Json::parse(embedded_result_schema().at(0).second);
  check_json_schema(j, schema, at, "docs/result.schema.json");
  return c;
}

std::vector<CompareColumn> from_sweep_csv(const std::string& text, const std::string& path) {
  std::istringstream in(text);
  std::string line;
  if (!std::getline(in, line)) throw InputError(path, "empty file: expected a sweep CSV header");
  const auto head = parse_csv_line(line);
  auto col = [&](const std::string& name) -> std::size_t {
    for (std::size_t i = 0; i < head.size(); ++i)
      if (head[i] == name) return i;
    throw InputError(path + ":1", "expected a sweep CSV (fabricsim sweep) with a column '" + name + "'");
  };
  if (head.empty() || head[0] != "point") throw InputError(path + ":1", "expected a sweep CSV header starting with 'point'");
  const std::size_t status = col("status"), gpus = col("gpus"), it = col("iteration_s"), sps = col("samples_per_s"),
                    tps = col("tokens_per_s"), tfl = col("tflops_per_gpu"), comp = col("compute_s"),
                    bub = col("bubble_s"), idle = col("idle_s");
  std::vector<std::pair<std::string, std::size_t>> exposed;
  for (std::size_t i = 0; i < head.size(); ++i)
    if (head[i].rfind("exposed_", 0) == 0 && ends_with(head[i], "_s") && head[i] != "exposed_comm_total_s")
      exposed.emplace_back(head[i].substr(8, head[i].size() - 10), i);
  std::vector<CompareColumn> out;
  int lineno = 1;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty()) continue;
    auto f = parse_csv_line(line);
    const std::string where = path + ":" + std::to_string(lineno);
    if (f.size() != head.size())
      throw InputError(where, "expected " + std::to_string(head.size()) + " fields like the header, got " +
                                  std::to_string(f.size()));
    if (f[status] != "ok") continue;
    auto d = [&](std::size_t i) {
      try {
        std::size_t used = 0;
        double v = std::stod(f[i], &used);
        // Every figure compared is a count, a time or a rate: finite and not negative (nan, inf, -1 are not a
        // result a sweep writes).
        if (used != f[i].size() || !std::isfinite(v) || v < 0) throw std::invalid_argument("not a figure");
        return v;
      } catch (const std::exception&) {
        throw InputError(where, "column '" + head[i] + "': expected a finite number >= 0, got '" + text_excerpt(f[i], 40) + "'");
      }
    };
    CompareColumn c;
    std::string inputs;
    for (std::size_t i = 1; i < status; ++i) {
      inputs += (inputs.empty() ? "" : ",") + head[i] + "=" + f[i];
      c.inputs[head[i]] = f[i];
    }
    c.label = basename_of(path) + ": " + (inputs.empty() ? "point " + f[0] : inputs);
    c.gpus = static_cast<int>(d(gpus));
    c.iteration_s = d(it);
    c.samples_per_s = d(sps);
    c.tokens_per_s = d(tps);
    c.tflops_per_gpu = d(tfl);
    c.breakdown.emplace_back("compute", d(comp));
    for (const auto& [name, i] : exposed) c.breakdown.emplace_back("exposed " + name, d(i));
    c.breakdown.emplace_back("bubble", d(bub));
    c.breakdown.emplace_back("idle", d(idle));
    out.push_back(std::move(c));
  }
  if (out.empty()) throw InputError(path, "the sweep CSV has no ok rows to compare");
  return out;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}
std::string ms(double s) { return fmt("%.3f", s * 1e3) + " ms"; }
std::string signed_ms(double s) { return fmt("%+.3f", s * 1e3) + " ms"; }
std::string pct_change(double v, double base) {
  if (!(base != 0)) return "";
  return " (" + fmt("%+.1f", 100 * (v / base - 1)) + " %)";
}

// Two results whose step times agree to the printed 0.0 %: why, in two lines, from what the results state --
// the inputs that differ, and what is equal (the breakdown, the link classes) and which links carry no traffic.
std::string same_result_text(const CompareColumn& a, const CompareColumn& b, const std::vector<std::string>& cats,
                             const std::set<std::string>& classes) {
  std::string diff;
  int n = 0;
  std::set<std::string> keys;
  for (const auto& [k, v] : a.inputs) keys.insert(k);
  for (const auto& [k, v] : b.inputs) keys.insert(k);
  for (const auto& k : keys) {
    auto ia = a.inputs.find(k), ib = b.inputs.find(k);
    const std::string va = ia == a.inputs.end() ? "(not stated)" : ia->second, vb = ib == b.inputs.end() ? "(not stated)" : ib->second;
    if (va == vb) continue;
    if (++n <= 4) diff += (diff.empty() ? "" : ", ") + k + " " + text_excerpt(va, 40) + " -> " + text_excerpt(vb, 40);
  }
  if (n > 4) diff += " and " + std::to_string(n - 4) + " more";
  std::string o = "  why the same: ";
  if (a.inputs.empty() || b.inputs.empty()) o += "the inputs are not stated in both results";
  else if (n == 0) o += "both results state the same inputs";
  else o += "the inputs differ in " + diff;
  o += b.iteration_s == a.iteration_s ? " and the step times are equal;\n" : " and the step times differ by under 0.05 %;\n";
  // What is equal, and where the traffic is.
  auto value_of = [](const CompareColumn& c, const std::string& k) {
    for (const auto& [kk, v] : c.breakdown)
      if (kk == k) return v;
    return 0.0;
  };
  std::vector<std::string> moved;
  for (const auto& k : cats)
    if (std::abs(value_of(a, k) - value_of(b, k)) >= 5e-7) moved.push_back(k);
  o += "    ";
  if (moved.empty()) o += "every breakdown category is equal (to 0.001 ms)";
  else {
    o += "categories that moved and cancel out:";
    for (const auto& k : moved) o += " " + k;
  }
  if (a.has_links && b.has_links) {
    std::string busy, changed;
    bool between_switches = false, tiers_known = true;
    for (const auto& cl : classes) {
      auto ia = a.link_classes.find(cl), ib = b.link_classes.find(cl);
      const double ba = ia == a.link_classes.end() ? 0 : ia->second.bytes, bb = ib == b.link_classes.end() ? 0 : ib->second.bytes;
      const double ua = ia == a.link_classes.end() ? 0 : ia->second.util_avg_run_mean,
                   ub = ib == b.link_classes.end() ? 0 : ib->second.util_avg_run_mean;
      if (ba == 0 && bb == 0) continue;
      busy += (busy.empty() ? "" : ", ") + cl;
      if (ba != bb || ua != ub) changed += (changed.empty() ? "" : ", ") + cl;
      const int tier = ia != a.link_classes.end() ? ia->second.tier : ib->second.tier;
      if (tier < 0) tiers_known = false;
      if (tier >= 2) between_switches = true;
    }
    if (busy.empty()) o += "; no link carries traffic in either";
    else {
      o += changed.empty() ? "; the links carrying traffic (" + busy + ") carry the same bytes at the same utilisation"
                           : "; traffic on " + busy + " (changed: " + changed + ")";
      if (tiers_known && !between_switches) o += "; no link between switches carries any";
    }
  }
  return o + "\n";
}

}  // namespace

std::vector<CompareColumn> load_compare_input(const std::string& path) {
  const std::string text = read_input_file(path);
  std::size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '{') return {from_result_json(parse_json_text(text, path), path)};
  return from_sweep_csv(text, path);
}

std::string compare_text(const std::vector<CompareColumn>& cols) {
  if (cols.empty()) return "";
  const std::size_t n = cols.size();
  const int LW = 26, CW = 24;
  std::ostringstream o;
  auto cell = [&](const std::string& s, int w) {
    std::string t = s.size() > static_cast<std::size_t>(w - 1) ? s.substr(0, static_cast<std::size_t>(w - 2)) + "~" : s;
    return t + std::string(static_cast<std::size_t>(w) - t.size(), ' ');
  };
  auto line = [&](const std::string& label, const std::vector<std::string>& vals) {
    std::string s = "  " + cell(label, LW);
    for (const auto& v : vals) s += cell(v, CW);
    while (!s.empty() && s.back() == ' ') s.pop_back();
    o << s << "\n";
  };
  o << "results (" << n << "); deltas are against [A]:\n";
  for (std::size_t k = 0; k < n; ++k) o << "  [" << static_cast<char>('A' + k % 26) << "] " << cols[k].label << "\n";
  std::vector<std::string> heads;
  for (std::size_t k = 0; k < n; ++k) heads.push_back(std::string("[") + static_cast<char>('A' + k % 26) + "]");
  line("", heads);
  auto per = [&](const std::string& label, auto fn) {
    std::vector<std::string> v;
    for (const auto& c : cols) v.push_back(fn(c));
    line(label, v);
  };
  per("GPUs", [](const CompareColumn& c) { return std::to_string(c.gpus); });
  per("step time", [&](const CompareColumn& c) {
    return ms(c.iteration_s) + (&c == &cols[0] ? "" : pct_change(c.iteration_s, cols[0].iteration_s));
  });
  per("tokens/s", [&](const CompareColumn& c) {
    return c.tokens_per_s > 0 ? fmt("%.0f", c.tokens_per_s) + (&c == &cols[0] ? "" : pct_change(c.tokens_per_s, cols[0].tokens_per_s))
                              : std::string("-");
  });
  per("samples/s", [](const CompareColumn& c) { return fmt("%.2f", c.samples_per_s); });
  per("TFLOP/s per GPU", [](const CompareColumn& c) { return fmt("%.1f", c.tflops_per_gpu); });
  per("MFU", [](const CompareColumn& c) { return c.mfu > 0 ? fmt("%.1f", 100 * c.mfu) + " %" : std::string("-"); });
  per("GPU-seconds per step", [](const CompareColumn& c) { return fmt("%.3f", c.gpus * c.iteration_s) + " s"; });
  // Breakdown rows: the union of categories, in first-seen order.
  std::vector<std::string> cats;
  for (const auto& c : cols)
    for (const auto& [k, v] : c.breakdown)
      if (std::find(cats.begin(), cats.end(), k) == cats.end()) cats.push_back(k);
  auto value_of = [](const CompareColumn& c, const std::string& k) {
    for (const auto& [kk, v] : c.breakdown)
      if (kk == k) return v;
    return 0.0;
  };
  o << "breakdown (per-rank average per step; categories that are 0 in every result left out):\n";
  for (const auto& k : cats) {
    bool any = false;
    for (const auto& c : cols) any = any || std::abs(value_of(c, k)) >= 5e-7;
    if (any) per(k, [&](const CompareColumn& c) { return ms(value_of(c, k)); });
  }
  // Link classes.
  std::set<std::string> classes;
  bool any_links = false;
  for (const auto& c : cols) {
    any_links = any_links || c.has_links;
    for (const auto& [k, v] : c.link_classes) classes.insert(k);
  }
  if (any_links) {
    o << "link classes (bytes carried per step, mean utilisation over the run):\n";
    for (const auto& k : classes)
      per(k, [&](const CompareColumn& c) {
        if (!c.has_links) return std::string("n/a");
        auto it = c.link_classes.find(k);
        if (it == c.link_classes.end()) return std::string("0 B");
        return format_bytes(it->second.bytes) + ", " + fmt("%.1f", 100 * it->second.util_avg_run_mean) + " %";
      });
  }
  // Where each delta comes from.
  for (std::size_t k = 1; k < n; ++k) {
    const auto& a = cols[0];
    const auto& b = cols[k];
    const double d = b.iteration_s - a.iteration_s;
    o << "[" << static_cast<char>('A' + k % 26) << "] - [A]: step time " << signed_ms(d) << pct_change(b.iteration_s, a.iteration_s)
      << "; by category (largest first):\n";
    std::vector<std::pair<std::string, double>> deltas;
    for (const auto& c : cats) deltas.emplace_back(c, value_of(b, c) - value_of(a, c));
    std::stable_sort(deltas.begin(), deltas.end(),
                     [](const auto& x, const auto& y) { return std::abs(x.second) > std::abs(y.second); });
    double sum = 0;
    for (const auto& [c, v] : deltas) {
      sum += v;
      if (std::abs(v) < 5e-7) continue;  // below 0.0005 ms: nothing to read
      o << "    " << cell(c, LW) << signed_ms(v) << "\n";
    }
    // The breakdown is a per-rank average that sums to the step time; say so when it does not quite.
    if (std::abs(sum - d) > 1e-6 + 1e-3 * std::abs(a.iteration_s))
      o << "    (the categories sum to " << signed_ms(sum) << ": the breakdown is a per-rank average)\n";
    if (std::abs(d) < 5e-4 * std::abs(a.iteration_s) || d == 0) o << same_result_text(a, b, cats, classes);
    if (a.has_links && b.has_links) {
      std::vector<std::pair<std::string, std::string>> lines;
      for (const auto& cl : classes) {
        auto ia = a.link_classes.find(cl), ib = b.link_classes.find(cl);
        double ba = ia == a.link_classes.end() ? 0 : ia->second.bytes, bb = ib == b.link_classes.end() ? 0 : ib->second.bytes;
        double ua = ia == a.link_classes.end() ? 0 : ia->second.util_avg_run_mean,
               ub = ib == b.link_classes.end() ? 0 : ib->second.util_avg_run_mean;
        if (ba == bb && ua == ub) continue;
        lines.emplace_back(cl, "bytes " + format_bytes(ba) + " -> " + format_bytes(bb) + ", mean util " +
                                   fmt("%.1f", 100 * ua) + " % -> " + fmt("%.1f", 100 * ub) + " %");
      }
      if (!lines.empty()) o << "  link classes that changed:\n";
      for (const auto& [cl, t] : lines) o << "    " << cell(cl, LW) << t << "\n";
    }
  }
  return o.str();
}

}  // namespace fabricsim::sim

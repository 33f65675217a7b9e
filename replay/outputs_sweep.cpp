#include "replay/outputs_sweep.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "sim/base/csv.hpp"
#include "replay/progress.hpp"

namespace fabricsim::sim {

std::vector<std::string> parse_csv_line(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quoted) {
      if (c == '"') {
        if (i + 1 < line.size() && line[i + 1] == '"') {
          cur += '"';
          ++i;
        } else {
          quoted = false;
        }
      } else {
        cur += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

namespace {

std::string num(double v) {
  if (!std::isfinite(v)) return "";
  if (v == 0) return "0";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

// Text of a scalar JSON value for a CSV input column.
// A point's label or axis value becomes a cell of the CSV's input columns, read back on resume: no line breaks or
// other control characters (a label with a newline split its row, and resume failed on it: found by fuzzing).
const std::string& csv_cell_text(const std::string& text, const JsonPath& at) {
  for (unsigned char ch : text)
    if (ch < 0x20 || ch == 0x7f) json_fail(at, "a text without line breaks or other control characters (it is a CSV cell)");
  return text;
}

std::string scalar_text(const Json& v, const JsonPath& at) {
  if (v.is_string()) return csv_cell_text(v.get<std::string>(), at);
  if (v.is_number() || v.is_boolean()) return v.dump();
  json_fail(at, "a string, number or boolean");
}

Json::json_pointer pointer(const std::string& text, const JsonPath& at) {
  if (text.empty() || text[0] != '/') json_fail(at, "a JSON pointer starting with '/', e.g. \"/topology/params/nodes\"");
  // Setting a pointer creates the objects it names: bound its depth like any parsed document's.
  if (static_cast<std::size_t>(std::count(text.begin(), text.end(), '/')) > kMaxJsonDepth / 2)
    json_fail(at, "a JSON pointer of at most " + std::to_string(kMaxJsonDepth / 2) + " levels");
  try {
    return Json::json_pointer(text);
  } catch (const std::exception& e) {
    json_fail(at, std::string("a valid JSON pointer (") + e.what() + ")");
  }
}

std::vector<std::pair<std::string, Json>> read_set(const Json& set, const JsonPath& at) {
  if (!set.is_object() || set.empty()) json_fail(at, "a non-empty object of JSON pointer -> value");
  std::vector<std::pair<std::string, Json>> out;
  for (const auto& [k, v] : set.items()) {
    pointer(k, at.child(k));
    out.emplace_back(k, v);
  }
  return out;
}

// One value of an axis: its CSV text and what it sets.
struct AxisValue {
  std::string text;
  std::vector<std::pair<std::string, Json>> set;
};

const char* kExposed[] = {"tp", "pp", "dp", "ep", "all_to_all"};

}  // namespace

SweepSpec parse_sweep(const Json& j, const std::string& file) {
  JsonPath root{file, ""};
  if (!j.is_object()) json_fail(root, "a sweep object (keys scenario, mode, axes|points, metrics, output, threads)");
  ObjectReader r(j, root);
  SweepSpec s;
  s.file = file;
  const Json& scen = r.raw("scenario");
  if (scen.is_string()) {
    std::filesystem::path p = scen.get<std::string>();
    if (p.is_relative()) p = std::filesystem::path(file).parent_path() / p;
    s.base_source = p.lexically_normal().string();
    s.base = load_json_file(s.base_source);
  } else if (scen.is_object()) {
    s.base = scen;
    s.base_source = file + "#/scenario";
  } else {
    json_fail(r.path_of("scenario"), "a scenario file name or an inline scenario object");
  }
  if (!s.base.is_object()) json_fail(JsonPath{s.base_source, ""}, "a scenario object");
  std::string mode = r.string_or("mode", r.has("points") ? "list" : "grid");
  if (mode == "grid") {
    const Json& axes = r.array("axes");
    if (axes.empty()) json_fail(r.path_of("axes"), "at least one axis");
    std::vector<std::vector<AxisValue>> vals;
    std::set<std::string> names;
    for (std::size_t i = 0; i < axes.size(); ++i) {
      JsonPath ap = r.path_of("axes").index(i);
      if (!axes[i].is_object()) json_fail(ap, "an axis object {name, path?, values}");
      ObjectReader ar(axes[i], ap);
      std::string name = ar.string("name");
      if (name.empty() || !names.insert(name).second) json_fail(ap.child("name"), "a unique, non-empty column name");
      std::string path = ar.string_or("path", "");
      const Json& values = ar.array("values");
      if (values.empty()) json_fail(ap.child("values"), "at least one value");
      std::vector<AxisValue> av;
      for (std::size_t k = 0; k < values.size(); ++k) {
        JsonPath vp = ap.child("values").index(k);
        AxisValue v;
        if (!path.empty()) {
          pointer(path, ap.child("path"));
          v.text = scalar_text(values[k], vp);
          v.set = {{path, values[k]}};
        } else {
          if (!values[k].is_object()) json_fail(vp, "{\"label\": ..., \"set\": {pointer: value}} (the axis has no \"path\")");
          ObjectReader vr(values[k], vp);
          v.text = csv_cell_text(vr.string("label"), vp.child("label"));
          v.set = read_set(vr.object("set"), vp.child("set"));
          vr.finish();
        }
        av.push_back(std::move(v));
      }
      ar.finish();
      s.input_columns.push_back(name);
      vals.push_back(std::move(av));
    }
    std::size_t total = 1;
    for (const auto& v : vals) {
      total *= v.size();
      if (total > 1000000) json_fail(r.path_of("axes"), "at most 1,000,000 points");
    }
    for (std::size_t idx = 0; idx < total; ++idx) {
      SweepPoint p;
      p.index = idx;
      std::size_t rem = idx;
      std::vector<std::size_t> digit(vals.size());
      for (std::size_t a = vals.size(); a-- > 0;) {  // last axis varies fastest
        digit[a] = rem % vals[a].size();
        rem /= vals[a].size();
      }
      for (std::size_t a = 0; a < vals.size(); ++a) {
        const AxisValue& v = vals[a][digit[a]];
        p.inputs.push_back(v.text);
        for (const auto& kv : v.set) p.set.push_back(kv);
      }
      s.points.push_back(std::move(p));
    }
  } else if (mode == "list") {
    const Json& pts = r.array("points");
    if (pts.empty()) json_fail(r.path_of("points"), "at least one point");
    s.input_columns = {"label"};
    std::set<std::string> labels;
    for (std::size_t i = 0; i < pts.size(); ++i) {
      JsonPath pp = r.path_of("points").index(i);
      if (!pts[i].is_object()) json_fail(pp, "{\"label\": ..., \"set\": {pointer: value}}");
      ObjectReader pr(pts[i], pp);
      SweepPoint p;
      p.index = i;
      std::string label = csv_cell_text(pr.string("label"), pp.child("label"));
      if (!labels.insert(label).second) json_fail(pp.child("label"), "a label not used by another point");
      p.inputs = {label};
      p.set = read_set(pr.object("set"), pp.child("set"));
      pr.finish();
      s.points.push_back(std::move(p));
    }
  } else {
    json_fail(r.path_of("mode"), "\"grid\" or \"list\"");
  }
  if (const Json* m = r.array_optional("metrics")) {
    for (std::size_t i = 0; i < m->size(); ++i) {
      if (!(*m)[i].is_string() || (*m)[i].get<std::string>().empty())
        json_fail(r.path_of("metrics").index(i), "a metric name (string)");
      s.metric_columns.push_back((*m)[i].get<std::string>());
    }
  }
  s.output = r.string_or("output", "");
  auto th = r.integer_or("threads", 0);
  if (th < 0 || th > 4096) json_fail(r.path_of("threads"), "an integer between 0 (all cores) and 4096");
  s.threads = static_cast<int>(th);
  r.finish();
  // Every point's pointers must be settable on the base scenario: fail before anything runs.
  for (const auto& p : s.points) point_scenario(s, p);
  return s;
}

SweepSpec load_sweep(const std::string& path) { return parse_sweep(load_json_file(path), path); }

namespace {
// Sets `v` at JSON pointer `ptr` inside `j` (already validated by pointer()). Missing object members are
// created as objects; an array is only indexed within its size, or appended to ("-" or its size) by the
// last token. (nlohmann's operator[] would grow an array to any index it is given: "/a/4000000000".)
void set_pointer(Json& j, const std::string& ptr, const Json& v) {
  std::vector<std::string> tokens;
  for (std::size_t i = 1; i <= ptr.size();) {
    std::size_t e = ptr.find('/', i);
    if (e == std::string::npos) e = ptr.size();
    std::string t;
    for (std::size_t k = i; k < e; ++k) {
      if (ptr[k] == '~' && k + 1 < e) {
        t += ptr[k + 1] == '1' ? '/' : '~';
        ++k;
      } else {
        t += ptr[k];
      }
    }
    tokens.push_back(std::move(t));
    i = e + 1;
  }
  Json* cur = &j;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const std::string& t = tokens[i];
    const bool last = i + 1 == tokens.size();
    if (cur->is_null()) *cur = Json::object();
    if (cur->is_object()) {
      cur = &(*cur)[t];
    } else if (cur->is_array()) {
      std::size_t idx = cur->size();
      if (t != "-") {
        if (t.empty() || t.size() > 18 || (t.size() > 1 && t[0] == '0') ||
            t.find_first_not_of("0123456789") != std::string::npos)
          throw std::invalid_argument("array index '" + t.substr(0, 20) + "' is not a number");
        idx = static_cast<std::size_t>(std::stoull(t));
      }
      if (idx < cur->size()) {
        cur = &(*cur)[idx];
      } else if (idx == cur->size() && last) {
        cur->push_back(nullptr);
        cur = &cur->back();
      } else {
        throw std::invalid_argument("array index " + t.substr(0, 20) + " is beyond the array's " +
                                    std::to_string(cur->size()) + " elements");
      }
    } else {
      throw std::invalid_argument(std::string("it goes through a ") + cur->type_name() + ", not an object or array");
    }
  }
  *cur = v;
}
}  // namespace

Json point_scenario(const SweepSpec& s, const SweepPoint& p) {
  Json j = s.base;
  j.erase("outputs");
  for (const auto& [ptr, v] : p.set) {
    try {
      set_pointer(j, ptr, v);
    } catch (const std::exception& e) {
      throw InputError(s.file + ": point " + std::to_string(p.index) + " " + ptr.substr(0, 160) +
                           (ptr.size() > 160 ? "..." : ""),
                       std::string("cannot set this path in the base scenario (") + e.what() + ")");
    }
  }
  return j;
}

std::string sweep_csv_header(const SweepSpec& s) {
  std::string h = "point";
  for (const auto& c : s.input_columns) {
    h += ',';
    h += csv_field(c);
  }
  h += ",status,error,gpus,iteration_s,samples_per_s,tokens_per_s,tflops_per_gpu,gpu_seconds_per_step,compute_s";
  for (const char* c : kExposed) h += std::string(",exposed_") + c + "_s";
  h += ",exposed_other_s,exposed_comm_total_s,bubble_s,idle_s";
  for (const auto& m : s.metric_columns) {
    h += ',';
    h += csv_field(m);
  }
  return h + ",input_hash\n";
}

std::string point_input_hash(const SweepSpec& s, const SweepPoint& p) {
  std::uint64_t h = 1469598103934665603ULL;  // FNV-1a 64 offset basis
  auto add = [&h](const std::string& text) {
    for (unsigned char c : text) {
      h ^= c;
      h *= 1099511628211ULL;  // FNV-1a 64 prime
    }
    h ^= 0xff;  // field separator (a byte that UTF-8 text never contains)
    h *= 1099511628211ULL;
  };
  add(s.base.dump());
  for (const auto& [ptr, v] : p.set) {
    add(ptr);
    add(v.dump());
  }
  add(s.run_options);
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

namespace {
std::string row_prefix(const SweepPoint& p) {
  std::string o = std::to_string(p.index);
  for (const auto& v : p.inputs) {
    o += ',';
    o += csv_field(v);
  }
  return o;
}
// status, error, gpus, iteration_s, samples_per_s, tokens_per_s, tflops_per_gpu, gpu_seconds_per_step,
// compute_s, 5 exposed, exposed_other_s, exposed_comm_total_s, bubble_s, idle_s = 18; then the metrics.
std::size_t result_columns(const SweepSpec& s) { return 19 + s.metric_columns.size(); }  // + input_hash
}  // namespace

std::string sweep_csv_row_ok(const SweepSpec& s, const SweepPoint& p, const RunResult& r) {
  std::string o = row_prefix(p) + ",ok,";
  o += "," + std::to_string(r.gpus) + "," + num(r.iteration_s) + "," + num(r.samples_per_s) + "," +
       num(r.tokens_per_s) + "," + num(r.tflops_per_gpu) + "," + num(r.gpus * r.iteration_s) + "," +
       num(r.breakdown.compute_s);
  double other = 0, total = 0;
  for (const auto& [name, v] : r.breakdown.exposed_comm_s) {
    total += v;
    const std::string& k = name;  // clang 14 cannot capture a structured binding in the lambda below
    if (std::none_of(std::begin(kExposed), std::end(kExposed), [&](const char* c) { return k == c; })) other += v;
  }
  for (const char* c : kExposed) {
    auto it = r.breakdown.exposed_comm_s.find(c);
    o += "," + num(it == r.breakdown.exposed_comm_s.end() ? 0.0 : it->second);
  }
  o += "," + num(other) + "," + num(total) + "," + num(r.breakdown.bubble_s) + "," + num(r.breakdown.idle_s);
  for (const auto& m : s.metric_columns) {
    auto it = r.metrics.find(m);
    o += ',';
    if (it != r.metrics.end()) o += num(it->second);
  }
  return o + "," + point_input_hash(s, p) + "\n";
}

std::string sweep_csv_row_failed(const SweepSpec& s, const SweepPoint& p, const std::string& error,
                                 const std::string& status) {
  std::string e = error;
  for (char& c : e)
    if (c == '\n' || c == '\r') c = ' ';
  std::string o = row_prefix(p) + "," + status + "," + csv_field(e);
  for (std::size_t i = 0; i < result_columns(s) - 3; ++i) o += ",";
  return o + "," + point_input_hash(s, p) + "\n";
}

std::map<std::size_t, std::string> read_done_rows(const SweepSpec& s, const std::string& text,
                                                  const std::string& name, std::size_t* stale) {
  std::map<std::size_t, std::string> done;
  if (stale) *stale = 0;
  // A run killed while appending leaves a last line without its newline: that row is not trusted (its
  // point runs again), whatever it happens to contain.
  std::string complete = text.substr(0, text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1);
  std::istringstream in(complete);
  std::string line;
  if (!std::getline(in, line)) {
    if (!text.empty() && text != sweep_csv_header(s).substr(0, text.size()))
      throw InputError(name, "exists and is not a CSV written by this sweep; move it away or choose another output");
    return done;  // empty file (or a header cut short): nothing done
  }
  if (line + "\n" != sweep_csv_header(s))
    throw InputError(name, "exists with different columns than this sweep produces; move it away or choose "
                           "another output to start over");
  std::size_t lineno = 1;
  std::size_t ncols = 1 + s.input_columns.size() + result_columns(s);
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty()) continue;
    auto f = parse_csv_line(line);
    std::string where = name + ": line " + std::to_string(lineno);
    if (f.size() != ncols) {
      // A row cut short by an interrupted run: ignore it; the point runs again.
      continue;
    }
    long long idx = -1;
    try {
      idx = std::stoll(f[0]);
    } catch (...) {
    }
    if (idx < 0 || static_cast<std::size_t>(idx) >= s.points.size())
      throw InputError(where, "point index " + json_excerpt(Json(f[0]), 30) + " is not a point of this sweep");
    const SweepPoint& p = s.points[static_cast<std::size_t>(idx)];
    for (std::size_t c = 0; c < p.inputs.size(); ++c)
      if (f[1 + c] != p.inputs[c])
        throw InputError(where, "point " + f[0] + " has " + s.input_columns[c] + "=" + json_excerpt(Json(f[1 + c]), 40) +
                                    " but this sweep's point " + f[0] + " has " + json_excerpt(Json(p.inputs[c]), 40) +
                                    " (the sweep changed; choose another output)");
    std::string st = f[1 + p.inputs.size()];
    if (st != "ok" && st != "failed" && st != "does_not_fit")
      throw InputError(where, "status must be ok, failed or does_not_fit, got " + json_excerpt(Json(st), 30));
    if (f.back() != point_input_hash(s, p)) {  // computed from another scenario or other run options
      if (stale) ++*stale;
      continue;
    }
    done[static_cast<std::size_t>(idx)] = line + "\n";
  }
  return done;
}

std::map<std::size_t, std::string> run_sweep_points(const SweepSpec& s, const std::vector<std::size_t>& todo,
                                                    const ScenarioRunner& run, const SweepRunOptions& opt) {
  std::map<std::size_t, std::string> rows;
  std::mutex mu;
  std::atomic<std::size_t> next{0};
  Progress bar("sweep", static_cast<double>(todo.size()), !opt.progress);
  auto worker = [&]() {
    for (;;) {
      std::size_t k = next.fetch_add(1);
      if (k >= todo.size()) return;
      const SweepPoint& p = s.points.at(todo[k]);
      std::string row, error;
      bool ok = false;
      RunResult r;
      try {
        Json scen = point_scenario(s, p);
        r = run(scen, s.base_source);
        row = sweep_csv_row_ok(s, p, r);
        ok = true;
      } catch (const DoesNotFitError& e) {  // an answer about this layout, not a failure of the run
        error = e.what();
        row = sweep_csv_row_failed(s, p, error, "does_not_fit");
      } catch (const std::exception& e) {
        error = e.what();
        row = sweep_csv_row_failed(s, p, error);
      }
      {
        std::lock_guard<std::mutex> lock(mu);
        rows[p.index] = row;
        if (ok && opt.on_result) opt.on_result(p.index, r);
        if (!ok) bar.interrupt();  // on_row may print the failure on stderr
        if (opt.on_row) opt.on_row(p.index, row, ok, error);
      }
      bar.advance(1);
    }
  };
  int n = std::max(1, std::min<int>(opt.threads, static_cast<int>(todo.size())));
  std::vector<std::thread> pool;
  for (int i = 1; i < n; ++i) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  bar.finish();
  return rows;
}

std::string sweep_row_status(const SweepSpec& s, const std::string& row) {
  std::string line = row;
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
  auto f = parse_csv_line(line);
  std::size_t at = 1 + s.input_columns.size();
  return f.size() > at ? f[at] : std::string();
}


std::string sweep_csv(const SweepSpec& s, const std::map<std::size_t, std::string>& rows) {
  std::string o = sweep_csv_header(s);
  for (const auto& [i, row] : rows) o += row;
  return o;
}

}  // namespace fabricsim::sim

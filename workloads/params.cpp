#include "workloads/params.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "sim/base/did_you_mean.hpp"
#include "sim/base/error.hpp"
#include "sim/base/units.hpp"

namespace fabricsim::workloads {

ParamMap params_from_json(const Json& obj, const JsonPath& at) {
  if (!obj.is_object()) json_fail(at, "expected an object of parameters");
  ParamMap m;
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    const Json& v = *it;
    if (v.is_string()) {
      m[it.key()] = v.get<std::string>();
      m.quoted.insert(it.key());
    }
    else if (v.is_boolean()) m[it.key()] = v.get<bool>() ? "true" : "false";
    else if (v.is_number_unsigned()) m[it.key()] = std::to_string(v.get<std::uint64_t>());  // > 2^63 stays exact
    else if (v.is_number_integer()) m[it.key()] = std::to_string(v.get<std::int64_t>());
    else if (v.is_number()) {
      std::ostringstream os;
      os.precision(17);
      os << v.get<double>();
      m[it.key()] = os.str();
    } else if (v.is_array() && std::all_of(v.begin(), v.end(), [](const Json& row) {
                 return row.is_array() && std::all_of(row.begin(), row.end(), [](const Json& e) { return e.is_string(); });
               })) {
      m[it.key()] = v.dump();
      m.lists.insert(it.key());
    } else if (v.is_object()) {
      m[it.key()] = v.dump();
      m.objects.insert(it.key());
    } else {
      json_fail(at.child(it.key()), "expected a number, string or boolean");
    }
  }
  return m;
}

Json param_value_json(const std::string& text) {
  try {
    return Json(static_cast<std::int64_t>(parse_int(text, "")));
  } catch (const InputError&) {
  }
  try {
    return Json(parse_double(text, ""));
  } catch (const InputError&) {
  }
  if (text == "true" || text == "false") return Json(text == "true");
  if (!text.empty() && text.front() == '{') {  // an object (tp_comm_overlap_cfg's '{"fc2_fprop": {...}}')
    Json o = Json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (o.is_object()) return o;
  }
  return Json(text);
}

void ParamReader::fail(const std::string& k, const std::string& what) const {
  throw InputError(where_ + " " + k, what);
}

void ParamReader::bad_value(const std::string& k, const std::string& what) const {
  throw ParamError(where_ + " " + k, what);
}

void ParamReader::reject_quoted(const std::string& k, const char* what) const {
  if (!p_.quoted.count(k)) return;
  throw ParamError(where_ + "/" + k, std::string("expected ") + what + ", found the string " +
                                         json_excerpt(Json(p_.at(k))));
}

template <class T>
T ParamReader::parsed(const std::string& k, T dflt, T (*parse)(std::string_view, std::string_view), const char* what) {
  seen_.insert(k);
  auto it = p_.find(k);
  if (it == p_.end()) return dflt;
  try {
    return parse(it->second, k);
  } catch (const InputError&) {
    bad_value(k, std::string("expected ") + what + ", got '" + text_excerpt(it->second) + "'");
  }
}

std::int64_t ParamReader::integer(const std::string& k, std::int64_t dflt, std::int64_t min) {
  reject_quoted(k, "a number");
  const long long v = parsed<long long>(k, dflt, parse_int, "an integer");
  if (v < min) bad_value(k, "expected an integer >= " + std::to_string(min) + ", got " + std::to_string(v));
  used_[k] = std::to_string(v);
  return v;
}

std::int64_t ParamReader::integer_required(const std::string& k, std::int64_t min) {
  if (!p_.count(k)) bad_value(k, "required parameter is missing");
  return integer(k, 0, min);
}

double ParamReader::number(const std::string& k, double dflt, double min) {
  reject_quoted(k, "a number");
  const double v = parsed<double>(k, dflt, parse_double, "a number");
  if (!(v >= min) || !std::isfinite(v)) bad_value(k, "expected a finite number >= " + std::to_string(min));
  std::ostringstream os;
  os << v;
  used_[k] = os.str();
  return v;
}

bool ParamReader::boolean(const std::string& k, bool dflt) {
  seen_.insert(k);
  auto it = p_.find(k);
  bool v = dflt;
  if (it != p_.end()) {
    reject_quoted(k, "true or false");
    if (it->second == "true" || it->second == "1") v = true;
    else if (it->second == "false" || it->second == "0") v = false;
    else bad_value(k, "expected true or false, got '" + text_excerpt(it->second) + "'");
  }
  used_[k] = v ? "true" : "false";
  return v;
}

std::string ParamReader::string_or_list(const std::string& k) {
  seen_.insert(k);
  auto it = p_.find(k);
  std::string v = it == p_.end() ? "" : it->second;
  used_[k] = v;
  return v;
}

Json ParamReader::object(const std::string& k, const std::string& what) {
  seen_.insert(k);
  auto it = p_.find(k);
  if (it == p_.end()) return Json();
  used_[k] = it->second;
  Json v;
  if (!p_.quoted.count(k)) v = Json::parse(it->second, nullptr, /*allow_exceptions=*/false);
  if (!v.is_object()) throw ParamError(where_ + " " + k, "expected " + what + ", got '" + it->second.substr(0, 60) + "'");
  return v;
}

std::string ParamReader::string(const std::string& k, const std::string& dflt) {
  if (p_.lists.count(k)) throw ParamError(where_ + "/" + k, "expected a string, found a list");
  if (p_.objects.count(k)) throw ParamError(where_ + "/" + k, "expected a string, found an object");
  seen_.insert(k);
  auto it = p_.find(k);
  std::string v = it == p_.end() ? dflt : it->second;
  used_[k] = v;
  return v;
}

std::uint64_t ParamReader::size(const std::string& k, std::uint64_t dflt) {
  const std::uint64_t v = parsed<std::uint64_t>(k, dflt, parse_size, "a size (bytes, or with K/M/G suffix)");
  used_[k] = std::to_string(v);
  return v;
}

// bandwidth() and time(): a given value is parsed with its unit and recorded as written; the default is
// used (and recorded in base units) when the key is absent.
double ParamReader::with_unit(const std::string& k, double dflt, const std::string& dflt_text,
                              double (*parse)(std::string_view, std::string_view), const char* kind,
                              const char* example, bool zero_ok) {
  seen_.insert(k);
  auto it = p_.find(k);
  if (it == p_.end()) {
    used_[k] = dflt_text;
    return dflt;
  }
  double v = 0;
  try {
    v = parse(it->second, k);
  } catch (const InputError&) {
    bad_value(k, std::string("expected a ") + kind + " such as \"" + example + "\", found '" + text_excerpt(it->second) + "'");
  }
  if (zero_ok ? !(v >= 0) : !(v > 0)) bad_value(k, std::string("expected a ") + kind + (zero_ok ? " >= 0" : " > 0"));
  // The same physical ranges as JSON unit fields (sim/base/json_reader.hpp), so derived times stay finite.
  if (zero_ok ? !(v <= kMaxTime) : !(v >= kMinBandwidth && v <= kMaxBandwidth))
    bad_value(k, std::string("expected a ") + kind + (zero_ok ? " of at most 1e9 s" : " between 1e-3 B/s and 1e18 B/s"));
  used_[k] = it->second;
  return v;
}

double ParamReader::bandwidth(const std::string& k, double dflt) {
  return with_unit(k, dflt, format_bandwidth(dflt), &parse_bandwidth, "bandwidth", "26.28GB/s", false);
}

double ParamReader::time(const std::string& k, double dflt) {
  std::ostringstream os;
  os << dflt << "s";
  return with_unit(k, dflt, os.str(), &parse_time, "time", "0.5ms", true);
}

std::set<std::string> ParamReader::names() const {
  std::set<std::string> out = seen_;
  out.insert(asked_.begin(), asked_.end());
  return out;
}

void ParamReader::finish() const {
  std::vector<std::string> unseen;
  for (const auto& [k, v] : p_)
    if (!seen_.count(k)) unseen.push_back(k);
  if (unseen.empty()) return;
  const std::set<std::string> known = names();
  const std::vector<std::string> known_list(known.begin(), known.end());
  std::string unknown;
  for (const auto& k : unseen)
    if (unknown.size() < 200) unknown += (unknown.empty() ? "" : ", ") + text_excerpt(k, 40) + did_you_mean(k, known_list);
  throw ParamError(where_, "unknown parameter(s): " + unknown);
}

}  // namespace fabricsim::workloads

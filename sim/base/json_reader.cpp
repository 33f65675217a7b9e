#include "sim/base/json_reader.hpp"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "sim/base/units.hpp"

namespace fabricsim {

Json parse_json_text(const std::string& text, const std::string& source_name) {
  try {
    return Json::parse(text);
  } catch (const Json::parse_error& e) {
    // Translate the byte offset into line:column.
    std::size_t line = 1, col = 1;
    for (std::size_t i = 0; i < text.size() && i + 1 < e.byte; ++i) {
      if (text[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    std::string msg = e.what();
    auto pos = msg.find("syntax error");
    if (pos != std::string::npos) msg = msg.substr(pos);
    throw InputError(source_name + ":" + std::to_string(line) + ":" + std::to_string(col),
                     "invalid JSON (" + msg + ")");
  }
}

Json load_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, "cannot open file for reading");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_json_text(ss.str(), path);
}

void json_fail(const JsonPath& at, const std::string& expected) { throw InputError(at.str(), expected); }

namespace {
std::string type_name(const Json& v) { return v.type_name(); }
}  // namespace

ObjectReader::ObjectReader(const Json& j, JsonPath path) : j_(j), path_(std::move(path)) {
  if (!j_.is_object()) json_fail(path_, "expected an object, found " + type_name(j_));
}

bool ObjectReader::has(const std::string& key) const {
  seen_.insert(key);  // a key the reader asks about is one it knows, whether or not this object has it
  return j_.contains(key);
}

const Json& ObjectReader::raw(const std::string& key) {
  seen_.insert(key);
  auto it = j_.find(key);
  if (it == j_.end()) json_fail(path_.child(key), "missing required field '" + key + "'");
  return *it;
}

const Json* ObjectReader::raw_optional(const std::string& key) {
  seen_.insert(key);
  auto it = j_.find(key);
  if (it == j_.end() || it->is_null()) return nullptr;
  return &*it;
}

std::string ObjectReader::string(const std::string& key) {
  const Json& v = raw(key);
  if (!v.is_string()) json_fail(path_.child(key), "expected a string, found " + type_name(v));
  return v.get<std::string>();
}

std::string ObjectReader::string_or(const std::string& key, const std::string& dflt) {
  return has(key) ? string(key) : (seen_.insert(key), dflt);
}

double ObjectReader::number(const std::string& key) {
  const Json& v = raw(key);
  if (!v.is_number()) json_fail(path_.child(key), "expected a number, found " + type_name(v));
  double d = v.get<double>();
  if (!std::isfinite(d)) json_fail(path_.child(key), "expected a finite number");
  return d;
}

double ObjectReader::number_or(const std::string& key, double dflt) {
  return has(key) ? number(key) : (seen_.insert(key), dflt);
}

double ObjectReader::positive(const std::string& key) {
  double d = number(key);
  if (!(d > 0)) json_fail(path_.child(key), "expected a positive number, found " + std::to_string(d));
  return d;
}

std::int64_t ObjectReader::integer(const std::string& key) {
  const Json& v = raw(key);
  if (!v.is_number_integer()) json_fail(path_.child(key), "expected an integer, found " + v.dump());
  return v.get<std::int64_t>();
}

std::int64_t ObjectReader::integer_or(const std::string& key, std::int64_t dflt) {
  return has(key) ? integer(key) : (seen_.insert(key), dflt);
}

bool ObjectReader::boolean_or(const std::string& key, bool dflt) {
  seen_.insert(key);
  if (!has(key)) return dflt;
  const Json& v = j_.at(key);
  if (!v.is_boolean()) json_fail(path_.child(key), "expected true or false, found " + v.dump());
  return v.get<bool>();
}

double json_bandwidth(const Json& v, const JsonPath& at) {
  double d = 0;
  if (v.is_number()) {
    d = v.get<double>();
  } else if (v.is_string()) {
    try {
      d = parse_bandwidth(v.get<std::string>(), at.str());
    } catch (const InputError&) {
      json_fail(at, "expected a positive bandwidth (bytes/s number, or a string such as \"400Gbps\" or \"25GB/s\"), found " + v.dump());
    }
  } else {
    json_fail(at, "expected a bandwidth (number in bytes/s or string with unit), found " + v.dump());
  }
  if (!(d > 0) || !std::isfinite(d)) json_fail(at, "expected a positive bandwidth, found " + v.dump());
  return d;
}

double json_time(const Json& v, const JsonPath& at) {
  double d = 0;
  if (v.is_number()) {
    d = v.get<double>();
  } else if (v.is_string()) {
    try {
      d = parse_time(v.get<std::string>(), at.str());
    } catch (const InputError&) {
      json_fail(at, "expected a non-negative time (seconds, or a string such as \"1.5us\"), found " + v.dump());
    }
  } else {
    json_fail(at, "expected a time (number in seconds or string with unit), found " + v.dump());
  }
  if (!(d >= 0) || !std::isfinite(d)) json_fail(at, "expected a non-negative time, found " + v.dump());
  return d;
}

std::uint64_t json_size(const Json& v, const JsonPath& at) {
  if (v.is_number_unsigned()) return v.get<std::uint64_t>();
  if (v.is_number_integer() && v.get<std::int64_t>() >= 0) return static_cast<std::uint64_t>(v.get<std::int64_t>());
  if (v.is_string()) {
    try {
      return parse_size(v.get<std::string>(), at.str());
    } catch (const InputError&) {
    }
  }
  json_fail(at, "expected a size in bytes (non-negative integer, or a string such as \"64M\"), found " + v.dump());
}

double ObjectReader::bandwidth(const std::string& key) { return json_bandwidth(raw(key), path_.child(key)); }
double ObjectReader::bandwidth_or(const std::string& key, double dflt) {
  return has(key) ? bandwidth(key) : (seen_.insert(key), dflt);
}
double ObjectReader::time(const std::string& key) { return json_time(raw(key), path_.child(key)); }
double ObjectReader::time_or(const std::string& key, double dflt) {
  return has(key) ? time(key) : (seen_.insert(key), dflt);
}
std::uint64_t ObjectReader::size(const std::string& key) { return json_size(raw(key), path_.child(key)); }
std::uint64_t ObjectReader::size_or(const std::string& key, std::uint64_t dflt) {
  return has(key) ? size(key) : (seen_.insert(key), dflt);
}

const Json& ObjectReader::array(const std::string& key) {
  const Json& v = raw(key);
  if (!v.is_array()) json_fail(path_.child(key), "expected an array, found " + type_name(v));
  return v;
}
const Json* ObjectReader::array_optional(const std::string& key) {
  const Json* v = raw_optional(key);
  if (v && !v->is_array()) json_fail(path_.child(key), "expected an array, found " + type_name(*v));
  return v;
}
const Json& ObjectReader::object(const std::string& key) {
  const Json& v = raw(key);
  if (!v.is_object()) json_fail(path_.child(key), "expected an object, found " + type_name(v));
  return v;
}
const Json* ObjectReader::object_optional(const std::string& key) {
  const Json* v = raw_optional(key);
  if (v && !v->is_object()) json_fail(path_.child(key), "expected an object, found " + type_name(*v));
  return v;
}

void ObjectReader::finish() const {
  for (auto it = j_.begin(); it != j_.end(); ++it) {
    if (!seen_.count(it.key())) {
      std::string known;
      for (const auto& k : seen_) known += (known.empty() ? "" : ", ") + k;
      json_fail(path_.child(it.key()), "unknown key '" + it.key() + "' (known keys: " + known + ")");
    }
  }
}

void check_output_path(const std::string& path, const std::string& what) {
  std::filesystem::path p(path);
  std::error_code ec;
  if (path.empty()) throw InputError(what, "a file path (got an empty string)");
  if (p.filename().empty() || std::filesystem::is_directory(p, ec))
    throw InputError(what, "a file path (got '" + path + "', a directory)");
  const auto dir = p.parent_path();
  if (!dir.empty() && !std::filesystem::is_directory(dir, ec))
    throw InputError(what, "a path in an existing directory ('" + dir.string() + "' does not exist)");
}

void write_file_atomic(const std::string& path, const std::string& contents) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw InputError(path, "cannot open file for writing");
    out << contents;
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      throw InputError(path, "write failed");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw InputError(path, "cannot rename temporary file into place");
  }
}

}  // namespace fabricsim

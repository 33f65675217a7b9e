#pragma once
// Strict, path-aware reading of JSON input files. Components never see JSON: parsers at the edge use
// ObjectReader to pull typed fields out of an object, and every error names the file, the JSON pointer
// path and what was expected. finish() rejects keys that were never read (unknown keys are errors).
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/base/error.hpp"

namespace fabricsim {

using Json = nlohmann::json;

// Reads and parses a JSON file; a syntax error names the file, line and column.
Json load_json_file(const std::string& path);
// Parses JSON text that came from `source_name` (for error messages).
Json parse_json_text(const std::string& text, const std::string& source_name);

// Where a value sits: file name plus JSON pointer ("/links/3/bandwidth").
struct JsonPath {
  std::string file;
  std::string pointer;  // "" for the document root
  JsonPath child(const std::string& key) const { return {file, pointer + "/" + key}; }
  JsonPath index(std::size_t i) const { return {file, pointer + "/" + std::to_string(i)}; }
  std::string str() const { return file + ": " + (pointer.empty() ? "/" : pointer); }
};

[[noreturn]] void json_fail(const JsonPath& at, const std::string& expected);

class ObjectReader {
 public:
  ObjectReader(const Json& j, JsonPath path);

  bool has(const std::string& key) const;  // also records `key` as known (for finish()'s error message)
  const Json& raw(const std::string& key);  // required, any type
  const Json* raw_optional(const std::string& key);
  JsonPath path_of(const std::string& key) const { return path_.child(key); }
  const JsonPath& path() const { return path_; }

  std::string string(const std::string& key);
  std::string string_or(const std::string& key, const std::string& dflt);
  double number(const std::string& key);
  double number_or(const std::string& key, double dflt);
  double positive(const std::string& key);  // > 0
  std::int64_t integer(const std::string& key);
  std::int64_t integer_or(const std::string& key, std::int64_t dflt);
  bool boolean_or(const std::string& key, bool dflt);
  // Fields that accept either a number (in the base unit) or a string with a unit suffix.
  double bandwidth(const std::string& key);  // bytes/s, > 0
  double bandwidth_or(const std::string& key, double dflt);
  double time(const std::string& key);  // seconds, >= 0
  double time_or(const std::string& key, double dflt);
  std::uint64_t size(const std::string& key);  // bytes
  std::uint64_t size_or(const std::string& key, std::uint64_t dflt);
  const Json& array(const std::string& key);
  const Json* array_optional(const std::string& key);
  const Json& object(const std::string& key);
  const Json* object_optional(const std::string& key);

  // Rejects keys that were not read; call after reading all fields.
  void finish() const;

 private:
  const Json& j_;
  JsonPath path_;
  mutable std::set<std::string> seen_;  // keys read or asked about; finish() rejects the others
};

double json_bandwidth(const Json& v, const JsonPath& at);
double json_time(const Json& v, const JsonPath& at);
std::uint64_t json_size(const Json& v, const JsonPath& at);

// Checks, before any work, that `path` can name an output file: not a directory, in an existing directory.
// Throws InputError naming `what` (the flag or JSON field). Commands call it for every output they will
// write, so a bad path fails at once instead of after a long simulation.
void check_output_path(const std::string& path, const std::string& what);

// Writes `j` to `path` atomically (temporary file then rename) so a failure never leaves a partial file.
void write_file_atomic(const std::string& path, const std::string& contents);

}  // namespace fabricsim

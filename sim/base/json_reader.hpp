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

// Limits every JSON input is held to (docs/reliability.md). Depth bounds every later recursive walk over
// the document (copy, dump, destruction, error messages); size bounds the memory a file can make us use.
constexpr std::size_t kMaxJsonDepth = 64;                 // nested arrays/objects
constexpr std::size_t kMaxJsonBytes = 512ull << 20;        // 512 MiB per file
// Physical ranges every unit-bearing field is checked against (finite, and far outside any real system, so
// derived times and byte counts stay finite): bandwidth in [1e-3, 1e18] bytes/s, time in [0, 1e9] s, size
// at most 2^60 bytes (1 EiB).
constexpr double kMinBandwidth = 1e-3, kMaxBandwidth = 1e18;
constexpr double kMaxTime = 1e9;
constexpr std::uint64_t kMaxSize = 1ull << 60;

// Reads and parses a JSON file; a syntax error names the file, line and column. Also rejects: files over
// kMaxJsonBytes, nesting deeper than kMaxJsonDepth, a key repeated within one object, and numbers outside
// double range (1e400), each as an InputError naming the file and line:column or JSON pointer.
Json load_json_file(const std::string& path);
// Parses JSON text that came from `source_name` (for error messages), with the same checks.
Json parse_json_text(const std::string& text, const std::string& source_name);

// A short rendering of `v` for error messages: scalars dumped and cut at `max_chars` ("..." marks the cut),
// arrays and objects described by their size ("an array of 3 elements"). Never dumps a large value whole.
std::string json_excerpt(const Json& v, std::size_t max_chars = 60);
// `s` cut at `max_chars` ("..." marks the cut), for names quoted in messages.
std::string text_excerpt(const std::string& s, std::size_t max_chars = 60);

// Where a value sits: file name plus JSON pointer ("/links/3/bandwidth").
struct JsonPath {
  std::string file;
  std::string pointer;  // "" for the document root
  JsonPath child(const std::string& key) const { return {file, pointer + "/" + key}; }
  JsonPath index(std::size_t i) const { return {file, pointer + "/" + std::to_string(i)}; }
  // Pointers longer than 160 characters (only hostile inputs have them) are shown cut, ending in "...".
  std::string str() const {
    return file + ": " + (pointer.empty() ? "/" : pointer.size() > 160 ? pointer.substr(0, 160) + "..." : pointer);
  }
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
  // An integer in [lo, hi] (checked before any narrowing by the caller).
  std::int64_t integer_in(const std::string& key, std::int64_t lo, std::int64_t hi);
  std::int64_t integer_in_or(const std::string& key, std::int64_t lo, std::int64_t hi, std::int64_t dflt);
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

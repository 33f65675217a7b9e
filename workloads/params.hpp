#pragma once
// Generator parameters arrive as key=value strings (from `fabricsim gen --param k=v` or a scenario's
// "workload.params" object, whose JSON numbers/booleans are converted to text and whose strings are marked
// quoted). ParamReader pulls typed values out, names the parameter in errors (`where` + key), and rejects keys
// that were never read.
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "sim/base/error.hpp"
#include "sim/base/json_reader.hpp"

namespace fabricsim::workloads {

// Parameter values as text. `quoted`: the keys whose value a JSON file gave as a string (params_from_json), so a
// reader expecting a number or a boolean rejects "32" where 32 was meant; `--param k=v` values are all text and
// none is quoted.
struct ParamMap : std::map<std::string, std::string> {
  using Base = std::map<std::string, std::string>;
  using Base::Base;
  ParamMap() = default;
  ParamMap(const Base& m) : Base(m) {}
  ParamMap(Base&& m) : Base(std::move(m)) {}
  std::set<std::string> quoted;
  std::set<std::string> lists;  // keys whose JSON value was a list (held as its JSON text; string_or_list)
  std::set<std::string> objects;  // keys whose JSON value was an object (held as its JSON text; object())
};

// What the reader itself rejects: an unknown parameter, or a value of the wrong type or below its minimum.
// Checks that relate parameters to each other or to the topology (a TP size that does not divide the GPUs)
// stay plain InputErrors (`fabricsim sweep` checks every point for ParamErrors before running any, and
// reports the others as that point's failed row).
class ParamError : public InputError {
 public:
  using InputError::InputError;
};

// Converts a JSON object of scalars into a ParamMap (errors name the JSON path); string values are marked
// quoted (integer(), number() and boolean() then reject them, naming the JSON path); a list of lists of
// strings (pipeline_model_parallel_layout's list form) is kept as its JSON text and marked in `lists`; an object
// (tp_comm_overlap_cfg) is kept as its JSON text and marked in `objects`.
ParamMap params_from_json(const Json& obj, const JsonPath& at);
// A `--param k=v` value as a scenario's JSON would give it: an integer, a number, true / false, a JSON object
// ('{...}'), else a string (what importers write into the scenarios they make).
Json param_value_json(const std::string& text);

class ParamReader {
 public:
  // `where` prefixes errors, e.g. "--param" or "scenario.json: /workload/params".
  ParamReader(const ParamMap& p, std::string where) : p_(p), where_(std::move(where)) {}
  ParamReader(ParamMap&&, std::string) = delete;  // the reader keeps a reference: no temporaries
  bool has(const std::string& k) const {
    asked_.insert(k);
    return p_.count(k) > 0;
  }
  std::int64_t integer(const std::string& k, std::int64_t dflt, std::int64_t min = 0);
  std::int64_t integer_required(const std::string& k, std::int64_t min = 0);
  double number(const std::string& k, double dflt, double min = 0);
  bool boolean(const std::string& k, bool dflt);
  std::string string(const std::string& k, const std::string& dflt);  // a JSON list is refused
  std::string string_or_list(const std::string& k);  // a string, or a JSON list as its JSON text ("" if absent)
  // A JSON object: a scenario's object, or a `--param k='{...}'` value holding one (null if absent). `what` names
  // the expected object in the error a string or another JSON value gets.
  Json object(const std::string& k, const std::string& what);
  std::uint64_t size(const std::string& k, std::uint64_t dflt);  // "64M", "1GiB", or bytes
  double bandwidth(const std::string& k, double dflt);  // bytes/s from "26.28GB/s", "200Gbps"; given: > 0
  double time(const std::string& k, double dflt);       // seconds from "0.5ms", "3us"; given: >= 0
  [[noreturn]] void fail(const std::string& k, const std::string& what) const;  // InputError
  [[noreturn]] void bad_value(const std::string& k, const std::string& what) const;  // ParamError
  // A value a JSON file gave as a string where `what` ("a number", "true or false") is expected: a ParamError
  // naming the JSON path (where/k).
  void reject_quoted(const std::string& k, const char* what) const;
  void finish() const;  // unknown keys -> InputError listing them
  const ParamMap& used() const { return used_; }  // what was read, with defaults filled in (for reports)
  // Every key this reader was asked about (read or tested with has()): run over an empty map, the names a
  // generator accepts, from the generator's own reading code.
  std::set<std::string> names() const;

 private:
  // Shared by integer(), number() and size(): the value given for `k` read by `parse` (an InputError becomes
  // "expected <what>, got '<value>'"), else dflt.
  template <class T>
  T parsed(const std::string& k, T dflt, T (*parse)(std::string_view, std::string_view), const char* what);
  // Shared by bandwidth() and time(): `parse` reads a unit-suffixed value; `example` goes into the error;
  // zero_ok says whether 0 is allowed (else the value must be > 0).
  double with_unit(const std::string& k, double dflt, const std::string& dflt_text,
                   double (*parse)(std::string_view, std::string_view), const char* kind, const char* example,
                   bool zero_ok);
  const ParamMap& p_;
  std::string where_;
  std::set<std::string> seen_;
  mutable std::set<std::string> asked_;
  ParamMap used_;
};

}  // namespace fabricsim::workloads

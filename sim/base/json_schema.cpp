#include "sim/base/did_you_mean.hpp"
#include "sim/base/json_schema.hpp"

#include <algorithm>
#include <cmath>

#include "sim/base/error.hpp"

namespace fabricsim {

namespace {

// A schema that is a "$ref" to "#/$defs/<name>" is that definition (one level: the shipped schemas nest none).
const Json& resolved(const Json& s, const Json& root, const std::string& schema_name) {
  if (!s.is_object() || !s.contains("$ref")) return s;
  const std::string ref = s["$ref"].is_string() ? s["$ref"].get<std::string>() : "";
  const std::string prefix = "#/$defs/";
  if (ref.rfind(prefix, 0) == 0 && root.contains("$defs") && root["$defs"].contains(ref.substr(prefix.size())))
    return root["$defs"][ref.substr(prefix.size())];
  throw InputError(schema_name, "a $ref of the form #/$defs/NAME naming a definition (got '" + text_excerpt(ref) + "')");
}

bool has_type(const Json& v, const std::string& type) {
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "string") return v.is_string();
  if (type == "boolean") return v.is_boolean();
  if (type == "number") return v.is_number();
  if (type == "integer")  // JSON Schema: a number with no fractional part, 3.0 included
    return v.is_number_integer() || (v.is_number_float() && std::isfinite(v.get<double>()) && v.get<double>() == std::floor(v.get<double>()));
  if (type == "null") return v.is_null();
  return false;
}

std::string a_type(const std::string& type) {
  if (type == "object") return "an object";
  if (type == "array") return "an array";
  if (type == "integer") return "an integer";
  if (type == "boolean") return "true or false";
  return "a " + type;
}

// One value against its schema `s`. The recursion follows the schema's nesting (a value deeper than its schema
// describes is not descended into), and no document is deeper than kMaxJsonDepth.
void check(const Json& v, const Json& s_in, const Json& root, const JsonPath& at, const std::string& schema_name) {
  const Json& s = resolved(s_in, root, schema_name);
  if (!s.is_object()) return;  // `true` / {}: anything
  if (s.contains("type") && s["type"].is_string() && !has_type(v, s["type"].get<std::string>()))
    json_fail(at, "expected " + a_type(s["type"].get<std::string>()) + ", found " + json_excerpt(v) + " (" + schema_name + ")");
  if (s.contains("const") && v != s["const"])
    json_fail(at, "expected " + json_excerpt(s["const"]) + ", found " + json_excerpt(v) + " (" + schema_name + ")");
  if (s.contains("enum") && s["enum"].is_array() && std::find(s["enum"].begin(), s["enum"].end(), v) == s["enum"].end()) {
    std::string list;
    for (const auto& e : s["enum"]) list += (list.empty() ? "" : ", ") + json_excerpt(e);
    json_fail(at, "expected one of " + list + ", found " + json_excerpt(v) + " (" + schema_name + ")");
  }
  if (s.contains("minimum") && s["minimum"].is_number() && v.is_number() && !(v.get<double>() >= s["minimum"].get<double>()))
    json_fail(at, "expected a number >= " + json_excerpt(s["minimum"]) + ", found " + json_excerpt(v) + " (" + schema_name + ")");
  if (v.is_object()) {
    static const Json kNone = Json::object();
    const Json& props = s.contains("properties") ? s["properties"] : kNone;
    const Json* others = s.contains("additionalProperties") ? &s["additionalProperties"] : nullptr;
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (props.contains(it.key())) {
        check(*it, props[it.key()], root, at.child(it.key()), schema_name);
      } else if (others && others->is_boolean() && !others->get<bool>()) {
        std::string known;
        std::vector<std::string> names;
        for (auto p = props.begin(); p != props.end(); ++p) {
          known += (known.empty() ? "" : ", ") + p.key();
          names.push_back(p.key());
        }
        json_fail(at.child(it.key()), "unknown key '" + text_excerpt(it.key(), 40) + "'" + did_you_mean(it.key(), names) +
                                          " (known keys in " + schema_name + ": " + known + ")");
      } else if (others) {
        check(*it, *others, root, at.child(it.key()), schema_name);
      }
    }
  }
  if (v.is_array() && s.contains("items"))
    for (std::size_t i = 0; i < v.size(); ++i) check(v[i], s["items"], root, at.index(i), schema_name);
}

}  // namespace

void check_json_schema(const Json& doc, const Json& schema, const JsonPath& at, const std::string& schema_name) {
  check(doc, schema, schema, at, schema_name);
}

const std::vector<std::string>& json_schema_keywords() {
  static const std::vector<std::string> k = {"type",  "const", "enum",     "minimum", "properties", "additionalProperties",
                                             "items", "$ref",  "$defs",    "required", "title",     "description",
                                             "$schema", "$id"};
  return k;
}

}  // namespace fabricsim

// check_json_schema (sim/base/json_schema.hpp): the subset of JSON Schema fabricsim's result schema uses, each
// keyword applied with the JSON path of the first problem; and docs/result.schema.json uses no other keyword.
#include <doctest/doctest.h>

#include <algorithm>
#include <functional>
#include <string>

#include "sim/base/error.hpp"
#include "sim/base/json_schema.hpp"

using namespace fabricsim;

namespace {

const Json kSchema = Json::parse(R"({
  "type": "object", "additionalProperties": false, "required": ["n"],
  "properties": {
    "v": {"const": 1},
    "n": {"type": "integer", "minimum": 0},
    "k": {"enum": ["a", "b"]},
    "m": {"type": "object", "additionalProperties": {"type": "number"}},
    "free": {"type": "object"},
    "list": {"type": "array", "items": {"$ref": "#/$defs/item"}}
  },
  "$defs": {"item": {"type": "object", "additionalProperties": false, "properties": {"x": {"type": "string"}}}}
})");

std::string error_of(const std::string& doc) {
  try {
    check_json_schema(Json::parse(doc), kSchema, JsonPath{"d.json", ""}, "s.schema.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("check_json_schema: each keyword, the first problem at its JSON path") {
  CHECK(error_of(R"({"v": 1, "n": 3, "k": "b", "m": {"any": 2.5}, "free": {"z": [1]}, "list": [{"x": "s"}, {}]})") == "");
  CHECK(error_of(R"({"n": 3.0})") == "");  // an integer in JSON Schema's sense
  CHECK(error_of(R"({})") == "");          // `required` is not applied (see the header)
  CHECK(error_of(R"({"n": 1, "nn": 2})") == "d.json: /nn: unknown key 'nn' (known keys in s.schema.json: free, k, list, m, n, v)");
  CHECK(error_of(R"({"list": [{"x": "s"}, {"y": 1}]})") == "d.json: /list/1/y: unknown key 'y' (known keys in s.schema.json: x)");
  CHECK(error_of(R"({"list": [{"x": 5}]})") == "d.json: /list/0/x: expected a string, found 5 (s.schema.json)");
  CHECK(error_of(R"({"n": 1.5})") == "d.json: /n: expected an integer, found 1.5 (s.schema.json)");
  CHECK(error_of(R"({"n": -1})") == "d.json: /n: expected a number >= 0, found -1 (s.schema.json)");
  CHECK(error_of(R"({"v": 2})") == "d.json: /v: expected 1, found 2 (s.schema.json)");
  CHECK(error_of(R"({"k": "c"})") == "d.json: /k: expected one of \"a\", \"b\", found \"c\" (s.schema.json)");
  CHECK(error_of(R"({"m": {"q": "x"}})") == "d.json: /m/q: expected a number, found \"x\" (s.schema.json)");
  CHECK(error_of(R"({"list": {}})") == "d.json: /list: expected an array, found {} (s.schema.json)");
}

TEST_CASE("docs/result.schema.json uses only keywords check_json_schema applies or ignores on purpose") {
  const Json schema = load_json_file(std::string(FABRICSIM_SOURCE_DIR) + "/docs/result.schema.json");
  const auto& known = json_schema_keywords();
  std::function<void(const Json&, const std::string&)> walk = [&](const Json& s, const std::string& at) {
    if (!s.is_object()) return;
    for (auto it = s.begin(); it != s.end(); ++it) {
      CAPTURE(at);
      CHECK_MESSAGE(std::find(known.begin(), known.end(), it.key()) != known.end(), it.key());
      if (it.key() == "properties" || it.key() == "$defs")
        for (auto p = it->begin(); p != it->end(); ++p) walk(*p, at + "/" + it.key() + "/" + p.key());
      if (it.key() == "items" || it.key() == "additionalProperties") walk(*it, at + "/" + it.key());
    }
  };
  walk(schema, "");
}

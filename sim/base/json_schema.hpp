#pragma once
// Checks a JSON document against one of fabricsim's own JSON Schemas (docs/*.schema.json), so that the schema
// file is the one statement of what the format allows. The subset of JSON Schema (draft 2020-12) that
// docs/result.schema.json uses is applied: type, const, enum, minimum, properties, additionalProperties (false, or a schema for the
// other keys), items and $ref to "#/$defs/...". `required` is not applied: a format keeps its schema_version
// when keys are added (docs/outputs.md), so a file written before a key existed lacks it and is still that
// format; a reader requires the keys it reads itself. Annotations (title, description, $schema, $id) are
// ignored. Any other keyword is not applied (tests/base/test_json_schema.cpp checks the result schema uses none).
#include <string>
#include <vector>

#include "sim/base/json_reader.hpp"

namespace fabricsim {

// The first problem in `doc`, in document order, raises InputError at its JSON path: a key the object's schema
// does not allow ("unknown key 'x' (known keys in <schema_name>: a, b)"), a value of another type, a value that
// is not the schema's const or one of its enum, a number below its minimum.
void check_json_schema(const Json& doc, const Json& schema, const JsonPath& at, const std::string& schema_name);

// The keywords check_json_schema applies or deliberately ignores (for the tests that check a schema uses no
// other).
const std::vector<std::string>& json_schema_keywords();

}  // namespace fabricsim

// The JSON Schema subset validator (support/json_schema.h): each keyword it checks accepts what
// it should and refuses what it should, and a schema outside the subset is refused when loaded.
#include <stdexcept>
#include <string>

#include <catch2/catch.hpp>

#include "support/json_schema.h"

using epochcast::test::JsonSchema;
using nlohmann::json;

namespace {

// Whether any error line holds `text`.
bool mentions(const std::vector<std::string>& errors, const std::string& text) {
  for (const std::string& line : errors) {
    if (line.find(text) != std::string::npos) return true;
  }
  return false;
}

// A small scenario-like schema that uses most of the subset.
JsonSchema machine_like() {
  return JsonSchema(json::parse(R"({
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "a test schema",
    "type": "object",
    "required": ["kind", "gpus", "host"],
    "properties": {
      "kind": {"const": "machine"},
      "gpus": {"type": "integer", "minimum": 1, "maximum": 64},
      "share": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
      "shape": {"enum": ["none", "pairs", "nvswitch"]},
      "name": {"type": "string", "minLength": 1, "pattern": "^[^ ]+$"},
      "host": {"$ref": "#/$defs/host"},
      "batches": {"type": "array", "minItems": 1, "maxItems": 3, "items": {"type": "integer"}}
    },
    "additionalProperties": false,
    "$defs": {
      "host": {
        "type": "object",
        "required": ["cores"],
        "properties": {"cores": {"type": "integer", "minimum": 1}},
        "additionalProperties": false
      }
    }
  })"));
}

json valid_machine() {
  return json::parse(R"({"kind": "machine", "gpus": 8, "host": {"cores": 16}})");
}

}  // namespace

TEST_CASE("a document that meets every keyword is accepted") {
  const JsonSchema schema = machine_like();
  json document = valid_machine();
  document["share"] = 0.5;
  document["shape"] = "pairs";
  document["name"] = "box";
  document["batches"] = {32, 64};
  CHECK(schema.errors(document).empty());
}

TEST_CASE("a missing required key is refused and named") {
  json document = valid_machine();
  document.erase("gpus");
  const std::vector<std::string> errors = machine_like().errors(document);
  REQUIRE(errors.size() == 1);
  CHECK(errors[0] == "(root): missing the required key 'gpus'");
}

TEST_CASE("a required key missing in a referenced definition is refused at its place") {
  json document = valid_machine();
  document["host"] = json::object();
  CHECK(machine_like().errors(document) ==
        std::vector<std::string>{"/host: missing the required key 'cores'"});
}

TEST_CASE("a value of the wrong type is refused") {
  const JsonSchema schema = machine_like();
  json document = valid_machine();
  document["gpus"] = "8";
  CHECK(mentions(schema.errors(document), "/gpus: expected integer, got the string \"8\""));
  document = valid_machine();
  document["host"] = json::array();
  CHECK(mentions(schema.errors(document), "/host: expected object"));
  document = valid_machine();
  document["gpus"] = true;
  CHECK_FALSE(schema.accepts(document));
}

TEST_CASE("an integer is a number without a fraction") {
  const JsonSchema schema = machine_like();
  json document = valid_machine();
  document["gpus"] = 8.0;
  CHECK(schema.accepts(document));
  document["gpus"] = 8.5;
  CHECK(mentions(schema.errors(document), "/gpus: expected integer, got 8.5"));
  CHECK(JsonSchema(json{{"type", "number"}}).accepts(json(7)));
}

TEST_CASE("an unknown key is refused where additionalProperties is false") {
  const JsonSchema schema = machine_like();
  json document = valid_machine();
  document["gpu_count"] = 8;
  CHECK(schema.errors(document) == std::vector<std::string>{"/gpu_count: unknown key"});
  document = valid_machine();
  document["host"]["threads"] = 32;
  CHECK(schema.errors(document) == std::vector<std::string>{"/host/threads: unknown key"});
}

TEST_CASE("additionalProperties given as a schema checks every other key's value") {
  const JsonSchema schema(json::parse(
      R"({"type": "object", "additionalProperties": {"type": "number", "minimum": 0}})"));
  CHECK(schema.accepts(json{{"a", 1}, {"b", 2.5}}));
  CHECK(schema.errors(json{{"a", 1}, {"b", -1}}) ==
        std::vector<std::string>{"/b: -1 is below the minimum 0"});
}

TEST_CASE("a number outside its range is refused") {
  const JsonSchema schema = machine_like();
  json document = valid_machine();
  document["gpus"] = 0;
  CHECK(mentions(schema.errors(document), "/gpus: 0 is below the minimum 1"));
  document["gpus"] = 65;
  CHECK(mentions(schema.errors(document), "/gpus: 65 is above the maximum 64"));
  document["gpus"] = 64;
  CHECK(schema.accepts(document));
  for (double share : {0.0, 1.0, -0.5}) {
    document["share"] = share;
    CHECK_FALSE(schema.accepts(document));
  }
  document["share"] = 1e-9;
  CHECK(schema.accepts(document));
}

TEST_CASE("integer bounds are compared exactly beyond the precision of a double") {
  // 2^62 and 2^62 + 1 are the same double.
  const JsonSchema schema(
      json::parse(R"({"type": "integer", "minimum": 0, "maximum": 4611686018427387904})"));
  CHECK(schema.accepts(json(std::int64_t{4611686018427387904})));
  CHECK_FALSE(schema.accepts(json(std::int64_t{4611686018427387905})));
  CHECK_FALSE(schema.accepts(json(std::uint64_t{18446744073709551615u})));
  CHECK_FALSE(schema.accepts(json(std::int64_t{-1})));
  CHECK(schema.accepts(json::parse("4611686018427387903")));
}

TEST_CASE("a value outside an enum or unlike a const is refused") {
  const JsonSchema schema = machine_like();
  json document = valid_machine();
  document["shape"] = "cube";
  CHECK(mentions(schema.errors(document), "/shape: the string \"cube\" is not one of"));
  document = valid_machine();
  document["kind"] = "scenario";
  CHECK(mentions(schema.errors(document), "/kind: expected \"machine\""));
}

TEST_CASE("lists are checked item by item and by their length") {
  const JsonSchema schema = machine_like();
  json document = valid_machine();
  document["batches"] = json::array();
  CHECK(mentions(schema.errors(document), "/batches: expected at least 1 items, got 0"));
  document["batches"] = {1, 2, 3, 4};
  CHECK(mentions(schema.errors(document), "/batches: expected at most 3 items, got 4"));
  document["batches"] = {1, "two"};
  CHECK(mentions(schema.errors(document), "/batches/1: expected integer"));
}

TEST_CASE("strings are checked by their length in characters and by a pattern") {
  const JsonSchema schema = machine_like();
  json document = valid_machine();
  document["name"] = "";
  CHECK(mentions(schema.errors(document), "/name: the string is shorter than 1 characters"));
  document["name"] = "two words";
  CHECK(mentions(schema.errors(document), "does not match the pattern"));
  document["name"] = "\xc3\xa9";  // one character in two bytes
  CHECK(JsonSchema(json::parse(R"({"minLength": 2})")).errors(document["name"]).size() == 1);
}

TEST_CASE("oneOf needs exactly one alternative and anyOf at least one") {
  const JsonSchema one(
      json::parse(R"({"oneOf": [{"type": "integer"}, {"type": "number", "minimum": 10}]})"));
  CHECK(one.accepts(json(3)));
  CHECK(one.accepts(json(10.5)));
  CHECK(mentions(one.errors(json(12)), "matches 2 of the alternatives"));
  CHECK(mentions(one.errors(json("x")), "matches none of the 2 alternatives (oneOf)"));
  const JsonSchema any(
      json::parse(R"({"anyOf": [{"type": "integer"}, {"type": "number", "minimum": 10}]})"));
  CHECK(any.accepts(json(12)));
  CHECK(mentions(any.errors(json(2.5)), "matches none of the 2 alternatives (anyOf)"));
}

TEST_CASE("if then else applies the branch the condition picks") {
  const JsonSchema schema(json::parse(R"({
    "type": "object",
    "if": {"properties": {"status": {"const": "ok"}}},
    "then": {"required": ["epoch_s"]},
    "else": {"not": {"required": ["epoch_s"]}}
  })"));
  CHECK(schema.accepts(json{{"status", "ok"}, {"epoch_s", 1.5}}));
  CHECK(mentions(schema.errors(json{{"status", "ok"}}), "missing the required key 'epoch_s'"));
  CHECK(schema.accepts(json{{"status", "oom"}}));
  CHECK(mentions(schema.errors(json{{"status", "oom"}, {"epoch_s", 1.5}}),
                 "matches a schema it must not (not)"));
}

TEST_CASE("allOf and propertyNames and minProperties are checked") {
  const JsonSchema schema(json::parse(R"({
    "type": "object",
    "minProperties": 1,
    "propertyNames": {"enum": ["pascal", "volta"]},
    "allOf": [{"required": ["pascal"]}, {"additionalProperties": {"type": "number"}}]
  })"));
  CHECK(schema.accepts(json{{"pascal", 1}}));
  CHECK(mentions(schema.errors(json::object()), "expected at least 1 keys, got 0"));
  CHECK(mentions(schema.errors(json{{"pascal", 1}, {"amprere", 2}}),
                 "/amprere: the string \"amprere\" is not one of"));
  CHECK(mentions(schema.errors(json{{"volta", 1}}), "missing the required key 'pascal'"));
}

TEST_CASE("a reference may lead back to its own definition for nested lists") {
  const JsonSchema schema(json::parse(R"({
    "$ref": "#/$defs/layers",
    "$defs": {
      "layers": {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/layer"}},
      "layer": {"oneOf": [
        {"enum": ["relu"]},
        {"type": "object", "required": ["type"], "additionalProperties": false,
         "properties": {"type": {"const": "residual"}, "body": {"$ref": "#/$defs/layers"}}}
      ]}
    }
  })"));
  CHECK(schema.accepts(json::parse(R"(["relu", {"type": "residual", "body": ["relu"]}])")));
  const std::vector<std::string> errors =
      schema.errors(json::parse(R"(["relu", {"type": "residual", "body": ["tanh"]}])"));
  CHECK(mentions(errors, "/1: matches none of the 2 alternatives (oneOf)"));
  CHECK(mentions(errors, "closest: /1/body/0"));
}

TEST_CASE("boolean schemas accept everything or nothing") {
  CHECK(JsonSchema(json(true)).accepts(json::parse(R"({"a": [1, 2]})")));
  CHECK_FALSE(JsonSchema(json(false)).accepts(json(1)));
}

TEST_CASE("a schema outside the subset is refused when it is loaded") {
  CHECK_THROWS_WITH(JsonSchema(json::parse(R"({"patternProperties": {"^x": {}}})")),
                    Catch::Contains("the keyword 'patternProperties' is outside the subset"));
  CHECK_THROWS_WITH(
      JsonSchema(json::parse(R"({"properties": {"a": {"unevaluatedProperties": false}}})")),
      Catch::Contains("schema /properties/a/unevaluatedProperties"));
  CHECK_THROWS_WITH(JsonSchema(json::parse(R"({"type": "float"})")),
                    Catch::Contains("unknown type \"float\""));
  CHECK_THROWS_WITH(JsonSchema(json::parse(R"({"$ref": "#/$defs/missing"})")),
                    Catch::Contains("resolves to nothing"));
  CHECK_THROWS_WITH(JsonSchema(json::parse(R"({"$ref": "other.schema.json#/x"})")),
                    Catch::Contains("is not within this document"));
  CHECK_THROWS_WITH(JsonSchema(json::parse(R"({"pattern": "(unclosed"})")),
                    Catch::Contains("pattern does not compile"));
  CHECK_THROWS_WITH(JsonSchema(json::parse(R"({"required": "name"})")),
                    Catch::Contains("required is an array of names"));
  CHECK_THROWS_AS(JsonSchema(json(3)), std::invalid_argument);
}

TEST_CASE("annotations are read and never checked") {
  const JsonSchema schema(json::parse(R"({
    "$schema": "https://json-schema.org/draft/2020-12/schema", "$id": "x", "$comment": "c",
    "title": "t", "description": "d", "default": 1, "examples": [2], "format": "date-time",
    "deprecated": false, "type": "string"
  })"));
  CHECK(schema.accepts(json("not a date")));
  CHECK_FALSE(schema.accepts(json(1)));
}

// A JSON Schema (draft 2020-12) validator for the subset the schemas in schemas/ use, so that
// the tests check every bundled input and every golden output against them without a tool
// outside the build. A schema that uses any other keyword is refused when it is loaded, never
// half-checked: what the validator does not know cannot pass unnoticed.
//
// Keywords checked: type, enum, const; properties, required, additionalProperties,
// propertyNames, minProperties; items, minItems, maxItems; minimum, maximum, exclusiveMinimum,
// exclusiveMaximum; minLength, pattern (ECMAScript, std::regex, searched as the specification
// says); allOf, anyOf, oneOf, not, if/then/else; $ref to the same document ("#", "#/$defs/x",
// any JSON pointer into it). Annotations, read and ignored: $schema, $id, $comment, $defs, title,
// description, default, examples, format, deprecated. Integers are numbers without a fraction
// (2020-12: 1.0 is an integer).
#pragma once

#include <filesystem>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace epochcast::test {

class JsonSchema {
 public:
  // Raises std::invalid_argument naming the place (a JSON pointer into the schema) of a keyword
  // outside the subset, a keyword's value of the wrong kind, a $ref that resolves to nothing,
  // or a pattern std::regex cannot compile.
  explicit JsonSchema(nlohmann::json schema);
  // A schema file; raises std::invalid_argument when it cannot be read or is not JSON.
  static JsonSchema load(const std::filesystem::path& file);

  // Every violation of `document`, one line each: "<JSON pointer>: <what is wrong>" (the
  // pointer is empty for the root). Empty when the document is valid.
  std::vector<std::string> errors(const nlohmann::json& document) const;
  bool accepts(const nlohmann::json& document) const { return errors(document).empty(); }

  const nlohmann::json& root() const { return root_; }

 private:
  void check(const nlohmann::json& schema, const std::string& where);
  // Whether `value` meets `schema`. With `errors`, every violation is added to them (each
  // pointer built); without, the first one ends the check, nothing built (oneOf, anyOf, not and
  // if only need the answer, and ask it of many alternatives).
  bool validate(const nlohmann::json& schema, const nlohmann::json& value,
                const std::string& pointer, std::vector<std::string>* errors, int depth) const;
  const nlohmann::json& resolve(const std::string& reference, const std::string& where) const;

  nlohmann::json root_;
  // Every `pattern` of the schema, compiled once (compiling one costs more than checking a
  // whole document without it).
  std::map<std::string, std::regex> patterns_;
};

}  // namespace epochcast::test

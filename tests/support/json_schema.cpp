// The JSON Schema subset of json_schema.h: the schema checked once when loaded, documents
// checked against it keyword by keyword.
#include "support/json_schema.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <set>
#include <stdexcept>
#include <string_view>

namespace epochcast::test {

namespace {

using Json = nlohmann::json;

// Keywords that only describe: read, never checked.
const std::set<std::string, std::less<>> kAnnotations = {
    "$schema",     "$id",     "$comment", "$defs",  "title",
    "description", "default", "examples", "format", "deprecated"};

// Keywords whose value is one schema, or a list or map of schemas.
const std::set<std::string, std::less<>> kOneSchema = {
    "additionalProperties", "propertyNames", "items", "not", "if", "then", "else"};
const std::set<std::string, std::less<>> kSchemaLists = {"allOf", "anyOf", "oneOf"};

const std::set<std::string, std::less<>> kNumbers = {"minimum", "maximum", "exclusiveMinimum",
                                                     "exclusiveMaximum"};
const std::set<std::string, std::less<>> kCounts = {"minItems", "maxItems", "minProperties",
                                                    "minLength"};
const std::set<std::string, std::less<>> kTypeNames = {"object",  "array",   "string", "number",
                                                       "integer", "boolean", "null"};

std::string escaped(const std::string& key) {
  std::string out;
  for (char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

std::string child(const std::string& pointer, const std::string& key) {
  return pointer + "/" + escaped(key);
}

std::string at(const std::string& pointer) {
  return pointer.empty() ? std::string("(root)") : pointer;
}

[[noreturn]] void refuse(const std::string& where, const std::string& problem) {
  throw std::invalid_argument("schema " + at(where) + ": " + problem);
}

bool is_integer(const Json& value) {
  if (value.is_number_integer()) return true;
  if (!value.is_number_float()) return false;
  const double v = value.get<double>();
  return std::isfinite(v) && std::floor(v) == v;
}

bool has_type(const Json& value, std::string_view type) {
  if (type == "object") return value.is_object();
  if (type == "array") return value.is_array();
  if (type == "string") return value.is_string();
  if (type == "number") return value.is_number();
  if (type == "integer") return is_integer(value);
  if (type == "boolean") return value.is_boolean();
  return value.is_null();
}

std::string describe(const Json& value) {
  if (value.is_object()) return "an object";
  if (value.is_array()) return "an array";
  if (value.is_string()) return "the string " + value.dump();
  if (value.is_boolean()) return value.dump();
  if (value.is_null()) return "null";
  return value.dump();
}

// -1, 0 or 1 as the number `value` is below, at or above the number `bound`: exactly when both
// are integers (2^62 + 1 is above 2^62, which doubles cannot tell), else as doubles.
int compare(const Json& value, const Json& bound) {
  auto order = [](auto a, auto b) { return a < b ? -1 : (b < a ? 1 : 0); };
  if (value.is_number_integer() && bound.is_number_integer()) {
    const bool v_unsigned = value.is_number_unsigned(), b_unsigned = bound.is_number_unsigned();
    if (v_unsigned && b_unsigned)
      return order(value.get<std::uint64_t>(), bound.get<std::uint64_t>());
    if (!v_unsigned && !b_unsigned)
      return order(value.get<std::int64_t>(), bound.get<std::int64_t>());
    // One unsigned (a value above what int64 holds, or parsed as such), one signed.
    if (v_unsigned) {
      const auto b = bound.get<std::int64_t>();
      return b < 0 ? 1 : order(value.get<std::uint64_t>(), static_cast<std::uint64_t>(b));
    }
    const auto v = value.get<std::int64_t>();
    return v < 0 ? -1 : order(static_cast<std::uint64_t>(v), bound.get<std::uint64_t>());
  }
  return order(value.get<double>(), bound.get<double>());
}

// The characters of a UTF-8 string (its code points), as minLength counts them.
std::size_t code_points(const std::string& text) {
  return static_cast<std::size_t>(std::count_if(text.begin(), text.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  }));
}

}  // namespace

JsonSchema::JsonSchema(Json schema) : root_(std::move(schema)) {
  check(root_, "");
}

JsonSchema JsonSchema::load(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) throw std::invalid_argument("cannot read the schema " + file.string());
  try {
    return JsonSchema(Json::parse(in));
  } catch (const Json::exception& error) {
    throw std::invalid_argument(file.string() + ": " + error.what());
  }
}

const Json& JsonSchema::resolve(const std::string& reference, const std::string& where) const {
  if (reference.empty() || reference.front() != '#') {
    refuse(where, "$ref '" + reference + "' is not within this document (expected '#...')");
  }
  try {
    const Json::json_pointer pointer(reference.substr(1));
    if (!root_.contains(pointer)) refuse(where, "$ref '" + reference + "' resolves to nothing");
    return root_.at(pointer);
  } catch (const Json::exception& error) {
    refuse(where, "$ref '" + reference + "': " + error.what());
  }
}

void JsonSchema::check(const Json& schema, const std::string& where) {
  if (schema.is_boolean()) return;
  if (!schema.is_object()) refuse(where, "a schema is an object or a boolean");
  for (const auto& [keyword, value] : schema.items()) {
    const std::string place = child(where, keyword);
    if (kAnnotations.count(keyword) != 0) {
      if (keyword == "$defs") {
        if (!value.is_object()) refuse(place, "$defs is an object of schemas");
        for (const auto& [name, definition] : value.items())
          check(definition, child(place, name));
      }
    } else if (keyword == "type") {
      const Json names = value.is_array() ? value : Json::array({value});
      if (names.empty()) refuse(place, "type names no type");
      for (const Json& name : names) {
        if (!name.is_string() || kTypeNames.count(name.get<std::string>()) == 0)
          refuse(place, "unknown type " + name.dump());
      }
    } else if (keyword == "enum") {
      if (!value.is_array() || value.empty()) refuse(place, "enum is a non-empty array");
    } else if (keyword == "const") {
      // Any value.
    } else if (keyword == "properties") {
      if (!value.is_object()) refuse(place, "properties is an object of schemas");
      for (const auto& [name, property] : value.items())
        check(property, child(place, name));
    } else if (keyword == "required") {
      if (!value.is_array()) refuse(place, "required is an array of names");
      for (const Json& name : value) {
        if (!name.is_string()) refuse(place, "required is an array of names");
      }
    } else if (kOneSchema.count(keyword) != 0) {
      check(value, place);
    } else if (kSchemaLists.count(keyword) != 0) {
      if (!value.is_array() || value.empty()) refuse(place, keyword + " is a non-empty array");
      for (std::size_t i = 0; i < value.size(); ++i)
        check(value[i], child(place, std::to_string(i)));
    } else if (kNumbers.count(keyword) != 0) {
      if (!value.is_number()) refuse(place, keyword + " is a number");
    } else if (kCounts.count(keyword) != 0) {
      if (!value.is_number_unsigned() && !(value.is_number_integer() && value.get<int>() >= 0))
        refuse(place, keyword + " is a non-negative integer");
    } else if (keyword == "pattern") {
      if (!value.is_string()) refuse(place, "pattern is a string");
      try {
        patterns_.emplace(value.get<std::string>(),
                          std::regex(value.get<std::string>(), std::regex::ECMAScript));
      } catch (const std::regex_error& error) {
        refuse(place, std::string("pattern does not compile: ") + error.what());
      }
    } else if (keyword == "$ref") {
      if (!value.is_string()) refuse(place, "$ref is a string");
      resolve(value.get<std::string>(), place);
    } else {
      refuse(place, "the keyword '" + keyword + "' is outside the subset this validator checks");
    }
  }
}

std::vector<std::string> JsonSchema::errors(const Json& document) const {
  std::vector<std::string> out;
  validate(root_, document, "", &out, 0);
  return out;
}

bool JsonSchema::validate(const Json& schema, const Json& value, const std::string& pointer,
                          std::vector<std::string>* errors, int depth) const {
  // A $ref may lead back to itself on the same value; no schema of this project nests so deep.
  constexpr int kMaxDepth = 200;
  bool valid = true;
  // Records a violation; without `errors` (a yes-or-no question) the first one is the answer.
  auto fail = [&](const std::string& problem) {
    valid = false;
    if (errors) errors->push_back(at(pointer) + ": " + problem);
    return errors == nullptr;
  };
  if (depth > kMaxDepth) {
    fail("the schema recurses without end");
    return false;
  }
  if (schema.is_boolean()) {
    if (!schema.get<bool>()) fail("no value is allowed here");
    return valid;
  }
  // Whether `sub` accepts `value` itself (for anyOf, oneOf, not, if): yes or no, no messages.
  auto holds = [&](const Json& sub) { return validate(sub, value, pointer, nullptr, depth + 1); };
  // A part of `value` checked against `sub`, its errors added to this one's.
  auto nested = [&](const Json& sub, const Json& part, const std::string& key) {
    if (validate(sub, part, errors ? child(pointer, key) : std::string(), errors, depth + 1))
      return false;
    valid = false;
    return errors == nullptr;
  };

  if (auto ref = schema.find("$ref"); ref != schema.end()) {
    if (!validate(resolve(ref->get<std::string>(), pointer), value, pointer, errors, depth + 1)) {
      valid = false;
      if (!errors) return false;
    }
  }

  if (auto type = schema.find("type"); type != schema.end()) {
    const bool matches =
        type->is_array() ? std::any_of(type->begin(), type->end(),
                                       [&](const Json& name) {
                                         return has_type(value, name.get_ref<const std::string&>());
                                       })
                         : has_type(value, type->get_ref<const std::string&>());
    if (!matches) {
      std::string wanted;
      for (const Json& name : type->is_array() ? *type : Json::array({*type}))
        wanted += (wanted.empty() ? "" : " or ") + name.get<std::string>();
      fail("expected " + wanted + ", got " + describe(value));
      return false;  // the other keywords would only repeat it
    }
  }
  if (auto choices = schema.find("enum"); choices != schema.end()) {
    if (std::find(choices->begin(), choices->end(), value) == choices->end() &&
        fail(describe(value) + " is not one of " + choices->dump()))
      return false;
  }
  if (auto constant = schema.find("const"); constant != schema.end()) {
    if (*constant != value && fail("expected " + constant->dump() + ", got " + describe(value)))
      return false;
  }

  if (value.is_number()) {
    if (auto m = schema.find("minimum"); m != schema.end() && compare(value, *m) < 0) {
      if (fail(value.dump() + " is below the minimum " + m->dump())) return false;
    }
    if (auto m = schema.find("maximum"); m != schema.end() && compare(value, *m) > 0) {
      if (fail(value.dump() + " is above the maximum " + m->dump())) return false;
    }
    if (auto m = schema.find("exclusiveMinimum"); m != schema.end() && compare(value, *m) <= 0) {
      if (fail(value.dump() + " is not above " + m->dump())) return false;
    }
    if (auto m = schema.find("exclusiveMaximum"); m != schema.end() && compare(value, *m) >= 0) {
      if (fail(value.dump() + " is not below " + m->dump())) return false;
    }
  }

  if (value.is_string()) {
    const std::string& text = value.get_ref<const std::string&>();
    if (auto m = schema.find("minLength");
        m != schema.end() && code_points(text) < m->get<std::size_t>()) {
      if (fail("the string is shorter than " + m->dump() + " characters")) return false;
    }
    if (auto p = schema.find("pattern");
        p != schema.end() && !std::regex_search(text, patterns_.at(p->get<std::string>()))) {
      if (fail(describe(value) + " does not match the pattern " + p->dump())) return false;
    }
  }

  if (value.is_array()) {
    if (auto m = schema.find("minItems");
        m != schema.end() && value.size() < m->get<std::size_t>()) {
      if (fail("expected at least " + m->dump() + " items, got " + std::to_string(value.size())))
        return false;
    }
    if (auto m = schema.find("maxItems");
        m != schema.end() && value.size() > m->get<std::size_t>()) {
      if (fail("expected at most " + m->dump() + " items, got " + std::to_string(value.size())))
        return false;
    }
    if (auto items = schema.find("items"); items != schema.end()) {
      for (std::size_t i = 0; i < value.size(); ++i) {
        if (nested(*items, value[i], std::to_string(i))) return false;
      }
    }
  }

  if (value.is_object()) {
    if (auto m = schema.find("minProperties");
        m != schema.end() && value.size() < m->get<std::size_t>()) {
      if (fail("expected at least " + m->dump() + " keys, got " + std::to_string(value.size())))
        return false;
    }
    if (auto required = schema.find("required"); required != schema.end()) {
      for (const Json& name : *required) {
        const std::string& key = name.get_ref<const std::string&>();
        if (!value.contains(key) && fail("missing the required key '" + key + "'")) return false;
      }
    }
    const auto properties = schema.find("properties");
    const auto additional = schema.find("additionalProperties");
    const auto names = schema.find("propertyNames");
    for (const auto& [key, item] : value.items()) {
      if (names != schema.end() && nested(*names, Json(key), key)) return false;
      const auto property =
          properties != schema.end() ? properties->find(key) : Json::const_iterator();
      if (properties != schema.end() && property != properties->end()) {
        if (nested(*property, item, key)) return false;
      } else if (additional != schema.end()) {
        if (additional->is_boolean() && !additional->get<bool>()) {
          valid = false;
          if (!errors) return false;
          errors->push_back(at(child(pointer, key)) + ": unknown key");
        } else if (nested(*additional, item, key)) {
          return false;
        }
      }
    }
  }

  if (auto all = schema.find("allOf"); all != schema.end()) {
    for (const Json& sub : *all) {
      if (!validate(sub, value, pointer, errors, depth + 1)) {
        valid = false;
        if (!errors) return false;
      }
    }
  }
  // Of the alternatives none matches, the one that came closest explains why: the one whose
  // errors all lie deepest in the value (it matched the most around them: a layer's `type`),
  // then the one with the fewest.
  auto closest = [&](const Json& alternatives) {
    auto nesting = [](const std::vector<std::string>& found) {
      std::size_t shallowest = std::string::npos;
      for (const std::string& line : found) {
        if (line.starts_with(" ")) continue;
        const std::string place = line.starts_with("(root)") ? "" : line.substr(0, line.find(": "));
        shallowest = std::min<std::size_t>(
            shallowest, static_cast<std::size_t>(std::count(place.begin(), place.end(), '/')));
      }
      return shallowest == std::string::npos ? 0 : shallowest;
    };
    std::vector<std::string> best;
    std::size_t best_depth = 0;
    for (const Json& sub : alternatives) {
      std::vector<std::string> found;
      validate(sub, value, pointer, &found, depth + 1);
      const std::size_t d = nesting(found);
      if (best.empty() || d > best_depth || (d == best_depth && found.size() < best.size())) {
        best = std::move(found);
        best_depth = d;
      }
    }
    for (std::string& line : best)
      errors->push_back("  closest: " + line);
  };
  if (auto any = schema.find("anyOf"); any != schema.end()) {
    if (std::none_of(any->begin(), any->end(), holds)) {
      if (fail("matches none of the " + std::to_string(any->size()) + " alternatives (anyOf)"))
        return false;
      closest(*any);
    }
  }
  if (auto one_of = schema.find("oneOf"); one_of != schema.end()) {
    const auto matching = std::count_if(one_of->begin(), one_of->end(), holds);
    if (matching == 0) {
      if (fail("matches none of the " + std::to_string(one_of->size()) + " alternatives (oneOf)"))
        return false;
      closest(*one_of);
    } else if (matching > 1) {
      if (fail("matches " + std::to_string(matching) +
               " of the alternatives, not exactly one (oneOf)"))
        return false;
    }
  }
  if (auto negated = schema.find("not"); negated != schema.end()) {
    if (holds(*negated) && fail("matches a schema it must not (not)")) return false;
  }
  if (auto condition = schema.find("if"); condition != schema.end()) {
    const auto branch = schema.find(holds(*condition) ? "then" : "else");
    if (branch != schema.end() && !validate(*branch, value, pointer, errors, depth + 1)) {
      valid = false;
    }
  }
  return valid;
}

}  // namespace epochcast::test

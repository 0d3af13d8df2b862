// YAML to JSON with the strict reader's scalar types.
#include "support/yaml_json.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <string>

namespace epochcast::test {

namespace {

nlohmann::json plain_scalar(const std::string& text) {
  const char* begin = text.data();
  const char* end = begin + text.size();
  std::int64_t integer = 0;
  if (auto [stop, error] = std::from_chars(begin, end, integer);
      error == std::errc() && stop == end) {
    return integer;
  }
  double number = 0;
  if (auto [stop, error] = std::from_chars(begin, end, number);
      error == std::errc() && stop == end && std::isfinite(number)) {
    return number;
  }
  if (text == "true") return true;
  if (text == "false") return false;
  return text;
}

}  // namespace

nlohmann::json yaml_to_json(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map: {
      nlohmann::json out = nlohmann::json::object();
      for (auto it = node.begin(); it != node.end(); ++it)
        out[it->first.Scalar()] = yaml_to_json(it->second);
      return out;
    }
    case YAML::NodeType::Sequence: {
      nlohmann::json out = nlohmann::json::array();
      for (const YAML::Node& item : node)
        out.push_back(yaml_to_json(item));
      return out;
    }
    case YAML::NodeType::Scalar:
      // yaml-cpp tags a quoted scalar "!" and a plain one "?".
      return node.Tag() == "!" ? nlohmann::json(node.Scalar()) : plain_scalar(node.Scalar());
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      break;
  }
  return nullptr;
}

nlohmann::json load_yaml_as_json(const std::filesystem::path& file) {
  return yaml_to_json(YAML::LoadFile(file.string()));
}

}  // namespace epochcast::test

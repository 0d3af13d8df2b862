// YAML documents as JSON, for checking them against the schemas in schemas/. Scalars are typed
// as epochcast's strict reader types them (core/yaml/strict_yaml.cpp) and as YAML 1.2's core
// schema, which editors use, mostly does: a quoted scalar is a string; a plain one is an integer
// when it reads whole as a 64-bit integer (std::from_chars), else a number when it reads whole
// as a finite double, `true`/`false` a boolean, empty, `~` or `null` null, anything else a string.
#pragma once

#include <filesystem>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

namespace epochcast::test {

nlohmann::json yaml_to_json(const YAML::Node& node);
// A YAML (or JSON) file as JSON; raises YAML::Exception when it is not YAML.
nlohmann::json load_yaml_as_json(const std::filesystem::path& file);

}  // namespace epochcast::test

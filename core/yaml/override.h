// A `--set PATH=VALUE` override of a document's value, apart from the YAML reader (strict_yaml.h)
// so that the specs that carry overrides do not bring yaml-cpp into every file that reads them.
#pragma once

#include <string>
#include <string_view>

namespace epochcast::yaml {

// `--set PATH=VALUE` from the command line: replaces (or creates) the value at PATH before the
// loaders read the document. PATH is dotted map keys, each optionally followed by list indices
// ("sweep.batch[0]"); VALUE is YAML text ("fp32", "[32, 64]", "{workers: 4}").
struct Override {
  std::string path;
  std::string value;
  // How the user wrote it, for error messages; empty means "--set PATH=VALUE". Options that
  // are shorthands for an override (--gpus 1,2) name themselves here.
  std::string origin;

  // "PATH=VALUE".
  std::string text() const { return path + "=" + value; }
  // Where errors about this override point: `origin`, or "--set PATH=VALUE", its middle left
  // out when long (a --batch list of 20,000 sizes would otherwise fill the terminal).
  std::string where() const;
};

// Splits "PATH=VALUE" at the first '='. Raises InputError (at "--set TEXT") when there is no '=',
// the path is empty, a path segment is empty ("a..b") or a list index is malformed.
Override parse_override(std::string_view text);

}  // namespace epochcast::yaml

// Every epochcast YAML file says what it is (`kind: model`, ...), so passing one kind of file
// where another is expected fails with a message that says so, not with a list of odd keys.
#pragma once

#include <string_view>

#include "core/enum_name.h"

namespace epochcast {

namespace yaml {
class Node;
}

enum class FileKind { model, gpu_catalogue, machine, scenario, profile };

inline constexpr std::string_view kFileKindNames[] = {"model", "gpu-catalogue", "machine",
                                                      "scenario", "profile"};
inline std::string_view name_of(FileKind value) {
  return enum_name(kFileKindNames, value);
}

// Checks that `root` is a mapping whose `kind` is `expected`; raises InputError otherwise.
void expect_file_kind(const yaml::Node& root, FileKind expected);

}  // namespace epochcast

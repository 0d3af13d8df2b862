// The `kind:` check shared by all loaders.
#include "core/spec/file_kind.h"

#include <fmt/format.h>

#include "core/yaml/strict_yaml.h"

namespace epochcast {

void expect_file_kind(const yaml::Node& root, FileKind expected) {
  std::string_view want = name_of(expected);
  if (!root.is_map()) {
    root.fail(fmt::format("expected a {} file (a mapping starting with 'kind: {}'), got {}", want,
                          want, root.describe()));
  }
  YAML::Node raw = root.raw()["kind"];
  if (!raw) {
    throw InputError(
        root.mark(), "kind",
        fmt::format("missing required key; a {} file starts with 'kind: {}'", want, want));
  }
  yaml::Node kind(raw, root.file(), "kind");
  std::size_t found = kind.as_choice(kFileKindNames);
  if (found != static_cast<std::size_t>(expected)) {
    kind.fail(fmt::format("this is a {} file, but a {} file is expected here",
                          kFileKindNames[found], want));
  }
}

}  // namespace epochcast

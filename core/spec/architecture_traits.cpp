// Looking architectures up in their table.
#include "core/spec/architecture_traits.h"

#include <fmt/format.h>

#include "core/input_error.h"

namespace epochcast {

const ArchitectureTraits* find_architecture(std::string_view name) {
  for (const ArchitectureTraits& traits : kArchitectures) {
    if (traits.name == name) return &traits;
  }
  return nullptr;
}

const ArchitectureTraits& architecture_traits(std::string_view name) {
  if (const ArchitectureTraits* traits = find_architecture(name)) return *traits;
  throw InputError(
      {}, "gpu.architecture",
      fmt::format("'{}' is no architecture epochcast models: expected one of {}{}", name,
                  join_alternatives(kArchitectureNames), did_you_mean(name, kArchitectureNames)));
}

bool is_cpu_architecture(std::string_view architecture) {
  return architecture_traits(architecture).cpu;
}

}  // namespace epochcast

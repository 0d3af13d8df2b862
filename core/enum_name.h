// Enum values by name: every enum read from or written to a file keeps its names in a table
// beside it (kStrategyNames for Strategy, in the enum's order), and `name_of(value)` is the one
// way code turns a value into its name. Each such header declares its own `name_of` overload
// with enum_name below, so a call never casts and never indexes out of the table.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

namespace epochcast {

// names[value]: the table lists the enum's values in declaration order. A value past the table
// is a broken invariant (a table that lost an entry), never an input error.
template <typename Enum, std::size_t N>
constexpr std::string_view enum_name(const std::string_view (&names)[N], Enum value) {
  const auto index = static_cast<std::size_t>(value);
  if (index >= N) {
    throw std::logic_error("enum value " + std::to_string(index) + " past its names table");
  }
  return names[index];
}

}  // namespace epochcast

// Per-sample tensor shapes and element types. The batch dimension is never stored: a shape
// [50, 12001] is printed as [-1, 50, 12001], the way torchsummary prints it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/enum_name.h"

namespace epochcast {

enum class DType { float32, float16, bfloat16, int64, int32, uint8 };

inline constexpr std::string_view kDTypeNames[] = {"float32", "float16", "bfloat16",
                                                   "int64",   "int32",   "uint8"};
inline std::string_view name_of(DType value) {
  return enum_name(kDTypeNames, value);
}

std::int64_t element_bytes(DType dtype);
bool is_integer(DType dtype);

struct TensorShape {
  std::vector<std::int64_t> dims;

  std::int64_t elements() const;
  std::size_t rank() const { return dims.size(); }
  std::int64_t last() const { return dims.back(); }
  // "[-1, 50, 12001]"
  std::string str() const;

  friend bool operator==(const TensorShape&, const TensorShape&) = default;
};

}  // namespace epochcast

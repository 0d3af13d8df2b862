// Tensor shape helpers.
#include "core/model/tensor_shape.h"

#include <fmt/format.h>

namespace epochcast {

std::int64_t element_bytes(DType dtype) {
  switch (dtype) {
    case DType::float32:
    case DType::int32:
      return 4;
    case DType::float16:
    case DType::bfloat16:
      return 2;
    case DType::int64:
      return 8;
    case DType::uint8:
      return 1;
  }
  return 4;
}

bool is_integer(DType dtype) {
  return dtype == DType::int64 || dtype == DType::int32 || dtype == DType::uint8;
}

std::int64_t TensorShape::elements() const {
  std::int64_t n = 1;
  for (std::int64_t d : dims)
    n *= d;
  return n;
}

std::string TensorShape::str() const {
  std::string out = "[-1";
  for (std::int64_t d : dims)
    out += fmt::format(", {}", d);
  return out + "]";
}

}  // namespace epochcast

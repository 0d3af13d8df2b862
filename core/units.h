// Strong types for the quantities epochcast computes with, so a unit can never be implicit.
//
// Counts are exact integers (bytes, floating-point operations); rates and durations taken from
// specs are doubles in SI units. Simulated time has its own integer type in sim/engine.
#pragma once

#include <compare>
#include <cstdint>

namespace epochcast {

template <typename Tag, typename Rep>
class Quantity {
 public:
  using rep = Rep;

  constexpr Quantity() = default;
  constexpr explicit Quantity(Rep value) : value_(value) {}

  constexpr Rep value() const { return value_; }

  constexpr Quantity& operator+=(Quantity other) {
    value_ += other.value_;
    return *this;
  }
  constexpr Quantity& operator-=(Quantity other) {
    value_ -= other.value_;
    return *this;
  }
  friend constexpr Quantity operator+(Quantity a, Quantity b) {
    return Quantity(a.value_ + b.value_);
  }
  friend constexpr Quantity operator-(Quantity a, Quantity b) {
    return Quantity(a.value_ - b.value_);
  }
  friend constexpr Quantity operator*(Quantity a, Rep k) { return Quantity(a.value_ * k); }
  friend constexpr Quantity operator*(Rep k, Quantity a) { return Quantity(a.value_ * k); }
  // The ratio of two like quantities is a plain number.
  friend constexpr double operator/(Quantity a, Quantity b) {
    return static_cast<double>(a.value_) / static_cast<double>(b.value_);
  }
  friend constexpr auto operator<=>(Quantity a, Quantity b) = default;

 private:
  Rep value_{};
};

using Bytes = Quantity<struct BytesTag, std::int64_t>;
// A count of floating-point operations (a multiply-add counts as two).
using Flops = Quantity<struct FlopsTag, std::int64_t>;
using Seconds = Quantity<struct SecondsTag, double>;
using BytesPerSecond = Quantity<struct BytesPerSecondTag, double>;
using FlopsPerSecond = Quantity<struct FlopsPerSecondTag, double>;

constexpr Seconds operator/(Bytes bytes, BytesPerSecond rate) {
  return Seconds(static_cast<double>(bytes.value()) / rate.value());
}
constexpr Seconds operator/(Flops flops, FlopsPerSecond rate) {
  return Seconds(static_cast<double>(flops.value()) / rate.value());
}

inline constexpr std::int64_t kKiB = 1024;
inline constexpr std::int64_t kMiB = 1024 * kKiB;
inline constexpr std::int64_t kGiB = 1024 * kMiB;

constexpr double to_mib(Bytes bytes) {
  return static_cast<double>(bytes.value()) / kMiB;
}
constexpr double to_gib(Bytes bytes) {
  return static_cast<double>(bytes.value()) / kGiB;
}

// Spec files give rates in decimal units (GB/s, TFLOP/s), as datasheets do.
constexpr BytesPerSecond gigabytes_per_second(double gb_per_s) {
  return BytesPerSecond(gb_per_s * 1e9);
}
constexpr FlopsPerSecond teraflops(double tflops) {
  return FlopsPerSecond(tflops * 1e12);
}
constexpr Seconds microseconds(double us) {
  return Seconds(us * 1e-6);
}

}  // namespace epochcast

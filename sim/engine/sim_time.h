// Simulated time: an exact integer count of nanoseconds, used for instants and durations alike.
#pragma once

#include <cmath>
#include <compare>
#include <cstdint>
#include <limits>

#include "core/units.h"

namespace epochcast::sim {

class SimTime {
 public:
  constexpr SimTime() = default;
  static constexpr SimTime from_ns(std::int64_t ns) { return SimTime(ns); }
  // Rounds to the nearest nanosecond, so the same duration always maps to the same count.
  static SimTime from_seconds(Seconds seconds) {
    return SimTime(static_cast<std::int64_t>(std::llround(seconds.value() * 1e9)));
  }
  static constexpr SimTime max() { return SimTime(std::numeric_limits<std::int64_t>::max()); }

  constexpr std::int64_t ns() const { return ns_; }
  constexpr double seconds() const { return static_cast<double>(ns_) * 1e-9; }

  constexpr SimTime& operator+=(SimTime other) {
    ns_ += other.ns_;
    return *this;
  }
  constexpr SimTime& operator-=(SimTime other) {
    ns_ -= other.ns_;
    return *this;
  }
  friend constexpr SimTime operator+(SimTime a, SimTime b) { return SimTime(a.ns_ + b.ns_); }
  friend constexpr SimTime operator-(SimTime a, SimTime b) { return SimTime(a.ns_ - b.ns_); }
  friend constexpr SimTime operator*(SimTime a, std::int64_t k) { return SimTime(a.ns_ * k); }
  friend constexpr auto operator<=>(SimTime a, SimTime b) = default;

 private:
  constexpr explicit SimTime(std::int64_t ns) : ns_(ns) {}
  std::int64_t ns_ = 0;
};

}  // namespace epochcast::sim

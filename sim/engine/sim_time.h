// Simulated time: an exact integer count of nanoseconds, used for instants and durations alike.
//
// The clock holds 2^63 ns, about 292 years. Every operation is checked: a duration or sum that
// does not fit raises TimeOverflow, never wraps, so an absurd input (a data set of 10^12 samples
// on a thousandth of a GPU) is reported as such instead of as a negative epoch.
#pragma once

#include <cmath>
#include <compare>
#include <cstdint>
#include <limits>
#include <stdexcept>

#include "core/units.h"

namespace epochcast::sim {

// A simulated time (or count) beyond what 64 bits hold.
class SimulationOverflow : public std::overflow_error {
 public:
  using std::overflow_error::overflow_error;
};

class TimeOverflow : public SimulationOverflow {
 public:
  TimeOverflow()
      : SimulationOverflow("a simulated time beyond the clock's range (2^63 ns, 292 years)") {}
};

// Products and sums of simulated counts (bytes moved, kernels run), checked.
inline std::int64_t checked_product(std::int64_t a, std::int64_t b) {
  std::int64_t product = 0;
  if (__builtin_mul_overflow(a, b, &product)) {
    throw SimulationOverflow("a simulated count beyond 64 bits");
  }
  return product;
}
inline std::int64_t checked_sum(std::int64_t a, std::int64_t b) {
  std::int64_t sum = 0;
  if (__builtin_add_overflow(a, b, &sum))
    throw SimulationOverflow("a simulated count beyond 64 bits");
  return sum;
}

class SimTime {
 public:
  constexpr SimTime() = default;
  static constexpr SimTime from_ns(std::int64_t ns) { return SimTime(ns); }
  // Rounds to the nearest nanosecond, so the same duration always maps to the same count.
  static SimTime from_seconds(Seconds seconds) {
    double ns = std::round(seconds.value() * 1e9);
    // 2^63 itself does not fit; the comparison also rejects NaN.
    if (!(std::abs(ns) < 0x1p63)) throw TimeOverflow();
    return SimTime(static_cast<std::int64_t>(ns));
  }
  // `ns` rounded up (a transfer is not done before its last byte has arrived).
  static SimTime from_ns_rounded_up(double ns) {
    double whole = std::ceil(ns);
    if (!(std::abs(whole) < 0x1p63)) throw TimeOverflow();
    return SimTime(static_cast<std::int64_t>(whole));
  }
  static constexpr SimTime max() { return SimTime(kMaxNs); }
  // An activity that never completes (a resource that is idle): later than any instant a
  // simulation reaches, since a sum that would reach max() throws.
  static constexpr SimTime never() { return max(); }

  constexpr std::int64_t ns() const { return ns_; }
  constexpr double seconds() const { return static_cast<double>(ns_) * 1e-9; }

  constexpr SimTime& operator+=(SimTime other) { return *this = *this + other; }
  constexpr SimTime& operator-=(SimTime other) { return *this = *this - other; }
  friend constexpr SimTime operator+(SimTime a, SimTime b) {
    std::int64_t sum = 0;
    // Reaching max() is an overflow too: it stands for never().
    if (__builtin_add_overflow(a.ns_, b.ns_, &sum) || sum == kMaxNs) throw TimeOverflow();
    return SimTime(sum);
  }
  friend constexpr SimTime operator-(SimTime a, SimTime b) {
    std::int64_t difference = 0;
    if (__builtin_sub_overflow(a.ns_, b.ns_, &difference)) throw TimeOverflow();
    return SimTime(difference);
  }
  friend constexpr SimTime operator*(SimTime a, std::int64_t k) {
    std::int64_t product = 0;
    if (__builtin_mul_overflow(a.ns_, k, &product)) throw TimeOverflow();
    return SimTime(product);
  }
  friend constexpr auto operator<=>(SimTime a, SimTime b) = default;

 private:
  static constexpr std::int64_t kMaxNs = std::numeric_limits<std::int64_t>::max();
  constexpr explicit SimTime(std::int64_t ns) : ns_(ns) {}
  std::int64_t ns_ = 0;
};

}  // namespace epochcast::sim

// The epoch's iterations as the driver numbers them: the training phase's, then the validation
// phase's; which phase an iteration belongs to and where it lies in it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "sim/predict/epoch_simulator.h"

namespace epochcast::sim::epoch {

class Phases {
 public:
  explicit Phases(const EpochInput& in)
      : in_(in), total_(in.train.iterations + in.validation.iterations) {}

  std::int64_t total() const { return total_; }
  bool in_validation(std::int64_t g) const { return g >= in_.train.iterations; }
  const Phase& phase(std::int64_t g) const { return in_validation(g) ? in_.validation : in_.train; }
  // The phase's first iteration, and the one after its last.
  std::int64_t start(std::int64_t g) const { return in_validation(g) ? in_.train.iterations : 0; }
  std::int64_t end(std::int64_t g) const {
    return in_validation(g) ? total_ : in_.train.iterations;
  }
  bool is_last(std::int64_t g) const { return g == end(g) - 1; }
  // Its place in the phase's cycle of micro-batch plans.
  std::size_t cycle_position(std::int64_t g) const {
    return static_cast<std::size_t>((g - start(g)) %
                                    static_cast<std::int64_t>(phase(g).cycle.size()));
  }

 private:
  const EpochInput& in_;
  std::int64_t total_;
};

}  // namespace epochcast::sim::epoch

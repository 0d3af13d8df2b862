// Finds the period of the epoch driver's state: a snapshot of everything that shapes what comes
// next, taken at iteration boundaries, that equals an earlier one means the loop repeats from
// there, and the driver skips whole periods (sim/predict/epoch_simulator.cpp, at_boundary).
//
// Brent's method: one remembered snapshot (the checkpoint), moved to the current boundary after
// 1, 2, 4, ... further boundaries, so a period of any length is found once the checkpoint lies
// in the repeating part, with a single snapshot held (a loop whose input pipeline hands out
// batches in bursts repeats only after a whole round of workers).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "sim/predict/epoch_simulator.h"

namespace epochcast::sim::epoch {

class PeriodDetector {
 public:
  struct Checkpoint {
    std::vector<std::int64_t> snapshot;
    std::uint64_t hash = 0;
    std::int64_t iteration = 0;
    SimTime time;
    EpochStats stats;
  };
  // The snapshot of the boundary of `iteration`, at `time`, with the counters so far: the
  // checkpoint it equals, or nullptr (it may then become the checkpoint).
  const Checkpoint* offer(std::vector<std::int64_t> snapshot, std::int64_t iteration, SimTime time,
                          const EpochStats& stats);
  // Starts afresh (after a skip, or where no skip can follow).
  void forget();

 private:
  std::optional<Checkpoint> checkpoint_;
  std::int64_t span_ = 1;   // boundaries until the checkpoint moves on
  std::int64_t since_ = 0;  // boundaries compared against it so far
};

}  // namespace epochcast::sim::epoch

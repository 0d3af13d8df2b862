// What the epoch driver reports besides the epoch's length: GPU 0's busy time by category, its
// idle time charged to what held it up (a collective in flight, else what the main CPU thread
// was doing), the main thread's busy time, and the collectives' count, bytes and time.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

#include "sim/predict/epoch_simulator.h"

namespace epochcast::sim::epoch {

class Accounting {
 public:
  EpochStats stats;

  // A kernel or copy of GPU 0 ran in [start, end). (Inline: called for every one.)
  void gpu_activity(SimTime start, SimTime end, Category category) {
    if (start > gpu_busy_until_) attribute_idle(gpu_busy_until_, start);
    SimTime from = std::max(start, gpu_busy_until_);
    if (end > from) stats.gpu_busy[static_cast<std::size_t>(category)] += end - from;
    gpu_busy_until_ = std::max(gpu_busy_until_, end);
  }
  // The main CPU thread of rank 0 ran an op in [start, end).
  void cpu_activity(SimTime start, SimTime end, Category category) {
    if (start > cpu_last_end_) cpu_segments_.push_back({cpu_last_end_, start, category});
    cpu_segments_.push_back({start, end, category});
    stats.cpu_busy[static_cast<std::size_t>(category)] += end - start;
    cpu_last_end_ = end;
  }
  // A collective of GPU 0 began (its begin marker finished at `at`), moving `bytes`.
  void collective_begin(SimTime at, std::int64_t bytes);
  // GPU 0's oldest collective in flight ended at `at`.
  void collective_end(SimTime at);
  // The epoch ended at `end`: idle time up to it charged, the epoch's length set.
  void finish(SimTime end);
  bool collectives_open() const { return !open_collectives_.empty(); }

  // Everything moved `delta` later (a skipped span of iterations).
  void shift(SimTime delta);
  // The state that shapes what is charged next, relative to `now`, appended to a snapshot.
  void append_snapshot(std::vector<std::int64_t>& s, SimTime now) const;

 private:
  // Charges GPU idle time in [from, to).
  void attribute_idle(SimTime from, SimTime to);

  struct Segment {
    SimTime begin, end;
    Category category;
  };
  SimTime gpu_busy_until_;
  std::deque<Segment> cpu_segments_;  // main-thread activity not yet matched against GPU idling
  SimTime cpu_last_end_;
  std::deque<SimTime> open_collectives_;  // begins of GPU 0's collectives still in flight
  std::deque<std::pair<SimTime, SimTime>> comm_intervals_;  // closed, for idle attribution
  SimTime comm_covered_until_;                              // communication counted up to here
};

// Counters accumulated between two boundaries (`then` and `now`), times `periods`.
EpochStats period_times(const EpochStats& now, const EpochStats& then, std::int64_t periods);

}  // namespace epochcast::sim::epoch

// Simulates one epoch — training iterations, then an optional validation pass — on the engine,
// with a data loader feeding batches, and reports where the time went.
//
// Iterations are instantiated from their plans one step ahead (and loader batches as slots free
// up), so the engine holds only a few iterations at a time. At every iteration boundary the
// simulator can take a snapshot of the whole state relative to that instant; when a snapshot
// repeats, the iterations in between form a period, and whole periods are skipped by shifting
// time and counters. Because the engine is deterministic and the snapshot covers everything
// that decides the future (resources, live tasks, pending events, loader and attribution
// state), the result is exactly that of simulating every iteration; tests compare the two.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/spec/scenario_spec.h"
#include "sim/engine/sim_time.h"
#include "sim/strategy/iteration_plan.h"

namespace epochcast::sim {

// Iterations of one loop over a data set (training or validation).
struct Phase {
  IterationPlan full;  // a full batch
  IterationPlan last;  // the last batch, smaller unless the batches divide the data set
  std::int64_t iterations = 0;
  std::int64_t full_batch = 0;  // samples a loader batch holds
  std::int64_t last_batch = 0;
};

struct EpochInput {
  Phase train;
  Phase validation;  // iterations == 0 for none
  LoaderSpec loader;
  int launch_queue_depth = 1024;  // kernels a GPU may have pending before launches block
};

struct EpochOptions {
  bool steady_state_shortcut = true;
  int trace_iterations = 0;  // record the first N training iterations for a trace
};

// One executed operation, for traces.
struct TraceEvent {
  std::string track;  // resource name
  std::string name;
  Category category = Category::host;
  SimTime start;
  SimTime end;
};

// Where GPU 0's time went over the epoch: busy time by what it ran, and idle time by what the
// main CPU thread was doing meanwhile. Together they add up to the epoch time.
struct EpochStats {
  SimTime epoch;
  std::array<SimTime, kCategoryCount> gpu_busy{};
  std::array<SimTime, kCategoryCount> gpu_idle{};  // keyed by the host activity that starved it
  SimTime gpu_idle_other;                          // idle with the host idle too
  std::array<SimTime, kCategoryCount> cpu_busy{};  // main CPU thread, by category
  std::int64_t kernels = 0;                        // GPU operations run in the epoch
  std::int64_t iterations = 0;
  std::int64_t simulated_iterations = 0;  // the rest were skipped as exact periods
  std::int64_t simulated_tasks = 0;

  SimTime gpu_busy_total() const;
  EpochStats& operator+=(const EpochStats& other);
};

class EpochSimulator {
 public:
  EpochSimulator(const EpochInput& input, const EpochOptions& options);
  EpochStats run();
  const std::vector<TraceEvent>& trace() const { return trace_; }

 private:
  struct Impl;
  const EpochInput& input_;
  EpochOptions options_;
  std::vector<TraceEvent> trace_;
};

}  // namespace epochcast::sim

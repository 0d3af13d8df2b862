// Predictions for the points of a scenario's sweep.
#pragma once

#include <string>
#include <vector>

#include "core/spec/scenario_spec.h"
#include "sim/compute/memory_model.h"
#include "sim/predict/epoch_simulator.h"

namespace epochcast::sim {

struct PredictOptions {
  bool steady_state_shortcut = true;
  int trace_iterations = 0;  // > 0: keep a trace of the first iterations of each point
};

// The time breakdown of an epoch from GPU 0's point of view; the parts add up to the epoch.
struct Breakdown {
  double data = 0;  // GPU idle while the host loads or waits for data
  double h2d = 0;   // host-to-device copies, and the GPU idle during blocking ones
  double forward = 0;
  double backward = 0;
  double optimizer = 0;
  double communication = 0;  // exposed communication
  double host = 0;           // GPU idle while the host dispatches or runs framework overhead
  double other = 0;          // GPU idle with the host idle too
};

struct PointResult {
  SweepPoint point;
  std::int64_t train_iterations = 0;
  std::int64_t validation_iterations = 0;
  MemoryEstimate memory;
  bool simulated = false;  // false when the point does not fit in memory
  EpochStats stats;
  double epoch_seconds = 0;
  double iteration_seconds = 0;   // mean training iteration (epoch without validation / iterations)
  double samples_per_second = 0;  // training samples per second of epoch time
  Breakdown breakdown;            // seconds per epoch
  double gpu_busy_fraction = 0;
  std::string bottleneck;  // one word: compute, host, input, copy, communication, memory
  std::string diagnosis;   // a sentence a user understands
  std::vector<TraceEvent> trace;
};

PointResult predict_point(const ScenarioSpec& scenario, const SweepPoint& point,
                          const PredictOptions& options = {});
std::vector<PointResult> predict(const ScenarioSpec& scenario, const PredictOptions& options = {});

}  // namespace epochcast::sim

// Time to a target rather than per epoch: how many optimizer steps a batch size needs to reach
// the scenario's target, from the gradient noise scale (McCandlish, Kaplan, Amodei et al., "An
// Empirical Model of Large-Batch Training", 2018), times the simulated time those steps take.
#pragma once

#include <optional>
#include <utility>
#include <vector>

#include "core/spec/scenario_spec.h"
#include "sim/predict/predict.h"

namespace epochcast::sim {

struct TargetPrediction {
  double batch = 0;    // samples per optimizer step (the global batch x gradient accumulation)
  double steps = 0;    // S(B) = S_min (1 + B_noise / B)
  double epochs = 0;   // S(B) x B / training samples
  double seconds = 0;  // epochs x the simulated epoch (its validation pass included)
  // 95% intervals where the figures carry a spread (statistical_efficiency's relative_sd, a
  // calibrated profile's epoch uncertainty); taken as log-normal and independent.
  std::optional<std::pair<double, double>> epochs_interval;
  std::optional<std::pair<double, double>> seconds_interval;
};

// The point's way to the target; nullopt when the scenario has none or the point does not run.
std::optional<TargetPrediction> predict_to_target(const ScenarioSpec& scenario,
                                                  const PointResult& result);

// The point that reaches the target first (the first of equals); null when none can.
const PointResult* fastest_to_target(const ScenarioSpec& scenario,
                                     const std::vector<PointResult>& results);

// How the figures were obtained, in words, for the lines above a table: "the noise scale (900
// samples, measured) and the minimum steps (400, assumed)".
std::string target_assumption(const ScenarioSpec& scenario);

}  // namespace epochcast::sim

// Predictions with uncertainty: a calibrated profile carries the covariance of its fitted figures'
// logarithms (ProfileUncertainty); moving each figure once gives the epoch's sensitivity to it,
// and the sensitivities and the covariance give the epoch's spread (to first order). Figures the
// calibration did not fit are taken as exact: the interval is the calibration's, not the model's.
#pragma once

#include "core/spec/scenario_spec.h"
#include "sim/predict/predict.h"

namespace epochcast::sim {

// Two-sided 95% interval of a normal distribution, in standard deviations.
inline constexpr double kInterval95 = 1.96;

// Fills `result.epoch_interval` when the scenario's profile has an uncertainty and the point
// simulates (one more simulation per uncertain figure).
void add_epoch_interval(const ScenarioSpec& scenario, PointResult& result,
                        const PredictOptions& options = {});

}  // namespace epochcast::sim

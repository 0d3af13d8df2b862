// Validation: every measured point against its prediction, and the figures that summarise them.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/measure/measurements.h"
#include "core/spec/scenario_spec.h"
#include "validate/calibration.h"

namespace epochcast::validate {

struct ValidatedPoint {
  int gpus = 1;
  std::int64_t global_batch = 0;
  double measured_s = 0;  // epoch time
  double predicted_s = 0;
  double error_pct = 0;   // (predicted - measured) / measured x 100
  bool held_out = false;  // not used for calibration
};

struct ValidationSummary {
  int points = 0;
  double mape_pct = 0;        // mean absolute percentage error
  double worst_pct = 0;       // largest absolute error, signed
  double spearman = 0;        // rank correlation of predicted and measured epoch times
  bool best_matches = false;  // the predicted fastest point is the measured fastest
  std::string measured_best;
  std::string predicted_best;
};

struct ValidationReport {
  std::vector<ValidatedPoint> points;  // measured ok points, in sweep order
  ValidationSummary all;
  std::optional<ValidationSummary> calibration_points;  // --holdout: the points fitted to
  std::optional<ValidationSummary> held_out;            // --holdout: the others
  std::string cross_device;  // non-empty when the profile was calibrated on another device
};

// Predicts every ok point of `measured` with `scenario` (its profile as given) and compares.
ValidationReport validate(const ScenarioSpec& scenario, const MeasurementFile& measured,
                          const PointFilter& held_out = {});

ValidationSummary summarise(const std::vector<ValidatedPoint>& points);

// Spearman's rank correlation (average ranks for ties).
double spearman(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace epochcast::validate

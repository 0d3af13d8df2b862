// Validation: every measured point against its prediction, and the figures that summarise them.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/measure/measurements.h"
#include "core/spec/scenario_spec.h"
#include "validate/calibration.h"

namespace epochcast::validate {

// What a measured point is compared on. The runtime's points, and results tables with an
// epoch_s, give an epoch; a results table with only iteration_s or samples_per_s gives a
// training iteration (the global batch over the throughput).
enum class Figure { epoch, iteration };
inline const char* figure_name(Figure figure) {
  return figure == Figure::epoch ? "epoch" : "iteration";
}

struct ValidatedPoint {
  int gpus = 1;
  std::int64_t global_batch = 0;
  double measured_s = 0;  // seconds of an epoch or an iteration (`figure`)
  double predicted_s = 0;
  double error_pct = 0;   // (predicted - measured) / measured x 100
  bool held_out = false;  // not used for calibration
  Figure figure = Figure::epoch;
  // Training samples the figure covers (the data set, or the global batch): rankings and the
  // fastest configuration compare time per sample, so that iterations of different batches and
  // epochs compare alike.
  double samples = 1;
  // The measurement's own spread relative to it: (p90 - p10) / median of its iteration times
  // (0 when it has none, as a results table's figure).
  double relative_spread = 0;
  // The prediction's 95% interval, when the profile carries a calibration's uncertainty.
  std::optional<std::pair<double, double>> interval;
};

struct ValidationSummary {
  int points = 0;
  double mape_pct = 0;   // mean absolute percentage error
  double worst_pct = 0;  // largest absolute error, signed
  double spearman = 0;   // rank correlation of predicted and measured epoch times
  // The predicted fastest point is the measured fastest, or measured slower than it by no more
  // than the two points' measured spread (a gap the measurements cannot tell from noise).
  bool best_matches = false;
  bool best_within_spread = false;  // matched only within the measured spread
  // Points with a 95% interval, and how many measured figures it holds (nominally 95% of them).
  int intervals = 0, covered = 0;
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

struct MeasuredFigure {
  Figure figure = Figure::epoch;
  double seconds = 0;
};
MeasuredFigure measured_figure(const MeasuredPoint& point);

struct PredictedFigure {
  bool simulated = false;  // false when the point is predicted not to fit in memory
  double seconds = 0;
  // Training steps in the figure: an epoch's iterations, or 1 for an iteration.
  std::int64_t steps = 0;
  // With `with_interval` and a profile that carries a calibration's uncertainty: the figure's
  // 95% interval (sim/predict/uncertainty.h; an iteration takes its epoch's relative spread).
  std::optional<std::pair<double, double>> interval;
};
// The simulated counterpart of `figure`: the epoch, or the mean training iteration of the epoch
// without its validation pass (what a user's iteration clock or throughput counter sees).
PredictedFigure predict_figure(const ScenarioSpec& scenario, const MeasuredPoint& point,
                               Figure figure, bool with_interval = false);

// Predicts every ok point of `measured` with `scenario` (its profile as given) and compares.
ValidationReport validate(const ScenarioSpec& scenario, const MeasurementFile& measured,
                          const PointFilter& held_out = {});

ValidationSummary summarise(const std::vector<ValidatedPoint>& points);

// Spearman's rank correlation (average ranks for ties).
double spearman(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace epochcast::validate

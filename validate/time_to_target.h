// Time to target against real training: the noise-scale model's statistical figures fitted
// from time-to-target runs (run --to-target), and its predictions compared point by point.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/measure/target_runs.h"
#include "core/spec/scenario_spec.h"

namespace epochcast::validate {

// S_min and B_noise, and how they were obtained.
struct StatisticalFit {
  double min_steps = 0;
  double noise_scale = 0;
  FigureSource noise_source = FigureSource::calibrated;
  std::vector<std::int64_t> fitted_on;  // the batches whose median steps fixed the figures
  std::string how;                      // in words
};

// From the measured noise scale (B_noise = B_simple) and one batch's median steps:
// S_min = S(B) / (1 + B_noise / B). nullopt when the file has no noise scale or that batch did
// not reach the target.
std::optional<StatisticalFit> fit_from_noise_scale(const TargetRunsFile& runs, std::int64_t batch);
// From the median steps at every batch in `batches` (at least two that reached the target):
// least squares of S = S_min + (S_min B_noise) / B, linear in 1/B, weighted by 1/S^2 (relative
// errors). nullopt when fewer than two points reached or the slope comes out negative.
std::optional<StatisticalFit> fit_from_steps(const TargetRunsFile& runs,
                                             const std::vector<std::int64_t>& batches);

struct TargetRow {
  std::int64_t batch = 0;
  bool calibration = false;  // one of the fit's batches
  int reached = 0, runs = 0;
  double measured_epochs = 0, measured_epochs_low = 0, measured_epochs_high = 0;
  double predicted_epochs = 0;
  double epochs_error_pct = 0;
  double measured_seconds = 0, measured_seconds_low = 0, measured_seconds_high = 0;
  double predicted_seconds = 0;  // predicted epochs x the simulated epoch (training only)
};

struct TargetValidation {
  StatisticalFit fit;
  std::vector<TargetRow> rows;
  double epochs_mape_pct = 0;         // over the rows that reached, calibration rows excluded
  double epochs_mape_all_pct = 0;     // every row that reached
  std::int64_t measured_fastest = 0;  // by the median time to target
  std::int64_t predicted_fastest = 0;
  // The predicted fastest batch's seeds reached the target in a range that overlaps the
  // measured fastest's: the seeds cannot tell them apart.
  bool fastest_within_spread = false;
};

// The batch S_min is fitted on by default: the one the noise scale was measured at when it is
// among the runs and reached the target, else the median batch of those that did (0: none).
std::int64_t default_calibration_batch(const TargetRunsFile& runs);

// Refuses runs of another model, target or data set than the scenario's (InputError naming the
// file's key).
void check_runs_match(const ScenarioSpec& scenario, const TargetRunsFile& runs,
                      const std::string& file);

// `scenario` predicts each batch's epoch (simulated, on its profile); `fit` replaces its
// statistical figures.
TargetValidation validate_to_target(const ScenarioSpec& scenario, const TargetRunsFile& runs,
                                    const StatisticalFit& fit);

}  // namespace epochcast::validate

// Fitting and validating the noise-scale model of steps to a target.
#include "validate/time_to_target.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/input_error.h"
#include "sim/predict/predict.h"

namespace epochcast::validate {

namespace {

const TargetPoint* point_at(const TargetRunsFile& runs, std::int64_t batch) {
  for (const TargetPoint& p : runs.points) {
    if (p.global_batch == batch) return &p;
  }
  return nullptr;
}

}  // namespace

std::optional<StatisticalFit> fit_from_noise_scale(const TargetRunsFile& runs, std::int64_t batch) {
  if (!runs.noise_scale) return std::nullopt;
  const TargetPoint* point = point_at(runs, batch);
  if (point == nullptr) return std::nullopt;
  const std::optional<TargetMedians> m = medians(*point);
  if (!m) return std::nullopt;
  StatisticalFit fit;
  fit.noise_scale = runs.noise_scale->b_simple;
  fit.noise_source = FigureSource::measured;
  fit.min_steps = m->steps / (1 + fit.noise_scale / static_cast<double>(batch));
  fit.fitted_on = {batch};
  fit.how = fmt::format(
      "B_noise = B_simple measured at batch {} ({:.0f} samples); S_min from batch {}'s median "
      "{:.0f} steps",
      runs.noise_scale->batch, fit.noise_scale, batch, m->steps);
  return fit;
}

std::optional<StatisticalFit> fit_from_steps(const TargetRunsFile& runs,
                                             const std::vector<std::int64_t>& batches) {
  // S = a + b x with x = 1/B, a = S_min, b = S_min B_noise; weights 1/S^2 (relative errors).
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  std::vector<std::int64_t> used;
  for (std::int64_t batch : batches) {
    const TargetPoint* point = point_at(runs, batch);
    if (point == nullptr) continue;
    const std::optional<TargetMedians> m = medians(*point);
    if (!m) continue;
    const double x = 1.0 / static_cast<double>(batch), y = m->steps, w = 1 / (y * y);
    sw += w;
    sx += w * x;
    sy += w * y;
    sxx += w * x * x;
    sxy += w * x * y;
    used.push_back(batch);
  }
  if (used.size() < 2) return std::nullopt;
  const double det = sw * sxx - sx * sx;
  if (!(det > 0)) return std::nullopt;
  const double a = (sxx * sy - sx * sxy) / det, b = (sw * sxy - sx * sy) / det;
  if (!(a > 0) || !(b > 0)) return std::nullopt;
  StatisticalFit fit;
  fit.min_steps = a;
  fit.noise_scale = b / a;
  fit.noise_source = FigureSource::calibrated;
  fit.fitted_on = used;
  fit.how = fmt::format("S_min and B_noise by least squares on the median steps of {} batch sizes",
                        used.size());
  return fit;
}

std::int64_t default_calibration_batch(const TargetRunsFile& runs) {
  std::vector<std::int64_t> reached;
  for (const TargetPoint& p : runs.points) {
    if (medians(p)) reached.push_back(p.global_batch);
  }
  if (reached.empty()) return 0;
  if (runs.noise_scale &&
      std::find(reached.begin(), reached.end(), runs.noise_scale->batch) != reached.end()) {
    return runs.noise_scale->batch;
  }
  std::sort(reached.begin(), reached.end());
  return reached[reached.size() / 2];
}

void check_runs_match(const ScenarioSpec& scenario, const TargetRunsFile& runs,
                      const std::string& file) {
  auto refuse = [&](const std::string& key, const std::string& problem) {
    throw InputError(SourceMark{file, 0, 0}, key, problem);
  };
  if (!scenario.target) {
    refuse("target",
           fmt::format("the scenario '{}' states no target to compare with", scenario.name));
  }
  if (runs.model != scenario.model.name) {
    refuse("model", fmt::format("the runs trained '{}', the scenario's model is '{}'", runs.model,
                                scenario.model.name));
  }
  const std::string metric(name_of(scenario.target->metric));
  if (runs.metric != metric || std::abs(runs.value - scenario.target->value) > 1e-12) {
    refuse("target", fmt::format("the runs aimed at {} {:g}, the scenario at {} {:g}", runs.metric,
                                 runs.value, metric, scenario.target->value));
  }
  if (runs.train_samples != scenario.dataset.train_samples) {
    refuse("train_samples",
           fmt::format("the runs trained on {} samples, the scenario's data set has {}",
                       runs.train_samples, scenario.dataset.train_samples));
  }
}

TargetValidation validate_to_target(const ScenarioSpec& scenario, const TargetRunsFile& runs,
                                    const StatisticalFit& fit) {
  TargetValidation out;
  out.fit = fit;
  double sum = 0, sum_all = 0;
  int count = 0, count_all = 0;
  const TargetRow* measured_best = nullptr;
  const TargetRow* predicted_best = nullptr;
  // The simulated epoch, training only: the runs' seconds leave their evaluations out.
  ScenarioSpec training = scenario;
  training.dataset.validation_samples = 0;
  training.dataset.train_samples = runs.train_samples;
  for (const TargetPoint& point : runs.points) {
    TargetRow row;
    row.batch = point.global_batch;
    row.calibration =
        std::find(fit.fitted_on.begin(), fit.fitted_on.end(), row.batch) != fit.fitted_on.end();
    row.runs = static_cast<int>(point.runs.size());
    const double batch = static_cast<double>(point.global_batch);
    const double steps = fit.min_steps * (1 + fit.noise_scale / batch);
    row.predicted_epochs = steps * batch / static_cast<double>(runs.train_samples);
    const sim::PointResult result =
        sim::predict_point(training, SweepPoint{1, point.global_batch, point.global_batch});
    row.predicted_seconds = result.simulated ? row.predicted_epochs * result.epoch_seconds : 0;
    if (const std::optional<TargetMedians> m = medians(point)) {
      row.reached = m->reached;
      row.measured_epochs = m->epochs;
      row.measured_epochs_low = m->epochs_low;
      row.measured_epochs_high = m->epochs_high;
      row.measured_seconds = m->seconds;
      row.measured_seconds_low = m->seconds_low;
      row.measured_seconds_high = m->seconds_high;
      row.epochs_error_pct = 100 * (row.predicted_epochs - m->epochs) / m->epochs;
      sum_all += std::abs(row.epochs_error_pct);
      ++count_all;
      if (!row.calibration) {
        sum += std::abs(row.epochs_error_pct);
        ++count;
      }
    }
    out.rows.push_back(row);
  }
  for (const TargetRow& row : out.rows) {
    if (row.reached > 0 &&
        (!measured_best || row.measured_seconds < measured_best->measured_seconds))
      measured_best = &row;
    if (row.predicted_seconds > 0 &&
        (!predicted_best || row.predicted_seconds < predicted_best->predicted_seconds))
      predicted_best = &row;
  }
  out.epochs_mape_pct = count > 0 ? sum / count : 0;
  out.epochs_mape_all_pct = count_all > 0 ? sum_all / count_all : 0;
  if (measured_best) out.measured_fastest = measured_best->batch;
  if (predicted_best) out.predicted_fastest = predicted_best->batch;
  if (measured_best && predicted_best) {
    out.fastest_within_spread =
        predicted_best == measured_best ||
        (predicted_best->reached > 0 &&
         predicted_best->measured_seconds_low <= measured_best->measured_seconds_high);
  }
  return out;
}

}  // namespace epochcast::validate

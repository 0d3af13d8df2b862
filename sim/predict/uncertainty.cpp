// First-order propagation of a profile's uncertainty to an epoch time.
#include "sim/predict/uncertainty.h"

#include <algorithm>
#include <cmath>

#include "core/spec/profile_figures.h"

namespace epochcast::sim {

namespace {
constexpr double kSlopeStep = 0.02;  // in natural-log units: 2%
}  // namespace

void add_epoch_interval(const ScenarioSpec& scenario, PointResult& result,
                        const PredictOptions& options) {
  const ProfileUncertainty& u = scenario.profile.uncertainty;
  if (u.empty() || !result.simulated || result.epoch_seconds <= 0) return;
  const std::size_t n = u.figures.size();
  const double base = std::log(result.epoch_seconds);
  std::vector<double> slope(n, 0.0);
  for (std::size_t k = 0; k < n; ++k) {
    const double sd = std::sqrt(std::max(0.0, u.log_covariance[k][k]));
    std::optional<double> value = profile_figure_value(scenario.profile, u.figures[k]);
    if (sd <= 0 || !value || *value <= 0) continue;
    const ProfileFigure* figure = find_profile_figure(u.figures[k]);
    // A local slope, as the calibration's Jacobian that gave the covariance: figures the points
    // fix only in combination cancel in it (a secant as wide as each figure's own spread would
    // break that cancellation), and the step stays above the simulator's event-ordering ripple.
    double step = std::min(sd, kSlopeStep);
    if (figure && *value * std::exp(step) > figure->upper) step = -step;
    HardwareProfile profile = scenario.profile;
    set_profile_figure(profile, u.figures[k], *value * std::exp(step));
    // A host figure moves a C++ loop's costs as much (the calibration fitted them; the
    // Python loop's are them plus measured extras), so that training.loop: libtorch feels it.
    if (profile.host_libtorch && u.figures[k].rfind("host.", 0) == 0) {
      HardwareProfile libtorch = profile;
      libtorch.host = *profile.host_libtorch;
      if (auto own = profile_figure_value(libtorch, u.figures[k])) {
        set_profile_figure(libtorch, u.figures[k], *own * std::exp(step));
        profile.host_libtorch = libtorch.host;
      }
    }
    ScenarioSpec moved = scenario;
    apply_profile(moved, std::move(profile));  // as --profile applies it (the loader cost too)
    PointResult r = predict_point(moved, result.point, options);
    if (r.simulated && r.epoch_seconds > 0) slope[k] = (std::log(r.epoch_seconds) - base) / step;
  }
  // The figures' share, then the error no figure accounts for (independent of it).
  double variance = u.model_log_sd * u.model_log_sd;
  for (std::size_t a = 0; a < n; ++a)
    for (std::size_t b = 0; b < n; ++b)
      variance += slope[a] * u.log_covariance[a][b] * slope[b];
  const double sd = std::sqrt(std::max(0.0, variance));
  result.epoch_relative_sd = sd;
  result.epoch_interval = {result.epoch_seconds * std::exp(-kInterval95 * sd),
                           result.epoch_seconds * std::exp(kInterval95 * sd)};
}

}  // namespace epochcast::sim

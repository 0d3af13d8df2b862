// Steps, epochs and time to the target from the noise-scale model.
#include "sim/predict/time_to_target.h"

#include <cmath>

#include <fmt/format.h>

namespace epochcast::sim {

namespace {

constexpr double kZ95 = 1.959964;

}  // namespace

std::optional<TargetPrediction> predict_to_target(const ScenarioSpec& scenario,
                                                  const PointResult& result) {
  if (!scenario.target || !scenario.statistical_efficiency || !result.simulated) {
    return std::nullopt;
  }
  const StatisticalEfficiencySpec& e = *scenario.statistical_efficiency;
  TargetPrediction p;
  p.batch = static_cast<double>(result.point.global_batch) *
            static_cast<double>(scenario.training.gradient_accumulation);
  const double noise_ratio = e.noise_scale.value / p.batch;
  p.steps = e.min_steps.value * (1 + noise_ratio);
  p.epochs = p.steps * p.batch / static_cast<double>(scenario.dataset.train_samples);
  p.seconds = p.epochs * result.epoch_seconds;
  // d log S / d log B_noise with S_min given: (B_noise / B) / (1 + B_noise / B), the noise
  // scale matters where the batch is below it. With E_min given (min_epochs), S = E_min / B_noise
  // + E_min / B, and the sensitivity is the other share, B / (B + B_noise).
  const double elasticity =
      e.min_given_as_epochs ? 1 / (1 + noise_ratio) : noise_ratio / (1 + noise_ratio);
  const double steps_sd =
      std::hypot(e.min_steps.relative_sd, elasticity * e.noise_scale.relative_sd);
  if (steps_sd > 0) {
    const double f = std::exp(kZ95 * steps_sd);
    p.epochs_interval = std::make_pair(p.epochs / f, p.epochs * f);
  }
  const double time_sd = std::hypot(steps_sd, result.epoch_relative_sd);
  if (time_sd > 0) {
    const double f = std::exp(kZ95 * time_sd);
    p.seconds_interval = std::make_pair(p.seconds / f, p.seconds * f);
  }
  return p;
}

const PointResult* fastest_to_target(const ScenarioSpec& scenario,
                                     const std::vector<PointResult>& results) {
  const PointResult* best = nullptr;
  double best_seconds = 0;
  for (const PointResult& r : results) {
    const std::optional<TargetPrediction> p = predict_to_target(scenario, r);
    if (p && (!best || p->seconds < best_seconds)) {
      best = &r;
      best_seconds = p->seconds;
    }
  }
  return best;
}

std::string target_assumption(const ScenarioSpec& s) {
  if (!s.target || !s.statistical_efficiency) return "";
  const StatisticalEfficiencySpec& e = *s.statistical_efficiency;
  const std::string_view metric = name_of(s.target->metric);
  return fmt::format(
      "reaching {} {:g} takes S_min (1 + B_noise / B) optimizer steps at B samples a step "
      "(McCandlish et al. 2018), with a learning rate tuned for each batch; B_noise {:g} samples "
      "({}), S_min {:.4g} steps{} ({}); statistical_efficiency corrects them",
      metric, s.target->value, e.noise_scale.value, name_of(e.noise_scale.source),
      e.min_steps.value,
      e.min_given_as_epochs
          ? fmt::format(", from min_epochs {:g}", e.min_steps.value * e.noise_scale.value /
                                                      static_cast<double>(s.dataset.train_samples))
          : "",
      name_of(e.min_steps.source));
}

}  // namespace epochcast::sim

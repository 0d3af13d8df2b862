// Predicted against measured, point by point.
#include "validate/validation.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>

#include "sim/predict/predict.h"
#include "sim/predict/uncertainty.h"

namespace epochcast::validate {

namespace {

std::vector<double> ranks_of(const std::vector<double>& values) {
  std::vector<std::size_t> order(values.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](auto a, auto b) { return values[a] < values[b]; });
  std::vector<double> ranks(values.size());
  for (std::size_t i = 0; i < order.size();) {
    std::size_t j = i;
    while (j + 1 < order.size() && values[order[j + 1]] == values[order[i]])
      ++j;
    double average = 0.5 * static_cast<double>(i + j) + 1;
    for (std::size_t k = i; k <= j; ++k)
      ranks[order[k]] = average;
    i = j + 1;
  }
  return ranks;
}

std::string label(const ValidatedPoint& p) {
  return fmt::format("{} GPU{}, batch {}", p.gpus, p.gpus == 1 ? "" : "s", p.global_batch);
}

}  // namespace

double spearman(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() < 2) return 0;
  std::vector<double> ra = ranks_of(a), rb = ranks_of(b);
  double n = static_cast<double>(a.size());
  double mean = (n + 1) / 2, cov = 0, va = 0, vb = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    cov += (ra[i] - mean) * (rb[i] - mean);
    va += (ra[i] - mean) * (ra[i] - mean);
    vb += (rb[i] - mean) * (rb[i] - mean);
  }
  return va > 0 && vb > 0 ? cov / std::sqrt(va * vb) : 0;
}

ValidationSummary summarise(const std::vector<ValidatedPoint>& points) {
  ValidationSummary s;
  s.points = static_cast<int>(points.size());
  if (points.empty()) return s;
  std::vector<double> measured, predicted;
  double sum = 0;
  for (const ValidatedPoint& p : points) {
    sum += std::abs(p.error_pct);
    if (std::abs(p.error_pct) > std::abs(s.worst_pct)) s.worst_pct = p.error_pct;
    measured.push_back(p.measured_s / p.samples);
    predicted.push_back(p.predicted_s / p.samples);
  }
  s.mape_pct = sum / static_cast<double>(points.size());
  for (const ValidatedPoint& p : points) {
    if (!p.interval) continue;
    ++s.intervals;
    s.covered += p.interval->first <= p.measured_s && p.measured_s <= p.interval->second;
  }
  s.spearman = spearman(measured, predicted);
  auto fastest = [&](const std::vector<double>& v) {
    return static_cast<std::size_t>(std::min_element(v.begin(), v.end()) - v.begin());
  };
  std::size_t mb = fastest(measured), pb = fastest(predicted);
  s.measured_best = label(points[mb]);
  s.predicted_best = label(points[pb]);
  s.best_matches = mb == pb;
  if (!s.best_matches) {
    const double gap = measured[pb] / measured[mb] - 1;
    s.best_within_spread = gap <= std::max(points[mb].relative_spread, points[pb].relative_spread);
    s.best_matches = s.best_within_spread;
  }
  return s;
}

MeasuredFigure measured_figure(const MeasuredPoint& point) {
  if (point.epoch_s_measured) return {Figure::epoch, *point.epoch_s_measured};
  if (point.epoch_s_estimated > 0) return {Figure::epoch, point.epoch_s_estimated};
  if (point.iteration_s.median > 0) return {Figure::iteration, point.iteration_s.median};
  return {Figure::iteration, point.samples_per_s > 0
                                 ? static_cast<double>(point.global_batch) / point.samples_per_s
                                 : 0};
}

PredictedFigure predict_figure(const ScenarioSpec& scenario, const MeasuredPoint& point,
                               Figure figure, bool with_interval) {
  const SweepPoint p{point.gpus, point.global_batch, point.per_gpu_batch};
  PredictedFigure out;
  ScenarioSpec simulated = scenario;
  if (figure == Figure::iteration) simulated.dataset.validation_samples = 0;
  sim::PointResult r = sim::predict_point(simulated, p);
  out.simulated = r.simulated && r.train_iterations > 0;
  out.seconds = figure == Figure::epoch ? r.epoch_seconds : r.iteration_seconds;
  out.steps = figure == Figure::epoch ? r.train_iterations : 1;
  if (with_interval && out.simulated) {
    sim::add_epoch_interval(simulated, r);
    if (r.epoch_interval) {
      const double sd = r.epoch_relative_sd;
      out.interval = {out.seconds * std::exp(-sim::kInterval95 * sd),
                      out.seconds * std::exp(sim::kInterval95 * sd)};
    }
  }
  return out;
}

ValidationReport validate(const ScenarioSpec& scenario, const MeasurementFile& measured,
                          const PointFilter& held_out) {
  ValidationReport report;
  for (const MeasuredPoint& m : measured.points) {
    if (m.status != PointStatus::ok) continue;
    MeasuredFigure measured_point = measured_figure(m);
    PredictedFigure predicted = predict_figure(scenario, m, measured_point.figure, true);
    // Predicted OOM where it ran: shown by predict, not comparable.
    if (!predicted.simulated) continue;
    ValidatedPoint v;
    v.gpus = m.gpus;
    v.global_batch = m.global_batch;
    v.figure = measured_point.figure;
    v.measured_s = measured_point.seconds;
    v.predicted_s = predicted.seconds;
    v.interval = predicted.interval;
    if (m.iteration_s.median > 0 && m.iteration_s.count > 1)
      v.relative_spread = (m.iteration_s.p90 - m.iteration_s.p10) / m.iteration_s.median;
    v.samples = static_cast<double>(
        measured_point.figure == Figure::epoch ? scenario.dataset.train_samples : m.global_batch);
    v.error_pct = (v.predicted_s - v.measured_s) / v.measured_s * 100;
    v.held_out = held_out && held_out(m);
    report.points.push_back(v);
  }
  report.all = summarise(report.points);
  if (held_out) {
    std::vector<ValidatedPoint> in, out;
    for (const ValidatedPoint& p : report.points)
      (p.held_out ? out : in).push_back(p);
    report.calibration_points = summarise(in);
    report.held_out = summarise(out);
  }
  report.cross_device = cross_device_note(scenario);
  return report;
}

}  // namespace epochcast::validate

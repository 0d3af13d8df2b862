// Time-to-target runs: what `epochcast run --to-target` measured training for real until a
// target (a test accuracy, a loss) was reached, at each batch size, several seeds each, and the
// gradient noise scale it measured on the way (--noise-scale). Calibration fits the statistical
// figures of the noise-scale model from them; validation compares its predictions point by point.
//
// JSON, versioned by `format` and `version` (docs/formats.md, "Time-to-target runs").
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace epochcast {

inline constexpr std::string_view kTargetRunsFormat = "epochcast-target-runs";
inline constexpr int kTargetRunsVersion = 1;

// One seed's training at one batch size.
struct TargetRun {
  std::uint64_t seed = 0;
  bool reached = false;
  std::int64_t steps = 0;  // optimizer steps when the target was first seen (or when stopped)
  double epochs = 0;       // samples trained / training samples
  double seconds = 0;      // wall time of the training, evaluations excluded
  double metric = 0;       // the metric at that evaluation
};

struct TargetPoint {
  std::int64_t global_batch = 0;
  double learning_rate = 0;
  std::vector<TargetRun> runs;
};

// McCandlish et al.'s B_simple = tr(Sigma) / |G|^2 from per-micro-batch gradients against the
// whole batch's (their appendix A): the two estimates averaged over training, then divided.
struct NoiseScaleMeasurement {
  std::int64_t batch = 0;          // the batch it was measured at
  std::int64_t micro_batches = 0;  // of batch / micro_batches samples each
  double b_simple = 0;             // over the whole training
  // Its spread: the quartiles over windows of training (NoiseScaleRecord), either of them
  // infinite (in JSON kUnboundedQuartile) where enough windows resolved no gradient.
  double low = 0, high = 0;
  std::int64_t windows = 0;
};

// One window's B_simple from its summed estimates. Both are unbiased estimates, so either may
// come out at or below zero: a window whose |G|^2 estimate does (the noise hides the gradient)
// bounds B_simple nowhere, infinity, above every finite window; one whose tr(Sigma) estimate
// does resolved no noise, 0. NaN where either is NaN.
double window_b_simple(double trace, double gradient_squared);

// The runtime's per-step estimates (tr(Sigma) and |G|^2), summed over the whole run and over
// windows of kWindow steps, and what they measured.
class NoiseScaleRecord {
 public:
  static constexpr int kWindow = 10;
  void add(double trace, double gradient_squared);
  // The measurement: B_simple over the whole run and its quartiles over the windows (either
  // unbounded, infinite, once the windows that resolved no gradient are at least a quarter of
  // them for the upper one, three quarters for the lower). Or why there is none: too few steps
  // for a window, a whole-run estimate at or below zero, or one not finite (training diverged).
  std::variant<NoiseScaleMeasurement, std::string> measurement(std::int64_t batch,
                                                               std::int64_t micro_batches) const;

 private:
  double trace_ = 0, gradient_squared_ = 0;
  std::vector<double> windows_;  // window_b_simple of each whole window
  double window_trace_ = 0, window_gradient_ = 0;
  int window_steps_ = 0;
};

inline constexpr std::string_view kUnboundedQuartile = "unbounded";
// A quartile as files and reports write it: samples, or kUnboundedQuartile.
std::string quartile_text(double value);

struct TargetRunsFile {
  std::string scenario_name;
  std::string model;
  std::vector<std::string> arguments;
  std::string device_name;
  std::string torch_version;
  std::string metric;  // kTargetMetricNames
  double value = 0;
  std::int64_t evaluate_every_samples = 0;
  double max_epochs = 0;
  std::int64_t train_samples = 0;  // of the real data set
  std::int64_t test_samples = 0;
  double campaign_seconds = 0;  // wall time of the whole run, evaluations included
  std::vector<TargetPoint> points;
  std::optional<NoiseScaleMeasurement> noise_scale;
};

std::string to_json(const TargetRunsFile& file);
TargetRunsFile load_target_runs(const std::filesystem::path& path);
TargetRunsFile load_target_runs_from_string(const std::string& text, const std::string& name);
// Whether a JSON file says it is a time-to-target file (its "format"), without reading it all.
bool is_target_runs_file(const std::filesystem::path& path);

// Medians over the seeds, one that never reached the target counting as later than any that
// did (nullopt when half of them or more did not); the ranges are over the seeds that reached.
struct TargetMedians {
  double steps = 0, epochs = 0, seconds = 0;
  double epochs_low = 0, epochs_high = 0;  // the seeds' range
  double seconds_low = 0, seconds_high = 0;
  int reached = 0, runs = 0;
};
std::optional<TargetMedians> medians(const TargetPoint& point);

}  // namespace epochcast

// Reading and writing time-to-target runs (strictly: every error names file:line:col and key).
#include "core/measure/target_runs.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/input_error.h"
#include "core/measure/measurements.h"
#include "core/spec/scenario_spec.h"
#include "core/yaml/strict_yaml.h"

namespace epochcast {

namespace {

using Json = nlohmann::ordered_json;
using yaml::MapReader;
using yaml::Node;

TargetRunsFile read(const yaml::Document& document) {
  Node root = document.root();
  if (!root.is_map())
    root.fail("expected a time-to-target file (a JSON object), got " + root.describe());
  MapReader m(root, {"format", "version", "scenario", "model", "arguments", "device_name",
                     "torch_version", "target", "evaluate_every_samples", "max_epochs",
                     "train_samples", "test_samples", "campaign_s", "points", "noise_scale"});
  check_file_kind(m, kTargetRunsFormat, kTargetRunsVersion, "time-to-target file");
  TargetRunsFile f;
  f.scenario_name = m.required("scenario").as_string();
  f.model = m.required("model").as_string();
  if (auto arguments = m.optional("arguments")) {
    for (const Node& item : arguments->items())
      f.arguments.push_back(item.as_string());
  }
  f.device_name = m.required("device_name").as_string();
  f.torch_version = m.required("torch_version").as_string();
  MapReader target(m.required("target"), {"metric", "value"});
  f.metric =
      std::string(kTargetMetricNames[target.required("metric").as_choice(kTargetMetricNames)]);
  f.value = target.required("value").as_number();
  f.evaluate_every_samples = m.required("evaluate_every_samples").as_int_at_least(1);
  f.max_epochs = m.required("max_epochs").as_positive_number();
  f.train_samples = m.required("train_samples").as_int_at_least(1);
  f.test_samples = m.required("test_samples").as_int_at_least(0);
  f.campaign_seconds = m.required("campaign_s").as_number_in(0, 1e9);
  for (const Node& item : m.required("points").items()) {
    MapReader p(item, {"global_batch", "learning_rate", "runs"});
    TargetPoint point;
    point.global_batch = p.required("global_batch").as_int_at_least(1);
    point.learning_rate = p.required("learning_rate").as_positive_number();
    for (const Node& run_node : p.required("runs").items()) {
      MapReader r(run_node, {"seed", "reached", "steps", "epochs", "seconds", "metric"});
      TargetRun run;
      run.seed = static_cast<std::uint64_t>(r.required("seed").as_int_at_least(0));
      run.reached = r.required("reached").as_bool();
      run.steps = r.required("steps").as_int_at_least(0);
      run.epochs = r.required("epochs").as_number_in(0, 1e9);
      run.seconds = r.required("seconds").as_number_in(0, 1e9);
      run.metric = r.required("metric").as_number();
      if (run.reached && (run.steps < 1 || run.epochs <= 0)) {
        run_node.fail("a run that reached the target took at least one step and some epochs");
      }
      for (const TargetRun& earlier : point.runs) {
        if (earlier.seed == run.seed) r.required("seed").fail("this seed is listed twice");
      }
      point.runs.push_back(run);
    }
    for (const TargetPoint& earlier : f.points) {
      if (earlier.global_batch == point.global_batch) {
        item.fail(fmt::format("batch {} is listed twice", point.global_batch));
      }
    }
    f.points.push_back(std::move(point));
  }
  if (auto noise = m.optional("noise_scale")) {
    MapReader n(*noise, {"batch", "micro_batches", "b_simple", "low", "high", "windows"});
    NoiseScaleMeasurement s;
    s.batch = n.required("batch").as_int_at_least(2);
    s.micro_batches = n.required("micro_batches").as_int_at_least(2);
    s.b_simple = n.required("b_simple").as_positive_number();
    // A quartile is a number of samples, or "unbounded" (NoiseScaleRecord).
    auto quartile = [](const Node& node) {
      const std::string text = node.is_scalar() ? node.raw().Scalar() : std::string();
      if (text == kUnboundedQuartile) return std::numeric_limits<double>::infinity();
      double value = 0;
      const char* end = text.data() + text.size();
      const auto [stop, error] = std::from_chars(text.data(), end, value);
      if (text.empty() || error != std::errc() || stop != end || !std::isfinite(value) ||
          value < 0) {
        node.fail(fmt::format("expected a number of samples, at least 0, or \"{}\", got {}",
                              kUnboundedQuartile, node.describe()));
      }
      return value == 0 ? 0.0 : value;  // -0 reads as 0
    };
    const Node low = n.required("low");
    const Node high = n.required("high");
    s.low = quartile(low);
    s.high = quartile(high);
    if (s.low > s.high) {
      auto exact = [](double v) {
        return std::isinf(v) ? std::string(kUnboundedQuartile) : fmt::format("{:g}", v);
      };
      high.fail(fmt::format("expected the upper quartile, at least the lower one ({}), got {}",
                            exact(s.low), exact(s.high)));
    }
    s.windows = n.required("windows").as_int_at_least(1);
    f.noise_scale = s;
  }
  return f;
}

}  // namespace

double window_b_simple(double trace, double gradient_squared) {
  if (std::isnan(trace) || std::isnan(gradient_squared))
    return std::numeric_limits<double>::quiet_NaN();
  if (!(gradient_squared > 0)) return std::numeric_limits<double>::infinity();
  return std::max(0.0, trace / gradient_squared);
}

void NoiseScaleRecord::add(double trace, double gradient_squared) {
  trace_ += trace;
  gradient_squared_ += gradient_squared;
  window_trace_ += trace;
  window_gradient_ += gradient_squared;
  if (++window_steps_ == kWindow) {
    windows_.push_back(window_b_simple(window_trace_, window_gradient_));
    window_trace_ = window_gradient_ = 0;
    window_steps_ = 0;
  }
}

std::variant<NoiseScaleMeasurement, std::string> NoiseScaleRecord::measurement(
    std::int64_t batch, std::int64_t micro_batches) const {
  if (windows_.empty()) {
    return fmt::format("too few steps: {}, a window is {}", window_steps_, kWindow);
  }
  const bool finite =
      std::isfinite(trace_) && std::isfinite(gradient_squared_) &&
      std::none_of(windows_.begin(), windows_.end(), [](double w) { return std::isnan(w); });
  if (!finite) return std::string("an estimate is not finite: did training diverge?");
  if (!(gradient_squared_ > 0)) {
    return fmt::format("the whole run's |G|^2 estimate is {:g}: the noise hides the gradient",
                       gradient_squared_);
  }
  if (!(trace_ > 0)) {
    return fmt::format("the whole run's tr(Sigma) estimate is {:g}: no gradient noise resolved",
                       trace_);
  }
  NoiseScaleMeasurement m;
  m.batch = batch;
  m.micro_batches = micro_batches;
  m.b_simple = trace_ / gradient_squared_;
  if (!std::isfinite(m.b_simple)) {
    return fmt::format("B_simple {:g} / {:g} is not finite", trace_, gradient_squared_);
  }
  std::vector<double> sorted = windows_;
  std::sort(sorted.begin(), sorted.end());
  m.low = sorted[sorted.size() / 4];
  m.high = sorted[(3 * sorted.size()) / 4];
  m.windows = static_cast<std::int64_t>(sorted.size());
  return m;
}

std::string quartile_text(double value) {
  return std::isinf(value) ? std::string(kUnboundedQuartile) : fmt::format("{:.0f}", value);
}

std::string to_json(const TargetRunsFile& f) {
  Json points = Json::array();
  for (const TargetPoint& p : f.points) {
    Json runs = Json::array();
    for (const TargetRun& r : p.runs) {
      runs.push_back({{"seed", r.seed},
                      {"reached", r.reached},
                      {"steps", r.steps},
                      {"epochs", r.epochs},
                      {"seconds", r.seconds},
                      {"metric", r.metric}});
    }
    points.push_back(
        {{"global_batch", p.global_batch}, {"learning_rate", p.learning_rate}, {"runs", runs}});
  }
  Json j{{"format", kTargetRunsFormat},
         {"version", kTargetRunsVersion},
         {"scenario", f.scenario_name},
         {"model", f.model},
         {"arguments", f.arguments},
         {"device_name", f.device_name},
         {"torch_version", f.torch_version},
         {"target", {{"metric", f.metric}, {"value", f.value}}},
         {"evaluate_every_samples", f.evaluate_every_samples},
         {"max_epochs", f.max_epochs},
         {"train_samples", f.train_samples},
         {"test_samples", f.test_samples},
         {"campaign_s", f.campaign_seconds},
         {"points", points}};
  if (f.noise_scale) {
    const NoiseScaleMeasurement& s = *f.noise_scale;
    auto quartile = [](double value) {
      return std::isinf(value) ? Json(kUnboundedQuartile) : Json(value);
    };
    j["noise_scale"] = {{"batch", s.batch},         {"micro_batches", s.micro_batches},
                        {"b_simple", s.b_simple},   {"low", quartile(s.low)},
                        {"high", quartile(s.high)}, {"windows", s.windows}};
  }
  return j.dump(2) + "\n";
}

TargetRunsFile load_target_runs_from_string(const std::string& text, const std::string& name) {
  check_json_syntax(text, name);
  return read(yaml::Document::load_string(text, name));
}

TargetRunsFile load_target_runs(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw InputError(SourceMark{path.string(), 0, 0}, "", "cannot read the file");
  std::stringstream text;
  text << in.rdbuf();
  return load_target_runs_from_string(text.str(), path.string());
}

bool is_target_runs_file(const std::filesystem::path& path) {
  // Only a regular file can be peeked at: a FIFO's first bytes would be gone for its reader.
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) return false;
  std::ifstream in(path);
  std::string head(512, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<std::size_t>(in.gcount()));
  return head.find(std::string("\"") + std::string(kTargetRunsFormat) + "\"") != std::string::npos;
}

std::optional<TargetMedians> medians(const TargetPoint& point) {
  // A seed that never reached the target counts as reaching it later than any that did
  // (censored): the median is a reached seed's only when most seeds reached.
  std::vector<double> steps, epochs, seconds;
  int unreached = 0;
  for (const TargetRun& r : point.runs) {
    if (!r.reached) {
      ++unreached;
      continue;
    }
    steps.push_back(static_cast<double>(r.steps));
    epochs.push_back(r.epochs);
    seconds.push_back(r.seconds);
  }
  if (steps.empty() || unreached >= static_cast<int>(steps.size())) return std::nullopt;
  for (int i = 0; i < unreached; ++i) {  // beyond every reached figure
    steps.push_back(std::numeric_limits<double>::infinity());
    epochs.push_back(std::numeric_limits<double>::infinity());
    seconds.push_back(std::numeric_limits<double>::infinity());
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  };
  TargetMedians m;
  m.steps = median(steps);
  m.epochs = median(epochs);
  m.seconds = median(seconds);
  // The range over the seeds that reached (the others have no figure).
  const auto reached_end = static_cast<std::ptrdiff_t>(steps.size()) - unreached;
  m.epochs_low = *std::min_element(epochs.begin(), epochs.begin() + reached_end);
  m.epochs_high = *std::max_element(epochs.begin(), epochs.begin() + reached_end);
  m.seconds_low = *std::min_element(seconds.begin(), seconds.begin() + reached_end);
  m.seconds_high = *std::max_element(seconds.begin(), seconds.begin() + reached_end);
  m.reached = static_cast<int>(reached_end);
  m.runs = static_cast<int>(point.runs.size());
  return m;
}

}  // namespace epochcast

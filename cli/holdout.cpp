// Hold-out rules for calibrate and validate.
#include "cli/holdout.h"

#include <algorithm>
#include <charconv>
#include <set>

#include <fmt/format.h>

#include "core/input_error.h"

namespace epochcast::cli {

void add_holdout_option(CLI::App& command, std::string& mode) {
  command.add_option("--holdout", mode,
                     "Calibrate on part of the points and validate on the rest: "
                     "every-other-batch, or gpus=N (calibrate on N GPUs)");
}

namespace {

validate::PointFilter parse_mode(const std::string& mode,
                                 const std::vector<validate::MeasuredScenario>& inputs) {
  if (mode == "every-other-batch") {
    std::set<std::int64_t> batches;
    for (const auto& input : inputs)
      for (const MeasuredPoint& p : input.measurements.points)
        if (p.status == PointStatus::ok) batches.insert(p.global_batch);
    std::set<std::int64_t> held;
    int i = 0;
    for (std::int64_t b : batches)
      if (i++ % 2 == 1) held.insert(b);
    return [held](const MeasuredPoint& p) { return held.count(p.global_batch) > 0; };
  }
  if (mode.rfind("gpus=", 0) == 0) {
    const std::string number = mode.substr(5);
    int gpus = 0;
    auto [end, error] = std::from_chars(number.data(), number.data() + number.size(), gpus);
    if (error == std::errc() && end == number.data() + number.size() && gpus >= 1) {
      return [gpus](const MeasuredPoint& p) { return p.gpus != gpus; };
    }
  }
  static constexpr std::string_view kModes[] = {"every-other-batch"};
  throw InputError(SourceMark{"<command line>", 0, 0}, "--holdout",
                   "expected every-other-batch or gpus=N (N >= 1), got '" + mode + "'" +
                       did_you_mean(mode, kModes));
}

}  // namespace

validate::PointFilter holdout_filter(const std::string& mode,
                                     const std::vector<validate::MeasuredScenario>& inputs) {
  if (mode.empty()) return {};
  validate::PointFilter held_out = parse_mode(mode, inputs);
  // Both sides must hold a measured point, or there is nothing to fit or nothing to test.
  int held = 0, used = 0;
  for (const auto& input : inputs) {
    for (const MeasuredPoint& p : input.measurements.points) {
      if (p.status != PointStatus::ok) continue;
      (held_out(p) ? held : used) += 1;
    }
  }
  if (held == 0 || used == 0) {
    throw InputError(
        SourceMark{"<command line>", 0, 0}, "--holdout",
        fmt::format("'{}' leaves {} of the {} measured points that ended ok: "
                    "{}; measure more batch sizes or GPU counts, or drop --holdout",
                    mode, held == 0 ? "none to hold out" : "none to calibrate on", held + used,
                    held == 0 ? "every point is used for calibration" : "every point is held out"));
  }
  return held_out;
}

}  // namespace epochcast::cli

// Hold-out rules for calibrate and validate.
#include "cli/holdout.h"

#include <algorithm>
#include <set>

#include "core/input_error.h"

namespace epochcast::cli {

void add_holdout_option(CLI::App& command, std::string& mode) {
  command.add_option("--holdout", mode,
                     "Calibrate on part of the points and validate on the rest: "
                     "every-other-batch, or gpus=N (calibrate on N GPUs)");
}

validate::PointFilter holdout_filter(const std::string& mode,
                                     const std::vector<validate::MeasuredScenario>& inputs) {
  if (mode.empty()) return {};
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
    try {
      int gpus = std::stoi(mode.substr(5));
      return [gpus](const MeasuredPoint& p) { return p.gpus != gpus; };
    } catch (const std::exception&) {
    }
  }
  throw InputError(SourceMark{"<command line>", 0, 0}, "--holdout",
                   "expected every-other-batch or gpus=N, got '" + mode + "'");
}

}  // namespace epochcast::cli

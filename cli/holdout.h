// --holdout: which measured points calibration leaves out so validation can test on them.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "validate/calibration.h"

namespace epochcast::cli {

void add_holdout_option(CLI::App& command, std::string& mode);

// The held-out points: `every-other-batch` holds out the 2nd, 4th, ... of the measured batch
// sizes (sorted); `gpus=N` calibrates on the points with N GPUs and holds out the others. Empty
// mode: no filter.
validate::PointFilter holdout_filter(const std::string& mode,
                                     const std::vector<validate::MeasuredScenario>& inputs);

void print_calibration(std::FILE* out, const validate::Calibration& calibration);

}  // namespace epochcast::cli

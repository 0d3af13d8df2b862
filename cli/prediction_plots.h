// `epochcast predict --plot`: the figures of a sweep, drawn by gnuplot.
#pragma once

#include <string>
#include <vector>

#include "core/spec/scenario_spec.h"
#include "sim/predict/predict.h"

namespace epochcast::cli {

// Draws, for the points that fit: epoch time against global batch with a line per GPU count
// (`image`), the epoch's breakdown stacked per point (<stem>-breakdown), and, when the sweep
// has several GPU counts, scaling efficiency against GPU count with a line per batch
// (<stem>-scaling). Returns the images written.
// Every file plot_predictions may write for `image` (images, data and scripts).
std::vector<std::string> prediction_plot_files(const std::string& image);

std::vector<std::string> plot_predictions(const ScenarioSpec& scenario,
                                          const std::vector<sim::PointResult>& results,
                                          const std::string& image);

}  // namespace epochcast::cli

// What calibrate and validate read: the runtime's measurement files and results tables (CSV of
// end-to-end figures a user timed or copied from a paper), each turned into measured scenarios.
#pragma once

#include <string>
#include <vector>

#include "core/yaml/strict_yaml.h"
#include "validate/calibration.h"

namespace epochcast::validate {

// A measurement file gives one measured scenario (load_measured_scenario). A results table gives
// one per distinct scenario and overrides of its rows (scenario, precision, strategy and set
// columns), with each row's figure and nothing it does not give; `scenario_override` (the
// command's scenario) replaces the scenario column and `extra` (the command's --set) applies
// after the rows' own overrides. A point that cannot run in its scenario or appears twice is
// refused at its row.
std::vector<MeasuredScenario> load_measurement_input(const std::string& file,
                                                     const std::string& scenario_override = "",
                                                     const std::vector<yaml::Override>& extra = {});

}  // namespace epochcast::validate

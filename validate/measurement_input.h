// What calibrate and validate read: the runtime's measurement files and results tables (CSV of
// end-to-end figures a user timed or copied from a paper), each turned into measured scenarios.
#pragma once

#include <string>
#include <vector>

#include "core/yaml/override.h"
#include "validate/calibration.h"

namespace epochcast::validate {

// A measurement file gives one measured scenario (load_measured_scenario, below). A results table
// gives one per distinct scenario and overrides of its rows (scenario, precision, strategy and set
// columns), with each row's figure and nothing it does not give; `scenario_override` (the
// command's scenario) replaces the scenario column and `extra` (the command's --set) applies
// after the rows' own overrides. A point that cannot run in its scenario or appears twice is
// refused at its row.
std::vector<MeasuredScenario> load_measurement_input(const std::string& file,
                                                     const std::string& scenario_override = "",
                                                     const std::vector<yaml::Override>& extra = {});

// Every file of a command: load_measurement_input of each, where a measurement file that records
// no scenario (`epochcast bench` alone) takes the one the other files ran (refused when they ran
// none or several: then --scenario says which).
std::vector<MeasuredScenario> load_measurement_inputs(const std::vector<std::string>& files,
                                                      const std::string& scenario_override = "");

// Raises InputError naming the file and the point when a point that ended ok could not have
// run in the scenario (more GPUs than its machine, a batch larger than its data set, ...):
// predicting it would compare against something else.
void check_measured_points(const MeasuredScenario& measured);

// Loads a measurement file and the scenario it ran (`scenario_override`, or the recorded
// scenario_file: as recorded from here, else relative to the measurement file, else a bundled
// one), re-applying the recorded --set/--gpus/--batch and then `extra` (the command's own);
// checks its points.
MeasuredScenario load_measured_scenario(const std::string& measurement_file,
                                        const std::string& scenario_override = "",
                                        const std::vector<yaml::Override>& extra = {});

// "" when the measurements' device is the scenario's, else a sentence saying they differ: the
// CPU against a GPU, a GPU whose model (H100, 1080, ...) is not in the measured name, or a CPU
// device measured on another number of threads than it has cores.
std::string measured_device_note(const ScenarioSpec& scenario,
                                 const MeasuredEnvironment& environment);

}  // namespace epochcast::validate

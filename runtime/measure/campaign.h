// A measurement campaign: every point of a scenario's sweep, measured in turn, each result
// written to the output file as soon as it exists (a crash or Ctrl-C keeps what was measured),
// with progress on the terminal, and --resume skipping points already measured.
#pragma once

#include <atomic>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/measure/measurements.h"
#include "core/spec/scenario_spec.h"
#include "runtime/comm/communicator.h"
#include "runtime/train/trainer.h"

namespace epochcast::runtime {

struct CampaignOptions {
  std::filesystem::path output = "measurements.json";
  bool resume = false;
  bool quiet = false;
  // Passes over the sweep: each measures every point once, and a point's record combines its
  // rounds (combine_rounds), so slow drifts of a shared machine reach every point alike.
  int rounds = 1;
  RunOptions run;
  std::vector<std::string> arguments;  // --set/--gpus/--batch as given, recorded in the file
};

// Runs the campaign on every rank (collective); rank 0 writes the file. Returns the process exit
// code: 0 when every point ended (ok, oom, skipped or timeout), 1 when one failed, 130 when
// interrupted. `benchmarks`, when given, are stored in the same file.
int run_campaign(const ScenarioSpec& scenario, const CampaignOptions& options,
                 const DevicePlan& devices, World& world, const std::atomic<bool>& interrupted,
                 const std::optional<Benchmarks>& benchmarks = std::nullopt);

// The points still to measure: those of `sweep` without a finished record in `existing` that
// combines at least `rounds` rounds (one measured in fewer is measured again, in every round).
std::vector<SweepPoint> points_to_measure(const std::vector<SweepPoint>& sweep,
                                          const std::vector<MeasuredPoint>& existing,
                                          int rounds = 1);

// Writes `file` whole (temporary file, then rename).
void save_measurements(const MeasurementFile& file, const std::filesystem::path& path);

}  // namespace epochcast::runtime

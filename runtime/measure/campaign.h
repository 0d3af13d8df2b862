// A measurement campaign: every point of a scenario's sweep, measured in turn, each result
// written to the output file as soon as it exists (a crash, Ctrl-C or SIGTERM keeps what was
// measured), with progress on standard error, and --resume skipping points already measured.
#pragma once

#include <atomic>
#include <optional>
#include <string>
#include <vector>

#include "core/io/output_file.h"
#include "core/measure/measurements.h"
#include "core/spec/scenario_spec.h"
#include "runtime/comm/communicator.h"
#include "runtime/train/trainer.h"

namespace epochcast::runtime {

struct CampaignOptions {
  // -o as given: every rank reads it back for --resume (ranks share the writer's folder).
  std::string output = "measurements.json";
  // Where rank 0 writes, resolved before anything runs (resolve_measurement_output); empty on the
  // other ranks. A file is rewritten after every point; a stream ("-", a FIFO, /dev/null) cannot
  // be rewritten and receives the file once, when the campaign ends, is stopped or times out.
  std::optional<OutputFile> output_file;
  bool resume = false;
  bool quiet = false;
  // Passes over the sweep: each measures every point once, and a point's record combines its
  // rounds (combine_rounds), so slow drifts of a shared machine reach every point alike.
  int rounds = 1;
  RunOptions run;
  std::vector<std::string> arguments;  // --set/--gpus/--batch as given, recorded in the file
};

// A request to stop, made by a signal handler (so both members are lock-free atomics, stored in
// this order): whether one came, for the training loop, and which signal, for the exit status.
struct StopRequest {
  std::atomic<int> signal_number{0};
  std::atomic<bool> requested{false};
};
static_assert(std::atomic<int>::is_always_lock_free && std::atomic<bool>::is_always_lock_free,
              "a signal handler stores them");

// Resolves -o for a campaign (OutputFile::resolve); --resume must read the file back, so it
// refuses a stream or standard output. Raises InputError.
OutputFile resolve_measurement_output(const std::string& path, bool resume);

// Runs the campaign on every rank (collective); rank 0 writes the file. Once `stop` is requested
// the ranks agree to stop after the current iteration, drop the point it cut short, write what is
// finished and return 128 + the signal (130 on a rank that was not signalled itself). Otherwise
// returns 0 when every point ended (ok, oom, skipped or timeout), 1 when one failed.
// `benchmarks`, when given, are stored in the same file.
int run_campaign(const ScenarioSpec& scenario, const CampaignOptions& options,
                 const DevicePlan& devices, World& world, const StopRequest& stop,
                 const std::optional<Benchmarks>& benchmarks = std::nullopt);

// The points still to measure: those of `sweep` without a finished record in `existing` that
// combines at least `rounds` rounds (one measured in fewer is measured again, in every round).
std::vector<SweepPoint> points_to_measure(const std::vector<SweepPoint>& sweep,
                                          const std::vector<MeasuredPoint>& existing,
                                          int rounds = 1);

// Why points measured under `previous` cannot share a file with points measured under `now`
// (in words: the first setting that differs, both values), or "" when they can: the same
// device, library, threads, ranks, allocator and GPU math. Times, hosts and versions of
// epochcast may differ; the device's memory as the OS reports it may too.
std::string resume_mismatch(const MeasuredEnvironment& previous, const MeasuredEnvironment& now);

// Writes `file` whole, the way `output` says (a file is replaced, never left half-written).
void save_measurements(const MeasurementFile& file, const OutputFile& output);

}  // namespace epochcast::runtime

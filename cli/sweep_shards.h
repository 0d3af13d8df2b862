// Shards of predict's and compare's sweeps: one shard computed and written (`--shard K/N
// --shard-output FILE`), and the shards joined again (`epochcast merge`), whose output each
// command renders with the same function as its whole run. Which points a shard takes and what
// its file holds: sim/predict/sweep_shard.h.
#pragma once

#include <cstdio>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/sweep_options.h"
#include "cli/sweep_processes.h"
#include "core/input_error.h"
#include "core/io/output_file.h"
#include "options/shard_option.h"
#include "sim/predict/point_codec.h"
#include "sim/predict/sweep_shard.h"

namespace epochcast::cli {

// With --shard: the shard to compute, checked against the command's other options (a shard
// writes only its file: the table, --csv and the like are merge's, and refused by name);
// nullopt without --shard (then --shard-output is refused). `rendering` names the command's
// options that belong to merge.
std::optional<options::Shard> shard_to_compute(const CLI::App& command,
                                               const options::ShardOptions& shard,
                                               std::initializer_list<const char*> rendering);

// Computes the points of `shard` of the sweep `identity` describes — spread over this job's MPI
// processes when it has several — keeping each point's result or error, and writes them to
// `output` (process 0). `point(i)` simulates point i of the whole sweep. Says what it wrote on
// `notes`, and on standard error which point failed, if one did (merge reports it).
void compute_shard(SweepProcesses& processes, const options::Shard& shard, const OutputFile& output,
                   const sim::SweepIdentity& identity, const SweepSimulation& simulation,
                   const std::function<sim::PointResult(std::size_t)>& point, std::FILE* notes);

// A sweep joined from every one of its shards: what it is, and every point's outcome in order.
struct MergedSweep {
  sim::SweepIdentity sweep;
  std::vector<sim::PointOutcome> outcomes;
  std::string first_file;  // the first shard file given, for messages
};

// merge's own options: the outputs and table options of the command the shards ran.
struct MergeOptions {
  std::string csv;
  std::string json;
  std::string plot;
  bool wide = false;
  bool explain_scaling = false;
  bool details = false;
};

// Parses the sweep's recorded arguments into `parser` (the command's options, declared on it),
// as the command line parsed them when the shards ran. Raises InputError naming the shard file
// when they do not parse (a file from another epochcast).
void parse_recorded_arguments(CLI::App& parser, const MergedSweep& merged);

// An InputError raised while merge loads the shards' sweep again, said with where and how the
// shards ran (merge must load what they loaded).
[[noreturn]] void refuse_reloading(const MergedSweep& merged, const InputError& error);

// `load()`, the sweep loaded again by merge; refused as above when it raises an InputError.
template <typename Load>
auto reload_sweep(const MergedSweep& merged, Load load) -> decltype(load()) {
  try {
    return load();
  } catch (const InputError& e) {
    refuse_reloading(merged, e);
  }
}

// Refuses a sweep loaded again that read other files (by content) than the shards, or has
// another point count.
void check_same_inputs(const MergedSweep& merged, const std::string& inputs, std::size_t points);

// merge for each command, defined beside the command, whose rendering it shares.
int merge_predictions(const MergedSweep& merged, const MergeOptions& options);
int merge_comparisons(const MergedSweep& merged, const MergeOptions& options);

}  // namespace epochcast::cli

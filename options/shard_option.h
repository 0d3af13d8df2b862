// --shard K/N and --shard-output FILE, for the commands whose sweep can be split into shards
// that run apart (predict, compare) and are joined by `epochcast merge`; which points a shard
// takes and what its file holds: sim/predict/sweep_shard.h.
#pragma once

#include <string>
#include <string_view>

#include <CLI/CLI.hpp>

#include "core/io/launcher_environment.h"

namespace epochcast::options {

// Shard `number` of `count`, numbered from 1.
struct Shard {
  int number = 1;
  int count = 1;
};

struct ShardOptions {
  std::string shard;   // --shard as given ("3/8", "auto", "auto/8"); empty: the whole sweep
  std::string output;  // --shard-output FILE
  bool given() const { return !shard.empty(); }
};

void add_shard_options(CLI::App& command, ShardOptions& options);

// --shard's value: "K/N" (1 <= K <= N); "auto", from a Slurm array task (K-th of the array's N
// indices: SLURM_ARRAY_TASK_ID, _MIN, _COUNT); "auto/N", from a Kubernetes indexed Job of N
// completions (K = JOB_COMPLETION_INDEX + 1), or a Slurm array of N tasks. `lookup` reads the
// environment (tests pass their own). Raises InputError naming --shard, or the variable, with
// what to give instead.
Shard parse_shard(std::string_view text, const EnvironmentLookup& lookup = {});

}  // namespace epochcast::options

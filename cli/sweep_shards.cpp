// Shards of predict's and compare's sweeps: one computed and written, and the checks merge makes
// when it loads their sweep again (sweep_shards.h).
#include "cli/sweep_shards.h"

#include <algorithm>

#include <fmt/format.h>

#include "cli/progress.h"
#include "core/input_error.h"

namespace epochcast::cli {

namespace {

const SourceMark kCommandLine{"<command line>", 0, 0};

}  // namespace

std::optional<options::Shard> shard_to_compute(const CLI::App& command,
                                               const options::ShardOptions& shard,
                                               std::initializer_list<const char*> rendering) {
  if (!shard.given()) {
    if (!shard.output.empty()) {
      throw InputError(kCommandLine, "--shard-output",
                       "goes with --shard K/N (which shard of the sweep to write there)");
    }
    return std::nullopt;
  }
  for (const char* name : rendering) {
    if (command.get_option(name)->count() > 0) {
      throw InputError(kCommandLine, name,
                       "is epochcast merge's with --shard: a shard writes only its file "
                       "(--shard-output); give it to merge, which prints and writes what the "
                       "whole sweep would");
    }
  }
  if (shard.output.empty()) {
    throw InputError(kCommandLine, "--shard",
                     "needs --shard-output FILE: the file the shard's results go to, for "
                     "epochcast merge");
  }
  return options::parse_shard(shard.shard);
}

void compute_shard(SweepProcesses& processes, const options::Shard& shard, const OutputFile& output,
                   const sim::SweepIdentity& identity, const SweepSimulation& simulation,
                   const std::function<sim::PointResult(std::size_t)>& point, std::FILE* notes) {
  const std::vector<std::size_t> mine =
      sim::shard_points(identity.points, shard.number, shard.count);
  const std::size_t share = processes.share(mine.size());
  SweepProgress progress(fmt::format("{} shard {}/{}", identity.command, shard.number, shard.count),
                         share);
  std::vector<sim::PointOutcome> outcomes = processes.outcomes(
      mine.size(), simulation.jobs_for(share), [&](std::size_t k) { return point(mine[k]); },
      [&](std::size_t, const sim::PointResult&) { progress.point_done(); });
  if (!processes.writes_output()) return;
  sim::ShardFile file;
  file.sweep = identity;
  file.shard = shard.number;
  file.shards = shard.count;
  for (std::size_t k = 0; k < mine.size(); ++k)
    file.outcomes.emplace_back(mine[k], std::move(outcomes[k]));
  output.write(sim::shard_file_text(file));
  progress.clear();
  fmt::print(notes,
             "Shard {} of {}: {} of the sweep's {} points written to {}; once every shard's "
             "file is written, epochcast merge joins them into what {} without --shard prints "
             "and writes.\n",
             shard.number, shard.count, mine.size(), identity.points, output.given(),
             identity.command);
  const auto failed = std::find_if(file.outcomes.begin(), file.outcomes.end(),
                                   [](const auto& o) { return o.second.failed(); });
  if (failed != file.outcomes.end()) {
    const sim::PointOutcome& o = failed->second;
    fmt::print(stderr, "Point {} of the sweep failed, recorded for merge, which reports it: {}\n",
               failed->first + 1,
               o.input_error ? std::string(o.input_error->what()) : o.internal_error);
  }
  std::fflush(notes);
}

void parse_recorded_arguments(CLI::App& parser, const MergedSweep& merged) {
  // CLI11 takes the words last first.
  std::vector<std::string> words(merged.sweep.arguments.rbegin(), merged.sweep.arguments.rend());
  try {
    parser.parse(words);
  } catch (const CLI::ParseError& e) {
    throw InputError(SourceMark{merged.first_file, 0, 0}, "sweep.arguments",
                     fmt::format("`{}` does not parse as this epochcast's {} ({}): merge with "
                                 "the epochcast that computed the shards ({})",
                                 merged.sweep.command_line(), merged.sweep.command, e.what(),
                                 merged.sweep.epochcast));
  }
}

void refuse_reloading(const MergedSweep& merged, const InputError& error) {
  throw InputError(
      error.mark(), error.key(),
      fmt::format("{} (merge loads the shards' sweep again, `{}`: run it in the folder the "
                  "shards ran in, where the same files are found)",
                  error.problem(), merged.sweep.command_line()));
}

void check_same_inputs(const MergedSweep& merged, const std::string& inputs, std::size_t points) {
  if (inputs == merged.sweep.inputs && points == merged.sweep.points) return;
  throw InputError(
      SourceMark{merged.first_file, 0, 0}, "sweep.inputs",
      fmt::format("`{}` reads other files here than the shards read ({}): a scenario, model, "
                  "machine or profile changed since, or another folder or data folder is "
                  "used; merge where the shards ran, or compute the shards again",
                  merged.sweep.command_line(),
                  points == merged.sweep.points ? "other contents"
                                                : fmt::format("{} points here, {} in the shards",
                                                              points, merged.sweep.points)));
}

}  // namespace epochcast::cli

// `epochcast merge SHARD...`: the shard files of a predict or compare sweep (--shard K/N)
// joined into what the whole run prints and writes, byte for byte.
#include <algorithm>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/commands.h"
#include "cli/sweep_shards.h"
#include "core/input_error.h"
#include "core/io/launcher_environment.h"
#include "sim/predict/sweep_shard.h"

namespace epochcast::cli {

namespace {

struct MergeArgs {
  std::vector<std::string> files;
  MergeOptions options;
};

std::string read_whole(const std::string& name) {
  std::error_code error;
  if (std::filesystem::is_directory(name, error)) {
    throw InputError(SourceMark{name, 0, 0}, "",
                     "is a folder; give merge the shard files --shard-output wrote");
  }
  std::ifstream in(name, std::ios::binary);
  if (!in) {
    throw InputError(SourceMark{name, 0, 0}, "",
                     std::filesystem::exists(name, error)
                         ? "cannot be read (permission denied?)"
                         : "no such file: give merge the shard files --shard-output wrote");
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw InputError(SourceMark{name, 0, 0}, "", "read error");
  return text.str();
}

// Why `file` is not a shard of the same sweep as `first`, in words; empty when it is.
std::string other_sweep(const sim::ShardFile& file, const sim::ShardFile& first,
                        const std::string& first_name) {
  const sim::SweepIdentity& a = file.sweep;
  const sim::SweepIdentity& b = first.sweep;
  if (a.epochcast != b.epochcast) {
    return fmt::format(
        "was computed by {}, {} by {}: the shards of a sweep come from one "
        "epochcast, so compute them again with one",
        a.epochcast, first_name, b.epochcast);
  }
  if (a.command != b.command || a.arguments != b.arguments) {
    return fmt::format("is a shard of `{}`, {} of `{}`: merge the shards of one sweep",
                       a.command_line(), first_name, b.command_line());
  }
  if (a.id() != b.id()) {
    return fmt::format(
        "read other files than {} (same command, other contents: a scenario, "
        "model or machine changed between the shards, or they ran in other "
        "folders): compute the shards again from the same files",
        first_name);
  }
  if (file.shards != first.shards) {
    return fmt::format("is shard {} of {}, {} shard {} of {}: merge the shards of one split",
                       file.shard, file.shards, first_name, first.shard, first.shards);
  }
  return "";
}

// The shards joined: every shard of the sweep exactly once, all of one sweep.
MergedSweep join(const std::vector<std::string>& names) {
  std::vector<sim::ShardFile> files;
  for (const std::string& name : names)
    files.push_back(sim::read_shard_file(read_whole(name), name));
  const sim::ShardFile& first = files.front();
  std::map<int, std::string> given;  // shard number -> file
  for (std::size_t i = 0; i < files.size(); ++i) {
    if (const std::string why = other_sweep(files[i], first, names.front()); !why.empty())
      throw InputError(SourceMark{names[i], 0, 0}, "sweep", why);
    const auto [at, added] = given.emplace(files[i].shard, names[i]);
    if (!added) {
      throw InputError(SourceMark{names[i], 0, 0}, "shard",
                       at->second == names[i]
                           ? std::string("is given twice: give each shard once")
                           : fmt::format("is shard {} of {} again ({} is too): give each shard "
                                         "once",
                                         files[i].shard, first.shards, at->second));
    }
  }
  for (int k = 1; k <= first.shards; ++k) {
    if (given.contains(k)) continue;
    std::vector<int> numbers;
    for (const auto& [number, name] : given)
      numbers.push_back(number);
    throw InputError(
        SourceMark{"<command line>", 0, 0}, "shards",
        fmt::format("shard {} of {} is missing (given: {}); compute it with `{} --shard {}/{} "
                    "--shard-output FILE` and merge every shard's file",
                    k, first.shards, fmt::join(numbers, ", "), first.sweep.command_line(), k,
                    first.shards));
  }
  MergedSweep merged;
  merged.sweep = first.sweep;
  merged.first_file = names.front();
  merged.outcomes.resize(first.sweep.points);
  for (sim::ShardFile& file : files) {
    for (auto& [index, outcome] : file.outcomes)
      merged.outcomes[index] = std::move(outcome);
  }
  return merged;
}

}  // namespace

Command add_merge_command(CLI::App& app) {
  auto args = std::make_shared<MergeArgs>();
  CLI::App* command = app.add_subcommand(
      "merge",
      "Join the shard files of a predict or compare sweep split with --shard K/N: prints and "
      "writes what the command without --shard does, byte for byte");
  command
      ->add_option("shards", args->files,
                   "The shard files (--shard-output), every shard of the sweep once, in any order")
      ->required();
  MergeOptions& o = args->options;
  command->add_option("--csv", o.csv, "Also write the results as CSV to this file, as --csv does");
  command->add_option("--json", o.json,
                      "Also write the results as JSON to this file, as --json does");
  command->add_option("--plot", o.plot,
                      "Draw predict's figures to this .png or .svg, as predict --plot does");
  command->add_flag("--wide", o.wide, "Print every column whatever the terminal's width");
  command->add_flag("--explain-scaling", o.explain_scaling,
                    "After predict's table, where each point loses its scaling, as predict "
                    "--explain-scaling does");
  command->add_flag("--details", o.details,
                    "Also print each machine's full predict table, as compare --details does");
  return [args] {
    // Joining is one process's work: started several times, each would write the same files.
    if (const LaunchEnvironment launch = read_launch_environment(); launch.size > 1) {
      throw InputError(SourceMark{"<environment>", 0, 0}, launch.rank_variable,
                       fmt::format("{} processes of epochcast merge were started ({}): merge "
                                   "joins the shards in one process, so run it once, after "
                                   "every shard has written its file",
                                   launch.size, name_of(launch.launcher)));
    }
    const MergedSweep merged = join(args->files);
    return merged.sweep.command == "predict" ? merge_predictions(merged, args->options)
                                             : merge_comparisons(merged, args->options);
  };
}

}  // namespace epochcast::cli

// --shard and --shard-output (shard_option.h).
#include "options/shard_option.h"

#include <charconv>
#include <optional>

#include <fmt/format.h>

#include "core/input_error.h"

namespace epochcast::options {

namespace {

// More shards than any sweep has points would only make empty shard files.
constexpr int kMaxShards = 1'000'000;

[[noreturn]] void refuse(const std::string& problem) {
  throw InputError(SourceMark{"<command line>", 0, 0}, "--shard", problem);
}

// A whole number from 0 to kMaxShards, nullopt for anything else.
std::optional<int> whole_number(std::string_view text) {
  int value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size() || value < 0 ||
      value > kMaxShards)
    return std::nullopt;
  return value;
}

constexpr std::string_view kForms =
    "expected K/N (shard K of N, K from 1 to N), auto (from a Slurm job array) or auto/N (from a "
    "Kubernetes indexed Job of N completions)";

}  // namespace

void add_shard_options(CLI::App& command, ShardOptions& options) {
  command.add_option(
      "--shard", options.shard,
      "Simulate only shard K of N of the sweep, given as K/N with K from 1 to N (every N-th "
      "point from the K-th), and write its results to --shard-output for `epochcast merge`, "
      "which prints and writes what the whole run would; auto takes K and N from a Slurm job "
      "array (SLURM_ARRAY_TASK_ID, _MIN and _COUNT), auto/N takes K from a Kubernetes indexed "
      "Job of N completions (JOB_COMPLETION_INDEX, from 0)");
  command.add_option("--shard-output", options.output,
                     "The shard file --shard writes (JSON; one per shard, given together to "
                     "`epochcast merge`)");
}

Shard parse_shard(std::string_view text, const EnvironmentLookup& lookup) {
  const std::size_t slash = text.find('/');
  const std::string_view first = text.substr(0, slash);
  std::optional<int> count;
  if (slash != std::string_view::npos) {
    count = whole_number(text.substr(slash + 1));
    if (!count || *count < 1) {
      refuse(
          fmt::format("{}; got '{}' (N is a whole number from 1 to {})", kForms, text, kMaxShards));
    }
  }
  if (first != "auto") {
    const std::optional<int> number = whole_number(first);
    if (!number || !count) refuse(fmt::format("{}; got '{}'", kForms, text));
    if (*number < 1 || *number > *count) {
      refuse(fmt::format(
          "shard {} of {} does not exist: shards are numbered from 1 to {}{}", *number, *count,
          *count,
          *number == 0 ? " (an index from 0, as Slurm arrays and Kubernetes indexed Jobs give, "
                         "is read by --shard auto or auto/N)"
                       : ""));
    }
    return Shard{*number, *count};
  }
  const std::optional<ArrayTask> task = read_array_task(lookup);
  if (!task) {
    refuse(fmt::format(
        "{} reads the task of a job array from SLURM_ARRAY_TASK_ID (sbatch --array) or "
        "JOB_COMPLETION_INDEX (a Kubernetes indexed Job), and neither is set: give the shard as "
        "K/N{}",
        text, count ? fmt::format(" (1/{} to {}/{})", *count, *count, *count) : ""));
  }
  if (!task->count && !count) {
    refuse(
        fmt::format("{} gives the shard's number but not how many there are: give the "
                    "Job's completions as --shard auto/N",
                    task->source));
  }
  if (task->count && count && *task->count != *count) {
    refuse(
        fmt::format("{}, but --shard says {} shards: give --shard auto (the array's {}) or "
                    "an array of {} tasks",
                    task->source, *count, *task->count, *count));
  }
  const int shards = count ? *count : *task->count;
  if (task->index >= shards) {
    refuse(
        fmt::format("{} is past the {} shards of --shard {}: the Job's completions and N "
                    "must agree",
                    task->source, shards, text));
  }
  return Shard{task->index + 1, shards};
}

}  // namespace epochcast::options

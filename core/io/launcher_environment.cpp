// Reads the variables launchers set (launcher_environment.h).
#include "core/io/launcher_environment.h"

#include <charconv>
#include <cstdlib>
#include <optional>

#include <fmt/format.h>

#include "core/input_error.h"

namespace epochcast {

namespace {

class Variables {
 public:
  explicit Variables(const EnvironmentLookup& lookup) : lookup_(lookup) {}

  bool has(const char* name) const { return get(name) != nullptr; }

  // The whole number in `name`, nullopt when unset; refused when set but not one in
  // [lower, upper].
  std::optional<int> integer(const char* name, int lower, int upper) const {
    const char* text = get(name);
    if (text == nullptr) return std::nullopt;
    const std::string_view value(text);
    int number = 0;
    const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), number);
    if (value.empty() || error != std::errc() || end != value.data() + value.size() ||
        number < lower || number > upper) {
      throw InputError(SourceMark{"<environment>", 0, 0}, name,
                       fmt::format("expected a whole number from {} to {}, got '{}'; the "
                                   "launcher sets it, so check what the job script exports",
                                   lower, upper, value));
    }
    return number;
  }

  std::string text(const char* name) const {
    const char* value = get(name);
    return value != nullptr ? value : "";
  }

 private:
  const char* get(const char* name) const { return lookup_ ? lookup_(name) : std::getenv(name); }
  const EnvironmentLookup& lookup_;
};

constexpr int kMaxRanks = 1 << 24;

// Rank, size and local rank from one launcher's variables; the rank checked against the size.
bool read_ranks(const Variables& v, const char* rank, const char* size, const char* local,
                LaunchEnvironment& out) {
  const std::optional<int> n = v.integer(size, 1, kMaxRanks);
  if (!n) return false;
  out.size = *n;
  out.rank = v.integer(rank, 0, *n - 1).value_or(0);
  out.local_rank = local != nullptr ? v.integer(local, 0, kMaxRanks).value_or(0) : 0;
  out.rank_variable = rank;
  return true;
}

}  // namespace

std::string_view name_of(Launcher launcher) {
  switch (launcher) {
    case Launcher::none:
      return "none";
    case Launcher::mpi:
      return "mpi";
    case Launcher::torchrun:
      return "torchrun";
    case Launcher::slurm:
      return "slurm";
  }
  return "none";
}

LaunchEnvironment read_launch_environment(const EnvironmentLookup& lookup) {
  const Variables v(lookup);
  LaunchEnvironment out;
  if (read_ranks(v, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                 out)) {
    out.launcher = Launcher::mpi;
    return out;
  }
  if (read_ranks(v, "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", out)) {
    if (v.has("SLURM_LOCALID")) out.local_rank = *v.integer("SLURM_LOCALID", 0, kMaxRanks);
    out.launcher = Launcher::mpi;
    return out;
  }
  // PMIx (srun --mpi=pmix, prterun) gives the rank but not always the size: Slurm's task count
  // is the size there.
  if (v.has("PMIX_RANK")) {
    if (!read_ranks(v, "PMIX_RANK", "SLURM_NTASKS", "SLURM_LOCALID", out)) {
      out.size = v.integer("PMIX_SIZE", 1, kMaxRanks).value_or(1);
      out.rank = v.integer("PMIX_RANK", 0, out.size - 1).value_or(0);
      out.rank_variable = "PMIX_RANK";
    }
    out.launcher = Launcher::mpi;
    return out;
  }
  if (read_ranks(v, "RANK", "WORLD_SIZE", "LOCAL_RANK", out)) {
    out.launcher = Launcher::torchrun;
    out.master_port_taken_by_torchrun = v.text("TORCHELASTIC_USE_AGENT_STORE") == "True";
  } else if (v.has("SLURM_STEP_ID") &&
             (read_ranks(v, "SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_LOCALID", out) ||
              read_ranks(v, "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", out))) {
    // The step's task count first: `srun -E` (--preserve-env) passes the job's SLURM_NTASKS on.
    out.launcher = Launcher::slurm;
  } else {
    return out;
  }
  out.master_address = v.text("MASTER_ADDR");
  out.master_port = v.integer("MASTER_PORT", 1, 65535).value_or(0);
  return out;
}

std::optional<ArrayTask> read_array_task(const EnvironmentLookup& lookup) {
  const Variables v(lookup);
  // Slurm's array indices are at most MaxArraySize - 1 (4,000,001 at most); Kubernetes'
  // completions at most 100,000.
  constexpr int kMaxIndex = (1 << 30) - 1;
  if (const std::optional<int> id = v.integer("SLURM_ARRAY_TASK_ID", 0, kMaxIndex)) {
    auto required = [&](const char* name, int lower) {
      const std::optional<int> value = v.integer(name, lower, kMaxIndex);
      if (!value) {
        throw InputError(SourceMark{"<environment>", 0, 0}, name,
                         fmt::format("is not set, though SLURM_ARRAY_TASK_ID is ({}): Slurm sets "
                                     "both in an array job's tasks, so check what the job script "
                                     "exports",
                                     *id));
      }
      return *value;
    };
    const int min = required("SLURM_ARRAY_TASK_MIN", 0);
    const int count = required("SLURM_ARRAY_TASK_COUNT", 1);
    const int step = v.integer("SLURM_ARRAY_TASK_STEP", 1, kMaxIndex).value_or(1);
    const std::optional<int> max = v.integer("SLURM_ARRAY_TASK_MAX", 0, kMaxIndex);
    const long long offset = static_cast<long long>(*id) - min;
    const bool one_range =
        !max || static_cast<long long>(min) + static_cast<long long>(count - 1) * step == *max;
    if (!one_range || offset < 0 || offset % step != 0 || offset / step >= count) {
      throw InputError(
          SourceMark{"<environment>", 0, 0}, "SLURM_ARRAY_TASK_ID",
          fmt::format("task {} of an array from {}{} with {} tasks{} is not where a range's "
                      "indices would be: a task's place is known only in an array of one range "
                      "(sbatch --array=1-{}, or with a step as in --array=0-{}:2)",
                      *id, min, max ? fmt::format(" to {}", *max) : "", count,
                      step > 1 ? fmt::format(" in steps of {}", step) : "", count,
                      2 * (count - 1)));
    }
    ArrayTask task;
    task.index = static_cast<int>(offset / step);
    task.count = count;
    task.source = fmt::format("SLURM_ARRAY_TASK_ID={} (from {}{}, {} tasks)", *id, min,
                              step > 1 ? fmt::format(" in steps of {}", step) : "", count);
    return task;
  }
  if (const std::optional<int> index = v.integer("JOB_COMPLETION_INDEX", 0, kMaxIndex)) {
    ArrayTask task;
    task.index = *index;
    task.source = fmt::format("JOB_COMPLETION_INDEX={}", *index);
    return task;
  }
  return std::nullopt;
}

}  // namespace epochcast

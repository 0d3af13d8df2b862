// --every-rank, --jobs and --max-memory (see sweep_options.h).
#include "cli/sweep_options.h"

#include "core/io/memory_limit.h"
#include "options/command_line.h"
#include "sim/predict/point_pool.h"

namespace epochcast::cli {

int SweepSimulation::jobs_for(std::size_t points) const {
  return jobs > 0 ? jobs : sim::default_jobs(points);
}

std::uint64_t SweepSimulation::cap_memory() const {
  const std::uint64_t bytes = max_memory_gib > 0
                                  ? static_cast<std::uint64_t>(max_memory_gib * 1073741824.0)
                                  : default_memory_limit_bytes();
  return bytes > 0 && cap_process_memory(bytes) ? bytes : 0;
}

void add_sweep_simulation_options(CLI::App& command, SweepSimulation& options) {
  command
      .add_option("--jobs,-j", options.jobs,
                  "Threads simulating the sweep's points at once (default: one per core; the "
                  "output is the same with any number)")
      ->check(options::integer_within(1, 4096));
  command
      .add_option("--max-memory", options.max_memory_gib,
                  "GiB this process may take for its simulations (default: nine tenths of the "
                  "machine's memory); a point that needs more is refused by name (every rank "
                  "of a very large cluster, a long trace)")
      ->check(CLI::Range(0.01, 1.0e6));
  command.add_flag("--every-rank", options.every_rank,
                   "Across nodes, simulate every rank instead of letting node 0 stand for "
                   "identical nodes (slower; asymmetric fabrics always get it)");
}

}  // namespace epochcast::cli

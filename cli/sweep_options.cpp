// --every-rank and --jobs (see sweep_options.h).
#include "cli/sweep_options.h"

#include "options/command_line.h"
#include "sim/predict/point_pool.h"

namespace epochcast::cli {

int SweepSimulation::jobs_for(std::size_t points) const {
  return jobs > 0 ? jobs : sim::default_jobs(points);
}

void add_sweep_simulation_options(CLI::App& command, SweepSimulation& options) {
  command
      .add_option("--jobs,-j", options.jobs,
                  "Threads simulating the sweep's points at once (default: one per core; the "
                  "output is the same with any number)")
      ->check(options::integer_within(1, 4096));
  command.add_flag("--every-rank", options.every_rank,
                   "Across nodes, simulate every rank instead of letting node 0 stand for "
                   "identical nodes (slower; asymmetric fabrics always get it)");
}

}  // namespace epochcast::cli

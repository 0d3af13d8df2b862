// How predict and compare simulate a sweep: --every-rank and --jobs, declared once for both.
#pragma once

#include <cstddef>

#include <CLI/CLI.hpp>

namespace epochcast::cli {

struct SweepSimulation {
  bool every_rank = false;
  int jobs = 0;  // 0: one thread per core
  int jobs_for(std::size_t points) const;
};

void add_sweep_simulation_options(CLI::App& command, SweepSimulation& options);

}  // namespace epochcast::cli

// How predict and compare simulate a sweep: --every-rank, --jobs and --max-memory, declared once
// for both.
#pragma once

#include <cstddef>
#include <cstdint>

#include <CLI/CLI.hpp>

namespace epochcast::cli {

struct SweepSimulation {
  bool every_rank = false;
  int jobs = 0;               // 0: one thread per core
  double max_memory_gib = 0;  // 0: default_memory_limit_bytes()
  int jobs_for(std::size_t points) const;
  // Caps this process at --max-memory (core/io/memory_limit.h) and returns the cap in bytes
  // (0: none could be set), for the message of a point that needs more.
  std::uint64_t cap_memory() const;
};

void add_sweep_simulation_options(CLI::App& command, SweepSimulation& options);

}  // namespace epochcast::cli

// Microbenchmarks that calibration needs, measured the way nccl-tests measures: collectives over
// message sizes (algbw, busbw), host<->device and peer copy bandwidth, per-op dispatch and kernel
// launch cost, GEMM and convolution throughput per precision, and the largest batch that fits.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/measure/measurements.h"
#include "core/spec/scenario_spec.h"
#include "runtime/comm/communicator.h"
#include "runtime/train/trainer.h"

namespace epochcast::runtime {

inline constexpr std::string_view kBenchSections[] = {"collectives", "copies", "dispatch",
                                                      "throughput", "fit"};

struct BenchOptions {
  std::set<std::string> sections;  // of kBenchSections; empty: all but fit
  std::int64_t min_collective_bytes = 1024;
  std::int64_t max_collective_bytes = 0;  // 0: 1 GiB on GPUs, 64 MiB on the CPU
  int warmup_iterations = 5;              // nccl-tests' defaults
  int timed_iterations = 20;
  const ScenarioSpec* scenario = nullptr;  // the model for `fit`
  std::int64_t fit_cap = 0;                // 0: the data set's size
};

// nccl-tests' bus bandwidth for all-reduce: algbw x 2(n-1)/n, the traffic each link carries.
double all_reduce_bus_bandwidth(double algbw_gbps, int ranks);

// Collective over the world (every rank calls it); rank 0's result is the one to keep.
Benchmarks run_benchmarks(const BenchOptions& options, const DevicePlan& devices, World& world);

}  // namespace epochcast::runtime

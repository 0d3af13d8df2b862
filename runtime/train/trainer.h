// Measures one sweep point by training for real: the model built from its spec, the synthetic
// loader, cross-entropy, backward, the optimizer, in the scenario's precision and strategy.
//
// Timing follows nccl-tests: warm-up iterations are excluded, then every timed iteration is
// measured (CUDA events on a GPU, a monotonic clock on the CPU); each iteration's figure is the
// maximum across ranks; the point reports median, p10 and p90 besides the mean.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include <torch/torch.h>

#include "core/measure/measurements.h"
#include "core/spec/scenario_spec.h"
#include "runtime/comm/communicator.h"

namespace epochcast::runtime {

enum class DeviceChoice { automatic, cpu, cuda };

struct RunOptions {
  int warmup_iterations = 3;
  int timed_iterations = 10;
  bool full_epoch = false;      // also run (and time) one whole epoch
  bool profile_layers = false;  // per-layer forward/backward times, in a separate pass
  // A directory: each point's kernel trace (runtime/train/kernel_trace.h), written by rank 0
  // after its timings. Empty: none.
  std::string kernel_trace;
  double timeout_s = 600;  // per point: stops timing and records `timeout`
  std::uint64_t seed = 1;
  DeviceChoice device = DeviceChoice::automatic;
  int validation_iterations = 3;  // timed forward-only iterations when the data set has some
};

// What this process can run on.
struct DevicePlan {
  bool cuda = false;
  int device_count = 0;  // CUDA devices visible to this process
};
DevicePlan plan_devices(DeviceChoice choice);

// Whether the point can run here, and if not, why (in words). Identical on every rank.
std::string why_not_runnable(const ScenarioSpec& scenario, const SweepPoint& point,
                             const DevicePlan& devices, const World& world);

// Collective over the world: every rank calls it for every point. Ranks outside the point's
// group return after the others have finished. `stop_requested` becomes true when a signal asks
// the run to stop (SIGINT, SIGTERM; it is set asynchronously): the group agrees on it after each
// warm-up, timed and full-epoch step, and a point cut short reports `failed` with reason
// "interrupted" (not a measurement: --resume measures it again).
MeasuredPoint measure_point(const ScenarioSpec& scenario, const SweepPoint& point,
                            const RunOptions& options, const DevicePlan& devices, World& world,
                            const std::atomic<bool>& stop_requested);

// An FNV-1a hash of every parameter's bytes: equal hashes on all ranks mean ddp kept the
// replicas identical.
std::uint64_t parameter_hash(const std::vector<torch::Tensor>& parameters);

}  // namespace epochcast::runtime

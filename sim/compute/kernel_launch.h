// How many thread blocks a kernel launches on a GPU, by the launch rules of the library that
// runs it (ATen, PyTorch 2.1; the records come from core/model/kernel_launches.h). The device
// model's occupancy counts these blocks against the GPU's SMs: a kernel with fewer blocks than
// SMs leaves the rest idle (sim/compute/device_model.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/model/analysis.h"

namespace epochcast::sim {

// What the rules need of the GPU and the run.
struct LaunchTarget {
  int sm_count = 1;
  int max_threads_per_sm = 2048;
  bool channels_last = false;  // memory_format: channels_last (NHWC for 4-D activations)
};

struct LaunchGrid {
  double blocks = 1;  // in all (a double: sizes from user input may be huge)
  int threads = 1;    // per block
  std::string rule;   // in words, for `inspect`: "a block per row (8,192 rows)"
};

// The grid `launch` makes at `batch` samples on `target`. At least one block.
LaunchGrid launch_grid(const KernelLaunch& launch, std::int64_t batch, const LaunchTarget& target);

}  // namespace epochcast::sim

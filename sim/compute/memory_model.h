// Device memory of one training step on one GPU, and the largest batch that fits.
//
//   peak = context + (weights + gradients + optimizer state + low-precision weight copies
//                     + workspace + activations held for backward + transient gradients)
//                    x (1 + allocator overhead)
//
// Activations and transient gradients grow with the batch; everything else does not, so the
// largest batch that fits is floor((capacity - fixed) / per sample).
#pragma once

#include <cstdint>

#include "core/model/analysis.h"
#include "core/spec/profile_spec.h"
#include "core/spec/scenario_spec.h"

namespace epochcast::sim {

struct MemoryEstimate {
  Bytes capacity;
  Bytes context;
  Bytes weights;
  Bytes gradients;
  Bytes optimizer_state;
  Bytes weight_copies;  // fp16/bf16 copies autocast keeps during forward
  Bytes workspace;
  Bytes activations;  // held for backward, at this batch
  Bytes transient;    // gradients in flight during backward, at this batch
  Bytes strategy_buffers;
  Bytes peak;
  bool fits = false;
  std::int64_t largest_batch = 0;  // per GPU; 0 when not even one sample fits
};

// `analysis` must be made with the precision's cost options (activation sizes).
// `strategy_buffers`: what the parallel strategy keeps besides (DDP's gradient buckets, the
// batch and gathered outputs DataParallel holds on GPU 0).
MemoryEstimate estimate_memory(const ModelAnalysis& analysis, std::int64_t batch,
                               Optimizer optimizer, TrainingPrecision precision,
                               const HardwareProfile& profile, Bytes capacity,
                               Bytes strategy_buffers = Bytes(0));

}  // namespace epochcast::sim

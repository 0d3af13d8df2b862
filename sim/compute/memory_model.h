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

// How a sharded strategy divides the model's states among its ranks (ZeRO, Rajbhandari et al.
// 2020, section 5: stage 1 partitions the optimizer state, stage 2 the gradients too, stage 3
// the parameters too; each rank keeps 1/ranks of what is partitioned).
struct StateSharding {
  int ranks = 1;
  bool optimizer = false;
  bool gradients = false;
  bool weights = false;
  // The compute's copies of the weights are made when they are gathered (FSDP's mixed
  // precision casts each unit as it is all-gathered), so autocast caches none.
  bool copies_made_by_gather = false;
  // The model states live in host memory (FSDP's CPU offload): none of them on the GPU.
  bool offloaded = false;
};
// Bytes of the model states per rank, for `params` parameters of `weight`, `gradient` and
// `optimizer` bytes each: the partitioned ones divided among the ranks. With the paper's mixed-
// precision Adam (2 + 2 + 12 bytes) that is its Figure 1: 16 params without sharding, 4 + 12/N
// at stage 1, 2 + 14/N at stage 2, 16/N at stage 3.
double model_state_bytes(double params, double weight, double gradient, double optimizer,
                         const StateSharding& sharding);
// Bytes of optimizer state per parameter (torch.optim's: Adam's two moments, SGD's momentum).
std::int64_t optimizer_state_per_param(Optimizer optimizer);

// The activations kept from forward to backward: every layer's saved tensors; with blocks
// checkpointed, each block's input instead of its own tensors, plus the tensors of the one
// block being recomputed (the largest), alive during its backward.
PerBatch<Bytes> held_activations(const ModelAnalysis& analysis,
                                 ActivationCheckpointing checkpointing);

// `analysis` must be made with the precision's cost options (activation sizes).
// `strategy_buffers`: what the parallel strategy keeps besides (DDP's gradient buckets, the
// batch and gathered outputs DataParallel holds on GPU 0, FSDP's gathered units).
MemoryEstimate estimate_memory(
    const ModelAnalysis& analysis, std::int64_t batch, Optimizer optimizer,
    TrainingPrecision precision, const HardwareProfile& profile, Bytes capacity,
    Bytes strategy_buffers = Bytes(0), const StateSharding& sharding = {},
    ActivationCheckpointing checkpointing = ActivationCheckpointing::none);

}  // namespace epochcast::sim

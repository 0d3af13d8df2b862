// PyTorch's DistributedDataParallel as iteration plans: a process per GPU; gradients
// all-reduced in buckets as backward produces them, overlapping it; every rank steps.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/strategy/iteration_plan.h"
#include "sim/strategy/multi_gpu.h"

namespace epochcast::sim {

// DistributedDataParallel's broadcast_bucket_size, for its per-forward buffer sync.
inline constexpr std::int64_t kDdpBufferBroadcastBytes = 250 * kMiB;

// torch's ZeroRedundancyOptimizer over DDP (zero1): each rank's optimizer steps the parameter
// tensors it owns, then every tensor is broadcast from its owner to the others (_sync_params,
// a broadcast a tensor without parameters_as_bucket_view).
struct ShardedOptimizer {
  const StepContext* rank_shard = nullptr;  // rank 0's tensors, standing for every rank's
  struct Broadcast {
    int owner = 0;  // the rank that stepped it
    Bytes bytes;
  };
  std::vector<Broadcast> broadcasts;  // in _sync_params' order: rank by rank
};

// DistributedDataParallel, `batch` samples per rank. With gradient accumulation, a step either
// only accumulates (`communicate` false: no all-reduce, no optimizer) or completes the cycle.
// `zero_grad` opens a cycle. `sharded`: the optimizer is ZeroRedundancyOptimizer's.
IterationPlan ddp_training_step(const MultiGpuContext& context, std::int64_t batch,
                                bool communicate, bool zero_grad,
                                const ShardedOptimizer* sharded = nullptr);
IterationPlan ddp_validation_step(const MultiGpuContext& context, std::int64_t batch);

// DDP's gradient buckets, in the order they are reduced. A bucket closes once it holds first_cap
// (the first assigned) or cap (the others) bytes, so by its last tensor it may hold more, as in
// PyTorch's reducer. Assigned in the order the gradients become ready (reverse registration),
// as the reducer rebuilds them after the first step; or, where it never rebuilds them
// (find_unused_parameters), as DistributedDataParallel assigns them at construction: in
// registration order, the first cap on the first-registered tensors, then reversed, so that
// small bucket is the last reduced.
struct GradientBucket {
  std::vector<std::size_t> tensors;  // indices into the analysis' param_tensors
  Bytes bytes;
};
enum class BucketOrder { gradient_ready, registration };
std::vector<GradientBucket> ddp_buckets(const ModelAnalysis& analysis, Bytes first_cap, Bytes cap,
                                        BucketOrder order = BucketOrder::gradient_ready);

// What DDP holds beside the model: the gradient buckets, unless the gradients are views into
// them, and a compression hook's half-precision copy of every bucket (gradient_dtype).
Bytes ddp_bucket_bytes(const StepContext& context);

}  // namespace epochcast::sim

// PyTorch's DistributedDataParallel as iteration plans: a process per GPU; gradients
// all-reduced in buckets as backward produces them, overlapping it; every rank steps.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/strategy/iteration_plan.h"
#include "sim/strategy/multi_gpu.h"

namespace epochcast::sim {

class StrategyModel;

// DistributedDataParallel's broadcast_bucket_size, for its per-forward buffer sync.
inline constexpr std::int64_t kDdpBufferBroadcastBytes = 250 * kMiB;

// DistributedDataParallel, `batch` samples per rank. With gradient accumulation, a step either
// only accumulates (`communicate` false: no all-reduce, no optimizer) or completes the cycle.
// `zero_grad` opens a cycle.
IterationPlan ddp_training_step(const MultiGpuContext& context, std::int64_t batch,
                                bool communicate, bool zero_grad);
IterationPlan ddp_validation_step(const MultiGpuContext& context, std::int64_t batch);

// DDP's gradient buckets: parameter tensors in reverse registration order; a bucket closes once
// it holds first_cap (the first) or cap (the others) bytes, so by its last tensor it may hold
// more, as in PyTorch's reducer.
struct GradientBucket {
  std::vector<std::size_t> tensors;  // indices into the analysis' param_tensors
  Bytes bytes;
};
std::vector<GradientBucket> ddp_buckets(const ModelAnalysis& analysis, Bytes first_cap, Bytes cap);

// The strategy `ddp`.
const StrategyModel& ddp_strategy();

}  // namespace epochcast::sim

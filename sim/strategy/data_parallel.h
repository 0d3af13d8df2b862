// PyTorch's nn.DataParallel as iteration plans: one process; GPU 0 scatters the batch,
// broadcasts the model to the replicas, gathers their outputs and alone steps the optimizer.
#pragma once

#include <cstdint>

#include "sim/strategy/iteration_plan.h"
#include "sim/strategy/multi_gpu.h"

namespace epochcast::sim {

// nn.DataParallel's parameter buckets (torch.cuda.comm's 10 MiB buffers), in registration order.
inline constexpr std::int64_t kDataParallelBucketBytes = 10 * kMiB;

// DataParallel over the first `gpus` GPUs with a global batch of `batch`.
IterationPlan data_parallel_training_step(const MultiGpuContext& context, int gpus,
                                          std::int64_t batch);
IterationPlan data_parallel_validation_step(const MultiGpuContext& context, int gpus,
                                            std::int64_t batch);

// The strategy `dp` (on one GPU, a plain step on it).

}  // namespace epochcast::sim

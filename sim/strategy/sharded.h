// Sharded data parallelism as PyTorch runs it (ZeRO, Rajbhandari et al. 2020):
//   zero1 - DistributedDataParallel with torch's ZeroRedundancyOptimizer: gradients all-reduced
//           as DDP does, each rank steps the optimizer over the parameters it owns, then
//           broadcasts them;
//   zero2 - FullyShardedDataParallel's SHARD_GRAD_OP: each unit's parameters all-gathered for
//           forward and kept to its backward, gradients reduce-scattered, the optimizer on the
//           rank's shard;
//   fsdp  - its FULL_SHARD (ZeRO stage 3): the parameters freed after each unit's forward and
//           all-gathered again for its backward.
#pragma once

#include <cstdint>
#include <vector>

#include "core/spec/sharding.h"

namespace epochcast::sim {

class StrategyModel;

const StrategyModel& zero1_strategy();
const StrategyModel& zero2_strategy();
const StrategyModel& fsdp_strategy();

}  // namespace epochcast::sim

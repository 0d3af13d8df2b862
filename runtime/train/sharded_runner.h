// zero1, zero2 and fsdp as the runtime executes them: its own implementation over NCCL (the host
// transport, MPI or TCP, on the CPU), as its DDP reducer is, dividing the model by core's rules
// (core/spec/sharding.h) so that a measured step and a predicted one shard alike.
//
// - zero1: DDP's reducer, then torch's ZeroRedundancyOptimizer: each rank steps the parameter
//   tensors zero_partition gives it (holding optimizer state for those only) and broadcasts
//   them to the others after the step.
// - zero2 and fsdp: FSDP's flat parameters, one per unit of fsdp_units. A unit's parameters are
//   views of one flat tensor padded to a multiple of the ranks; each rank keeps its slice (the
//   shard the optimizer steps) and frees the rest. Before a unit's first layer its flat tensor is
//   all-gathered from the shards; fsdp frees it after the unit's forward and gathers it again
//   when backward reaches the unit (zero2 keeps it to the end of backward); once all of a unit's
//   gradients exist they are pre-divided by the ranks into a flat gradient, reduce-scattered to
//   the shards, and the unit's gathered parameters and gradients are freed. Prefetch follows
//   training.fsdp: backward_prefetch pre gathers the next unit of backward when this one's
//   backward starts, post once its gradients exist; forward_prefetch the next unit's before
//   this one's forward. The root unit is gathered at the start of forward and kept to its
//   reduction. Under no_sync (gradient accumulation's early micro-batches) the parameters'
//   gradients accumulate whole and nothing is reduced.
//
// What the runtime does not do, strategy_cannot_run says: mixed-precision gathers (FSDP's
// MixedPrecision; the runtime's zero2/fsdp gather fp32), CPU offload.
#pragma once

#include <memory>

#include "runtime/train/strategy_runner.h"

namespace epochcast::runtime {

std::unique_ptr<StrategyRunner> zero1_runner(const RunnerContext& context);
// zero2 and fsdp.
std::unique_ptr<StrategyRunner> flat_parameter_runner(const RunnerContext& context);

}  // namespace epochcast::runtime

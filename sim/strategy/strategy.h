// A training strategy as the simulator runs it: how its processes share the GPUs and the data
// set, what each GPU holds, and the plans of its steps. The epoch's simulation
// (sim/predict/predict.cpp) knows strategies only through this interface.
//
// To add a strategy (five files): its name in core's Strategy (core/spec/scenario_spec.h), a
// class implementing StrategyModel in a file of its own with a function returning it (ddp.cpp
// is the fullest example), that function declared and called in strategy_model()
// (strategy.cpp), the file in sim/CMakeLists.txt, and in the runtime its runner or the reason
// it has none (runtime/train/strategy_runner.cpp). Settings of its own go in a block of the
// training spec (scenario_spec.h), read in core/spec/scenario_loader.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/spec/scenario_spec.h"
#include "sim/compute/memory_model.h"
#include "sim/strategy/iteration_plan.h"
#include "sim/strategy/multi_gpu.h"

namespace epochcast::sim {

// Where a training step falls in its cycle of gradient accumulation (one step a cycle without).
struct MicroStep {
  bool opens = true;   // the cycle's first: the gradients start from nothing
  bool closes = true;  // its last: the gradients are reduced and the optimizer steps
};

class StrategyModel {
 public:
  virtual ~StrategyModel() = default;

  // A process per GPU, each with its own training thread and loader over its own share of the
  // data set (DistributedSampler's); false: one process drives every GPU and loads the global
  // batches.
  virtual bool process_per_gpu() const = 0;
  // Micro-batches per optimizer step.
  virtual int accumulation_cycle(const TrainingSpec& /*training*/) const { return 1; }
  // The memory of each GPU at `point`: the model's (estimate_memory) with what the strategy
  // holds beside it (buffers()).
  virtual MemoryEstimate memory(const StepContext& context, const SweepPoint& point) const;
  // The training step of `batch` samples a process (loader_batch()), and the evaluation step.
  virtual IterationPlan training_step(const MultiGpuContext& context, const SweepPoint& point,
                                      std::int64_t batch, MicroStep micro) const = 0;
  virtual IterationPlan validation_step(const MultiGpuContext& context, const SweepPoint& point,
                                        std::int64_t batch) const = 0;
  // What its collectives carry every step, in words ("of gradients (all-reduce)"), for the
  // diagnosis of a communication-bound point.
  virtual std::string collective_words() const { return "of data"; }
  // What its predictions take for granted on several GPUs, each sentence naming the setting
  // that changes it (the report's "Assumed:" lines).
  virtual std::vector<std::string> assumptions(const ScenarioSpec& /*scenario*/) const {
    return {};
  }

  // The processes that load data at `point`, and the samples each loads a step.
  int loading_processes(const SweepPoint& point) const {
    return process_per_gpu() ? point.gpus : 1;
  }
  std::int64_t loader_batch(const SweepPoint& point) const {
    return process_per_gpu() ? point.per_gpu_batch : point.global_batch;
  }

 protected:
  // What each GPU holds beside the model's parameters, gradients, optimizer state and
  // activations (DDP's buckets, the batch DataParallel gathers on GPU 0).
  virtual Bytes buffers(const StepContext& /*context*/, const SweepPoint& /*point*/) const {
    return Bytes(0);
  }
};

// The simulator's model of `strategy`.
const StrategyModel& strategy_model(Strategy strategy);

}  // namespace epochcast::sim

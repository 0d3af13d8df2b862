// The strategies by name, and training on one device.
#include "sim/strategy/strategy.h"

namespace epochcast::sim {

// Each strategy's model, defined in the strategy's own file; strategy_model() is their only
// caller.
const StrategyModel& data_parallel_strategy();  // data_parallel.cpp
const StrategyModel& ddp_strategy();            // ddp.cpp
const StrategyModel& zero1_strategy();          // sharded.cpp
const StrategyModel& zero2_strategy();          // sharded.cpp
const StrategyModel& fsdp_strategy();           // sharded.cpp

MemoryEstimate StrategyModel::memory(const StepContext& c, const SweepPoint& point) const {
  const TrainingSpec& training = c.scenario.training;
  return estimate_memory(c.analysis, point.per_gpu_batch, training.optimizer, training.precision,
                         c.scenario.profile, c.scenario.machine.gpu.memory, buffers(c, point), {},
                         training.activation_checkpointing);
}

namespace {

// One process, one device: the loop as a plain PyTorch script runs it.
class SingleDevice final : public StrategyModel {
 public:
  bool process_per_gpu() const override { return false; }
  IterationPlan training_step(const MultiGpuContext& c, const SweepPoint& /*point*/,
                              std::int64_t batch, MicroStep /*micro*/) const override {
    return single_device_training_step(c.step, batch);
  }
  IterationPlan validation_step(const MultiGpuContext& c, const SweepPoint& /*point*/,
                                std::int64_t batch) const override {
    return single_device_validation_step(c.step, batch);
  }
};

}  // namespace

const StrategyModel& strategy_model(Strategy strategy) {
  static const SingleDevice single;
  switch (strategy) {
    case Strategy::single:
      return single;
    case Strategy::dp:
      return data_parallel_strategy();
    case Strategy::ddp:
      return ddp_strategy();
    case Strategy::zero1:
      return zero1_strategy();
    case Strategy::zero2:
      return zero2_strategy();
    case Strategy::fsdp:
      return fsdp_strategy();
  }
  return single;
}

}  // namespace epochcast::sim

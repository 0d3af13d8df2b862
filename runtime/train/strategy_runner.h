// A training strategy as the runtime executes it (the simulator's side is
// sim/strategy/strategy.h): whether a point can run here, and what the strategy adds to each step
// around the model. measure_point (trainer.cpp) builds the model, the loader and the optimizer,
// sets up NCCL where a process per GPU trains on several GPUs, and times the steps; it knows
// strategies only through this header.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "core/spec/scenario_spec.h"
#include "runtime/comm/communicator.h"
#include "runtime/model/torch_model.h"
#include "runtime/train/trainer.h"

namespace epochcast::cuda {
class NcclCommunicator;
class Stream;
}  // namespace epochcast::cuda

namespace epochcast::runtime {

class CollectiveWatchdog;

// What a runner works with: the rank's model and parameters, and for a process per GPU on
// several CUDA ranks the communicator, its stream and the watchdog of its collectives.
struct RunnerContext {
  const ScenarioSpec& scenario;
  const SweepPoint& point;
  const Group& group;
  torch::Device device;
  TorchModel model;
  std::vector<torch::Tensor> parameters;
  cuda::NcclCommunicator* nccl = nullptr;
  cuda::Stream* comm_stream = nullptr;
  CollectiveWatchdog* watchdog = nullptr;
};

class StrategyRunner {
 public:
  virtual ~StrategyRunner() = default;
  // Once every rank has its runner, before the timed steps: make the ranks start alike. Returns
  // whether the optimizer must start afresh (its state from the trial step was local).
  virtual bool start() { return false; }
  // Around each micro-batch `micro` of an optimizer step of `micro_batches`.
  virtual void before_forward(int /*micro*/, int /*micro_batches*/) {}
  virtual torch::Tensor forward(const torch::Tensor& inputs) = 0;
  virtual void after_backward() {}
  // The tensors the optimizer steps, with their gradients after backward (empty: the model's
  // parameters). Asked after start().
  virtual std::vector<torch::Tensor> optimized() const { return {}; }
  // After each optimizer step.
  virtual void after_step() {}
  // From here on only local work: the passes after the timings (layer profile, kernel trace)
  // time the model's own kernels. The model's parameters hold the trained values again. Returns
  // whether the optimizer must be rebuilt over them (it stepped other tensors).
  virtual bool detach() { return false; }
};

// Why `point` cannot run here under the scenario's strategy ("" when it can). Identical on
// every rank.
std::string strategy_cannot_run(const ScenarioSpec& scenario, const SweepPoint& point,
                                const DevicePlan& devices, const World& world);
// The processes that train `point`, and the CUDA device of this one.
int strategy_ranks(const ScenarioSpec& scenario, const SweepPoint& point);
int strategy_device_index(const ScenarioSpec& scenario, const World& world);
// The runner for steps within this process: the trial step and, for a strategy whose ranks do
// not communicate (single, dp), every step. May throw (DataParallel's replicas out of memory).
std::unique_ptr<StrategyRunner> local_runner(const RunnerContext& context);
// Whether the ranks of `point` communicate, so that measure_point agrees on a communicator and
// then takes group_runner() for the timed steps.
bool strategy_communicates(const ScenarioSpec& scenario, const Group& group);
// The runner across the group's ranks. May throw (out of memory for DDP's buckets).
std::unique_ptr<StrategyRunner> group_runner(const RunnerContext& context);
// DDP's runner (zero1 wraps it).
std::unique_ptr<StrategyRunner> ddp_runner(const RunnerContext& context);
// Whether measure_point's trial step (one local step before the ranks communicate, so that a
// rank out of memory says so before its peers wait for it) has the strategy's memory: not for
// a sharded strategy, whose gradients and optimizer state are divided among the group.
bool strategy_trial_step(const ScenarioSpec& scenario);

}  // namespace epochcast::runtime

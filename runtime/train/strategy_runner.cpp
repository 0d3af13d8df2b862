// single, dp and ddp as the runtime executes them (see strategy_runner.h).
#include "runtime/train/strategy_runner.h"

#include <fmt/format.h>

#include "runtime/train/data_parallel.h"
#include "runtime/train/ddp_reducer.h"
#include "runtime/train/sharded_runner.h"

namespace epochcast::runtime {

namespace {

// The model alone: one device, gradients local.
class PlainRunner final : public StrategyRunner {
 public:
  explicit PlainRunner(TorchModel model) : model_(std::move(model)) {}
  torch::Tensor forward(const torch::Tensor& inputs) override { return model_->forward(inputs); }

 private:
  TorchModel model_;
};

// nn.DataParallel over the process's first `gpus` GPUs (runtime/train/data_parallel.h).
class DataParallelRunner final : public StrategyRunner {
 public:
  DataParallelRunner(const RunnerContext& c)
      : parallel_(c.model, devices(c.point.gpus), c.scenario.training.precision) {}
  torch::Tensor forward(const torch::Tensor& inputs) override { return parallel_.forward(inputs); }
  void after_backward() override { parallel_.reduce_gradients(); }

 private:
  static std::vector<torch::Device> devices(int gpus) {
    std::vector<torch::Device> out;
    for (int d = 0; d < gpus; ++d)
      out.emplace_back(torch::kCUDA, static_cast<c10::DeviceIndex>(d));
    return out;
  }
  DataParallel parallel_;
};

// DistributedDataParallel's reducer across the group (runtime/train/ddp_reducer.h).
class DdpRunner final : public StrategyRunner {
 public:
  explicit DdpRunner(const RunnerContext& c)
      : model_(c.model),
        ddp_(c.scenario.training.ddp),
        reducer_(std::make_unique<DdpReducer>(c.parameters, c.group, ddp_.first_bucket_cap.value(),
                                              ddp_.bucket_cap.value(), c.nccl, c.comm_stream,
                                              c.watchdog)),
        parameters_(c.parameters) {}
  // As DDP does on wrapping: every rank starts from rank 0's weights and buffers, with a fresh
  // optimizer state (the trial step's moments were local).
  bool start() override {
    reducer_->broadcast_from_rank0(parameters_);
    reducer_->broadcast_from_rank0(model_->buffers());
    return true;
  }
  void before_forward(int micro, int micro_batches) override {
    if (!reducer_) return;
    // DDP syncs buffers in the forward that follows a synchronised backward: the first
    // micro-batch of each step (no_sync() turns it off for the others).
    if (micro == 0 && ddp_.broadcast_buffers) reducer_->sync_buffers(model_->buffers());
    reducer_->prepare(micro + 1 == micro_batches);
  }
  torch::Tensor forward(const torch::Tensor& inputs) override { return model_->forward(inputs); }
  void after_backward() override {
    if (reducer_) reducer_->finish();
  }
  // The reducer's hooks would copy every gradient into its buckets, adding their time to each
  // layer's backward.
  bool detach() override {
    reducer_.reset();
    return false;
  }

 private:
  TorchModel model_;
  DdpSpec ddp_;
  std::unique_ptr<DdpReducer> reducer_;
  std::vector<torch::Tensor> parameters_;
};

// The DDP settings the runtime's reducer (ddp and zero1) does not mirror, or "".
std::string reducer_cannot_run(const DdpSpec& ddp) {
  if (ddp.searches_unused_parameters()) {
    return "training.ddp.find_unused_parameters: the runtime's ddp reducer expects every "
           "parameter's gradient and keeps no used-parameter map";
  }
  if (ddp.gradient_as_bucket_view) {
    // Its hooks run before AccumulateGrad (LibTorch 1.13 has no post-accumulate hook), which
    // would add each raw gradient into a bucket that is also the .grad.
    return "training.ddp.gradient_as_bucket_view: the runtime's ddp reducer copies buckets back "
           "into the gradients";
  }
  return "";
}

}  // namespace

std::string strategy_cannot_run(const ScenarioSpec& scenario, const SweepPoint& point,
                                const DevicePlan& devices, const World& world) {
  const TrainingSpec& t = scenario.training;
  const std::string_view name = name_of(t.strategy);
  if (t.gradient_dtype != GradientDtype::fp32) {
    return fmt::format(
        "training.gradient_dtype {}: the runtime's ddp reducer all-reduces fp32 buckets (it has "
        "no compression hook)",
        name_of(t.gradient_dtype));
  }
  switch (t.strategy) {
    case Strategy::single:
      if (point.gpus != 1) return "strategy single trains on one device";
      return "";
    case Strategy::dp:
      if (point.gpus == 1) return "";
      if (!devices.cuda)
        return fmt::format("dp on {} GPUs needs CUDA devices; this run is on the CPU", point.gpus);
      if (devices.device_count < point.gpus) {
        return fmt::format("dp on {} GPUs needs {} CUDA devices in this process; {} visible",
                           point.gpus, point.gpus, devices.device_count);
      }
      return "";
    case Strategy::ddp:
    case Strategy::zero1:
      if (std::string why = reducer_cannot_run(t.ddp); !why.empty()) return why;
      break;
    case Strategy::zero2:
    case Strategy::fsdp:
      if (t.fsdp.cpu_offload) {
        return fmt::format(
            "{} with training.fsdp.cpu_offload: the runtime keeps every shard on the device "
            "and steps it there; measure without offload",
            name);
      }
      if (mixed_precision(t.precision)) {
        return fmt::format(
            "{} under {}: the runtime's {} gathers and reduces fp32 parameters (FSDP's "
            "MixedPrecision, which the simulator assumes, gathers 16 bits); measure it in fp32",
            name, name_of(t.precision), name);
      }
      break;
  }
  // A process per GPU.
  if (point.gpus > world.size()) {
    return fmt::format(
        "{} on {} {} needs {} ranks: launch with `mpirun -np {}` or `torchrun --nproc_per_node "
        "{} --no_python` (this run has {})",
        name, point.gpus, devices.cuda ? "GPUs" : "CPU ranks", point.gpus, point.gpus, point.gpus,
        world.size());
  }
  if (devices.cuda && world.local_rank() >= devices.device_count && world.rank() < point.gpus) {
    return fmt::format("rank {} on {} has no GPU of its own ({} visible)", world.rank(),
                       world.host(), devices.device_count);
  }
  return "";
}

int strategy_ranks(const ScenarioSpec& scenario, const SweepPoint& point) {
  return process_per_gpu(scenario.training.strategy) ? point.gpus : 1;
}

int strategy_device_index(const ScenarioSpec& scenario, const World& world) {
  return process_per_gpu(scenario.training.strategy) ? world.local_rank() : 0;
}

std::unique_ptr<StrategyRunner> local_runner(const RunnerContext& context) {
  if (context.scenario.training.strategy == Strategy::dp && context.point.gpus > 1)
    return std::make_unique<DataParallelRunner>(context);
  return std::make_unique<PlainRunner>(context.model);
}

bool strategy_communicates(const ScenarioSpec& scenario, const Group& group) {
  return process_per_gpu(scenario.training.strategy) && group.size() > 1;
}

std::unique_ptr<StrategyRunner> group_runner(const RunnerContext& context) {
  switch (context.scenario.training.strategy) {
    case Strategy::ddp:
      return ddp_runner(context);
    case Strategy::zero1:
      return zero1_runner(context);
    case Strategy::zero2:
    case Strategy::fsdp:
      return flat_parameter_runner(context);
    case Strategy::single:
    case Strategy::dp:
      break;
  }
  throw std::logic_error("no group runner for this strategy");
}

std::unique_ptr<StrategyRunner> ddp_runner(const RunnerContext& context) {
  return std::make_unique<DdpRunner>(context);
}

bool strategy_trial_step(const ScenarioSpec& scenario) {
  switch (scenario.training.strategy) {
    case Strategy::single:
    case Strategy::dp:
    case Strategy::ddp:
      return true;
    case Strategy::zero1:
    case Strategy::zero2:
    case Strategy::fsdp:
      return false;
  }
  return true;
}

}  // namespace epochcast::runtime

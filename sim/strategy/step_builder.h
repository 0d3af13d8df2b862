// Builds the operations of one step on one device — zero_grad, forward, loss, backward,
// optimizer — as an eager framework issues them: each GPU kernel is preceded by its CPU
// dispatch, and the host cost per op comes from the hardware profile. Strategies (single
// device, dp, ddp) compose these calls, interleave them across replicas or insert
// communication between them.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/model/analysis.h"
#include "core/spec/scenario_spec.h"
#include "sim/compute/device_model.h"
#include "sim/strategy/iteration_plan.h"

namespace epochcast::sim {

// Everything a step builder needs about the point being simulated.
struct StepContext {
  const ScenarioSpec& scenario;
  const ModelAnalysis& analysis;  // at the training precision
  const DeviceModel& device;
};

// One operation the framework issues: host work, and the kernel it launches if any.
struct Call {
  std::string name;
  Category category = Category::host;
  Seconds host_cost;
  std::optional<SimTime> gpu_time;  // none: host-only (a view, zero_grad set to None)
  int layer = -1;                   // the layer (index in the analysis) it belongs to
};

// Bytes per parameter element moved by each kernel of a per-tensor ("for loop") optimizer
// step, in PyTorch 1.x's order (torch/optim/adam.py and sgd.py of that era), which is also how
// torch.optim steps CPU tensors.
std::vector<std::pair<std::string, std::int64_t>> per_tensor_optimizer(Optimizer optimizer);

// The calls of each part of a step, in issue order.
std::vector<Call> zero_grad_calls(const StepContext& context);
// `cast_weights`: under autocast, each matrix layer's weights are cast to 16 bits on use; false
// where they come in 16 bits already (FSDP's mixed precision gathers them so).
std::vector<Call> forward_calls(const StepContext& context, std::int64_t batch, bool training,
                                bool cast_weights = true);
std::vector<Call> loss_forward_calls(const StepContext& context, std::int64_t batch);
// The loss's gradient (and, under fp16 autocast, the GradScaler's scaling of it).
std::vector<Call> loss_backward_calls(const StepContext& context, std::int64_t batch);
// The layers' gradients, last layer first. `accumulate`: gradients exist already (zeroed by
// PyTorch 1.x, or from earlier micro-batches), so AccumulateGrad adds into them with a kernel
// per parameter tensor. Under training.activation_checkpointing each checkpointed block first
// runs its forward again (`cast_weights` as forward_calls has it).
std::vector<Call> backward_calls(const StepContext& context, std::int64_t batch, bool accumulate,
                                 bool cast_weights = true);
std::vector<Call> optimizer_calls(const StepContext& context);
// The implementation the scenario's optimizer runs (auto resolved by the framework).
OptimizerImplementation optimizer_implementation(const TrainingSpec& training);
// Bytes of one sample's inputs and labels as they cross to the device (inputs in the model's
// dtype, or one byte per element when the loader sends uint8 for the GPU to normalise).
std::int64_t sample_transfer_bytes(const ModelAnalysis& analysis, bool uint8_inputs = false);
// The same as the scenario's loader sends it: encoded files when the GPU decodes them, uint8
// with normalize_on_gpu, else the model's input dtype.
std::int64_t sample_transfer_bytes(const ModelAnalysis& analysis, const LoaderSpec& loader);

// Emits calls into a plan, on CPU thread `cpu` and GPU `gpu`.
class StepBuilder {
 public:
  StepBuilder(const StepContext& context, IterationPlan& plan, int cpu, int gpu);

  // A CPU-only op (no kernel).
  std::int32_t host(std::string_view name, Category category, Seconds cost,
                    std::vector<std::int32_t> deps = {});
  // A kernel: its CPU dispatch, then the kernel on the GPU's compute stream. Returns the
  // kernel's op.
  std::int32_t kernel(std::string_view name, Category category, Seconds host_cost, SimTime gpu_time,
                      std::vector<std::int32_t> deps = {});
  // A copy between pinned host memory and the GPU on its copy engine (either way), dispatched
  // from the CPU, after `deps` (not in the compute stream's order). Returns the copy.
  std::int32_t pinned_copy(std::string_view name, Category category, Bytes bytes,
                           std::vector<std::int32_t> deps = {});
  // Emits a call; returns its last op (the kernel, or the host op).
  std::int32_t emit(const Call& call);
  void emit(const std::vector<Call>& calls);
  // The next CPU op and the next kernel this builder emits also wait for `op`.
  void wait_for(std::int32_t op) { pending_.push_back(op); }

  // The start of a step: loop overhead, then the batch — loaded in place without workers, or
  // fetched from loader `loader`'s workers; nothing more with the loader's source
  // synthetic_gpu (the batch was made on the GPU once).
  void take_batch(std::int64_t batch, int loader);
  // Host-to-device copy of `batch` samples on the copy engine, in stream order; the next kernel
  // waits for it. Pageable copies also block the CPU thread. With the loader's
  // normalize_on_gpu, the uint8 batch is then converted and normalised by three element-wise
  // kernels. Returns the op after which the batch is ready on the device.
  // With the loader's prefetch_to_gpu, the copy (and normalisation) is of the next step's batch,
  // on a side stream that overlaps this step's kernels; this step's batch is already there, and
  // await_prefetched_batch() must close the step. With the loader's gpu_decode_us, the copy
  // carries the encoded files and a decoding kernel follows it on the compute stream. With the
  // loader's source synthetic_gpu there is no copy: the batch is on the device already.
  std::int32_t copy_batch(std::int64_t batch);
  // The end of a step under prefetch_to_gpu: the compute stream waits for the batch prefetched
  // during this step, so that the next step's kernels start only once it is on the device.
  void await_prefetched_batch();
  // The compute stream waits for `ops` (an event wait, no kernel): what it runs next queues
  // behind them. Counted with the kernels, as the engine's lanes count their ops.
  void stream_waits(std::string_view name, std::vector<std::int32_t> ops);
  // loss.item(): the CPU waits for everything issued so far on the GPU.
  void sync(std::string name);
  // The optimizer step as GradScaler drives it: under fp16, gradients are checked (and
  // unscaled) first, and a non-fused optimizer then reads found_inf on the host (a sync).
  // `over`: the parameters it steps, where they are not the model's (a rank's shard).
  void optimizer_step(const StepContext* over = nullptr);

  std::int32_t last_gpu_op() const { return last_gpu_op_; }
  std::int32_t last_cpu_op() const { return last_cpu_op_; }
  int cpu() const { return cpu_; }
  int gpu() const { return gpu_; }
  IterationPlan& plan() { return plan_; }

 private:
  // The loader's GPU decoding of `batch` samples, after `deps`; returns the kernel.
  std::int32_t decode_on_gpu(std::int64_t batch, std::vector<std::int32_t> deps);

  const StepContext& context_;
  IterationPlan& plan_;
  int cpu_;
  int gpu_;
  std::int32_t last_gpu_op_ = -1;
  std::int32_t last_cpu_op_ = -1;
  std::vector<std::int32_t> pending_;  // the next ops wait for these
  std::int32_t pending_copy_ = -1;     // the next kernel waits for this copy
  std::int32_t prefetched_ = -1;       // the side stream's last op for the next step's batch
  std::int64_t prefetched_samples_ = 0;
  std::string launch_name_;  // scratch: "launch " and a kernel's name
};

// Per-step plans for a single device: a training step and an evaluation (validation) step.
IterationPlan single_device_training_step(const StepContext& context, std::int64_t batch);
IterationPlan single_device_validation_step(const StepContext& context, std::int64_t batch);

}  // namespace epochcast::sim

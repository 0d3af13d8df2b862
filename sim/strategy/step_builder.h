// Builds the operations of one step on one device — zero_grad, forward, loss, backward,
// optimizer — as an eager framework issues them: each GPU kernel is preceded by its CPU
// dispatch, and the host cost per op comes from the hardware profile.
#pragma once

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

// Appends ops to `plan`, issuing on CPU thread `cpu` and GPU `gpu`. `after` is the op the
// first new op must follow on another lane (-1 for none); returns the last GPU op added.
class StepBuilder {
 public:
  StepBuilder(const StepContext& context, IterationPlan& plan, int cpu, int gpu);

  // A CPU-only op (no kernel).
  std::int32_t host(std::string name, Category category, Seconds cost,
                    std::vector<std::int32_t> deps = {});
  // A kernel: its CPU dispatch, then the kernel on the GPU's compute stream.
  std::int32_t kernel(std::string name, Category category, Seconds host_cost, SimTime gpu_time,
                      std::vector<std::int32_t> deps = {});

  void zero_grad();
  // Forward pass; in evaluation mode, training-only kernels (dropout) are skipped.
  void forward(std::int64_t batch, bool training);
  void loss_forward(std::int64_t batch);
  void backward(std::int64_t batch);
  void optimizer_step();
  // Host-to-device copy of the batch on the copy engine, in stream order; the next kernel
  // waits for it. Pageable copies also block the CPU thread.
  void copy_batch(std::int64_t batch);
  // loss.item(): the CPU waits for everything issued so far on the GPU.
  void sync(std::string name);

  std::int32_t last_gpu_op() const { return last_gpu_op_; }

 private:
  void layer_kernels(const LayerCosts& layer, const std::vector<KernelWork>& kernels,
                     std::int64_t batch, Category category, Seconds host_cost, bool training);
  void per_tensor_op(const std::string& name, Category category, const ParamTensor& tensor,
                     std::int64_t bytes_per_element);

  const StepContext& context_;
  IterationPlan& plan_;
  int cpu_;
  int gpu_;
  std::int32_t last_gpu_op_ = -1;
  std::int32_t pending_copy_ = -1;  // the next kernel waits for this copy
};

// Per-step plans for a single device: a training step and an evaluation (validation) step.
IterationPlan single_device_training_step(const StepContext& context, std::int64_t batch);
IterationPlan single_device_validation_step(const StepContext& context, std::int64_t batch);

}  // namespace epochcast::sim

// The operations of one training or evaluation step on one device.
#include "sim/strategy/step_builder.h"

#include <algorithm>

#include <fmt/format.h>

namespace epochcast::sim {

namespace {

// A memory-bound kernel with a fixed size (optimizer and bookkeeping kernels).
KernelWork fixed_kernel(std::string_view name, OpClass op_class, std::int64_t bytes,
                        std::int64_t elements) {
  KernelWork k;
  k.name = name;
  k.op_class = op_class;
  k.flops = {Flops(0), Flops(elements)};
  k.bytes = {Bytes(0), Bytes(bytes)};
  k.parallelism = {0, elements};
  return k;
}

// PyTorch's multi_tensor_apply launches one kernel per group of tensors: at most this many
// tensors per launch for an op over `lists` tensor lists, and at most 320 blocks of 65,536
// elements (aten/src/ATen/native/cuda/MultiTensorApply.cuh).
std::int64_t foreach_launches(std::int64_t tensors, std::int64_t elements, int lists) {
  static constexpr std::int64_t kMaxTensors[] = {110, 64, 48, 36, 30};
  std::int64_t per_launch = kMaxTensors[std::clamp(lists, 1, 5) - 1];
  std::int64_t by_tensors = (tensors + per_launch - 1) / per_launch;
  std::int64_t by_elements = (elements + 320 * 65536 - 1) / (320 * 65536);
  return std::max<std::int64_t>(1, std::max(by_tensors, by_elements));
}

bool mixed_precision(TrainingPrecision p) {
  return p == TrainingPrecision::amp_fp16 || p == TrainingPrecision::amp_bf16;
}

bool is_matrix_layer(const LayerCosts& layer) {
  return layer.params > 0 && std::any_of(layer.forward.begin(), layer.forward.end(),
                                         [](const KernelWork& k) { return k.has_gemm_shape; });
}

// Bytes per parameter element moved by each kernel of a per-tensor ("for loop") optimizer
// step, in PyTorch 1.x's order (torch/optim/adam.py and sgd.py of that era).
std::vector<std::pair<std::string, std::int64_t>> per_tensor_optimizer(Optimizer optimizer) {
  switch (optimizer) {
    case Optimizer::sgd:
      return {{"add_", 12}};
    case Optimizer::momentum:
      return {{"mul_", 8}, {"add_", 12}, {"add_", 12}};
    case Optimizer::adamw:
    case Optimizer::adam: {
      std::vector<std::pair<std::string, std::int64_t>> ops = {
          {"mul_", 8}, {"add_", 12}, {"mul_", 8}, {"addcmul_", 12},
          {"sqrt", 8}, {"div", 8},   {"add_", 8}, {"addcdiv_", 16}};
      if (optimizer == Optimizer::adamw) ops.insert(ops.begin(), {"mul_", 8});
      return ops;
    }
  }
  return {};
}

// The multi-tensor ops of PyTorch 2.x's foreach optimizers: (name, bytes per element, lists).
struct ForeachOp {
  std::string name;
  std::int64_t bytes_per_element;
  int lists;
};
std::vector<ForeachOp> foreach_optimizer(Optimizer optimizer) {
  switch (optimizer) {
    case Optimizer::sgd:
      return {{"_foreach_add_", 12, 2}};
    case Optimizer::momentum:
      return {{"_foreach_mul_", 8, 1}, {"_foreach_add_", 12, 2}, {"_foreach_add_", 12, 2}};
    case Optimizer::adamw:
    case Optimizer::adam: {
      std::vector<ForeachOp> ops = {{"_foreach_lerp_", 12, 2},    {"_foreach_mul_", 8, 1},
                                    {"_foreach_addcmul_", 12, 3}, {"_foreach_sqrt", 8, 2},
                                    {"_foreach_div_", 8, 1},      {"_foreach_add_", 8, 1},
                                    {"_foreach_addcdiv_", 16, 4}};
      if (optimizer == Optimizer::adamw) ops.insert(ops.begin(), {"_foreach_mul_", 8, 1});
      return ops;
    }
  }
  return {};
}

}  // namespace

StepBuilder::StepBuilder(const StepContext& context, IterationPlan& plan, int cpu, int gpu)
    : context_(context), plan_(plan), cpu_(cpu), gpu_(gpu) {}

std::int32_t StepBuilder::host(std::string name, Category category, Seconds cost,
                               std::vector<std::int32_t> deps) {
  PlanOp op;
  op.name = std::move(name);
  op.category = category;
  op.lane = Lane{LaneKind::cpu, cpu_};
  op.work_ns = SimTime::from_seconds(cost).ns();
  op.deps = std::move(deps);
  return plan_.add(std::move(op));
}

std::int32_t StepBuilder::kernel(std::string name, Category category, Seconds host_cost,
                                 SimTime gpu_time, std::vector<std::int32_t> deps) {
  PlanOp dispatch;
  dispatch.name = "launch " + name;
  dispatch.category = category;
  dispatch.lane = Lane{LaneKind::cpu, cpu_};
  dispatch.work_ns = SimTime::from_seconds(host_cost).ns();
  dispatch.launches_on_gpu = gpu_;
  std::int32_t issued = plan_.add(std::move(dispatch));

  PlanOp run;
  run.name = std::move(name);
  run.category = category;
  run.lane = Lane{LaneKind::compute, gpu_};
  run.work_ns = gpu_time.ns();
  run.deps = std::move(deps);
  run.deps.push_back(issued);
  if (pending_copy_ >= 0) {
    run.deps.push_back(pending_copy_);
    pending_copy_ = -1;
  }
  last_gpu_op_ = plan_.add(std::move(run));
  return last_gpu_op_;
}

void StepBuilder::copy_batch(std::int64_t batch) {
  const ModelAnalysis& a = context_.analysis;
  // Inputs in the model's input dtype, plus int64 labels (one per output row).
  std::int64_t label_rows = a.output_shape.elements() / a.output_shape.last();
  std::int64_t per_sample =
      a.input_shape.elements() * element_bytes(a.input_dtype) + 8 * label_rows;
  bool pinned = context_.scenario.loader.pin_memory;
  PlanOp dispatch;
  dispatch.name = "launch copy batch to device";
  dispatch.category = Category::h2d;
  dispatch.lane = Lane{LaneKind::cpu, cpu_};
  dispatch.work_ns = SimTime::from_seconds(context_.device.profile().host.forward_op).ns();
  dispatch.launches_on_gpu = gpu_;
  std::int32_t issued = plan_.add(std::move(dispatch));

  PlanOp copy;
  copy.name =
      fmt::format("copy batch to device ({:.2f} MiB, {})",
                  static_cast<double>(per_sample * batch) / kMiB, pinned ? "pinned" : "pageable");
  copy.category = Category::h2d;
  copy.lane = Lane{LaneKind::copy, gpu_};
  copy.work_ns = context_.device.host_to_device_time(Bytes(per_sample * batch), pinned).ns();
  copy.deps = {issued};
  copy.after_lane = Lane{LaneKind::compute, gpu_};  // issued on the compute stream
  pending_copy_ = plan_.add(std::move(copy));
  if (!pinned) {
    // A copy from pageable memory returns to Python only once the data has left it.
    host("wait for pageable copy", Category::h2d, Seconds(0), {pending_copy_});
  }
}

void StepBuilder::layer_kernels(const LayerCosts& layer, const std::vector<KernelWork>& kernels,
                                std::int64_t batch, Category category, Seconds host_cost,
                                bool training) {
  for (const KernelWork& k : kernels) {
    if (k.training_only && !training) continue;
    kernel(fmt::format("{} {} ({})", kCategoryNames[static_cast<int>(category)], layer.layer.name,
                       k.name),
           category, host_cost, context_.device.kernel_time(k, batch));
  }
}

void StepBuilder::zero_grad() {
  const HostCosts& costs = context_.device.profile().host;
  if (context_.scenario.training.framework == Framework::pytorch2) {
    // set_to_none: a Python loop over the parameters, no kernel.
    host("zero_grad (set to None)", Category::optimizer,
         Seconds(costs.optimizer_op.value() +
                 1e-7 * static_cast<double>(context_.analysis.param_tensors.size())));
    return;
  }
  for (const ParamTensor& tensor : context_.analysis.param_tensors) {
    per_tensor_op("zero_ " + tensor.name, Category::optimizer, tensor, 4);
  }
}

void StepBuilder::forward(std::int64_t batch, bool training) {
  const HostCosts& costs = context_.device.profile().host;
  bool mixed = mixed_precision(context_.device.precision());
  for (const LayerCosts& layer : context_.analysis.layers) {
    if (mixed && is_matrix_layer(layer)) {
      // autocast casts the fp32 weights to 16 bits on use (read 4, write 2 bytes each).
      for (const ParamTensor& tensor : layer.param_tensors) {
        KernelWork cast =
            fixed_kernel("_to_copy", OpClass::elementwise, 6 * tensor.elements, tensor.elements);
        kernel("autocast " + tensor.name, Category::forward, costs.forward_op,
               context_.device.kernel_time(cast, batch));
      }
    }
    bool launches = std::any_of(layer.forward.begin(), layer.forward.end(),
                                [&](const KernelWork& k) { return training || !k.training_only; });
    if (!launches) {
      // Views, reshapes and identities still cost a module call on the host.
      host("forward " + layer.layer.name, Category::forward, costs.forward_op);
      continue;
    }
    layer_kernels(layer, layer.forward, batch, Category::forward, costs.forward_op, training);
  }
}

void StepBuilder::loss_forward(std::int64_t batch) {
  LayerCosts loss = cross_entropy_costs(context_.analysis.output_shape, context_.analysis.options);
  layer_kernels(loss, loss.forward, batch, Category::forward,
                context_.device.profile().host.forward_op, true);
}

void StepBuilder::backward(std::int64_t batch) {
  const HostCosts& costs = context_.device.profile().host;
  if (context_.device.precision() == TrainingPrecision::amp_fp16) {
    KernelWork scale = fixed_kernel("mul", OpClass::elementwise, 8, 1);
    kernel("GradScaler scale loss", Category::backward, costs.forward_op,
           context_.device.kernel_time(scale, batch));
  }
  LayerCosts loss = cross_entropy_costs(context_.analysis.output_shape, context_.analysis.options);
  layer_kernels(loss, loss.backward_input, batch, Category::backward, costs.backward_op, true);
  bool accumulate = context_.scenario.training.framework == Framework::pytorch1;
  const auto& layers = context_.analysis.layers;
  for (auto it = layers.rbegin(); it != layers.rend(); ++it) {
    layer_kernels(*it, it->backward_input, batch, Category::backward, costs.backward_op, true);
    layer_kernels(*it, it->backward_weight, batch, Category::backward, costs.backward_op, true);
    if (accumulate) {
      // Gradients were zeroed, not freed: AccumulateGrad adds into them.
      for (const ParamTensor& tensor : it->param_tensors) {
        KernelWork add =
            fixed_kernel("add_", OpClass::elementwise, 12 * tensor.elements, tensor.elements);
        kernel("accumulate grad " + tensor.name, Category::backward, costs.backward_op,
               context_.device.kernel_time(add, batch));
      }
    }
  }
}

void StepBuilder::per_tensor_op(const std::string& name, Category category,
                                const ParamTensor& tensor, std::int64_t bytes_per_element) {
  KernelWork k =
      fixed_kernel(name, OpClass::optimizer, bytes_per_element * tensor.elements, tensor.elements);
  kernel(name, category, context_.device.profile().host.optimizer_op,
         context_.device.kernel_time(k, 1));
}

void StepBuilder::optimizer_step() {
  const ModelAnalysis& a = context_.analysis;
  const HostCosts& costs = context_.device.profile().host;
  const Optimizer optimizer = context_.scenario.training.optimizer;
  const std::int64_t tensors = static_cast<std::int64_t>(a.param_tensors.size());

  auto foreach = [&](const std::string& name, std::int64_t bytes_per_element, int lists) {
    std::int64_t launches = foreach_launches(tensors, a.params, lists);
    std::int64_t elements = (a.params + launches - 1) / launches;
    KernelWork k = fixed_kernel(name, OpClass::optimizer, bytes_per_element * elements, elements);
    for (std::int64_t i = 0; i < launches; ++i) {
      // The Python call once, then C++ launches.
      Seconds cost = i == 0 ? costs.optimizer_op : costs.backward_op;
      kernel(launches == 1 ? name : fmt::format("{} [{}/{}]", name, i + 1, launches),
             Category::optimizer, cost, context_.device.kernel_time(k, 1));
    }
  };

  if (context_.device.precision() == TrainingPrecision::amp_fp16) {
    // GradScaler.step: unscale and check for inf/NaN, then read found_inf on the host.
    foreach ("_amp_foreach_non_finite_check_and_unscale_", 8, 1)
      ;
    sync("GradScaler found_inf.item()");
  }
  if (context_.scenario.training.framework == Framework::pytorch1) {
    for (const ParamTensor& tensor : a.param_tensors) {
      for (const auto& [name, bytes] : per_tensor_optimizer(optimizer)) {
        per_tensor_op(name + " " + tensor.name, Category::optimizer, tensor, bytes);
      }
    }
  } else {
    for (const ForeachOp& op : foreach_optimizer(optimizer))
      foreach (op.name, op.bytes_per_element, op.lists)
        ;
  }
  if (context_.device.precision() == TrainingPrecision::amp_fp16) {
    KernelWork update = fixed_kernel("_amp_update_scale_", OpClass::elementwise, 16, 1);
    kernel("GradScaler update", Category::optimizer, costs.optimizer_op,
           context_.device.kernel_time(update, 1));
  }
}

void StepBuilder::sync(std::string name) {
  std::vector<std::int32_t> deps;
  if (last_gpu_op_ >= 0) deps.push_back(last_gpu_op_);
  host(std::move(name), Category::sync, context_.device.profile().host.sync, std::move(deps));
}

namespace {

// The start of a step: loop overhead, then the batch — loaded in place without workers, or
// fetched from a worker that prepared it (the op the loader's batch is handed to).
void take_batch(StepBuilder& step, IterationPlan& plan, const StepContext& context,
                std::int64_t batch) {
  const HostCosts& costs = context.device.profile().host;
  step.host("training loop step", Category::host, costs.step_overhead);
  const LoaderSpec& loader = context.scenario.loader;
  if (loader.workers == 0) {
    step.host(fmt::format("load batch of {} in the main thread", batch), Category::data,
              Seconds(loader.sample_cpu.value() * static_cast<double>(batch)));
    return;
  }
  std::int32_t fetch =
      step.host("fetch batch from loader worker", Category::data, costs.batch_fetch);
  plan.ops[static_cast<std::size_t>(fetch)].consumes_batch = true;
}

}  // namespace

IterationPlan single_device_training_step(const StepContext& context, std::int64_t batch) {
  IterationPlan plan;
  plan.samples = batch;
  StepBuilder step(context, plan, 0, 0);
  take_batch(step, plan, context, batch);
  step.copy_batch(batch);
  step.zero_grad();
  step.forward(batch, true);
  step.loss_forward(batch);
  step.backward(batch);
  step.optimizer_step();
  if (context.scenario.training.sync_every_step) step.sync("loss.item()");
  return plan;
}

IterationPlan single_device_validation_step(const StepContext& context, std::int64_t batch) {
  IterationPlan plan;
  plan.samples = batch;
  StepBuilder step(context, plan, 0, 0);
  take_batch(step, plan, context, batch);
  step.copy_batch(batch);
  step.forward(batch, false);
  step.loss_forward(batch);
  step.sync("validation loss.item()");
  return plan;
}

}  // namespace epochcast::sim

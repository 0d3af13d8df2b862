// The operations of one training or evaluation step on one device.
#include "sim/strategy/step_builder.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "core/model/kernel_launches.h"

namespace epochcast::sim {

namespace {

// A memory-bound kernel with a fixed size (optimizer and bookkeeping kernels), launched
// element-wise (TensorIterator) unless `launch` says otherwise.
KernelWork fixed_kernel(std::string_view name, OpClass op_class, std::int64_t bytes,
                        std::int64_t elements, std::optional<KernelLaunch> launch = std::nullopt) {
  KernelWork k;
  k.name = name;
  k.op_class = op_class;
  k.flops = {Flops(0), Flops(elements)};
  k.bytes = {Bytes(0), Bytes(bytes)};
  k.launch = launch.value_or(launch::elementwise({0, elements}));
  return k;
}

// multi_tensor_apply launches a block of 512 threads per chunk of up to 65,536 elements of
// one tensor (MultiTensorApply.cuh, kChunkSize and kBlockSize): a small model's whole optimizer
// step is a few dozen blocks. Each keeps 4 x 512 elements of every list in flight, enough to
// draw far more than one SM's share of the memory bandwidth, which the occupancy model (an SM's
// share per block) does not know yet; so these kernels are cut like element-wise ones, which
// keeps them at the bandwidth a few such blocks reach. An assumption, stated in the guide.
KernelLaunch multi_tensor_launch(std::int64_t elements) {
  return launch::elementwise({0, elements});
}

std::int64_t foreach_launches(std::int64_t tensors, std::int64_t elements, int lists) {
  static constexpr std::int64_t kMaxTensors[] = {110, 64, 48, 36, 30};
  std::int64_t per_launch = kMaxTensors[std::clamp(lists, 1, 5) - 1];
  std::int64_t by_tensors = (tensors + per_launch - 1) / per_launch;
  std::int64_t by_elements = (elements + 320 * 65536 - 1) / (320 * 65536);
  return std::max<std::int64_t>(1, std::max(by_tensors, by_elements));
}

bool is_matrix_layer(const LayerCosts& layer) {
  return layer.params > 0 && std::any_of(layer.forward.begin(), layer.forward.end(),
                                         [](const KernelWork& k) { return k.has_gemm_shape; });
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

// One fused optimizer kernel: fp32 bytes per element (reads of parameter, gradient and state,
// writes of parameter and state) over its tensor lists.
struct FusedOp {
  std::string name;
  std::int64_t bytes_per_element;
  int lists;
};
FusedOp fused_optimizer(Optimizer optimizer) {
  switch (optimizer) {
    case Optimizer::sgd:
      return {"_fused_sgd_", 12, 2};  // read p, g; write p
    case Optimizer::momentum:
      return {"_fused_sgd_", 20, 3};  // read p, g, buf; write p, buf
    case Optimizer::adam:
      return {"_fused_adam_", 28, 4};  // read p, g, m, v; write p, m, v
    case Optimizer::adamw:
      return {"_fused_adamw_", 28, 4};
  }
  return {};
}

void add_layer_kernels(std::vector<Call>& out, const StepContext& context, const LayerCosts& layer,
                       int index, const std::vector<KernelWork>& kernels, std::int64_t batch,
                       Category category, Seconds host_cost, bool training) {
  for (const KernelWork& k : kernels) {
    if (k.training_only && !training) continue;
    out.push_back({fmt::format("{} {} ({})", name_of(category), layer.layer.name, k.name), category,
                   host_cost, context.device.kernel_time(k, batch), index});
  }
}

Call fixed_call(const StepContext& context, std::string name, Category category, Seconds host,
                const KernelWork& kernel, int layer = -1) {
  return Call{std::move(name), category, host, context.device.kernel_time(kernel, 1), layer};
}

}  // namespace

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

std::int64_t sample_transfer_bytes(const ModelAnalysis& a, bool uint8_inputs) {
  // Inputs in the model's input dtype (or uint8), plus int64 labels (one per output row).
  std::int64_t label_rows = output_classes(a.output_shape).labels_per_sample;
  const std::int64_t input_element = uint8_inputs ? 1 : element_bytes(a.input_dtype);
  return a.input_shape.elements() * input_element + 8 * label_rows;
}

std::int64_t sample_transfer_bytes(const ModelAnalysis& a, const LoaderSpec& loader) {
  if (loader.gpu_decode.value() <= 0) return sample_transfer_bytes(a, loader.normalize_on_gpu);
  const std::int64_t labels =
      sample_transfer_bytes(a) - a.input_shape.elements() * element_bytes(a.input_dtype);
  return loader.encoded_sample_bytes + labels;
}

std::vector<Call> zero_grad_calls(const StepContext& context) {
  const HostCosts& costs = context.device.profile().host;
  if (context.scenario.training.framework == Framework::pytorch2) {
    // set_to_none: a Python loop over the parameters, no kernel.
    return {Call{"zero_grad (set to None)", Category::optimizer,
                 Seconds(costs.optimizer_op.value() +
                         1e-7 * static_cast<double>(context.analysis.param_tensors.size())),
                 std::nullopt, -1}};
  }
  std::vector<Call> calls;
  for (const ParamTensor& tensor : context.analysis.param_tensors) {
    calls.push_back(fixed_call(
        context, "zero_ " + tensor.name, Category::optimizer, costs.optimizer_op,
        fixed_kernel("zero_", OpClass::optimizer, 4 * tensor.elements, tensor.elements)));
  }
  return calls;
}

namespace {

// Layer `i`'s forward calls, appended to `calls`.
void append_forward_calls(std::vector<Call>& calls, const StepContext& context, std::size_t i,
                          std::int64_t batch, bool training, bool cast_weights) {
  const HostCosts& costs = context.device.profile().host;
  const bool mixed = cast_weights && mixed_precision(context.device.precision());
  const LayerCosts& layer = context.analysis.layers[i];
  const int index = static_cast<int>(i);
  if (mixed && is_matrix_layer(layer)) {
    // autocast casts the fp32 weights to 16 bits on use (read 4, write 2 bytes each).
    for (const ParamTensor& tensor : layer.param_tensors) {
      calls.push_back(fixed_call(
          context, "autocast " + tensor.name, Category::forward, costs.forward_op,
          fixed_kernel("_to_copy", OpClass::elementwise, 6 * tensor.elements, tensor.elements),
          index));
    }
  }
  bool launches = std::any_of(layer.forward.begin(), layer.forward.end(),
                              [&](const KernelWork& k) { return training || !k.training_only; });
  if (!launches) {
    // Views, reshapes and identities still cost a module call on the host.
    calls.push_back(
        {"forward " + layer.layer.name, Category::forward, costs.forward_op, std::nullopt, index});
    return;
  }
  add_layer_kernels(calls, context, layer, index, layer.forward, batch, Category::forward,
                    costs.forward_op, training);
}

// Whether backward recomputes layer `i` (a part of a checkpointed block).
bool recomputed(const StepContext& context, std::size_t i) {
  return context.scenario.training.activation_checkpointing == ActivationCheckpointing::blocks &&
         !context.analysis.layers[i].layer.block.empty();
}

}  // namespace

std::vector<Call> forward_calls(const StepContext& context, std::int64_t batch, bool training,
                                bool cast_weights) {
  std::vector<Call> calls;
  for (std::size_t i = 0; i < context.analysis.layers.size(); ++i)
    append_forward_calls(calls, context, i, batch, training, cast_weights);
  return calls;
}

std::vector<Call> loss_forward_calls(const StepContext& context, std::int64_t batch) {
  LayerCosts loss = cross_entropy_costs(context.analysis.output_shape, context.analysis.options);
  std::vector<Call> calls;
  add_layer_kernels(calls, context, loss, -1, loss.forward, batch, Category::forward,
                    context.device.profile().host.forward_op, true);
  return calls;
}

std::vector<Call> loss_backward_calls(const StepContext& context, std::int64_t batch) {
  const HostCosts& costs = context.device.profile().host;
  std::vector<Call> calls;
  if (context.device.precision() == TrainingPrecision::amp_fp16) {
    calls.push_back(fixed_call(context, "GradScaler scale loss", Category::backward,
                               costs.forward_op, fixed_kernel("mul", OpClass::elementwise, 8, 1)));
  }
  LayerCosts loss = cross_entropy_costs(context.analysis.output_shape, context.analysis.options);
  add_layer_kernels(calls, context, loss, -1, loss.backward_input, batch, Category::backward,
                    costs.backward_op, true);
  return calls;
}

std::vector<Call> backward_calls(const StepContext& context, std::int64_t batch, bool accumulate,
                                 bool cast_weights) {
  const HostCosts& costs = context.device.profile().host;
  std::vector<Call> calls;
  const auto& layers = context.analysis.layers;
  for (std::size_t i = layers.size(); i-- > 0;) {
    const LayerCosts& layer = layers[i];
    int index = static_cast<int>(i);
    // A checkpointed block's backward starts by running its forward again, from the input it
    // kept, so that its own activations are there for its gradients.
    if (recomputed(context, i) &&
        (i + 1 == layers.size() || layers[i + 1].layer.block != layer.layer.block)) {
      std::size_t first = i;
      while (first > 0 && layers[first - 1].layer.block == layer.layer.block)
        --first;
      std::vector<Call> again;
      for (std::size_t l = first; l <= i; ++l)
        append_forward_calls(again, context, l, batch, true, cast_weights);
      for (Call& call : again) {
        call.name = "recompute " + call.name;
        call.category = Category::backward;
        calls.push_back(std::move(call));
      }
    }
    add_layer_kernels(calls, context, layer, index, layer.backward_input, batch, Category::backward,
                      costs.backward_op, true);
    add_layer_kernels(calls, context, layer, index, layer.backward_weight, batch,
                      Category::backward, costs.backward_op, true);
    if (accumulate) {
      for (const ParamTensor& tensor : layer.param_tensors) {
        calls.push_back(fixed_call(
            context, "accumulate grad " + tensor.name, Category::backward, costs.backward_op,
            fixed_kernel("add_", OpClass::elementwise, 12 * tensor.elements, tensor.elements),
            index));
      }
    }
  }
  return calls;
}

OptimizerImplementation optimizer_implementation(const TrainingSpec& training) {
  return resolved_optimizer_implementation(training);
}

std::vector<Call> optimizer_calls(const StepContext& context) {
  const ModelAnalysis& a = context.analysis;
  const HostCosts& costs = context.device.profile().host;
  const Optimizer optimizer = context.scenario.training.optimizer;
  const std::int64_t tensors = static_cast<std::int64_t>(a.param_tensors.size());
  std::vector<Call> calls;
  auto foreach = [&](const std::string& name, std::int64_t bytes_per_element, int lists) {
    std::int64_t launches = foreach_launches(tensors, a.params, lists);
    std::int64_t elements = (a.params + launches - 1) / launches;
    KernelWork k = fixed_kernel(name, OpClass::optimizer, bytes_per_element * elements, elements,
                                multi_tensor_launch(elements));
    for (std::int64_t i = 0; i < launches; ++i) {
      // The Python call once, then C++ launches.
      Seconds cost = i == 0 ? costs.optimizer_op : costs.backward_op;
      calls.push_back(fixed_call(
          context, launches == 1 ? name : fmt::format("{} [{}/{}]", name, i + 1, launches),
          Category::optimizer, cost, k));
    }
  };
  if (context.device.precision() == TrainingPrecision::amp_fp16) {
    // GradScaler.step unscales and checks for inf/NaN (its found_inf read is a sync the step
    // builder adds).
    foreach ("_amp_foreach_non_finite_check_and_unscale_", 8, 1)
      ;
  }
  const OptimizerImplementation implementation =
      optimizer_implementation(context.scenario.training);
  if (implementation == OptimizerImplementation::fused) {
    // torch.optim's fused kernels (_fused_adam_, _fused_adamw_, _fused_sgd_) read parameter,
    // gradient and state once and write parameter and state once, over multi-tensor chunks.
    const FusedOp op = fused_optimizer(optimizer);
    foreach (op.name, op.bytes_per_element, op.lists)
      ;
  } else if (implementation == OptimizerImplementation::for_loop) {
    for (const ParamTensor& tensor : a.param_tensors) {
      for (const auto& [name, bytes] : per_tensor_optimizer(optimizer)) {
        calls.push_back(fixed_call(
            context, name + " " + tensor.name, Category::optimizer, costs.optimizer_op,
            fixed_kernel(name, OpClass::optimizer, bytes * tensor.elements, tensor.elements)));
      }
    }
  } else {
    for (const ForeachOp& op : foreach_optimizer(optimizer)) {
      foreach (op.name, op.bytes_per_element, op.lists)
        ;
    }
  }
  if (context.device.precision() == TrainingPrecision::amp_fp16) {
    calls.push_back(fixed_call(context, "GradScaler update", Category::optimizer,
                               costs.optimizer_op,
                               fixed_kernel("_amp_update_scale_", OpClass::elementwise, 16, 1)));
  }
  return calls;
}

StepBuilder::StepBuilder(const StepContext& context, IterationPlan& plan, int cpu, int gpu)
    : context_(context), plan_(plan), cpu_(cpu), gpu_(gpu) {}

std::int32_t StepBuilder::host(std::string_view name, Category category, Seconds cost,
                               std::vector<std::int32_t> deps) {
  PlanOp op;
  op.category = category;
  op.lane = Lane{LaneKind::cpu, cpu_};
  op.work = SimTime::from_seconds(cost).ns();
  op.deps = std::move(deps);
  op.deps.insert(op.deps.end(), pending_.begin(), pending_.end());
  pending_.clear();
  last_cpu_op_ = plan_.add(op, name);
  return last_cpu_op_;
}

std::int32_t StepBuilder::pinned_copy(std::string_view name, Category category, Bytes bytes,
                                      std::vector<std::int32_t> deps) {
  PlanOp dispatch;
  dispatch.category = category;
  dispatch.lane = Lane{LaneKind::cpu, cpu_};
  dispatch.work = SimTime::from_seconds(context_.device.profile().host.forward_op).ns();
  dispatch.launches_on_gpu = gpu_;
  dispatch.deps = pending_;
  pending_.clear();
  last_cpu_op_ = plan_.add(dispatch, fmt::format("launch {}", name));
  PlanOp copy;
  copy.category = category;
  copy.lane = Lane{LaneKind::copy, gpu_};
  // PCIe moves pinned memory at one rate either way in this model.
  copy.work = context_.device.host_to_device_time(bytes, true).ns();
  copy.deps = std::move(deps);
  copy.deps.push_back(last_cpu_op_);
  return plan_.add(copy, name);
}

std::int32_t StepBuilder::kernel(std::string_view name, Category category, Seconds host_cost,
                                 SimTime gpu_time, std::vector<std::int32_t> deps) {
  std::vector<std::int32_t> waits = pending_;
  PlanOp dispatch;
  launch_name_.assign("launch ");
  launch_name_.append(name);
  dispatch.category = category;
  dispatch.lane = Lane{LaneKind::cpu, cpu_};
  dispatch.work = SimTime::from_seconds(host_cost).ns();
  dispatch.launches_on_gpu = gpu_;
  dispatch.deps = pending_;
  pending_.clear();
  std::int32_t issued = plan_.add(dispatch, launch_name_);
  last_cpu_op_ = issued;

  PlanOp run;
  run.category = category;
  run.lane = Lane{LaneKind::compute, gpu_};
  run.work = gpu_time.ns();
  run.deps = std::move(deps);
  run.deps.push_back(issued);
  run.deps.insert(run.deps.end(), waits.begin(), waits.end());
  if (pending_copy_ >= 0) {
    run.deps.push_back(pending_copy_);
    pending_copy_ = -1;
  }
  last_gpu_op_ = plan_.add(run, name);
  // On a CPU the op returns only once it has computed: the thread's next op waits for it.
  if (context_.device.computes_inline()) pending_.push_back(last_gpu_op_);
  return last_gpu_op_;
}

std::int32_t StepBuilder::emit(const Call& call) {
  if (call.gpu_time) return kernel(call.name, call.category, call.host_cost, *call.gpu_time);
  return host(call.name, call.category, call.host_cost);
}

void StepBuilder::emit(const std::vector<Call>& calls) {
  for (const Call& call : calls)
    emit(call);
}

void StepBuilder::take_batch(std::int64_t batch, int loader) {
  const HostCosts& costs = context_.device.profile().host;
  host("training loop step", Category::host, costs.step_overhead);
  const LoaderSpec& spec = context_.scenario.loader;
  if (spec.source == LoaderSource::synthetic_gpu) return;  // the same batch, on the GPU already
  if (spec.workers == 0) {
    host(fmt::format("load batch of {} in the main thread", batch), Category::data,
         spec.batch_load_cpu(batch));
    return;
  }
  std::int32_t fetch = host("fetch batch from loader worker", Category::data, costs.batch_fetch);
  plan_.set_consumes_loader(fetch, loader);
}

std::int32_t StepBuilder::copy_batch(std::int64_t batch) {
  const LoaderSpec& loader = context_.scenario.loader;
  if (loader.source == LoaderSource::synthetic_gpu) return last_cpu_op_;  // made on the GPU
  const bool normalize = loader.normalize_on_gpu;
  const bool prefetch = loader.prefetch_to_gpu;
  std::int64_t bytes = checked_product(sample_transfer_bytes(context_.analysis, loader), batch);
  bool pinned = loader.pin_memory;
  const HostCosts& costs = context_.device.profile().host;
  PlanOp dispatch;
  dispatch.name =
      prefetch ? "launch copy of the next batch on the side stream" : "launch copy batch to device";
  dispatch.category = Category::h2d;
  dispatch.lane = Lane{LaneKind::cpu, cpu_};
  dispatch.work = SimTime::from_seconds(costs.forward_op).ns();
  dispatch.launches_on_gpu = gpu_;
  dispatch.deps = pending_;
  pending_.clear();
  std::int32_t issued = plan_.add(dispatch);
  last_cpu_op_ = issued;

  PlanOp copy;
  copy.name = fmt::format("copy {}batch to device ({:.2f} MiB, {})", prefetch ? "next " : "",
                          static_cast<double>(bytes) / kMiB, pinned ? "pinned" : "pageable");
  copy.category = Category::h2d;
  copy.lane = Lane{LaneKind::copy, gpu_};
  copy.work = context_.device.host_to_device_time(Bytes(bytes), pinned).ns();
  copy.deps = {issued};
  // On the compute stream the copy waits for the kernels before it; on the prefetcher's side
  // stream it overlaps them.
  if (!prefetch) copy.after_lane = Lane{LaneKind::compute, gpu_};
  std::int32_t copied = plan_.add(copy);
  if (!pinned) {
    // A copy from pageable memory returns to Python only once the data has left it.
    host("wait for pageable copy", Category::h2d, Seconds(0), {copied});
  }
  std::int32_t ready = copied;
  if (normalize) {
    // x.float().sub_(mean).div_(std): uint8 -> fp32, then two in-place fp32 passes.
    const std::int64_t elements = checked_product(context_.analysis.input_shape.elements(), batch);
    for (const auto& [name, bytes_per_element] :
         {std::pair{"to float", 1 + 4}, {"sub_ mean", 4 + 4}, {"div_ std", 4 + 4}}) {
      KernelWork k;
      k.name = name;
      k.op_class = OpClass::elementwise;
      k.flops = {Flops(0), Flops(elements)};
      k.bytes = {Bytes(0), Bytes(checked_product(elements, bytes_per_element))};
      k.launch = launch::elementwise({0, elements});
      const std::string what = fmt::format("normalize batch on GPU: {}", name);
      const SimTime gpu_time = context_.device.kernel_time(k, 1);
      if (!prefetch) {
        if (ready == copied) pending_copy_ = copied;  // the first kernel waits for the copy
        ready = kernel(what, Category::h2d, costs.forward_op, gpu_time);
        continue;
      }
      // The prefetcher normalises on its side stream too. Modelled in that stream's order, the
      // kernels overlap the step's own; on the GPU they share its SMs, an error bounded by
      // their own (short, memory-bound) time.
      std::int32_t launch = host("launch " + what, Category::h2d, costs.forward_op);
      PlanOp run;
      run.name = what;
      run.category = Category::h2d;
      run.lane = Lane{LaneKind::copy, gpu_};
      run.work = gpu_time.ns();
      run.deps = {launch};
      ready = plan_.add(run);
    }
  }
  if (prefetch) {
    prefetched_ = ready;
    prefetched_samples_ = batch;
    // This step's batch came in during the previous step: it is on the device already.
    return last_cpu_op_;
  }
  if (ready == copied) pending_copy_ = copied;  // the next kernel waits for the copy
  if (loader.gpu_decode.value() > 0) ready = decode_on_gpu(batch, {});
  return ready;
}

std::int32_t StepBuilder::decode_on_gpu(std::int64_t batch, std::vector<std::int32_t> deps) {
  // DALI's GPU stage (nvJPEG decoding, crops, normalisation) runs on its own stream, but on the
  // same SMs as the step's kernels: its time adds to theirs, so it runs in the compute stream's
  // order here. The hardware JPEG engines of A100/H100 spare the SMs; gpu_decode_us should then
  // count only what runs on them.
  const double seconds = context_.scenario.loader.gpu_decode.value() * static_cast<double>(batch);
  return kernel(fmt::format("decode and augment batch of {} on GPU", batch), Category::data,
                context_.device.profile().host.forward_op, SimTime::from_seconds(Seconds(seconds)),
                std::move(deps));
}

void StepBuilder::await_prefetched_batch() {
  if (prefetched_ < 0) return;
  if (context_.scenario.loader.gpu_decode.value() > 0) {
    // The next batch is decoded once its encoded files are on the device; the next step's
    // kernels queue behind the decoding in the compute stream.
    decode_on_gpu(prefetched_samples_, {prefetched_});
    prefetched_ = -1;
    return;
  }
  // torch.cuda.current_stream().wait_stream(side): an event wait in the compute stream, which
  // the next step's first kernel queues behind. Issued here, at the end of this step, it
  // delays nothing of this step (the stream has nothing after it in this step).
  PlanOp wait;
  wait.name = "compute stream waits for the prefetched batch";
  wait.category = Category::h2d;
  wait.lane = Lane{LaneKind::compute, gpu_};
  wait.deps = {prefetched_};
  plan_.add(wait);
  prefetched_ = -1;
}

void StepBuilder::stream_waits(std::string_view name, std::vector<std::int32_t> ops) {
  PlanOp wait;
  wait.category = Category::communication;
  wait.lane = Lane{LaneKind::compute, gpu_};
  wait.deps = std::move(ops);
  if (last_gpu_op_ >= 0) wait.deps.push_back(last_gpu_op_);
  last_gpu_op_ = plan_.add(wait, name);
}

void StepBuilder::sync(std::string name) {
  std::vector<std::int32_t> deps;
  if (last_gpu_op_ >= 0) deps.push_back(last_gpu_op_);
  host(std::move(name), Category::sync, context_.device.profile().host.sync, std::move(deps));
}

void StepBuilder::optimizer_step(const StepContext* over) {
  std::vector<Call> calls = optimizer_calls(over != nullptr ? *over : context_);
  // GradScaler.step (torch/amp/grad_scaler.py): a fused optimizer gets grad_scale and found_inf
  // on the device and skips a bad step itself; any other reads found_inf first, a host sync.
  if (context_.device.precision() != TrainingPrecision::amp_fp16 ||
      optimizer_implementation(context_.scenario.training) == OptimizerImplementation::fused) {
    emit(calls);
    return;
  }
  auto unscale_end = std::find_if(calls.begin(), calls.end(), [](const Call& c) {
    return c.name.rfind("_amp_foreach", 0) != 0;
  });
  emit(std::vector<Call>(calls.begin(), unscale_end));
  sync("GradScaler found_inf.item()");
  emit(std::vector<Call>(unscale_end, calls.end()));
}

IterationPlan single_device_training_step(const StepContext& context, std::int64_t batch) {
  IterationPlan plan;
  plan.samples = batch;
  StepBuilder step(context, plan, 0, 0);
  step.take_batch(batch, 0);
  step.copy_batch(batch);
  step.emit(zero_grad_calls(context));
  step.emit(forward_calls(context, batch, true));
  step.emit(loss_forward_calls(context, batch));
  step.emit(loss_backward_calls(context, batch));
  step.emit(
      backward_calls(context, batch, context.scenario.training.framework == Framework::pytorch1));
  step.optimizer_step();
  if (context.scenario.training.sync_every_step) step.sync("loss.item()");
  step.await_prefetched_batch();
  return plan;
}

IterationPlan single_device_validation_step(const StepContext& context, std::int64_t batch) {
  IterationPlan plan;
  plan.samples = batch;
  StepBuilder step(context, plan, 0, 0);
  step.take_batch(batch, 0);
  step.copy_batch(batch);
  step.emit(forward_calls(context, batch, false));
  step.emit(loss_forward_calls(context, batch));
  step.sync("validation loss.item()");
  step.await_prefetched_batch();
  return plan;
}

}  // namespace epochcast::sim

// nn.DataParallel's steps as iteration plans, and the strategy that runs them.
#include "sim/strategy/data_parallel.h"

#include <algorithm>

#include <fmt/format.h>

#include "sim/strategy/collective_ops.h"
#include "sim/strategy/strategy.h"

namespace epochcast::sim {

namespace {

// Samples of each of DataParallel's chunks: torch.chunk-like, ceil(batch / gpus) each.
std::vector<std::int64_t> chunk_sizes(std::int64_t batch, int gpus) {
  std::int64_t size = (batch + gpus - 1) / gpus;
  std::vector<std::int64_t> sizes;
  for (std::int64_t left = batch; left > 0; left -= size)
    sizes.push_back(std::min(size, left));
  return sizes;
}

std::int64_t output_bytes_per_sample(const MultiGpuContext& c) {
  return c.step.analysis.output_shape.elements() *
         element_bytes(c.step.analysis.options.activation_dtype);
}

// A plain peer copy (cudaMemcpyPeer-like, no collective step latency) as a network flow.
std::int32_t peer_copy(IterationPlan& plan, const std::string& name, int src, int dst,
                       std::int64_t bytes, std::vector<std::int32_t> deps) {
  PlanOp op;
  op.name = name;
  op.category = Category::communication;
  op.lane = Lane{LaneKind::network, 0};
  op.work = bytes;
  op.src_gpu = src;
  op.dst_gpu = dst;
  op.deps = std::move(deps);
  return plan.add(op);
}

// The forward half of a DataParallel step, shared by training and evaluation: scatter the
// batch, replicate the module (broadcast its parameters), run the replicas with their
// dispatch serialised by the GIL, gather the outputs onto GPU 0 and compute the loss there.
// Returns the per-replica chunk sizes.
std::vector<std::int64_t> data_parallel_forward(const MultiGpuContext& c, IterationPlan& plan,
                                                StepBuilder& main, int gpus, std::int64_t batch,
                                                std::int32_t batch_on_gpu0, bool training) {
  const HostCosts& costs = c.profile.host;
  std::vector<std::int64_t> sizes = chunk_sizes(batch, gpus);
  const int replicas = static_cast<int>(sizes.size());
  const std::int64_t sample_bytes =
      c.step.analysis.input_shape.elements() * element_bytes(c.step.analysis.input_dtype);

  std::int32_t scatter = main.host("DataParallel scatter", Category::communication,
                                   costs.forward_op * static_cast<double>(replicas));
  std::vector<std::int32_t> chunk_arrived(static_cast<std::size_t>(replicas), batch_on_gpu0);
  for (int r = 1; r < replicas; ++r) {
    chunk_arrived[static_cast<std::size_t>(r)] =
        peer_copy(plan, fmt::format("scatter inputs 0->{}", r), 0, r,
                  checked_product(sample_bytes, sizes[static_cast<std::size_t>(r)]),
                  {batch_on_gpu0, scatter});
  }

  // replicate(): new module objects per replica (a module call's host cost each), then the
  // parameters broadcast from GPU 0 in coalesced buffers.
  main.host("replicate modules", Category::communication,
            costs.forward_op *
                static_cast<double>((replicas - 1) *
                                    static_cast<std::int64_t>(c.step.analysis.layers.size())));
  std::vector<int> participants;
  for (int r = 0; r < replicas; ++r)
    participants.push_back(r);
  MultiGpuContext local = c;
  local.nodes = {participants};
  std::vector<std::int32_t> params_arrived(static_cast<std::size_t>(replicas), -1);
  // The parameters, then the buffers (batch-norm statistics, not differentiated), each in
  // coalesced buffers of their own.
  std::vector<std::pair<std::int64_t, const char*>> transfers;
  for (const CoalescedBuffer& b : coalesced_parameters(c.step.analysis, kDataParallelBucketBytes))
    transfers.emplace_back(b.bytes, "parameters");
  for (const CoalescedBuffer& b :
       coalesced_module_buffers(c.step.analysis, kDataParallelBucketBytes))
    transfers.emplace_back(b.bytes, "buffers");
  for (const auto& [bytes, what] : transfers) {
    std::int32_t flat = main.kernel(fmt::format("flatten {}", what), Category::communication,
                                    costs.forward_op, copy_time(c, bytes));
    main.host("broadcast_coalesced (NCCL)", Category::communication,
              c.profile.links.collective_launch);
    std::vector<CollectiveSite> sites;
    for (int r = 0; r < replicas; ++r) {
      std::vector<std::int32_t> ready = {main.last_cpu_op()};
      if (r == 0) ready.push_back(flat);
      sites.push_back({r, Lane{LaneKind::compute, r}, ready});
    }
    std::vector<std::int32_t> ends =
        add_collective(plan, local.collective(Collective::broadcast, Bytes(bytes), 0), c.analytic,
                       sites, fmt::format("broadcast {} ({:.1f} MiB)", what, to_mib(Bytes(bytes))));
    for (int r = 0; r < replicas; ++r)
      params_arrived[static_cast<std::size_t>(r)] = ends[static_cast<std::size_t>(r)];
  }

  // parallel_apply: a thread per replica, but Python holds the GIL, so their dispatch is one
  // interleaved sequence on the main thread.
  std::vector<StepBuilder> replica;
  std::vector<std::vector<Call>> calls;
  std::size_t longest = 0;
  for (int r = 0; r < replicas; ++r) {
    replica.emplace_back(c.step, plan, 0, r);
    replica.back().wait_for(chunk_arrived[static_cast<std::size_t>(r)]);
    replica.back().wait_for(params_arrived[static_cast<std::size_t>(r)]);
    calls.push_back(forward_calls(c.step, sizes[static_cast<std::size_t>(r)], training));
    longest = std::max(longest, calls.back().size());
  }
  for (std::size_t k = 0; k < longest; ++k) {
    for (int r = 0; r < replicas; ++r) {
      if (k < calls[static_cast<std::size_t>(r)].size()) {
        replica[static_cast<std::size_t>(r)].emit(calls[static_cast<std::size_t>(r)][k]);
      }
    }
  }
  // gather(): outputs onto GPU 0 for the loss.
  main.host("DataParallel gather", Category::communication,
            costs.forward_op * static_cast<double>(replicas));
  for (int r = 1; r < replicas; ++r) {
    main.wait_for(
        peer_copy(plan, fmt::format("gather outputs {}->0", r), r, 0,
                  output_bytes_per_sample(c) * sizes[static_cast<std::size_t>(r)],
                  {replica[static_cast<std::size_t>(r)].last_gpu_op(), main.last_cpu_op()}));
  }
  main.wait_for(replica[0].last_gpu_op());
  main.emit(loss_forward_calls(c.step, batch));
  return sizes;
}

}  // namespace

IterationPlan data_parallel_training_step(const MultiGpuContext& c, int gpus, std::int64_t batch) {
  IterationPlan plan;
  plan.samples = batch;
  const HostCosts& costs = c.profile.host;
  const bool pytorch1 = c.step.scenario.training.framework == Framework::pytorch1;
  StepBuilder main(c.step, plan, 0, 0);
  main.take_batch(batch, 0);
  std::int32_t on_gpu0 = main.copy_batch(batch);
  main.emit(zero_grad_calls(c.step));
  std::vector<std::int64_t> sizes =
      data_parallel_forward(c, plan, main, gpus, batch, on_gpu0, true);
  const int replicas = static_cast<int>(sizes.size());

  // loss.backward() hands over to the autograd engine's thread per device.
  std::int32_t call = main.host("loss.backward()", Category::backward, costs.backward_op);
  std::vector<StepBuilder> device;
  for (int r = 0; r < replicas; ++r) {
    device.emplace_back(c.step, plan, 1 + r, r);
    device.back().wait_for(call);
  }
  device[0].emit(loss_backward_calls(c.step, batch));
  // Gather's backward scatters the output gradients to the replicas.
  for (int r = 1; r < replicas; ++r) {
    device[static_cast<std::size_t>(r)].wait_for(
        peer_copy(plan, fmt::format("scatter output gradients 0->{}", r), 0, r,
                  output_bytes_per_sample(c) * sizes[static_cast<std::size_t>(r)],
                  {device[0].last_gpu_op()}));
  }
  for (int r = 0; r < replicas; ++r) {
    // Replicas' parameters are broadcast outputs, not leaves: no AccumulateGrad here.
    device[static_cast<std::size_t>(r)].emit(
        backward_calls(c.step, sizes[static_cast<std::size_t>(r)], false));
  }
  // Broadcast's backward (ReduceAddCoalesced) runs once every replica is done: flatten each
  // replica's gradients, NCCL-reduce them onto GPU 0, then accumulate into the module's grads.
  StepBuilder& engine = device[0];
  for (int r = 1; r < replicas; ++r)
    engine.wait_for(device[static_cast<std::size_t>(r)].last_cpu_op());
  std::vector<int> participants;
  for (int r = 0; r < replicas; ++r)
    participants.push_back(r);
  MultiGpuContext local = c;
  local.nodes = {participants};
  // Cut by Python's _take_tensors (reduce_add_coalesced), not the forward's C++ rule.
  for (const CoalescedBuffer& buffer :
       coalesced_gradients(c.step.analysis, kDataParallelBucketBytes)) {
    const std::int64_t bytes = buffer.bytes;
    std::vector<CollectiveSite> sites;
    for (int r = 0; r < replicas; ++r) {
      StepBuilder flatten(c.step, plan, 1, r);
      flatten.wait_for(engine.last_cpu_op());
      std::int32_t flat = flatten.kernel("flatten gradients", Category::communication,
                                         costs.backward_op, copy_time(c, bytes));
      sites.push_back({r, Lane{LaneKind::compute, r}, {flat}});
    }
    engine.host("reduce_add_coalesced (NCCL)", Category::communication,
                c.profile.links.collective_launch);
    for (CollectiveSite& site : sites)
      site.ready.push_back(engine.last_cpu_op());
    std::vector<std::int32_t> ends =
        add_collective(plan, local.collective(Collective::reduce, Bytes(bytes), 0), c.analytic,
                       sites, fmt::format("reduce gradients ({:.1f} MiB)", to_mib(Bytes(bytes))));
    // AccumulateGrad into the module's .grad: an add into zeroed grads (1.x) or a copy.
    engine.wait_for(ends[0]);
    engine.kernel("accumulate reduced gradients", Category::backward, costs.backward_op,
                  copy_time(c, pytorch1 ? bytes * 3 / 2 : bytes));
  }
  main.host("wait for backward", Category::backward, Seconds(0), {engine.last_cpu_op()});
  main.optimizer_step();
  if (c.step.scenario.training.sync_every_step) main.sync("loss.item()");
  main.await_prefetched_batch();
  return plan;
}

IterationPlan data_parallel_validation_step(const MultiGpuContext& c, int gpus,
                                            std::int64_t batch) {
  IterationPlan plan;
  plan.samples = batch;
  StepBuilder main(c.step, plan, 0, 0);
  main.take_batch(batch, 0);
  std::int32_t on_gpu0 = main.copy_batch(batch);
  data_parallel_forward(c, plan, main, gpus, batch, on_gpu0, false);
  main.sync("validation loss.item()");
  main.await_prefetched_batch();
  return plan;
}

namespace {

class DataParallelStrategy final : public StrategyModel {
 public:
  bool process_per_gpu() const override { return false; }
  IterationPlan training_step(const MultiGpuContext& c, const SweepPoint& point, std::int64_t batch,
                              MicroStep /*micro*/) const override {
    if (point.gpus == 1) return single_device_training_step(c.step, batch);
    return data_parallel_training_step(c, point.gpus, batch);
  }
  IterationPlan validation_step(const MultiGpuContext& c, const SweepPoint& point,
                                std::int64_t batch) const override {
    if (point.gpus == 1) return single_device_validation_step(c.step, batch);
    return data_parallel_validation_step(c, point.gpus, batch);
  }
  std::string collective_words() const override {
    return "(parameters out by broadcast, gradients back by reduce)";
  }

 protected:
  Bytes buffers(const StepContext& c, const SweepPoint& point) const override {
    if (point.gpus == 1) return Bytes(0);
    // GPU 0 holds the whole batch, everyone's outputs and two coalescing buffers.
    const std::int64_t per_sample =
        checked_sum(sample_transfer_bytes(c.analysis),
                    checked_product(c.analysis.output_shape.elements(),
                                    element_bytes(c.analysis.options.activation_dtype)));
    return Bytes(
        checked_sum(checked_product(point.global_batch, per_sample), 2 * kDataParallelBucketBytes));
  }
};

}  // namespace

const StrategyModel& data_parallel_strategy() {
  static const DataParallelStrategy strategy;
  return strategy;
}

}  // namespace epochcast::sim

// DistributedDataParallel's steps as iteration plans, and the strategy that runs them.
#include "sim/strategy/ddp.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "sim/strategy/collective_ops.h"
#include "sim/strategy/strategy.h"

namespace epochcast::sim {

namespace {

// find_unused_parameters' host work (reducer.cpp): a hook marks its parameter with a select
// and a fill_ of the host map; all_reduce_local_used_map stages the map with an empty_like in
// pinned memory, a copy_ into it and a copy_ to the device.
constexpr int kMarkUsedHostOps = 2;
constexpr int kStageUsedMapHostOps = 3;

}  // namespace

std::vector<GradientBucket> ddp_buckets(const ModelAnalysis& analysis, Bytes first_cap, Bytes cap,
                                        BucketOrder order) {
  std::vector<GradientBucket> buckets;
  const std::int64_t element = element_bytes(analysis.options.parameter_dtype);
  const std::size_t count = analysis.param_tensors.size();
  GradientBucket current;
  for (std::size_t n = 0; n < count; ++n) {
    const std::size_t i = order == BucketOrder::registration ? n : count - 1 - n;
    // As PyTorch's reducer assigns them: a bucket takes tensors until it reaches its limit,
    // so it may pass the limit by its last tensor.
    current.tensors.push_back(i);
    current.bytes += Bytes(analysis.param_tensors[i].elements * element);
    if (current.bytes >= (buckets.empty() ? first_cap : cap)) {
      buckets.push_back(std::move(current));
      current = GradientBucket{};
    }
  }
  if (!current.tensors.empty()) buckets.push_back(std::move(current));
  if (order == BucketOrder::registration) std::reverse(buckets.begin(), buckets.end());
  return buckets;
}

IterationPlan ddp_training_step(const MultiGpuContext& c, std::int64_t batch, bool communicate,
                                bool zero_grad, const ShardedOptimizer* sharded) {
  IterationPlan plan;
  plan.samples = batch;
  const HostCosts& costs = c.profile.host;
  const TrainingSpec& training = c.step.scenario.training;
  const ModelAnalysis& analysis = c.step.analysis;
  const bool find_unused = training.ddp.searches_unused_parameters();
  std::vector<GradientBucket> buckets =
      ddp_buckets(analysis, training.ddp.first_bucket_cap, training.ddp.bucket_cap,
                  find_unused ? BucketOrder::registration : BucketOrder::gradient_ready);
  const bool compressed = training.gradient_dtype != GradientDtype::fp32;
  const std::string_view dtype_name = name_of(training.gradient_dtype);
  const std::int64_t parameter_element = element_bytes(analysis.options.parameter_dtype);
  // The layer after whose backward each bucket is complete (its earliest layer), the parameter
  // tensors each layer's backward produces, and the bucket of each.
  std::vector<int> tensor_layer;
  std::vector<std::vector<std::size_t>> layer_tensors(analysis.layers.size());
  for (std::size_t l = 0; l < analysis.layers.size(); ++l) {
    for (std::size_t t = 0; t < analysis.layers[l].param_tensors.size(); ++t) {
      layer_tensors[l].push_back(tensor_layer.size());
      tensor_layer.push_back(static_cast<int>(l));
    }
  }
  std::vector<std::size_t> tensor_bucket(tensor_layer.size());
  std::map<int, std::vector<std::size_t>> complete_after;
  for (std::size_t b = 0; b < buckets.size(); ++b) {
    int earliest = static_cast<int>(analysis.layers.size());
    for (std::size_t t : buckets[b].tensors) {
      earliest = std::min(earliest, tensor_layer[t]);
      tensor_bucket[t] = b;
    }
    complete_after[earliest].push_back(b);
  }
  auto tensor_bytes = [&](std::size_t t) {
    return checked_product(analysis.param_tensors[t].elements, parameter_element);
  };

  // Every rank makes the same calls: one builder makes rank 0's, and the plan repeats each
  // block of them for every rank (with every rank of a large cluster, building and storing
  // them rank by rank was most of a plan's cost). The collectives between blocks join them.
  const std::vector<int> ranks = c.ranks();
  std::vector<Replica> replicas;
  for (std::size_t i = 0; i < ranks.size(); ++i)
    replicas.push_back(Replica{ranks[i], ranks[i], static_cast<int>(i)});
  StepBuilder b(c.step, plan, ranks.front(), ranks.front());
  auto sites_after = [&](const std::vector<std::int32_t>& ops) {
    return rank_sites(plan, ranks, ops);
  };
  const bool accumulate = training.framework == Framework::pytorch1 || !zero_grad;
  const bool prescales = training.framework == Framework::pytorch1;
  // DDP's buffer sync (broadcast_buffers): in the forward after a synchronised backward, the
  // first of a cycle, rank 0's buffers are flattened, broadcast on NCCL's stream and copied back
  // before the module runs (c10d's broadcast_coalesced).
  const bool several = ranks.size() > 1 || c.total_nodes > 1;
  const std::vector<CoalescedBuffer> buffer_syncs =
      zero_grad && several && training.ddp.broadcast_buffers
          ? coalesced_module_buffers(analysis, kDdpBufferBroadcastBytes)
          : std::vector<CoalescedBuffer>{};
  std::vector<std::vector<std::int32_t>> sync_ready;  // rank 0's, per buffer
  plan.begin_replicas(replicas.front());
  b.take_batch(batch, 0);
  b.copy_batch(batch);
  if (zero_grad) b.emit(zero_grad_calls(c.step));
  b.host("DistributedDataParallel forward", Category::forward, costs.forward_op);
  for (const CoalescedBuffer& sync : buffer_syncs) {
    // c10d's flatten: one cat from C++, no Python around it.
    std::int32_t flat = b.kernel("flatten buffers", Category::communication, costs.backward_op,
                                 copy_time(c, sync.bytes));
    std::int32_t launched = b.host("launch broadcast of buffers", Category::communication,
                                   c.profile.links.collective_launch);
    sync_ready.push_back({flat, launched});
  }
  plan.end_replicas(replicas);
  for (std::size_t k = 0; k < buffer_syncs.size(); ++k) {
    const CoalescedBuffer& sync = buffer_syncs[k];
    std::vector<std::int32_t> ends =
        add_collective(plan, c.collective(Collective::broadcast, Bytes(sync.bytes), 0), c.analytic,
                       sites_after(sync_ready[k]),
                       fmt::format("broadcast buffers ({:.2f} MiB)", to_mib(Bytes(sync.bytes))));
    // Then each buffer gets its part back with a copy_ of its own, from C++.
    const std::int64_t per_tensor = std::max<std::int64_t>(1, sync.bytes / sync.tensors);
    plan.begin_replicas(replicas.front());
    for (std::int64_t t = 0; t < sync.tensors; ++t) {
      b.kernel(
          "copy broadcast buffer back", Category::communication, costs.backward_op,
          copy_time(c, per_tensor),
          t == 0 ? std::vector<std::int32_t>{plan.per_replica(ends)} : std::vector<std::int32_t>{});
    }
    plan.end_replicas(replicas);
  }
  const std::vector<Call> forward = forward_calls(c.step, batch, true);
  const std::vector<Call> loss_forward = loss_forward_calls(c.step, batch);
  const std::vector<Call> loss_backward = loss_backward_calls(c.step, batch);
  const std::vector<Call> calls = backward_calls(c.step, batch, accumulate);
  // ready[b]: the ops of rank 0 after which it may start all-reducing bucket b; used_map_ready:
  // after which it may all-reduce the used-parameter map (find_unused_parameters).
  std::vector<std::vector<std::int32_t>> ready(buckets.size());
  std::vector<std::int32_t> used_map_ready;
  const std::int64_t used_map_bytes =
      checked_product(static_cast<std::int64_t>(analysis.param_tensors.size()),
                      static_cast<std::int64_t>(sizeof(std::int32_t)));
  plan.begin_replicas(replicas.front());
  b.emit(forward);
  b.emit(loss_forward);
  b.emit(loss_backward);
  // The last op of each bucket's gradients on the compute stream.
  std::vector<std::int32_t> filled(buckets.size(), -1);
  for (std::size_t k = 0; k < calls.size(); ++k) {
    b.emit(calls[k]);
    bool layer_done = k + 1 == calls.size() || calls[k + 1].layer != calls[k].layer;
    if (!layer_done) continue;
    const auto layer = static_cast<std::size_t>(calls[k].layer);
    // With find_unused_parameters every hook first marks its parameter used, under no_sync
    // too (reducer.cpp, autograd_hook: local_used_map_[index] = 1, a select and a fill_ of a
    // host tensor).
    if (find_unused && layer < layer_tensors.size()) {
      for (std::size_t t = 0; t < layer_tensors[layer].size(); ++t)
        b.host("mark parameter used", Category::backward, kMarkUsedHostOps * costs.backward_op);
    }
    if (!communicate) continue;
    // The reducer's autograd hook on each of the layer's parameters copies its gradient into
    // its bucket, pre-divided by the world size: one kernel a parameter (reducer.cpp,
    // mark_variable_ready_dense: mul_out into the bucket's view, or div_ in place where the
    // gradient already is that view; PyTorch 1's a plain copy_, divided by the bucket below), and
    // its C++ work on the autograd thread.
    if (layer < layer_tensors.size()) {
      for (std::size_t t : layer_tensors[layer]) {
        filled[tensor_bucket[t]] =
            b.kernel(fmt::format("copy gradient into bucket {}", tensor_bucket[t]),
                     Category::backward, costs.backward_op, copy_time(c, tensor_bytes(t)));
      }
    }
    auto finished = complete_after.find(calls[k].layer);
    if (finished == complete_after.end()) continue;
    // The full bucket's all-reduce is launched from the autograd thread right away. A
    // compression hook first casts the bucket down and divides it by the world size, on the
    // compute stream; PyTorch 1's reducer copied each gradient in unscaled and divided the
    // full bucket in place before its all-reduce, one pass over the bucket (reducer.cpp,
    // mark_variable_ready: "Prescale bucket contents", replica.contents.div_, through 1.7).
    for (std::size_t bucket : finished->second) {
      std::int32_t copied = filled[bucket];
      const std::int64_t elements = buckets[bucket].bytes.value() / parameter_element;
      if (!compressed && prescales) {
        copied = b.kernel(fmt::format("divide bucket {} by the world size", bucket),
                          Category::backward, costs.backward_op,
                          elementwise_time(c, elements, static_cast<int>(parameter_element),
                                           static_cast<int>(parameter_element)));
      }
      if (compressed) {
        b.kernel(fmt::format("compress bucket {} to {}", bucket, dtype_name),
                 Category::communication, costs.backward_op,
                 elementwise_time(c, elements, static_cast<int>(parameter_element), 2));
        copied = b.kernel(fmt::format("divide compressed bucket {} by the world size", bucket),
                          Category::communication, costs.backward_op,
                          elementwise_time(c, elements, 2, 2));
      }
      std::int32_t launched = b.host(fmt::format("launch all-reduce of bucket {}", bucket),
                                     Category::communication, c.profile.links.collective_launch);
      ready[bucket] = {copied, launched};
      if (find_unused && bucket + 1 == buckets.size()) {
        // The last bucket launched, the used-parameter map goes to the device (a pinned
        // staging copy, then an asynchronous copy in the compute stream's order) and is
        // all-reduced after the buckets (reducer.cpp, all_reduce_local_used_map).
        std::int32_t copied_map =
            b.kernel("copy used-parameter map to device", Category::communication,
                     kStageUsedMapHostOps * costs.backward_op,
                     c.step.device.host_to_device_time(Bytes(used_map_bytes), true));
        std::int32_t launched_map =
            b.host("launch all-reduce of used-parameter map", Category::communication,
                   c.profile.links.collective_launch);
        used_map_ready = {copied_map, launched_map};
      }
    }
  }
  plan.end_replicas(replicas);
  if (communicate) {
    const double memory_bound = memory_bound_share(c, batch);
    std::vector<std::vector<std::int32_t>> ends(buckets.size());
    for (std::size_t bucket = 0; bucket < buckets.size(); ++bucket) {
      // Compressed, two bytes an element cross the wire.
      const Bytes wire = compressed ? Bytes(buckets[bucket].bytes.value() / parameter_element * 2)
                                    : buckets[bucket].bytes;
      const CollectiveChoice& choice = c.collective(Collective::all_reduce, wire);
      ends[bucket] =
          add_collective(plan, choice, c.analytic, sites_after(ready[bucket]),
                         fmt::format("all-reduce bucket {} ({:.1f} MiB{})", bucket,
                                     static_cast<double>(wire.value()) / kMiB,
                                     compressed ? fmt::format(", {}", dtype_name) : std::string()),
                         true, compute_speed_beside(c, choice, memory_bound));
    }
    std::vector<std::int32_t> used_map_end;
    if (!used_map_ready.empty()) {
      used_map_end = add_collective(
          plan, c.collective(Collective::all_reduce, Bytes(used_map_bytes)), c.analytic,
          sites_after(used_map_ready),
          fmt::format("all-reduce used-parameter map ({} int32)", analysis.param_tensors.size()));
    }
    // finalize_backward: the compute stream waits for each all-reduce, then the averaged
    // bucket is copied back into the gradients (a compressed one is cast back into the bucket
    // first). Gradients that are views into their buckets need no copy (reducer.cpp copies
    // bucket to gradient only without gradient_as_bucket_view); the hooks' copy in stays, as
    // a division in place where the gradient already is the bucket's view.
    plan.begin_replicas(replicas.front());
    std::vector<std::int32_t> viewed;  // the all-reduces of buckets the gradients are views of
    for (std::size_t bucket = 0; bucket < buckets.size(); ++bucket) {
      std::vector<std::int32_t> after{plan.per_replica(ends[bucket])};
      if (compressed) {
        const std::int64_t elements = buckets[bucket].bytes.value() / parameter_element;
        b.kernel(fmt::format("decompress bucket {}", bucket), Category::backward, costs.backward_op,
                 elementwise_time(c, elements, 2, static_cast<int>(parameter_element)), after);
        after.clear();
      }
      if (training.ddp.gradient_as_bucket_view) {
        viewed.insert(viewed.end(), after.begin(), after.end());
        continue;
      }
      // One copy a parameter (reducer.cpp, copy_bucket_to_grad), the first after the bucket's
      // all-reduce.
      for (std::size_t t : buckets[bucket].tensors) {
        b.kernel(fmt::format("copy bucket {} back to a gradient", bucket), Category::backward,
                 costs.backward_op, copy_time(c, tensor_bytes(t)), after);
        after.clear();
      }
    }
    // Gradients that are views of their buckets are not copied, but the optimizer reads the
    // buckets: the compute stream waits for their all-reduces (the work's wait() in
    // finalize_backward).
    if (!viewed.empty()) b.stream_waits("compute stream waits for the all-reduces", viewed);
    // finalize_backward then waits for the map's all-reduce (local_used_work_->wait()) before
    // the optimizer.
    if (!used_map_end.empty()) {
      b.stream_waits("compute stream waits for the used-parameter map",
                     {plan.per_replica(std::move(used_map_end))});
    }
    if (sharded == nullptr) {
      b.optimizer_step();
      plan.end_replicas(replicas);
    } else {
      b.optimizer_step(sharded->rank_shard);
      // The broadcasts are issued from the host, each after its owner's step, on NCCL's
      // stream; the next step's kernels wait for all of them (the works' wait()).
      std::int32_t launched = b.host("launch broadcasts of the updated parameters",
                                     Category::communication, c.profile.links.collective_launch);
      std::vector<std::int32_t> stepped = {b.last_gpu_op(), launched};
      plan.end_replicas(replicas);
      std::vector<std::vector<std::int32_t>> broadcast_ends;
      for (const ShardedOptimizer::Broadcast& cast : sharded->broadcasts) {
        const int root = ranks.at(static_cast<std::size_t>(cast.owner) % ranks.size());
        broadcast_ends.push_back(
            add_collective(plan, c.collective(Collective::broadcast, cast.bytes, root), c.analytic,
                           sites_after(stepped),
                           fmt::format("broadcast rank {}'s parameters ({:.2f} MiB)", cast.owner,
                                       to_mib(cast.bytes))));
      }
      plan.begin_replicas(replicas.front());
      std::vector<std::int32_t> arrived;
      for (std::vector<std::int32_t>& end : broadcast_ends)
        arrived.push_back(plan.per_replica(std::move(end)));
      b.stream_waits("compute stream waits for the parameters", arrived);
      plan.end_replicas(replicas);
    }
  }
  plan.begin_replicas(replicas.front());
  if (training.sync_every_step) b.sync("loss.item()");
  b.await_prefetched_batch();
  plan.end_replicas(replicas);
  return plan;
}

IterationPlan ddp_validation_step(const MultiGpuContext& c, std::int64_t batch) {
  IterationPlan plan;
  plan.samples = batch;
  const std::vector<int> ranks = c.ranks();
  std::vector<Replica> replicas;
  for (std::size_t i = 0; i < ranks.size(); ++i)
    replicas.push_back(Replica{ranks[i], ranks[i], static_cast<int>(i)});
  // Every rank's step is rank 0's (see ddp_training_step).
  StepBuilder b(c.step, plan, ranks.front(), ranks.front());
  plan.begin_replicas(replicas.front());
  b.take_batch(batch, 0);
  b.copy_batch(batch);
  b.emit(forward_calls(c.step, batch, false));
  b.emit(loss_forward_calls(c.step, batch));
  b.sync("validation loss.item()");
  b.await_prefetched_batch();
  plan.end_replicas(replicas);
  return plan;
}

Bytes ddp_bucket_bytes(const StepContext& c) {
  const TrainingSpec& training = c.scenario.training;
  const std::int64_t parameters = c.analysis.params;
  Bytes held(0);
  if (!training.ddp.gradient_as_bucket_view)
    held = Bytes(checked_product(parameters, element_bytes(c.analysis.options.parameter_dtype)));
  // The compressed copy is alive until backward ends.
  if (training.gradient_dtype != GradientDtype::fp32)
    held = Bytes(checked_sum(held.value(), checked_product(parameters, 2)));
  return held;
}

namespace {

class DdpStrategy final : public StrategyModel {
 public:
  bool process_per_gpu() const override { return true; }
  int accumulation_cycle(const TrainingSpec& training) const override {
    return training.gradient_accumulation;
  }
  IterationPlan training_step(const MultiGpuContext& c, const SweepPoint& /*point*/,
                              std::int64_t batch, MicroStep micro) const override {
    return ddp_training_step(c, batch, micro.closes, micro.opens);
  }
  IterationPlan validation_step(const MultiGpuContext& c, const SweepPoint& /*point*/,
                                std::int64_t batch) const override {
    return ddp_validation_step(c, batch);
  }
  std::string collective_words() const override { return "of gradients (all-reduce)"; }
  std::vector<std::string> assumptions(const ScenarioSpec& s) const override {
    std::vector<std::string> out;
    const TrainingSpec& training = s.training;
    // Both public runs of PyTorch's DDP benchmark the model can express measure more than it
    // gives for the second rank (tests/sim/data/pytorch-ddp-benchmark, docs/evidence/
    // ddp-overheads.md): what hides behind backward is the least certain part of a DDP step.
    out.push_back(
        "ddp's all-reduces hide behind the rest of backward as far as their buckets allow; in "
        "PyTorch's DDP benchmark (ResNet-50 and -101 on a DGX-1 V100 and on four GH200) a second "
        "rank adds 1.3-5 ms a step, 1.4-7x what this overlap gives: a measured 1- and 2-GPU step "
        "(epochcast run) shows your machine's");
    if (training.nccl_sm_contention) {
      out.push_back(fmt::format(
          "ddp's all-reduces hold one of the {}'s {} SMs per NCCL channel (24 over NVLink rings, "
          "16 under NVLS, 2 otherwise) from the backward pass beside them; "
          "training.nccl_sm_contention: false leaves it out",
          s.machine.gpu.name, s.machine.gpu.sm_count));
    }
    if (training.nccl_memory_contention) {
      out.push_back(
          "ddp's all-reduces move their data through GPU memory (three accesses per byte a GPU "
          "receives, two under NVLS) and the memory-bound kernels of the backward pass beside "
          "them get the rest of its bandwidth; training.nccl_memory_contention: false leaves it "
          "out");
    }
    if (training.ddp.broadcast_buffers && s.analysis.buffers > 0) {
      out.push_back(
          "ddp broadcasts rank 0's buffers (batch-norm statistics) before each step's forward, "
          "as DistributedDataParallel's default broadcast_buffers=True does; "
          "training.ddp.broadcast_buffers: false leaves it out");
    }
    if (training.ddp.searches_unused_parameters()) {
      out.push_back(
          "find_unused_parameters: every parameter is taken as used (none is marked ready early "
          "for its bucket), and the search of the autograd graph after each forward is not "
          "costed (a hash-set insertion per autograd node)");
    }
    return out;
  }

 protected:
  Bytes buffers(const StepContext& c, const SweepPoint& /*point*/) const override {
    return ddp_bucket_bytes(c);
  }
};

}  // namespace

const StrategyModel& ddp_strategy() {
  static const DdpStrategy strategy;
  return strategy;
}

}  // namespace epochcast::sim

// nn.DataParallel and DistributedDataParallel steps as iteration plans.
#include "sim/strategy/multi_gpu.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/model/kernel_launches.h"
#include "sim/collectives/protocols.h"
#include "sim/strategy/collective_ops.h"

namespace epochcast::sim {

std::vector<int> MultiGpuContext::ranks() const {
  std::vector<int> out;
  for (const auto& node : nodes)
    out.insert(out.end(), node.begin(), node.end());
  return out;
}

const CollectiveChoice& MultiGpuContext::collective(Collective kind, Bytes bytes, int root) const {
  std::unique_lock<std::mutex> lock;
  if (cache_mutex != nullptr) lock = std::unique_lock<std::mutex>(*cache_mutex);
  auto key = std::make_tuple(static_cast<int>(kind), bytes.value(), root);
  auto found = cache->find(key);
  if (found != cache->end()) return found->second;
  CollectiveRequest request;
  request.collective = kind;
  request.bytes = bytes;
  request.nodes = nodes;
  request.total_nodes = total_nodes;
  request.symmetric = symmetric;
  request.root = root;
  request.algorithm = step.scenario.training.collective_algorithm;
  request.architecture = step.scenario.machine.gpu.architecture;
  return cache->emplace(key, choose_collective(request, topology, profile)).first->second;
}

namespace {

// A memory-bound copy kernel over `bytes` (read and written: 2x the traffic).
SimTime copy_time(const MultiGpuContext& c, std::int64_t bytes) {
  KernelWork k;
  k.name = "copy";
  k.op_class = OpClass::elementwise;
  k.bytes = {Bytes(0), Bytes(2 * bytes)};
  k.launch = launch::elementwise({0, std::max<std::int64_t>(1, bytes / 4)});
  return c.step.device.kernel_time(k, 1);
}

// An element-wise kernel over `elements` that reads `read` and writes `written` bytes of each
// (a cast, an in-place division).
SimTime elementwise_time(const MultiGpuContext& c, std::int64_t elements, int read, int written) {
  KernelWork k;
  k.name = "elementwise";
  k.op_class = OpClass::elementwise;
  k.flops = {Flops(0), Flops(elements)};
  k.bytes = {Bytes(0), Bytes(elements * (read + written))};
  k.launch = launch::elementwise({0, std::max<std::int64_t>(1, elements)});
  return c.step.device.kernel_time(k, 1);
}

// The share of the backward pass's kernel time that memory bandwidth bounds, at `batch`.
double memory_bound_share(const MultiGpuContext& c, std::int64_t batch) {
  double memory = 0, total = 0;
  for (const LayerCosts& layer : c.step.analysis.layers) {
    for (const auto* kernels : {&layer.backward_input, &layer.backward_weight}) {
      for (const KernelWork& k : *kernels) {
        const KernelExplanation e = c.step.device.explain(k, batch);
        total += e.seconds;
        if (e.bound == KernelBound::memory) memory += e.seconds;
      }
    }
  }
  return total > 0 ? memory / total : 0;
}

// The share of GPU `gpu`'s memory bandwidth a collective's kernels take while it runs. Per byte
// a GPU receives over a link in a ring or tree step, NCCL's primitives touch its memory three
// times: the sender writes it into the receive buffer, the kernel reads it back and reads the
// local input to reduce with it (recvReduceSend) or writes it to the output (recvCopySend);
// what it sends on is written into the next GPU's memory, counted there. Under NVLS the switch
// reads each GPU's data and writes the reduced result into each by multicast: twice per byte.
double nccl_memory_share(const MultiGpuContext& c, const CollectiveChoice& choice, int gpu) {
  if (choice.time.value() <= 0) return 0;
  double touched = 0;
  for (const Transfer& t : choice.plan.transfers) {
    if (t.fabric != FabricWay::none) {
      if (t.src == gpu && t.fabric != FabricWay::into_switch)
        touched += 2.0 * static_cast<double>(t.bytes.value());
    } else if (t.mirror ? t.src == gpu : t.dst == gpu) {
      touched += 3.0 * static_cast<double>(t.bytes.value());
    }
  }
  const double bandwidth = c.step.device.effective_bandwidth(OpClass::elementwise).value();
  // Capped so that the kernels beside it always keep a tenth of the bandwidth: the count can
  // exceed it where the collective's time is an underestimate (a latency-bound one).
  return std::min(0.9, touched / choice.time.value() / bandwidth);
}

// The compute stream's speed while an all-reduce runs beside it on the communication stream.
// NCCL's kernel holds one SM per channel (protocols.h: nccl_channels), so compute-bound
// kernels get the rest of the SMs (training.nccl_sm_contention: false, all of them); and it
// moves data through the GPU's memory (nccl_memory_share), so memory-bound kernels get the
// rest of the bandwidth (training.nccl_memory_contention: false, all of it). The step's
// kernels, in the backward pass's mix of the two (memory_bound_share), then take
// f / (1 - memory share) + (1 - f) / (1 - SM share) of their time.
double compute_speed_beside(const MultiGpuContext& c, const CollectiveChoice& choice,
                            double memory_bound) {
  const TrainingSpec& training = c.step.scenario.training;
  double sm_share = 0, memory_share = 0;
  const int sms = c.step.scenario.machine.gpu.sm_count;
  const int held = nccl_channels(choice.plan, c.topology);
  if (training.nccl_sm_contention && sms > 0 && held > 0)
    sm_share = static_cast<double>(std::min(held, sms - 1)) / sms;
  if (training.nccl_memory_contention && !choice.plan.ranks.empty())
    memory_share = nccl_memory_share(c, choice, choice.plan.ranks.front());
  return 1 / (memory_bound / (1 - memory_share) + (1 - memory_bound) / (1 - sm_share));
}

// take_tensors over (torch dtype number, bytes) pairs; see coalesced_parameters.
std::vector<CoalescedBuffer> take_tensors(const std::vector<std::pair<int, std::int64_t>>& tensors,
                                          std::int64_t cap) {
  std::vector<CoalescedBuffer> buffers;
  std::map<int, CoalescedBuffer> open;  // torch's ScalarType order: int64 (4) before float32 (6)
  for (const auto& [dtype, bytes] : tensors) {
    CoalescedBuffer& filled = open[dtype];
    filled.bytes += bytes;
    ++filled.tensors;
    if (filled.bytes >= cap) {
      buffers.push_back(filled);
      filled = CoalescedBuffer{};
    }
  }
  for (const auto& [dtype, filled] : open) {
    if (filled.tensors > 0) buffers.push_back(filled);
  }
  return buffers;
}

// c10::ScalarType's numbers (c10/core/ScalarType.h), which order take_tensors' leftover buffers.
constexpr int kTorchInt64 = 4;
constexpr int kTorchFloat32 = 6;

}  // namespace

std::vector<CoalescedBuffer> coalesced_parameters(const ModelAnalysis& analysis, std::int64_t cap) {
  const std::int64_t element = element_bytes(analysis.options.parameter_dtype);
  // Parameters share one dtype, so its number only has to differ from the buffers'.
  std::vector<std::pair<int, std::int64_t>> tensors;
  for (const ParamTensor& t : analysis.param_tensors)
    tensors.emplace_back(kTorchFloat32, checked_product(t.elements, element));
  return take_tensors(tensors, cap);
}

std::vector<CoalescedBuffer> coalesced_gradients(const ModelAnalysis& analysis, std::int64_t cap) {
  const std::int64_t element = element_bytes(analysis.options.parameter_dtype);
  std::vector<CoalescedBuffer> buffers;
  CoalescedBuffer open;
  for (const ParamTensor& t : analysis.param_tensors) {
    const std::int64_t bytes = checked_product(t.elements, element);
    if (open.bytes > 0 && open.bytes + bytes > cap) {
      buffers.push_back(open);
      open = CoalescedBuffer{};
    }
    open.bytes += bytes;
    ++open.tensors;
  }
  if (open.tensors > 0) buffers.push_back(open);
  return buffers;
}

std::vector<CoalescedBuffer> coalesced_module_buffers(const ModelAnalysis& analysis,
                                                      std::int64_t cap) {
  // Batch norm's buffers (the only layer with any), in registration order: running mean and
  // running variance in float32 (also under autocast), num_batches_tracked in int64.
  std::vector<std::pair<int, std::int64_t>> tensors;
  for (const LayerCosts& layer : analysis.layers) {
    if (layer.buffers <= 0) continue;
    // layer_costs counts 2 x features + 1 of them.
    const std::int64_t statistics = (layer.buffers - 1) / 2 * element_bytes(DType::float32);
    tensors.emplace_back(kTorchFloat32, statistics);
    tensors.emplace_back(kTorchFloat32, statistics);
    tensors.emplace_back(kTorchInt64, element_bytes(DType::int64));
  }
  return take_tensors(tensors, cap);
}

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
  op.work_ns = bytes;
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

std::vector<GradientBucket> ddp_buckets(const ModelAnalysis& analysis, Bytes first_cap, Bytes cap) {
  std::vector<GradientBucket> buckets;
  const std::int64_t element = element_bytes(analysis.options.parameter_dtype);
  GradientBucket current;
  for (std::size_t i = analysis.param_tensors.size(); i-- > 0;) {
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
  return buckets;
}

IterationPlan ddp_training_step(const MultiGpuContext& c, std::int64_t batch, bool communicate,
                                bool zero_grad) {
  IterationPlan plan;
  plan.samples = batch;
  const HostCosts& costs = c.profile.host;
  const TrainingSpec& training = c.step.scenario.training;
  const ModelAnalysis& analysis = c.step.analysis;
  std::vector<GradientBucket> buckets =
      ddp_buckets(analysis, training.first_bucket_cap, training.bucket_cap);
  const bool compressed = training.gradient_dtype != GradientDtype::fp32;
  const std::string_view dtype_name =
      kGradientDtypeNames[static_cast<std::size_t>(training.gradient_dtype)];
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
  // Each rank's copies of rank 0's ops `ops`.
  auto per_rank = [&](const std::vector<std::int32_t>& ops) {
    std::vector<std::vector<std::int32_t>> out(ranks.size());
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      for (std::int32_t op : ops)
        out[i].push_back(plan.replica_op(op, i));
    }
    return out;
  };
  auto sites_after = [&](const std::vector<std::int32_t>& ops) {
    std::vector<CollectiveSite> sites;
    std::vector<std::vector<std::int32_t>> ready = per_rank(ops);
    for (std::size_t i = 0; i < ranks.size(); ++i)
      sites.push_back({ranks[i], Lane{LaneKind::comm, ranks[i]}, std::move(ready[i])});
    return sites;
  };
  const bool accumulate = training.framework == Framework::pytorch1 || !zero_grad;
  // DDP's buffer sync (broadcast_buffers): in the forward after a synchronised backward, the
  // first of a cycle, rank 0's buffers are flattened, broadcast on NCCL's stream and copied back
  // before the module runs (c10d's broadcast_coalesced).
  const bool several = ranks.size() > 1 || c.total_nodes > 1;
  const std::vector<CoalescedBuffer> buffer_syncs =
      zero_grad && several && training.broadcast_buffers
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
  // ready[b]: the ops of rank 0 after which it may start all-reducing bucket b.
  std::vector<std::vector<std::int32_t>> ready(buckets.size());
  plan.begin_replicas(replicas.front());
  b.emit(forward);
  b.emit(loss_forward);
  b.emit(loss_backward);
  // The last op of each bucket's gradients on the compute stream.
  std::vector<std::int32_t> filled(buckets.size(), -1);
  for (std::size_t k = 0; k < calls.size(); ++k) {
    b.emit(calls[k]);
    bool layer_done = k + 1 == calls.size() || calls[k + 1].layer != calls[k].layer;
    if (!communicate || !layer_done) continue;
    // The reducer's autograd hook on each of the layer's parameters copies its gradient into
    // its bucket, pre-divided by the world size: one kernel a parameter (reducer.cpp,
    // mark_variable_ready_dense: mul_out into the bucket's view, or div_ in place where the
    // gradient already is that view), and its C++ work on the autograd thread.
    const auto layer = static_cast<std::size_t>(calls[k].layer);
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
    // compute stream.
    for (std::size_t bucket : finished->second) {
      std::int32_t copied = filled[bucket];
      if (compressed) {
        const std::int64_t elements = buckets[bucket].bytes.value() / parameter_element;
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
      if (training.gradient_as_bucket_view) {
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
    b.optimizer_step();
    plan.end_replicas(replicas);
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

}  // namespace epochcast::sim

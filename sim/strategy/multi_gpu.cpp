// What the strategies over several GPUs share: the ranks, the collectives chosen for them, the
// kernels around collectives and PyTorch's coalescing of tensors.
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

std::vector<CollectiveSite> rank_sites(const IterationPlan& plan, const std::vector<int>& ranks,
                                       const std::vector<std::int32_t>& ops) {
  std::vector<CollectiveSite> sites;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    CollectiveSite site{ranks[i], Lane{LaneKind::comm, ranks[i]}, {}};
    for (std::int32_t op : ops)
      site.ready.push_back(plan.replica_op(op, i));
    sites.push_back(std::move(site));
  }
  return sites;
}

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

namespace {

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

}  // namespace

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
  const int held = choice.channels;
  if (training.nccl_sm_contention && sms > 0 && held > 0)
    sm_share = static_cast<double>(std::min(held, sms - 1)) / sms;
  if (training.nccl_memory_contention && !choice.plan.ranks.empty())
    memory_share = nccl_memory_share(c, choice, choice.plan.ranks.front());
  return 1 / (memory_bound / (1 - memory_share) + (1 - memory_bound) / (1 - sm_share));
}

namespace {

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

}  // namespace epochcast::sim

// Data-parallel strategies over several GPUs, as iteration plans:
//   dp  - PyTorch nn.DataParallel (one process; GPU 0 scatters, broadcasts the model, gathers
//         and alone steps the optimizer);
//   ddp - PyTorch DistributedDataParallel (a process per GPU; gradients all-reduced in buckets
//         as backward produces them, overlapping it; every rank steps).
#pragma once

#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "sim/collectives/alpha_beta.h"
#include "sim/strategy/step_builder.h"

namespace epochcast::sim {

struct MultiGpuContext {
  StepContext step;
  const Topology& topology;
  const HardwareProfile& profile;
  bool analytic;  // collectives by their alpha-beta time instead of as flows
  // The GPUs simulated, per node (a symmetric cluster simulates node 0 only), and the number of
  // nodes the job spans.
  std::vector<std::vector<int>> nodes;
  int total_nodes = 1;
  bool symmetric = false;
  // Chosen collectives, by (collective, bytes, root): a step asks for the same ones often.
  std::map<std::tuple<int, std::int64_t, int>, CollectiveChoice>* cache = nullptr;
  // Held while the cache is read or filled, where several plans are built at once (choosing a
  // collective also fills the Topology's caches of paths, which are not shared safely).
  std::mutex* cache_mutex = nullptr;

  std::vector<int> ranks() const;
  const CollectiveChoice& collective(Collective kind, Bytes bytes, int root = 0) const;
};

// nn.DataParallel's parameter buckets (torch.cuda.comm's 10 MiB buffers), in registration order.
inline constexpr std::int64_t kDataParallelBucketBytes = 10 * kMiB;
// DistributedDataParallel's broadcast_bucket_size, for its per-forward buffer sync.
inline constexpr std::int64_t kDdpBufferBroadcastBytes = 250 * kMiB;

// Bytes of each coalesced transfer of the model's parameters, or of its buffers (batch-norm
// running statistics in float32, its step count in int64), cut as torch's take_tensors cuts
// them (torch/csrc/utils/tensor_flatten.cpp): each dtype fills a buffer of its own in order,
// which closes as soon as it holds `cap` bytes or more; buffers left open follow in dtype order.
struct CoalescedBuffer {
  std::int64_t bytes = 0;
  std::int64_t tensors = 0;
};
std::vector<CoalescedBuffer> coalesced_parameters(const ModelAnalysis& analysis, std::int64_t cap);
std::vector<CoalescedBuffer> coalesced_module_buffers(const ModelAnalysis& analysis,
                                                      std::int64_t cap);
// The gradients' buffers of nn.DataParallel's reduce (reduce_add_coalesced), cut by Python's
// _take_tensors (torch/_utils.py): a tensor that would take the open buffer past `cap` closes it
// first, so a buffer passes the cap only by holding one large tensor.
std::vector<CoalescedBuffer> coalesced_gradients(const ModelAnalysis& analysis, std::int64_t cap);

// DataParallel over the first `gpus` GPUs with a global batch of `batch`.
IterationPlan data_parallel_training_step(const MultiGpuContext& context, int gpus,
                                          std::int64_t batch);
IterationPlan data_parallel_validation_step(const MultiGpuContext& context, int gpus,
                                            std::int64_t batch);

// DistributedDataParallel, `batch` samples per rank. With gradient accumulation, a step either
// only accumulates (`communicate` false: no all-reduce, no optimizer) or completes the cycle.
// `zero_grad` opens a cycle.
IterationPlan ddp_training_step(const MultiGpuContext& context, std::int64_t batch,
                                bool communicate, bool zero_grad);
IterationPlan ddp_validation_step(const MultiGpuContext& context, std::int64_t batch);

// DDP's gradient buckets: parameter tensors in reverse registration order; a bucket closes once
// it holds first_cap (the first) or cap (the others) bytes, so by its last tensor it may hold
// more, as in PyTorch's reducer.
struct GradientBucket {
  std::vector<std::size_t> tensors;  // indices into the analysis' param_tensors
  Bytes bytes;
};
std::vector<GradientBucket> ddp_buckets(const ModelAnalysis& analysis, Bytes first_cap, Bytes cap);

}  // namespace epochcast::sim

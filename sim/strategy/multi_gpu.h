// What the data-parallel strategies over several GPUs share: the ranks simulated and the
// collectives chosen for them, the kernels that run around collectives, and PyTorch's
// coalescing of tensors into buffers. The strategies themselves: data_parallel.cpp (dp), ddp.cpp,
// sharded.cpp (zero1, zero2, fsdp).
#pragma once

#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "sim/collectives/alpha_beta.h"
#include "sim/strategy/collective_ops.h"
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

// Where each of `ranks` takes part in a collective on its communication stream, once its copy
// of `ops` (ops of rank 0's part of a step, repeated for every rank) is done.
std::vector<CollectiveSite> rank_sites(const IterationPlan& plan, const std::vector<int>& ranks,
                                       const std::vector<std::int32_t>& ops);

// A memory-bound copy kernel over `bytes` (read and written: 2x the traffic).
SimTime copy_time(const MultiGpuContext& c, std::int64_t bytes);
// An element-wise kernel over `elements` that reads `read` and writes `written` bytes of each
// (a cast, an in-place division).
SimTime elementwise_time(const MultiGpuContext& c, std::int64_t elements, int read, int written);
// The share of the backward pass's kernel time that memory bandwidth bounds, at `batch`.
double memory_bound_share(const MultiGpuContext& c, std::int64_t batch);
// The compute stream's speed, as a fraction of its own, while the collective `choice` runs
// beside it on the communication stream, for kernels of which `memory_bound` is the share that
// memory bandwidth bounds.
double compute_speed_beside(const MultiGpuContext& c, const CollectiveChoice& choice,
                            double memory_bound);

}  // namespace epochcast::sim

// Gradient synchronisation the way PyTorch's DistributedDataParallel does it: parameters are
// grouped into buckets in reverse registration order (the first bucket capped at 1 MiB, the rest
// at 25 MiB by default; a bucket closes once it reaches its cap), and each bucket is all-reduced
// as soon as backward has produced all of its gradients, while backward goes on with earlier
// layers. On the CPU a communication thread runs the all-reduce over the host transport (MPI or
// TCP); on a GPU NCCL runs it on a side stream that waits for the gradients and that the optimizer
// waits for.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <torch/torch.h>

#include "runtime/comm/communicator.h"

namespace epochcast::cuda {
class NcclCommunicator;
class Stream;
}  // namespace epochcast::cuda

namespace epochcast::runtime {

class CollectiveWatchdog;

// Parameter indices per bucket, in the order their all-reduces are issued.
std::vector<std::vector<std::size_t>> plan_buckets(const std::vector<torch::Tensor>& parameters,
                                                   std::int64_t first_cap_bytes,
                                                   std::int64_t cap_bytes);

class DdpReducer {
 public:
  // `nccl` and `stream` are used for CUDA parameters (both required then), else the host
  // collectives of `group` (MPI or TCP).
  // With a `watchdog`, every collective launched on the GPU is registered with it.
  DdpReducer(std::vector<torch::Tensor> parameters, const Group& group,
             std::int64_t first_cap_bytes, std::int64_t cap_bytes,
             cuda::NcclCommunicator* nccl = nullptr, cuda::Stream* stream = nullptr,
             CollectiveWatchdog* watchdog = nullptr);
  ~DdpReducer();  // removes its gradient hooks: the model trains on without it
  DdpReducer(const DdpReducer&) = delete;
  DdpReducer& operator=(const DdpReducer&) = delete;

  // Copies rank 0's parameters (or buffers) to every rank, as DDP does when it wraps a model.
  void broadcast_from_rank0(const std::vector<torch::Tensor>& tensors);
  // DDP's buffer sync before a forward (broadcast_buffers=True): rank 0's buffers (batch-norm
  // statistics) flattened into coalesced buckets of kBufferBroadcastBytes, one broadcast each,
  // and copied back into every rank's buffers, ordered on the device before the forward.
  void sync_buffers(const std::vector<torch::Tensor>& buffers);
  // DDP's broadcast_bucket_size for that sync.
  static constexpr std::int64_t kBufferBroadcastBytes = 250LL * 1024 * 1024;

  // Before a backward pass: `synchronise` false accumulates locally (gradient accumulation's
  // early micro-batches, DDP's no_sync()).
  void prepare(bool synchronise);
  // After backward: waits for every bucket and leaves the average gradient in each .grad.
  void finish();

  std::size_t bucket_count() const { return buckets_.size(); }

 private:
  struct Bucket {
    std::vector<std::size_t> parameters;
    std::vector<std::int64_t> offsets;  // element offset of each parameter in `flat`
    torch::Tensor flat;
    std::size_t pending = 0;  // gradients not yet copied in this step
  };
  void on_gradient(std::size_t parameter, const torch::Tensor& gradient);
  void launch(std::size_t bucket);
  void communication_loop();
  void all_reduce(Bucket& bucket);
  void watch_last_launch(std::string what);
  void launch_unless_aborted(const std::function<void()>& launch);
  void compute_waits_for_communication() const;

  std::vector<torch::Tensor> parameters_;
  std::vector<unsigned> hooks_;  // one per parameter, removed with the reducer
  const Group& group_;
  cuda::NcclCommunicator* nccl_;
  cuda::Stream* stream_;
  std::unique_ptr<cuda::Stream> compute_;  // LibTorch's current stream (borrowed)
  CollectiveWatchdog* watchdog_;
  bool on_cuda_ = false;
  std::vector<Bucket> buckets_;
  std::vector<std::pair<std::size_t, std::size_t>> where_;  // parameter -> (bucket, slot)
  bool synchronise_ = false;
  // 1 / world size as a float wrapped number (a CPU scalar that kernels on any device take as an
  // argument, with no conversion), for the one multiply writing each gradient into its bucket.
  torch::Tensor inverse_world_size_;

  // The CPU communication thread and its queue of buckets to all-reduce.
  std::mutex mutex_;
  std::condition_variable work_;
  std::condition_variable done_;
  std::deque<std::size_t> queue_;
  std::size_t launched_ = 0;
  std::size_t completed_ = 0;
  bool stopping_ = false;
  // The first all-reduce the thread could not finish (a peer gone): finish() raises it.
  std::exception_ptr communication_failure_;
  std::thread thread_;
};

}  // namespace epochcast::runtime

// Single-process data parallelism the way PyTorch's nn.DataParallel runs it, so that a measured
// `dp` point is the step the simulator's dp strategy costs (sim/strategy/multi_gpu.cpp):
//   - each forward scatters the batch in torch.chunk's pieces, broadcasts the module's
//     parameters and buffers from the first device in coalesced buffers of about 10 MiB (cut
//     as torch.cuda.comm.broadcast_coalesced cuts them), runs every replica on a thread of its own
//     that carries the caller's device, stream, grad mode and autocast state (parallel_apply), and
//     gathers the outputs on the first device;
//   - after backward the replicas' gradients are summed onto the module's own in coalesced
//     buffers (reduce_add_coalesced, cut by Python's _take_tensors: at most 10 MiB unless one
//     gradient is larger), and only the module steps the optimizer.
// Replicas are built once and kept: a step re-broadcasts their values, it does not rebuild
// modules (LibTorch's nn::parallel::data_parallel deep-clones the module every call). The
// buffers travel as peer copies from the first device and the gradients come back the same way
// (reduce_add's path without NCCL); PyTorch uses NCCL's broadcast and reduce where it can, the
// same bytes over the same links for two GPUs.
#pragma once

#include <cstdint>
#include <thread>
#include <vector>

#include <torch/torch.h>

#include "core/spec/scenario_spec.h"
#include "runtime/model/torch_model.h"

namespace epochcast::runtime {

// torch.nn.DataParallel's buffer size for broadcast_coalesced and reduce_add_coalesced.
inline constexpr std::int64_t kDataParallelBufferBytes = 10LL * 1024 * 1024;

// What a replica's thread had set when it called forward (for tests and diagnostics).
struct ReplicaThreadState {
  std::thread::id thread;
  torch::Device device{torch::kCPU};
  bool grad_enabled = false;
  bool autocast_enabled = false;
};

class DataParallel {
 public:
  // `module` lives on devices[0] and is replica 0; the others are cloned onto their devices.
  DataParallel(TorchModel module, std::vector<torch::Device> devices, TrainingPrecision precision,
               std::int64_t buffer_bytes = kDataParallelBufferBytes);

  // Scatter, broadcast, parallel forward, gather: the output on devices[0] (differentiable).
  torch::Tensor forward(const torch::Tensor& inputs);
  // reduce_add_coalesced: every replica's gradients summed into the module's .grad, and the
  // replicas' gradients released. Call after backward, before the optimizer step.
  void reduce_gradients();

  std::size_t device_count() const { return devices_.size(); }
  const TorchModel& replica(std::size_t i) const { return replicas_.at(i); }
  // The coalesced buffers one broadcast of the parameters sends, and one reduce of the gradients.
  std::size_t parameter_buffer_count() const { return parameter_buffers_.size(); }
  std::size_t gradient_buffer_count() const { return gradient_buffers_.size(); }
  const std::vector<ReplicaThreadState>& last_forward_threads() const { return last_threads_; }

 private:
  void broadcast(const std::vector<torch::Tensor>& sources,
                 const std::vector<std::vector<std::size_t>>& buffers,
                 const std::vector<std::vector<torch::Tensor>>& targets, std::size_t replicas);

  std::vector<torch::Device> devices_;
  TrainingPrecision precision_;
  std::vector<TorchModel> replicas_;  // [0] is the module itself
  // parameters_[r] / buffers_[r]: replica r's tensors, in the module's registration order.
  std::vector<std::vector<torch::Tensor>> parameters_;
  std::vector<std::vector<torch::Tensor>> buffers_;
  std::vector<std::vector<std::size_t>> parameter_buffers_;
  std::vector<std::vector<std::size_t>> buffer_buffers_;
  // The parameters that take gradients, and their gradients' buffers for the reduce.
  std::vector<std::size_t> trained_;
  std::vector<std::vector<std::size_t>> gradient_buffers_;
  std::size_t used_replicas_ = 0;  // replicas the last forward ran (fewer for a small batch)
  std::vector<ReplicaThreadState> last_threads_;
};

}  // namespace epochcast::runtime

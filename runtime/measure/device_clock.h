// How device work is timed: CUDA events on LibTorch's current stream on a GPU, the host clock on
// the CPU. Two clocks: one for the iterations of a training loop (nothing waits between them),
// one for the device time of short calls (a layer, a GEMM) without the host's dispatch in it.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include <torch/torch.h>

#include "runtime/cuda/cuda_api.h"

namespace epochcast::runtime {

// Seconds of the host's monotonic clock since `start`.
double seconds_since(std::chrono::steady_clock::time_point start);

// LibTorch's current stream on `device`, which its eager ops are queued on (borrowed, not
// owned); the legacy default stream where LibTorch has no CUDA.
std::unique_ptr<cuda::Stream> current_stream(const torch::Device& device);

// Time per iteration of a loop, as nccl-tests times its iterations: events recorded around each
// on the current stream, read once at the end, so that the loop runs as it would untimed (a
// loop that never reads the loss is never made to wait). On the CPU, the host clock.
class IterationClock {
 public:
  explicit IterationClock(const torch::Device& device);
  ~IterationClock();
  IterationClock(const IterationClock&) = delete;
  IterationClock& operator=(const IterationClock&) = delete;
  template <typename Body>
  void time(Body&& body) {
    start();
    body();
    stop();
  }
  // Seconds per timed iteration, in order; waits for the device once.
  std::vector<double> seconds();

 private:
  void start();
  void stop();
  torch::Device device_;
  std::unique_ptr<cuda::Stream> stream_;
  std::vector<std::unique_ptr<cuda::EventTimer>> timers_;
  std::vector<double> host_seconds_;
  std::chrono::steady_clock::time_point host_start_;
};

// The device time of one call of `body(k)`, for k = 0 .. calls - 1 run back to back: the stream
// is held by a spinning kernel while the host queues the calls, so the events around them see
// the device's time alone, kernels shorter than their launch included; the cost of an empty
// pair of events is subtracted. `prepare` (untimed) runs before each trial, e.g. the forward
// passes whose graphs the timed backward calls consume. The median over `trials`. On the CPU,
// the host time per call. Never negative.
double device_seconds_per_call(const torch::Device& device, int calls, int trials,
                               const std::function<void(int)>& body,
                               const std::function<void()>& prepare = {});

}  // namespace epochcast::runtime

// CUDA events on LibTorch's stream, and the hold that keeps the host's pace out of the events.
#include "runtime/measure/device_clock.h"

#include <algorithm>
#include <chrono>

#include "core/measure/measurements.h"

#ifdef EPOCHCAST_TORCH_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

namespace epochcast::runtime {

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> values) {
  return values.empty() ? 0 : spread_of(std::move(values)).median;
}

bool on_gpu(const torch::Device& device) {
  return device.is_cuda() && cuda::compiled_with_cuda();
}

// The hold starts at 2 ms and grows (x4, up to a second) whenever the host needed more than
// 80% of it to queue the calls: the device must still be held when the last call is queued.
constexpr double kFirstHoldSeconds = 2e-3;
constexpr double kLongestHoldSeconds = 1.0;
constexpr double kHoldMargin = 0.8;

}  // namespace

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::unique_ptr<cuda::Stream> current_stream(const torch::Device& device) {
#ifdef EPOCHCAST_TORCH_CUDA
  if (device.is_cuda()) {
    return std::make_unique<cuda::Stream>(device.index(),
                                          c10::cuda::getCurrentCUDAStream(device.index()).stream());
  }
#endif
  (void)device;
  return nullptr;  // the legacy default stream
}

IterationClock::IterationClock(const torch::Device& device)
    : device_(device), stream_(on_gpu(device) ? current_stream(device) : nullptr) {}

IterationClock::~IterationClock() = default;

void IterationClock::start() {
  if (on_gpu(device_)) {
    timers_.push_back(std::make_unique<cuda::EventTimer>(stream_.get()));
    timers_.back()->start();
  } else {
    host_start_ = Clock::now();
  }
}

void IterationClock::stop() {
  if (on_gpu(device_)) {
    timers_.back()->stop();
  } else {
    host_seconds_.push_back(seconds_since(host_start_));
  }
}

std::vector<double> IterationClock::seconds() {
  if (!on_gpu(device_)) return host_seconds_;
  std::vector<double> out;
  out.reserve(timers_.size());
  for (auto& timer : timers_)
    out.push_back(timer->elapsed_seconds());  // the first waits; the rest are done by then
  return out;
}

double device_seconds_per_call(const torch::Device& device, int calls, int trials,
                               const std::function<void(int)>& body,
                               const std::function<void()>& prepare) {
  calls = std::max(calls, 1);
  trials = std::max(trials, 1);
  std::vector<double> per_call;
  if (!on_gpu(device)) {
    for (int t = 0; t < trials; ++t) {
      if (prepare) prepare();
      auto start = Clock::now();
      for (int k = 0; k < calls; ++k)
        body(k);
      per_call.push_back(seconds_since(start) / calls);
    }
    return median(per_call);
  }
  std::unique_ptr<cuda::Stream> stream = current_stream(device);
  // The events' own cost: an empty pair recorded back to back behind a short hold.
  std::vector<double> empty;
  for (int t = 0; t < 5; ++t) {
    cuda::EventTimer timer(stream.get());
    cuda::hold_stream(stream.get(), 1e-4);
    timer.start();
    timer.stop();
    empty.push_back(timer.elapsed_seconds());
  }
  const double baseline = median(empty);
  double hold = kFirstHoldSeconds;
  for (int t = 0; t < trials;) {
    if (prepare) prepare();
    cuda::EventTimer timer(stream.get());
    cuda::hold_stream(stream.get(), hold);
    auto queued_from = Clock::now();
    timer.start();
    for (int k = 0; k < calls; ++k)
      body(k);
    timer.stop();
    const double queueing = seconds_since(queued_from);
    const double elapsed = timer.elapsed_seconds();
    if (queueing > kHoldMargin * hold && hold < kLongestHoldSeconds) {
      // The device may have caught up with the host: the events saw the host's pace. Again,
      // held longer (the trial does not count).
      hold = std::min(hold * 4, kLongestHoldSeconds);
      continue;
    }
    per_call.push_back(std::max(0.0, elapsed - baseline) / calls);
    ++t;
  }
  return median(per_call);
}

}  // namespace epochcast::runtime

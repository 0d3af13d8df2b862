// Device microbenchmarks: host<->device and peer copies, and the cost of launching an empty
// kernel. Timed as nccl-tests times: warm-up excluded, CUDA events around each repetition, the
// median reported.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "runtime/cuda/cuda_api.h"
#include "runtime/cuda/cuda_internal.h"
#include "runtime/cuda/kernels.h"

namespace epochcast::cuda {
namespace {

constexpr int kWarmUpCopies = 2;
constexpr int kWarmUpLaunches = 16;

void require_copy_arguments(const char* benchmark, std::size_t bytes, int repetitions) {
  if (bytes == 0 || repetitions < 1) {
    throw std::invalid_argument(
        std::string(benchmark) + ": needs bytes > 0 and repetitions >= 1, got " +
        std::to_string(bytes) + " bytes and " + std::to_string(repetitions) + " repetitions");
  }
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t middle = values.size() / 2;
  return values.size() % 2 == 1 ? values[middle] : (values[middle - 1] + values[middle]) / 2;
}

// Host memory for a copy: page-locked (cudaMallocHost, copied by DMA directly) or ordinary
// pageable memory (staged by the driver through a pinned buffer).
class HostBuffer {
 public:
  HostBuffer(int device, std::size_t bytes, bool pinned) : device_(device) {
    if (pinned) {
      EPOCHCAST_CHECK(device_, cudaMallocHost(&pinned_, bytes));
      std::fill_n(static_cast<std::byte*>(pinned_), bytes, std::byte{0});
    } else {
      pageable_.resize(bytes);  // zero-filled, so every page is touched before timing
    }
  }
  ~HostBuffer() {
    if (pinned_ != nullptr) EPOCHCAST_CHECK_NOTHROW(device_, cudaFreeHost(pinned_));
  }
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  void* data() { return pinned_ != nullptr ? pinned_ : pageable_.data(); }

 private:
  int device_;
  void* pinned_ = nullptr;
  std::vector<std::byte> pageable_;
};

// Runs `copy` (which queues one copy on `stream`) for warm-up, then times `repetitions` of it.
template <typename Copy>
CopyResult time_copies(std::size_t bytes, int repetitions, const Stream& stream, Copy copy) {
  for (int i = 0; i < kWarmUpCopies; ++i) {
    copy();
  }
  stream.synchronize();
  EventTimer timer(&stream);
  std::vector<double> seconds;
  seconds.reserve(static_cast<std::size_t>(repetitions));
  for (int i = 0; i < repetitions; ++i) {
    timer.start();
    copy();
    timer.stop();
    seconds.push_back(timer.elapsed_seconds());
  }
  return CopyResult{bytes, median(std::move(seconds))};
}

CopyResult host_copy(int device, std::size_t bytes, bool pinned, int repetitions,
                     cudaMemcpyKind kind) {
  DeviceBuffer device_buffer(device, bytes);
  HostBuffer host_buffer(device, bytes, pinned);
  const Stream stream(device);
  const bool to_device = kind == cudaMemcpyHostToDevice;
  void* destination = to_device ? device_buffer.data() : host_buffer.data();
  const void* source = to_device ? host_buffer.data() : device_buffer.data();
  return time_copies(bytes, repetitions, stream, [&] {
    EPOCHCAST_CHECK(device, cudaMemcpyAsync(destination, source, bytes, kind,
                                            detail::as_stream(stream.handle())));
  });
}

// Direct access from `device` to `peer`'s memory, when the pair supports it. Process-wide and
// lasting: a second call finds it enabled already.
void enable_peer_access(int device, int peer) {
  if (!peer_access_supported(device, peer)) return;
  set_device(device);
  const cudaError_t status = cudaDeviceEnablePeerAccess(peer, 0);
  if (status == cudaErrorPeerAccessAlreadyEnabled) {
    static_cast<void>(cudaGetLastError());  // not a failure; clear it from the thread's state
    return;
  }
  detail::check(status, "cudaDeviceEnablePeerAccess(peer, 0)", __FILE__, __LINE__, device);
}

}  // namespace

CopyResult host_to_device_copy(int device, std::size_t bytes, bool pinned, int repetitions) {
  require_copy_arguments("host_to_device_copy", bytes, repetitions);
  return host_copy(device, bytes, pinned, repetitions, cudaMemcpyHostToDevice);
}

CopyResult device_to_host_copy(int device, std::size_t bytes, bool pinned, int repetitions) {
  require_copy_arguments("device_to_host_copy", bytes, repetitions);
  return host_copy(device, bytes, pinned, repetitions, cudaMemcpyDeviceToHost);
}

bool peer_access_supported(int source, int destination) {
  if (source == destination) return false;
  int supported = 0;
  EPOCHCAST_CHECK(source, cudaDeviceCanAccessPeer(&supported, source, destination));
  return supported != 0;
}

CopyResult peer_copy(int source, int destination, std::size_t bytes, int repetitions) {
  require_copy_arguments("peer_copy", bytes, repetitions);
  if (source == destination) {
    throw std::invalid_argument("peer_copy: source and destination are both device " +
                                std::to_string(source));
  }
  // Both directions, so the copy engines may read or write the peer directly; without support
  // CUDA stages the copy through host memory.
  enable_peer_access(source, destination);
  enable_peer_access(destination, source);
  const DeviceBuffer from(source, bytes);
  const DeviceBuffer to(destination, bytes);
  const Stream stream(source);
  return time_copies(bytes, repetitions, stream, [&] {
    EPOCHCAST_CHECK(source, cudaMemcpyPeerAsync(to.data(), destination, from.data(), source, bytes,
                                                detail::as_stream(stream.handle())));
  });
}

// The host figure holds while `launches` stays below the launch queue's depth (about a thousand
// kernels); beyond it each launch also waits for the device. The device figure is the time
// between events around the back-to-back launches: when the host launches more slowly than an
// empty kernel runs, it is bounded below by the launch rate.
LaunchResult empty_kernel_launch(int device, int launches) {
  if (launches < 1) {
    throw std::invalid_argument("empty_kernel_launch: needs launches >= 1, got " +
                                std::to_string(launches));
  }
  set_device(device);
  const Stream stream(device);
  const cudaStream_t handle = detail::as_stream(stream.handle());
  for (int i = 0; i < kWarmUpLaunches; ++i) {
    EPOCHCAST_CHECK(device, detail::launch_empty_kernel(handle));
  }
  stream.synchronize();

  const auto begin = std::chrono::steady_clock::now();
  for (int i = 0; i < launches; ++i) {
    EPOCHCAST_CHECK(device, detail::launch_empty_kernel(handle));
  }
  const auto end = std::chrono::steady_clock::now();
  stream.synchronize();

  EventTimer timer(&stream);
  timer.start();
  for (int i = 0; i < launches; ++i) {
    EPOCHCAST_CHECK(device, detail::launch_empty_kernel(handle));
  }
  timer.stop();

  LaunchResult result;
  result.host_seconds_per_launch = std::chrono::duration<double>(end - begin).count() / launches;
  result.device_seconds_per_kernel = timer.elapsed_seconds() / launches;
  return result;
}

}  // namespace epochcast::cuda

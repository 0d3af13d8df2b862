// The CUDA runtime behind cuda_api.h: devices, streams, event timers and device buffers, and the
// error check every CUDA and NCCL call goes through.
#include "runtime/cuda/cuda_api.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <iostream>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>

#include "runtime/cuda/cuda_internal.h"
#include "runtime/cuda/kernels.h"

namespace epochcast::cuda {
namespace {

struct ErrorContext {
  std::mutex mutex;
  std::optional<int> rank;
  std::string host;
};

ErrorContext& error_context() {
  static ErrorContext context;
  return context;
}

// __FILE__ is absolute under CMake; the message names the file from the repository root.
std::string_view repository_path(std::string_view file) {
  const auto position = file.rfind("runtime/cuda/");
  return position == std::string_view::npos ? file : file.substr(position);
}

std::string describe_failure(std::string_view call, const char* file, int line,
                             std::optional<int> device, std::string_view reason) {
  std::optional<int> rank;
  std::string host;
  {
    ErrorContext& context = error_context();
    const std::lock_guard lock(context.mutex);
    rank = context.rank;
    host = context.host;
  }
  std::ostringstream out;
  out << call << " failed at " << repository_path(file) << ':' << line << " (device ";
  if (device) {
    out << *device;
  } else {
    out << "none";
  }
  out << ", rank ";
  if (rank) {
    out << *rank;
  } else {
    out << "unset";
  }
  out << ", host " << (host.empty() ? std::string("unset") : host) << "): " << reason;
  return out.str();
}

std::string cuda_reason(cudaError_t status) {
  // Clears the thread's last error so that a later launch check does not report this failure
  // again (sticky errors, which corrupt the context, stay regardless).
  static_cast<void>(cudaGetLastError());
  return std::string(cudaGetErrorName(status)) + ": " + cudaGetErrorString(status);
}

std::string nccl_reason(ncclResult_t status) {
  std::string reason = ncclGetErrorString(status);
  // The detail (which peer, which system call) is only in NCCL's last-error text.
  const char* detail = ncclGetLastError(nullptr);
  if (detail != nullptr && *detail != '\0') reason += std::string(" (") + detail + ")";
  return reason;
}

void print_failure(const std::string& message) noexcept {
  try {
    std::cerr << "epochcast: ignored in a destructor: " << message << '\n';
  } catch (...) {  // nothing left to report to
  }
}

// CUDA encodes versions as 1000 * major + 10 * minor.
std::string cuda_version_text(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

// NCCL encodes 10000 * major + 100 * minor + patch from 2.9 on, 1000 * major + 100 * minor +
// patch before (NCCL_VERSION in nccl.h).
std::string nccl_version_text(int code) {
  const bool old_scheme = code < 10000;
  const int major = old_scheme ? code / 1000 : code / 10000;
  const int minor = old_scheme ? code / 100 % 10 : code / 100 % 100;
  const int patch = code % 100;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

cudaEvent_t create_timing_event(int device) {
  cudaEvent_t event = nullptr;
  EPOCHCAST_CHECK(device, cudaEventCreate(&event));
  return event;
}

// An event that orders two streams once. Destroying it right after cudaStreamWaitEvent is safe:
// CUDA releases it when the recorded work completes.
class OrderingEvent {
 public:
  explicit OrderingEvent(int device) : device_(device) {
    EPOCHCAST_CHECK(device_, cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
  }
  ~OrderingEvent() { EPOCHCAST_CHECK_NOTHROW(device_, cudaEventDestroy(event_)); }
  OrderingEvent(const OrderingEvent&) = delete;
  OrderingEvent& operator=(const OrderingEvent&) = delete;
  cudaEvent_t get() const { return event_; }

 private:
  int device_;
  cudaEvent_t event_ = nullptr;
};

}  // namespace

namespace detail {

void fail(cudaError_t status, std::string_view call, const char* file, int line,
          std::optional<int> device) {
  throw CudaError(describe_failure(call, file, line, device, cuda_reason(status)));
}

void fail(ncclResult_t status, std::string_view call, const char* file, int line,
          std::optional<int> device) {
  throw CudaError(describe_failure(call, file, line, device, nccl_reason(status)));
}

void report(cudaError_t status, std::string_view call, const char* file, int line,
            std::optional<int> device) noexcept {
  try {
    print_failure(describe_failure(call, file, line, device, cuda_reason(status)));
  } catch (...) {  // building the message failed (out of memory): nothing left to report
  }
}

void report(ncclResult_t status, std::string_view call, const char* file, int line,
            std::optional<int> device) noexcept {
  try {
    print_failure(describe_failure(call, file, line, device, nccl_reason(status)));
  } catch (...) {  // building the message failed (out of memory): nothing left to report
  }
}

}  // namespace detail

bool compiled_with_cuda() {
  return true;
}

int device_count() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    // No driver, no device, or a driver older than the runtime: none usable, which callers
    // handle (GPU tests skip, the runtime falls back to the CPU).
    static_cast<void>(cudaGetLastError());
    return 0;
  }
  return count;
}

void set_device(int device) {
  EPOCHCAST_CHECK(device, cudaSetDevice(device));
}

DeviceInfo device_info(int device) {
  cudaDeviceProp properties{};
  EPOCHCAST_CHECK(device, cudaGetDeviceProperties(&properties, device));
  std::array<char, 32> bus_id{};  // "0000:1B:00.0" and its terminator fit in 13
  EPOCHCAST_CHECK(device,
                  cudaDeviceGetPCIBusId(bus_id.data(), static_cast<int>(bus_id.size()), device));
  int driver = 0;
  EPOCHCAST_CHECK(device, cudaDriverGetVersion(&driver));
  int runtime = 0;
  EPOCHCAST_CHECK(device, cudaRuntimeGetVersion(&runtime));
  int nccl = 0;
  EPOCHCAST_CHECK(device, ncclGetVersion(&nccl));

  DeviceInfo info;
  info.index = device;
  const char* name = properties.name;  // NUL-terminated within the array
  info.name.assign(name, std::find(name, name + sizeof(properties.name), '\0'));
  info.pci_bus_id = bus_id.data();
  info.memory_bytes = static_cast<std::int64_t>(properties.totalGlobalMem);
  info.sm_count = properties.multiProcessorCount;
  info.compute_capability_major = properties.major;
  info.compute_capability_minor = properties.minor;
  info.driver_version = cuda_version_text(driver);
  info.runtime_version = cuda_version_text(runtime);
  info.nccl_version = nccl_version_text(nccl);
  return info;
}

std::int64_t memory_in_use(int device) {
  EPOCHCAST_CHECK(device, cudaSetDevice(device));
  std::size_t free_bytes = 0, total_bytes = 0;
  EPOCHCAST_CHECK(device, cudaMemGetInfo(&free_bytes, &total_bytes));
  return static_cast<std::int64_t>(total_bytes - free_bytes);
}

void set_error_context(int rank, const std::string& host) {
  ErrorContext& context = error_context();
  const std::lock_guard lock(context.mutex);
  context.rank = rank;
  context.host = host;
}

// --- Stream -------------------------------------------------------------------------------------

Stream::Stream(int device) : device_(device) {
  EPOCHCAST_CHECK(device_, cudaSetDevice(device_));
  cudaStream_t stream = nullptr;
  EPOCHCAST_CHECK(device_, cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  stream_ = stream;
}

Stream::Stream(int device, void* borrowed_handle)
    : device_(device), stream_(borrowed_handle), owned_(false) {}

Stream::~Stream() {
  // Returns at once; CUDA releases the stream when its queued work completes.
  if (stream_ != nullptr && owned_) {
    EPOCHCAST_CHECK_NOTHROW(device_, cudaStreamDestroy(detail::as_stream(stream_)));
  }
}

void Stream::synchronize() const {
  EPOCHCAST_CHECK(device_, cudaStreamSynchronize(detail::as_stream(stream_)));
}

void Stream::wait_for(const Stream* other) const {
  // The event must be created and recorded on the device of the stream it is recorded on; the
  // wait itself may cross devices.
  const int source_device = other != nullptr ? other->device_ : device_;
  const cudaStream_t source =
      other != nullptr ? detail::as_stream(other->stream_) : cudaStreamLegacy;
  EPOCHCAST_CHECK(source_device, cudaSetDevice(source_device));
  const OrderingEvent event(source_device);
  EPOCHCAST_CHECK(source_device, cudaEventRecord(event.get(), source));
  if (source_device != device_) EPOCHCAST_CHECK(device_, cudaSetDevice(device_));
  EPOCHCAST_CHECK(device_, cudaStreamWaitEvent(detail::as_stream(stream_), event.get(), 0));
}

void Stream::make_default_stream_wait() const {
  // The legacy default stream is per device: this stream's device must be current.
  EPOCHCAST_CHECK(device_, cudaSetDevice(device_));
  const OrderingEvent event(device_);
  EPOCHCAST_CHECK(device_, cudaEventRecord(event.get(), detail::as_stream(stream_)));
  EPOCHCAST_CHECK(device_, cudaStreamWaitEvent(cudaStreamLegacy, event.get(), 0));
}

void hold_stream(const Stream* stream, double seconds) {
  int device = 0;
  if (stream != nullptr) {
    device = stream->device();
    EPOCHCAST_CHECK(device, cudaSetDevice(device));
  } else {
    EPOCHCAST_CHECK(std::nullopt, cudaGetDevice(&device));
  }
  const cudaStream_t target =
      stream != nullptr ? detail::as_stream(stream->handle()) : cudaStreamLegacy;
  const auto nanoseconds = static_cast<unsigned long long>(std::max(0.0, seconds) * 1e9);
  EPOCHCAST_CHECK(device, detail::launch_spin_kernel(nanoseconds, target));
}

// --- EventTimer ---------------------------------------------------------------------------------

Event::Event(int device) : device_(device) {
  EPOCHCAST_CHECK(device_, cudaSetDevice(device_));
  cudaEvent_t event = nullptr;
  EPOCHCAST_CHECK(device_, cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  event_ = event;
}

Event::~Event() {
  if (event_ != nullptr)
    EPOCHCAST_CHECK_NOTHROW(device_, cudaEventDestroy(detail::as_event(event_)));
}

void Stream::wait_for(const Event& event) const {
  EPOCHCAST_CHECK(device_, cudaSetDevice(device_));
  EPOCHCAST_CHECK(device_, cudaStreamWaitEvent(detail::as_stream(stream_),
                                               detail::as_event(event.handle()), 0));
}

void Event::record(const Stream& stream) {
  if (stream.device() != device_) {
    throw std::invalid_argument("Event::record: the stream is on device " +
                                std::to_string(stream.device()) + ", the event on device " +
                                std::to_string(device_));
  }
  EPOCHCAST_CHECK(device_,
                  cudaEventRecord(detail::as_event(event_), detail::as_stream(stream.handle())));
}

bool Event::finished() const {
  // The asking thread (a watchdog's) may have another device current.
  if (cudaSetDevice(device_) != cudaSuccess) return true;
  const cudaError_t state = cudaEventQuery(detail::as_event(event_));
  if (state == cudaErrorNotReady) return false;
  if (state != cudaSuccess) (void)cudaGetLastError();  // not sticky: leave it to the caller
  return true;
}

EventTimer::EventTimer(const Stream* stream) : stream_(stream) {
  if (stream_ != nullptr) {
    device_ = stream_->device();
  } else {
    EPOCHCAST_CHECK(std::nullopt, cudaGetDevice(&device_));
  }
  // Events belong to the current device and must match the stream they are recorded on.
  EPOCHCAST_CHECK(device_, cudaSetDevice(device_));
  start_ = create_timing_event(device_);
  try {
    stop_ = create_timing_event(device_);
  } catch (...) {
    EPOCHCAST_CHECK_NOTHROW(device_, cudaEventDestroy(detail::as_event(start_)));
    throw;
  }
}

EventTimer::~EventTimer() {
  if (start_ != nullptr) {
    EPOCHCAST_CHECK_NOTHROW(device_, cudaEventDestroy(detail::as_event(start_)));
  }
  if (stop_ != nullptr) {
    EPOCHCAST_CHECK_NOTHROW(device_, cudaEventDestroy(detail::as_event(stop_)));
  }
}

namespace {

// The stream an EventTimer records on; for the legacy default stream, that of the timer's device.
cudaStream_t recording_stream(const Stream* stream, int device) {
  if (stream != nullptr) return detail::as_stream(stream->handle());
  EPOCHCAST_CHECK(device, cudaSetDevice(device));
  return cudaStreamLegacy;
}

}  // namespace

void EventTimer::start() {
  EPOCHCAST_CHECK(device_,
                  cudaEventRecord(detail::as_event(start_), recording_stream(stream_, device_)));
}

void EventTimer::stop() {
  EPOCHCAST_CHECK(device_,
                  cudaEventRecord(detail::as_event(stop_), recording_stream(stream_, device_)));
}

double EventTimer::elapsed_seconds() {
  EPOCHCAST_CHECK(device_, cudaEventSynchronize(detail::as_event(stop_)));
  float milliseconds = 0;
  EPOCHCAST_CHECK(device_, cudaEventElapsedTime(&milliseconds, detail::as_event(start_),
                                                detail::as_event(stop_)));
  return static_cast<double>(milliseconds) / 1e3;
}

// --- DeviceBuffer -------------------------------------------------------------------------------

DeviceBuffer::DeviceBuffer(int device, std::size_t bytes) : device_(device), bytes_(bytes) {
  EPOCHCAST_CHECK(device_, cudaSetDevice(device_));
  EPOCHCAST_CHECK(device_, cudaMalloc(&data_, bytes_));
}

DeviceBuffer::~DeviceBuffer() {
  if (data_ != nullptr) EPOCHCAST_CHECK_NOTHROW(device_, cudaFree(data_));
}

void DeviceBuffer::fill_float(float value, const Stream& stream) {
  if (stream.device() != device_) {
    throw std::invalid_argument("DeviceBuffer::fill_float: the stream is on device " +
                                std::to_string(stream.device()) + ", the buffer on device " +
                                std::to_string(device_));
  }
  EPOCHCAST_CHECK(device_, cudaSetDevice(device_));
  EPOCHCAST_CHECK(
      device_, detail::launch_fill_float(static_cast<float*>(data_), bytes_ / sizeof(float), value,
                                         detail::as_stream(stream.handle())));
}

std::pair<float, float> DeviceBuffer::read_ends_float() const {
  const std::size_t count = bytes_ / sizeof(float);
  if (count == 0) {
    throw std::logic_error("DeviceBuffer::read_ends_float: the buffer of " +
                           std::to_string(bytes_) + " bytes holds no float32 element");
  }
  EPOCHCAST_CHECK(device_, cudaSetDevice(device_));
  // The buffer is written on non-blocking streams (fills, NCCL), which cudaMemcpy on the legacy
  // default stream does not wait for: wait for the whole device.
  EPOCHCAST_CHECK(device_, cudaDeviceSynchronize());
  float first = 0;
  float last = 0;
  const auto* bytes = static_cast<const std::byte*>(data_);
  EPOCHCAST_CHECK(device_, cudaMemcpy(&first, bytes, sizeof(float), cudaMemcpyDeviceToHost));
  EPOCHCAST_CHECK(device_, cudaMemcpy(&last, bytes + (count - 1) * sizeof(float), sizeof(float),
                                      cudaMemcpyDeviceToHost));
  return {first, last};
}

}  // namespace epochcast::cuda

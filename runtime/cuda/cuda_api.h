// The CUDA runtime and NCCL, used directly (no LibTorch types), so this part builds against the
// CUDA Toolkit alone and compiles on machines without a GPU. Built only when CUDA is found
// (EPOCHCAST_HAVE_CUDA); without it, cuda_unavailable.cpp reports zero devices and every other
// call throws CudaError saying the runtime was built without CUDA.
//
// Failures raise CudaError naming the call, file:line, the device, rank and host (STYLE.md 8).
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>

#include "core/system_failure.h"

namespace epochcast::cuda {

class CudaError : public SystemFailure {
 public:
  using SystemFailure::SystemFailure;
};

// Whether CUDA support was compiled in.
bool compiled_with_cuda();
// Visible CUDA devices; 0 when none, when the driver is missing, or without CUDA support.
int device_count();
void set_device(int device);

struct DeviceInfo {
  int index = 0;
  std::string name;               // "NVIDIA H100 80GB HBM3"
  std::string pci_bus_id;         // "0000:1B:00.0"
  std::int64_t memory_bytes = 0;  // total device memory
  int sm_count = 0;
  int compute_capability_major = 0;
  int compute_capability_minor = 0;
  std::string driver_version;   // CUDA driver API version supported, "13.0"
  std::string runtime_version;  // CUDA runtime linked, "13.0"
  std::string nccl_version;     // "2.27.3", empty without NCCL
};
DeviceInfo device_info(int device);
// Bytes of the device's memory in use (total minus free, cudaMemGetInfo): every allocation of
// every process on it, the CUDA contexts included.
std::int64_t memory_in_use(int device);

// Process-wide rank and host for error messages (set once by the launcher).
void set_error_context(int rank, const std::string& host);

class Event;

// A non-blocking stream (does not synchronise with the legacy default stream, which is the
// stream LibTorch's eager ops use unless told otherwise).
class Stream {
 public:
  explicit Stream(int device);
  // A stream someone else owns (LibTorch's current stream: c10::cuda::getCurrentCUDAStream),
  // used without being destroyed.
  Stream(int device, void* borrowed_handle);
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  void* handle() const { return stream_; }  // cudaStream_t
  int device() const { return device_; }
  void synchronize() const;
  // This stream waits for all work queued so far on `other` (nullptr: the legacy default stream).
  void wait_for(const Stream* other) const;
  // This stream waits for the work queued before `event` was last recorded.
  void wait_for(const Event& event) const;
  // The legacy default stream waits for all work queued so far on this stream.
  void make_default_stream_wait() const;

 private:
  int device_;
  void* stream_ = nullptr;
  bool owned_ = true;
};

// Keeps `stream` (nullptr: the current device's legacy default stream) busy for about `seconds`
// with a spinning kernel. Work queued behind it then runs back to back once it ends, whatever
// the host's pace: how device time is measured for kernels shorter than their launch.
void hold_stream(const Stream* stream, double seconds);

// Times device work as nccl-tests does: events recorded on a stream around the work.
class EventTimer {
 public:
  explicit EventTimer(const Stream* stream = nullptr);  // nullptr: the legacy default stream
  ~EventTimer();
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;
  void start();
  void stop();
  double elapsed_seconds();  // synchronises on the stop event

 private:
  const Stream* stream_;
  int device_ = 0;  // the stream's device, or the current device for the legacy default stream
  void* start_ = nullptr;
  void* stop_ = nullptr;
};

// A marker recorded on a stream after some work: finished() once that work has run, without
// waiting (a watchdog's question about a collective in flight).
class Event {
 public:
  explicit Event(int device);
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  void record(const Stream& stream);
  // Never throws: an error counts as finished (the communicator's health check reports it).
  bool finished() const;
  void* handle() const { return event_; }  // cudaEvent_t

 private:
  int device_;
  void* event_ = nullptr;
};

// bytes: raw bytes, for copies of tensors of any dtype (broadcasts), never for reductions.
enum class ElementType { float32, float16, bfloat16, bytes };

// An NCCL communicator. The unique id is created by rank 0 and handed to the others by a
// broadcast over the host transport (MPI, or TCP under torchrun and plain srun), as nccl-tests
// bootstraps NCCL over MPI.
class NcclCommunicator {
 public:
  static constexpr std::size_t kUniqueIdBytes = 128;
  // Rank 0 calls this and broadcasts the bytes.
  static std::string create_unique_id();
  // Non-blocking: a rank whose peers do not all arrive within `timeout_s` aborts the
  // communicator and throws CudaError saying so, instead of waiting for ever.
  NcclCommunicator(int rank, int size, const std::string& unique_id, int device,
                   double timeout_s = 300);
  ~NcclCommunicator();
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // Sum in place, asynchronously on `stream`.
  void all_reduce_sum(void* data, std::size_t count, ElementType type, const Stream& stream);
  void broadcast(void* data, std::size_t count, ElementType type, int root, const Stream& stream);
  void reduce_scatter_sum(const void* send, void* receive, std::size_t receive_count,
                          ElementType type, const Stream& stream);
  void all_gather(const void* send, void* receive, std::size_t send_count, ElementType type,
                  const Stream& stream);
  // Throws CudaError (after aborting the communicator) when NCCL has recorded an asynchronous
  // failure: a peer gone, a network error. Call it while waiting on collectives.
  void check_health();
  // ncclCommAbort: pending and future operations fail instead of hanging; idempotent. Safe from
  // another thread (a watchdog's): every operation holds the communicator's lock.
  void abort();
  double timeout_s() const { return timeout_s_; }

 private:
  void abort_locked();
  void wait_until_ready(double timeout_s, const char* what);
  void check_launch(int result, const char* what);
  void check_live(const char* operation) const;

  int rank_;
  int size_;
  int device_;
  double timeout_s_;
  void* comm_ = nullptr;  // ncclComm_t
  std::mutex mutex_;      // a watchdog thread may abort while the training thread launches
};

// Device memory that frees itself.
class DeviceBuffer {
 public:
  DeviceBuffer(int device, std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }
  // Fills with `value` as float32 elements (for collectives checked against a known answer),
  // asynchronously on `stream`, which must belong to the buffer's device.
  void fill_float(float value, const Stream& stream);
  // Reads element 0 and the last float32 element back to the host, after waiting for all work
  // queued on the buffer's device (any stream). Throws std::logic_error when it holds no float.
  std::pair<float, float> read_ends_float() const;

 private:
  int device_;
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

// Microbenchmarks of the device alone (the LibTorch-level ones live in runtime/bench).
struct CopyResult {
  std::size_t bytes = 0;
  double seconds = 0;  // median of the timed repetitions
  double gbps() const { return seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0; }
};
// Host-to-device and device-to-host copies from pinned or pageable host memory.
CopyResult host_to_device_copy(int device, std::size_t bytes, bool pinned, int repetitions);
CopyResult device_to_host_copy(int device, std::size_t bytes, bool pinned, int repetitions);
// Device-to-device copy between two GPUs (peer access enabled when the pair supports it).
CopyResult peer_copy(int source, int destination, std::size_t bytes, int repetitions);
bool peer_access_supported(int source, int destination);
// Launch cost of an empty kernel: host-side seconds per launch (asynchronous launches in a loop),
// and the device time per kernel when launched back to back.
struct LaunchResult {
  double host_seconds_per_launch = 0;
  double device_seconds_per_kernel = 0;
};
LaunchResult empty_kernel_launch(int device, int launches);

}  // namespace epochcast::cuda

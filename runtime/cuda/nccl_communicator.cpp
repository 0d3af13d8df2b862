// NcclCommunicator: an NCCL communicator bootstrapped from a unique id that the launcher
// broadcasts, and the four collectives the runtime uses, queued on a caller's stream.
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>

#include "runtime/cuda/cuda_api.h"
#include "runtime/cuda/cuda_internal.h"

namespace epochcast::cuda {
namespace {

static_assert(sizeof(ncclUniqueId) == NcclCommunicator::kUniqueIdBytes,
              "kUniqueIdBytes must match this NCCL's ncclUniqueId");

ncclDataType_t nccl_type(ElementType type) {
  switch (type) {
    case ElementType::float32:
      return ncclFloat32;
    case ElementType::float16:
      return ncclFloat16;
    case ElementType::bfloat16:
      return ncclBfloat16;
    case ElementType::bytes:
      return ncclUint8;
  }
  throw std::logic_error("nccl_type: unknown ElementType " +
                         std::to_string(static_cast<int>(type)));
}

// NCCL switches to the communicator's device itself, but a stream of another device would fail
// deep inside NCCL with a less helpful message.
void require_device(const Stream& stream, int device, const char* operation) {
  if (stream.device() != device) {
    throw std::invalid_argument(std::string("NcclCommunicator::") + operation +
                                ": the stream is on device " + std::to_string(stream.device()) +
                                ", the communicator on device " + std::to_string(device));
  }
}

}  // namespace

void NcclCommunicator::check_live(const char* operation) const {
  if (comm_ == nullptr) {
    throw CudaError(std::string("NcclCommunicator::") + operation +
                    ": the communicator was aborted after an earlier failure");
  }
}

// A non-blocking communicator answers ncclInProgress while it works in the background (its
// initialisation, sometimes a collective's launch); nothing else may touch it until its state
// is ncclSuccess (NCCL docs, "Fault Tolerance" and "Non-blocking group operation"). A state
// that stays in progress past `timeout_s` is a peer that never came: the communicator is
// aborted, so that this rank reports it instead of waiting for ever.
void NcclCommunicator::wait_until_ready(double timeout_s, const char* what) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(timeout_s));
  ncclResult_t state = ncclInProgress;
  for (;;) {
    EPOCHCAST_CHECK(device_, ncclCommGetAsyncError(detail::as_comm(comm_), &state));
    if (state != ncclInProgress) break;
    if (std::chrono::steady_clock::now() > deadline) {
      abort_locked();
      throw CudaError(std::string("NCCL: ") + what + " did not complete within " +
                      std::to_string(static_cast<int>(timeout_s)) + " s on rank " +
                      std::to_string(rank_) + " of " + std::to_string(size_) +
                      " (a rank that never joined, or a hung peer); the communicator was aborted");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (state != ncclSuccess) {
    const std::string reason = ncclGetErrorString(state);
    abort_locked();
    throw CudaError(std::string("NCCL: ") + what + " failed on rank " + std::to_string(rank_) +
                    ": " + reason + "; the communicator was aborted");
  }
}

void NcclCommunicator::check_launch(int result, const char* what) {
  const auto status = static_cast<ncclResult_t>(result);
  if (status == ncclInProgress) {
    wait_until_ready(timeout_s_, what);
    return;
  }
  EPOCHCAST_CHECK(device_, status);
}

void NcclCommunicator::abort() {
  std::lock_guard lock(mutex_);
  abort_locked();
}

void NcclCommunicator::abort_locked() {
  if (comm_ == nullptr) return;
  EPOCHCAST_CHECK_NOTHROW(device_, ncclCommAbort(detail::as_comm(comm_)));
  comm_ = nullptr;
}

void NcclCommunicator::check_health() {
  std::lock_guard lock(mutex_);
  if (comm_ == nullptr) throw CudaError("NCCL: the communicator was aborted");
  ncclResult_t state = ncclSuccess;
  EPOCHCAST_CHECK(device_, ncclCommGetAsyncError(detail::as_comm(comm_), &state));
  if (state == ncclSuccess || state == ncclInProgress) return;
  const std::string reason = ncclGetErrorString(state);
  abort_locked();
  throw CudaError("NCCL: rank " + std::to_string(rank_) + " failed asynchronously: " + reason +
                  "; the communicator was aborted");
}

std::string NcclCommunicator::create_unique_id() {
  ncclUniqueId id{};
  EPOCHCAST_CHECK(std::nullopt, ncclGetUniqueId(&id));
  return std::string(id.internal, sizeof(id.internal));
}

NcclCommunicator::NcclCommunicator(int rank, int size, const std::string& unique_id, int device,
                                   double timeout_s)
    : rank_(rank), size_(size), device_(device), timeout_s_(timeout_s) {
  if (unique_id.size() != kUniqueIdBytes) {
    throw std::invalid_argument("NcclCommunicator: the unique id has " +
                                std::to_string(unique_id.size()) + " bytes, NCCL's has " +
                                std::to_string(kUniqueIdBytes));
  }
  ncclUniqueId id{};
  std::memcpy(id.internal, unique_id.data(), sizeof(id.internal));
  // The initialisation binds the communicator to the current device. Non-blocking, so that a
  // rank whose peers never arrive gives up after the timeout instead of hanging.
  EPOCHCAST_CHECK(device_, cudaSetDevice(device_));
  ncclComm_t comm = nullptr;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  const ncclResult_t started = ncclCommInitRankConfig(&comm, size_, id, rank_, &config);
  if (started != ncclSuccess && started != ncclInProgress) {
    if (comm != nullptr) EPOCHCAST_CHECK_NOTHROW(device_, ncclCommAbort(comm));
    EPOCHCAST_CHECK(device_, started);
  }
  comm_ = comm;
  wait_until_ready(timeout_s_, "the communicator's initialisation");
}

NcclCommunicator::~NcclCommunicator() {
  std::lock_guard lock(mutex_);
  if (comm_ == nullptr) return;
  // A non-blocking communicator may still be finishing work: abort rather than wait on it.
  ncclResult_t state = ncclSuccess;
  if (ncclCommGetAsyncError(detail::as_comm(comm_), &state) == ncclSuccess &&
      state == ncclSuccess) {
    EPOCHCAST_CHECK_NOTHROW(device_, ncclCommDestroy(detail::as_comm(comm_)));
  } else {
    abort_locked();
  }
}

void NcclCommunicator::all_reduce_sum(void* data, std::size_t count, ElementType type,
                                      const Stream& stream) {
  require_device(stream, device_, "all_reduce_sum");
  std::lock_guard lock(mutex_);
  check_live("all_reduce_sum");
  check_launch(ncclAllReduce(data, data, count, nccl_type(type), ncclSum, detail::as_comm(comm_),
                             detail::as_stream(stream.handle())),
               "an all-reduce");
}

void NcclCommunicator::broadcast(void* data, std::size_t count, ElementType type, int root,
                                 const Stream& stream) {
  require_device(stream, device_, "broadcast");
  std::lock_guard lock(mutex_);
  check_live("broadcast");
  check_launch(ncclBroadcast(data, data, count, nccl_type(type), root, detail::as_comm(comm_),
                             detail::as_stream(stream.handle())),
               "a broadcast");
}

void NcclCommunicator::reduce_scatter_sum(const void* send, void* receive,
                                          std::size_t receive_count, ElementType type,
                                          const Stream& stream) {
  require_device(stream, device_, "reduce_scatter_sum");
  std::lock_guard lock(mutex_);
  check_live("reduce_scatter_sum");
  check_launch(ncclReduceScatter(send, receive, receive_count, nccl_type(type), ncclSum,
                                 detail::as_comm(comm_), detail::as_stream(stream.handle())),
               "a reduce-scatter");
}

void NcclCommunicator::all_gather(const void* send, void* receive, std::size_t send_count,
                                  ElementType type, const Stream& stream) {
  require_device(stream, device_, "all_gather");
  std::lock_guard lock(mutex_);
  check_live("all_gather");
  check_launch(ncclAllGather(send, receive, send_count, nccl_type(type), detail::as_comm(comm_),
                             detail::as_stream(stream.handle())),
               "an all-gather");
}

}  // namespace epochcast::cuda

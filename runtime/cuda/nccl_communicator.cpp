// NcclCommunicator: an NCCL communicator bootstrapped from a unique id that the launcher
// broadcasts, and the four collectives the runtime uses, queued on a caller's stream.
#include <cstring>
#include <stdexcept>
#include <string>

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

std::string NcclCommunicator::create_unique_id() {
  ncclUniqueId id{};
  EPOCHCAST_CHECK(std::nullopt, ncclGetUniqueId(&id));
  return std::string(id.internal, sizeof(id.internal));
}

NcclCommunicator::NcclCommunicator(int rank, int size, const std::string& unique_id, int device)
    : rank_(rank), size_(size), device_(device) {
  if (unique_id.size() != kUniqueIdBytes) {
    throw std::invalid_argument("NcclCommunicator: the unique id has " +
                                std::to_string(unique_id.size()) + " bytes, NCCL's has " +
                                std::to_string(kUniqueIdBytes));
  }
  ncclUniqueId id{};
  std::memcpy(id.internal, unique_id.data(), sizeof(id.internal));
  // ncclCommInitRank binds the communicator to the current device.
  EPOCHCAST_CHECK(device_, cudaSetDevice(device_));
  ncclComm_t comm = nullptr;
  EPOCHCAST_CHECK(device_, ncclCommInitRank(&comm, size_, id, rank_));
  comm_ = comm;
}

NcclCommunicator::~NcclCommunicator() {
  if (comm_ != nullptr) EPOCHCAST_CHECK_NOTHROW(device_, ncclCommDestroy(detail::as_comm(comm_)));
}

void NcclCommunicator::all_reduce_sum(void* data, std::size_t count, ElementType type,
                                      const Stream& stream) {
  require_device(stream, device_, "all_reduce_sum");
  EPOCHCAST_CHECK(device_,
                  ncclAllReduce(data, data, count, nccl_type(type), ncclSum, detail::as_comm(comm_),
                                detail::as_stream(stream.handle())));
}

void NcclCommunicator::broadcast(void* data, std::size_t count, ElementType type, int root,
                                 const Stream& stream) {
  require_device(stream, device_, "broadcast");
  EPOCHCAST_CHECK(device_,
                  ncclBroadcast(data, data, count, nccl_type(type), root, detail::as_comm(comm_),
                                detail::as_stream(stream.handle())));
}

void NcclCommunicator::reduce_scatter_sum(const void* send, void* receive,
                                          std::size_t receive_count, ElementType type,
                                          const Stream& stream) {
  require_device(stream, device_, "reduce_scatter_sum");
  EPOCHCAST_CHECK(device_,
                  ncclReduceScatter(send, receive, receive_count, nccl_type(type), ncclSum,
                                    detail::as_comm(comm_), detail::as_stream(stream.handle())));
}

void NcclCommunicator::all_gather(const void* send, void* receive, std::size_t send_count,
                                  ElementType type, const Stream& stream) {
  require_device(stream, device_, "all_gather");
  EPOCHCAST_CHECK(device_,
                  ncclAllGather(send, receive, send_count, nccl_type(type), detail::as_comm(comm_),
                                detail::as_stream(stream.handle())));
}

}  // namespace epochcast::cuda

// Internal to runtime/cuda: the check that turns a failed CUDA or NCCL call into CudaError (the
// call, file:line, device, rank and host; STYLE.md 8), and the casts from the void* handles of
// cuda_api.h back to CUDA types. Includes the CUDA and NCCL headers, so never include it from a
// public header.
#pragma once

#include <optional>
#include <string_view>

#include <cuda_runtime_api.h>
#include <nccl.h>

namespace epochcast::cuda::detail {

[[noreturn]] void fail(cudaError_t status, std::string_view call, const char* file, int line,
                       std::optional<int> device);
[[noreturn]] void fail(ncclResult_t status, std::string_view call, const char* file, int line,
                       std::optional<int> device);
// For destructors, which must not throw: writes the message to stderr instead.
void report(cudaError_t status, std::string_view call, const char* file, int line,
            std::optional<int> device) noexcept;
void report(ncclResult_t status, std::string_view call, const char* file, int line,
            std::optional<int> device) noexcept;

inline void check(cudaError_t status, std::string_view call, const char* file, int line,
                  std::optional<int> device) {
  if (status != cudaSuccess) fail(status, call, file, line, device);
}
inline void check(ncclResult_t status, std::string_view call, const char* file, int line,
                  std::optional<int> device) {
  if (status != ncclSuccess) fail(status, call, file, line, device);
}
inline void check_nothrow(cudaError_t status, std::string_view call, const char* file, int line,
                          std::optional<int> device) noexcept {
  if (status != cudaSuccess) report(status, call, file, line, device);
}
inline void check_nothrow(ncclResult_t status, std::string_view call, const char* file, int line,
                          std::optional<int> device) noexcept {
  if (status != ncclSuccess) report(status, call, file, line, device);
}

inline cudaStream_t as_stream(void* handle) {
  return static_cast<cudaStream_t>(handle);
}
inline cudaEvent_t as_event(void* handle) {
  return static_cast<cudaEvent_t>(handle);
}
inline ncclComm_t as_comm(void* handle) {
  return static_cast<ncclComm_t>(handle);
}

}  // namespace epochcast::cuda::detail

// `call` is a CUDA runtime or NCCL call; `device` the device it concerns (std::nullopt: none).
#define EPOCHCAST_CHECK(device, call) \
  ::epochcast::cuda::detail::check((call), #call, __FILE__, __LINE__, (device))
#define EPOCHCAST_CHECK_NOTHROW(device, call) \
  ::epochcast::cuda::detail::check_nothrow((call), #call, __FILE__, __LINE__, (device))

// The runtime's own kernels: an empty one (launch cost), a spinning one (holds a stream while
// the host queues work to be timed) and a float fill (known answers for collectives).
#include <algorithm>

#include "runtime/cuda/kernels.h"

namespace epochcast::cuda::detail {
namespace {

__global__ void empty_kernel() {}

// %globaltimer counts nanoseconds whatever the SM clock does (PTX ISA, "Special Registers:
// %globaltimer"); its resolution is about a microsecond, plenty for a hold of milliseconds.
__device__ unsigned long long global_nanoseconds() {
  unsigned long long now = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  return now;
}

__global__ void spin_kernel(unsigned long long nanoseconds) {
  const unsigned long long start = global_nanoseconds();
  while (global_nanoseconds() - start < nanoseconds) {
  }
}

__global__ void fill_float_kernel(float* data, std::size_t count, float value) {
  const std::size_t stride = static_cast<std::size_t>(blockDim.x) * gridDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    data[i] = value;
  }
}

}  // namespace

cudaError_t launch_empty_kernel(cudaStream_t stream) {
  empty_kernel<<<1, 1, 0, stream>>>();
  return cudaGetLastError();
}

cudaError_t launch_spin_kernel(unsigned long long nanoseconds, cudaStream_t stream) {
  spin_kernel<<<1, 1, 0, stream>>>(nanoseconds);
  return cudaGetLastError();
}

cudaError_t launch_fill_float(float* data, std::size_t count, float value, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;  // a launch with zero blocks is an error
  constexpr unsigned kThreads = 256;
  // Enough blocks to fill an H100 several times over; the grid-stride loop covers the rest.
  constexpr std::size_t kMaxBlocks = 4096;
  const auto blocks =
      static_cast<unsigned>(std::min<std::size_t>((count + kThreads - 1) / kThreads, kMaxBlocks));
  fill_float_kernel<<<blocks, kThreads, 0, stream>>>(data, count, value);
  return cudaGetLastError();
}

}  // namespace epochcast::cuda::detail

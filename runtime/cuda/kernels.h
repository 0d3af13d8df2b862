// Internal to runtime/cuda: launchers for the kernels the runtime needs, compiled by nvcc
// (kernels.cu) and called from the C++ sources. Each returns the launch status.
#pragma once

#include <cstddef>

#include <cuda_runtime_api.h>

namespace epochcast::cuda::detail {

// A kernel with no body, one block of one thread: what a launch costs and nothing else.
cudaError_t launch_empty_kernel(cudaStream_t stream);
// One thread spinning on the GPU's global timer until `nanoseconds` have passed.
cudaError_t launch_spin_kernel(unsigned long long nanoseconds, cudaStream_t stream);
// data[0, count) = value, asynchronously on `stream` (of the current device).
cudaError_t launch_fill_float(float* data, std::size_t count, float value, cudaStream_t stream);

}  // namespace epochcast::cuda::detail

// Kernel times measured as kernels: a few training steps under PyTorch's Kineto profiler (CUPTI
// on a GPU), saved as the Chrome trace torch.profiler writes, with each operator's input shapes,
// each kernel's name, grid, block and GPU duration (validate/kernel_trace.h reads it back).
#pragma once

#include <functional>
#include <string>

#include <torch/torch.h>

#include "core/spec/scenario_spec.h"

namespace epochcast::runtime {

// Training steps traced per point: the first may still pick cuDNN algorithms, the others are
// the steady state; the reader takes the median of an operator's repeats.
inline constexpr int kKernelTraceSteps = 3;

// Where point (gpus, global batch) of a run's --kernel-trace DIR goes.
std::string kernel_trace_path(const std::string& directory, const SweepPoint& point);

// Whether this LibTorch can write a trace (it was built with Kineto: PyTorch's own builds are,
// Debian's libtorch 1.13 is not); when not, `why` says so. Tries a trace of nothing.
bool kernel_tracing_available(std::string& why);

// Runs `steps` under the profiler (CPU operators with their shapes, and the GPU's kernels on a
// CUDA device) and writes the trace to `path` whole (OutputFile: never half-written, never over
// a symlink, FIFO or device). The trace gains an "epochcast" object saying how it ran: the
// precision and whether cuDNN could use TF32, which decides how a float32 convolution's kernel
// is priced. Raises c10::Error when this LibTorch was built without Kineto.
void record_kernel_trace(const torch::Device& device, TrainingPrecision precision,
                         const std::string& path, const std::function<void()>& steps);

}  // namespace epochcast::runtime

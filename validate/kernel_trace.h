// Kernel times measured as kernels: the GPU kernels of a PyTorch profiler trace, each with its
// name, launch grid and GPU time, attributed to the operator that launched it.
//
// The trace is Kineto's Chrome trace JSON, as torch.profiler's export_chrome_trace() and
// LibTorch's ProfilerResult::save() write it (plain or gzip): `deviceProperties` names the GPUs;
// in `traceEvents`, operators are complete events ("ph": "X") of category `cpu_op` with
// "Input Dims", "Input type" and, from PyTorch 2.1, "Concrete Inputs" in their args (recorded
// with record_shapes); each launch is a `cuda_runtime` (or `cuda_driver`) event on the
// operator's thread, and its kernel a `kernel` event with the same "correlation", its GPU
// duration and its "grid" and "block". A kernel belongs to the outermost operator of
// kKernelOperators' kinds whose span holds its launch on the same thread (aten::linear, not the
// aten::addmm inside it).
//
// Operators of the kinds the kernel fit knows, with float32 tensors, become kernel
// measurements (kernel_measurements.h) whose time is their kernels' alone (kernel_only: no
// measuring floor): the same rows `epochcast kernels --fit` and `calibrate` fit the kernel
// model's figures to. Repeats of one operator at one shape (every training step's) are one row,
// the median of their times. The kernel fit prices float32 without TF32, so a convolution on a
// GPU with TF32 counts only where the trace says cuDNN's TF32 was off (the "epochcast" object
// runtime/train/kernel_trace.h and tools/pytorch_reference.py add).
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "core/spec/hardware_spec.h"
#include "validate/kernel_measurements.h"

namespace epochcast::validate {

// Whether `file` is a profiler trace (a JSON object, plain or gzip, with Kineto's traceEvents
// or schemaVersion near its start), not a CSV of kernel measurements or a measurement file.
bool is_kernel_trace(const std::filesystem::path& file);

struct KernelTrace {
  std::string device;  // as CUDA names it (deviceProperties)
  std::vector<KernelMeasurement> rows;
  int kernels = 0;     // kernel events in the trace
  int attributed = 0;  // of them, launched by an operator made into a row
  // Operators of a known kind left out, by reason ("not float32: 412", ...): what the rows do
  // not cover.
  std::map<std::string, int> skipped;
};

// Reads one trace; its rows are of catalogue entry `gpu_id`, or when empty of the entry the
// trace's device name is (gpu_for_device). A malformed file, one without GPU kernels (a
// CPU-only trace) or of a device the catalogue does not know by name is InputError, with the
// file and what to do.
KernelTrace read_kernel_trace(const std::filesystem::path& file, const GpuCatalogue& catalogue,
                              const std::string& gpu_id = "");

}  // namespace epochcast::validate

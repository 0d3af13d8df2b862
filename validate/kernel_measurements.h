// Kernel-level measurements: how long one PyTorch operator's kernels took on one GPU at one
// shape, and the kernels the simulator's cost model launches for it. This is the evidence the
// kernel model's per-class figures are fitted to and checked against (validate/kernel_fit.h).
//
// Files are CSV, plain or gzip-compressed, in the columns of the NeuSight data set
// (shared/data/kernels/README.md: S. Lee et al., "Forecasting GPU Performance for Deep Learning
// Training and Inference", ASPLOS 2025): `OPName`, `Latency` (milliseconds), `Device` (the name
// CUDA reports) and the operator's shape columns:
//   linear, bmm              B, M, N, K     nn.Linear(N, K) on [B, M, N]; torch.bmm of
//                                           [B, M, N] by [B, N, K] (N is the reduction)
//   conv                     B, Input_Channel, Output_Channel, Kernel_Szie, Input_Size, Stride,
//                            Padding         nn.Conv2d, square kernels and inputs, no bias
//   ln, softmax              B, H           LayerNorm / softmax over rows of H
//   add, mul, relu, gelu,    B, H           element-wise over B x H elements
//   tanh
// Other columns (the library kernel, the grid) are kept when present, never required.
// The data set measured with PyTorch's float32 math (no TF32 in cuBLAS or, as its collect.py
// sets torch.backends.cudnn.allow_tf32 = False, in cuDNN) and cudnn.benchmark on: the fit
// prices every row that way (validate/kernel_fit.h: kKernelMeasurementPrecision,
// kKernelMeasurementConvolution).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/enum_name.h"
#include "core/input_error.h"
#include "core/model/analysis.h"
#include "core/spec/hardware_spec.h"

namespace epochcast::validate {

// The operator classes of kernel-level evidence, each a kind of kernel the device model costs
// by its own rule: a GEMM, a batched GEMM (many small products in one launch), a convolution
// (cuDNN's algorithms), row-wise normalisations (LayerNorm, softmax) and element-wise kernels.
enum class KernelClass { gemm, batched_gemm, conv, layernorm, softmax, elementwise };
inline constexpr std::string_view kKernelClassNames[] = {
    "gemm", "batched_gemm", "conv", "layernorm", "softmax", "elementwise"};
inline std::string_view name_of(KernelClass value) {
  return enum_name(kKernelClassNames, value);
}
inline constexpr std::size_t kKernelClassCount = std::size(kKernelClassNames);

// The operators a file may hold (OPName), and their classes.
inline constexpr std::string_view kKernelOperators[] = {"linear", "bmm", "conv", "ln",   "softmax",
                                                        "add",    "mul", "relu", "gelu", "tanh"};
KernelClass kernel_class(std::string_view op);

struct KernelMeasurement {
  std::string op;      // one of kKernelOperators
  std::string device;  // as CUDA names it ("Tesla T4")
  std::string gpu_id;  // the catalogue entry it is (see gpu_for_device)
  double seconds = 0;  // the operator's kernels, on the GPU
  // The operator's shape columns, in the order listed above.
  std::vector<std::int64_t> shape;
  std::string library_kernel;  // `Kernel Name` when given
  SourceMark mark;             // the row
  // The kernels' own GPU time, with nothing of a measuring loop's host in it (a profiler trace,
  // validate/kernel_trace.h): no floor, no offset (kernel_fit.h).
  bool kernel_only = false;
};

// The catalogue entry a measured device is: a known CUDA device name of the public kernel data
// (Tesla T4 -> t4, ...), else the entry whose `name` is the device name with or without a
// leading "NVIDIA ". Empty when there is none.
std::string gpu_for_device(std::string_view device, const GpuCatalogue& catalogue);

// Why an operator's shape (in its columns' order) cannot be costed: a size outside 1 to 2^31 - 1
// (a convolution's padding may be 0), sizes multiplying past 2^60 (no kernel a GPU runs), or a
// convolution's kernel larger than its padded input. `column` names the column at fault.
struct ShapeProblem {
  std::string column;
  std::string problem;
};
std::optional<ShapeProblem> shape_problem(std::string_view op,
                                          const std::vector<std::int64_t>& shape);

// Reads one file (plain or gzip). Rows of a device the catalogue lacks are InputError (the
// message lists the catalogue's ids); so are missing columns and malformed cells.
std::vector<KernelMeasurement> read_kernel_measurements(const std::filesystem::path& file,
                                                        const GpuCatalogue& catalogue);
// Every *.csv and *.csv.gz below `directory`, in sorted path order.
std::vector<KernelMeasurement> read_kernel_directory(const std::filesystem::path& directory,
                                                     const GpuCatalogue& catalogue);

// What the simulator launches for a measured operator: its forward kernels from the same cost
// model as `predict` (core/model), at `batch` samples. fp32 tensors, as the data were taken.
struct CostedOperator {
  std::vector<KernelWork> kernels;
  std::int64_t batch = 1;
};
CostedOperator cost_operator(const KernelMeasurement& measurement);

}  // namespace epochcast::validate

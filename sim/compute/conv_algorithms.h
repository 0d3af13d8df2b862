// What cuDNN runs for a convolution: the algorithms that can compute a geometry, each as the
// kernels it launches.
//
// - Implicit GEMM: the convolution as one matrix product per group (output positions x output
//   channels, reducing over input channels x window), read straight from the tensors. Tensor
//   cores need the channels padded to their multiple, and with activations in NCHW order cuDNN
//   transposes them to NHWC and back around its tensor-core kernels.
// - Winograd F(4x4, 3x3) (Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks",
//   arXiv 1509.09308): for 3x3 stride-1 convolutions, 36 element-wise products per 4x4 output
//   tile instead of 144 multiply-adds, a quarter of the arithmetic, at the price of transformed
//   copies of the input and output 36/16 times their size ("non-fused": transforms and 36
//   batched GEMMs as separate kernels).
// - FFT over 32-point tiles (cuDNN's FFT_TILING, 32x32 tiles in 2-D): for stride-1 convolutions
//   whose window fits a tile; the products become one complex GEMM per frequency bin, with the
//   transformed tensors (complex fp32) written and read once.
//
// Depthwise convolutions are not here: they run PyTorch's own direct kernel, bound by memory.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/model/analysis.h"

namespace epochcast::sim {

enum class ConvAlgorithm { implicit_gemm, winograd, fft_tiling };
const char* conv_algorithm_name(ConvAlgorithm algorithm);

// One kernel an algorithm launches. GEMM parts carry their (padded) product shape.
struct KernelPart {
  KernelWork work;
  bool tensor_cores = false;  // runs on the tensor cores (else on the fp32 units)
  std::string what;           // "Winograd input transform", ...
};

struct ConvPlan {
  ConvAlgorithm algorithm = ConvAlgorithm::implicit_gemm;
  std::vector<KernelPart> parts;
};

struct ConvContext {
  std::int64_t activation_bytes = 4;  // element size of activations
  std::int64_t weight_bytes = 4;
  bool tensor_cores = false;          // the precision has tensor cores faster than fp32 here
  std::int64_t channel_multiple = 1;  // tensor-core channel multiple (8 for 16-bit, 4 for tf32)
  bool channels_last = false;         // activations in NHWC order
};

// Every algorithm that can compute `conv` (which has_conv_geometry), implicit GEMM first.
std::vector<ConvPlan> conv_plans(const KernelWork& conv, const ConvContext& context);

// The multiple tensor-core kernels need their feature dimensions padded to.
std::int64_t round_up(std::int64_t value, std::int64_t multiple);

}  // namespace epochcast::sim

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
//
// On a CPU device PyTorch calls oneDNN instead (mkldnn_convolution), which takes the first of its
// implementations whose conditions hold (docs/evidence/onednn-cpu-convolutions.md): a direct
// kernel whose generated code unrolls the window's width, or, for windows too wide or padded
// too far for it, im2col and a GEMM: the window's inputs laid out as a column matrix (input
// channels x window x output positions) that is written and read once per pass, and for the
// data gradient added back into the input by col2im.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/model/analysis.h"

namespace epochcast::sim {

enum class ConvAlgorithm { implicit_gemm, winograd, fft_tiling, im2col_gemm };
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
  bool onednn = false;                // a CPU device: oneDNN's one choice, not cuDNN's algorithms
  // oneDNN only: the samples a pass computes at once and its threads, which size the scratchpad
  // its im2col path may take (onednn_full_columns).
  std::int64_t batch = 1;
  std::int64_t threads = 1;
};

// Every algorithm that can compute `conv` (which has_conv_geometry), implicit GEMM first; on
// oneDNN the one it takes.
std::vector<ConvPlan> conv_plans(const KernelWork& conv, const ConvContext& context);

// Whether oneDNN 2.x's direct AVX-512 kernel computes this pass (else im2col and a GEMM): the
// conditions of jit_avx512_common_conv_kernel.cpp's init_conf on the window's width.
bool onednn_direct_applies(const ConvGeometry& g);

// Whether oneDNN's im2col path lays out a backward pass's whole column matrix for each sample
// (else a block of output positions at a time, in cache). gemm_convolution_utils.cpp's init_conf
// caps the scratchpad at 15 x threads x the pass's source, weights and destination (the whole
// mini-batch's; at most 1 GiB), less, for the weight gradient, the reduction buffer it books
// first (4 x threads x the weights' bytes); the column matrices take the full layout where they
// fit what is left. So the full layout comes with larger batches.
bool onednn_full_columns(const ConvGeometry& g, const ConvContext& context);

// The multiple tensor-core kernels need their feature dimensions padded to.
std::int64_t round_up(std::int64_t value, std::int64_t multiple);

}  // namespace epochcast::sim

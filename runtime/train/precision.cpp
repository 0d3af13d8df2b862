// Math flags and autocast, for LibTorch 1.13 (Debian's) and 2.x (PyTorch's).
#include "runtime/train/precision.h"

#include <ATen/autocast_mode.h>
#include <torch/version.h>

namespace epochcast::runtime {

MathFlags math_flags(const TrainingSpec& training) {
  MathFlags flags;
  flags.cublas_allow_tf32 = training.precision == TrainingPrecision::tf32;
  flags.cudnn_allow_tf32 = training.precision != TrainingPrecision::fp32_strict;
  flags.cudnn_benchmark = training.convolution.cudnn_benchmark;
  return flags;
}

void apply_math_flags(const MathFlags& flags) {
  at::globalContext().setAllowTF32CuBLAS(flags.cublas_allow_tf32);
  at::globalContext().setAllowTF32CuDNN(flags.cudnn_allow_tf32);
  at::globalContext().setBenchmarkCuDNN(flags.cudnn_benchmark);
}

bool autocast_enabled(torch::DeviceType type) {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
  return at::autocast::is_autocast_enabled(type);
#else
  return type == torch::kCUDA ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
#endif
}

AutocastScope::AutocastScope(TrainingPrecision precision, const torch::Device& device) {
  if (precision != TrainingPrecision::amp_fp16 && precision != TrainingPrecision::amp_bf16) return;
  at::ScalarType dtype = precision == TrainingPrecision::amp_fp16 ? at::kHalf : at::kBFloat16;
  type_ = device.type();
  active_ = true;
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
  at::autocast::set_autocast_enabled(type_, true);
  at::autocast::set_autocast_dtype(type_, dtype);
#else
  if (type_ == torch::kCUDA) {
    at::autocast::set_enabled(true);
    at::autocast::set_autocast_gpu_dtype(dtype);
  } else {
    at::autocast::set_cpu_enabled(true);
    at::autocast::set_autocast_cpu_dtype(dtype);
  }
#endif
  at::autocast::increment_nesting();
}

AutocastScope::~AutocastScope() {
  if (!active_) return;
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
  at::autocast::set_autocast_enabled(type_, false);
#else
  if (type_ == torch::kCUDA) {
    at::autocast::set_enabled(false);
  } else {
    at::autocast::set_cpu_enabled(false);
  }
#endif
}

}  // namespace epochcast::runtime

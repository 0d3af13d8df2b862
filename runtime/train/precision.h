// The scenario's precision as PyTorch sets it: the float32 math flags (TF32 in cuBLAS and cuDNN,
// cuDNN's autotuner) and autocast around the forward pass.
#pragma once

#include <torch/torch.h>

#include "core/spec/scenario_spec.h"

namespace epochcast::runtime {

// torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 and
// torch.backends.cudnn.benchmark for the scenario. fp32 keeps PyTorch's defaults (cuBLAS TF32
// off since PyTorch 1.12, cuDNN TF32 on), tf32 turns both on, fp32_strict both off; the 16-bit
// precisions keep the defaults for what autocast leaves in float32.
struct MathFlags {
  bool cublas_allow_tf32 = false;
  bool cudnn_allow_tf32 = true;
  bool cudnn_benchmark = false;
};
MathFlags math_flags(const TrainingSpec& training);
// Sets them process-wide (LibTorch's global context), as the Python flags do.
void apply_math_flags(const MathFlags& flags);

// Whether autocast is on for the device type in the calling thread.
bool autocast_enabled(torch::DeviceType type);

// Autocast for the forward pass, as `with torch.autocast(device, dtype)` sets it; nothing for
// the float32 precisions.
class AutocastScope {
 public:
  AutocastScope(TrainingPrecision precision, const torch::Device& device);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool active_ = false;
  torch::DeviceType type_ = torch::kCPU;
};

}  // namespace epochcast::runtime

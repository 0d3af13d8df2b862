// How long a kernel occupies a GPU: a roofline with utilisation.
//
//   time = max(FLOPs / (peak(precision, op class) x efficiency(op class)),
//              bytes / (memory bandwidth x memory efficiency)) / utilisation
//   (the optimizer's kernels use the profile's optimizer memory efficiency)
//   time = max(time, minimum kernel time)
//
// Utilisation has two parts. GEMMs and convolutions are cut into output tiles (128x128 down
// to 16x16, the largest that gives every slot a tile, then split along K when there are still
// too few) that run in waves of SMs x 2 resident tiles; a last, partial wave leaves SMs idle
// (wave quantisation), which scales their compute time. Memory
// traffic, and all other kernels (cut into 1024-element blocks), reach full bandwidth once
// every SM has a block: below that, utilisation is blocks / SMs. Small per-GPU batches thus
// under-use a large GPU.
#pragma once

#include "core/model/analysis.h"
#include "core/spec/hardware_spec.h"
#include "core/spec/profile_spec.h"
#include "core/spec/scenario_spec.h"
#include "sim/engine/sim_time.h"

namespace epochcast::sim {

// Why a kernel takes the time it does: the three bounds of the roofline and which one decides.
enum class KernelBound { compute, memory, floor };
struct KernelExplanation {
  double flops = 0, bytes = 0;
  double compute_s = 0;  // at the class's efficiency and the kernel's compute utilisation
  double memory_s = 0;   // at the effective bandwidth and the memory utilisation
  double seconds = 0;    // what kernel_time() gives
  KernelBound bound = KernelBound::compute;
  double compute_utilisation = 1, memory_utilisation = 1;
  double efficiency = 0;  // the op class's fraction of `peak`
  FlopsPerSecond peak;
  BytesPerSecond bandwidth;  // effective (after memory efficiency)
};
const char* bound_name(KernelBound bound);

class DeviceModel {
 public:
  DeviceModel(const GpuSpec& gpu, const HardwareProfile& profile, TrainingPrecision precision);

  SimTime kernel_time(const KernelWork& kernel, std::int64_t batch) const;
  KernelExplanation explain(const KernelWork& kernel, std::int64_t batch) const;
  // Fraction of the GPU's compute a kernel keeps busy, averaged over its waves (0, 1].
  double compute_utilisation(const KernelWork& kernel, std::int64_t batch) const;
  // Fraction of the memory bandwidth it can draw on (0, 1].
  double memory_utilisation(const KernelWork& kernel, std::int64_t batch) const;
  // The peak FLOP/s an op class runs against at this precision.
  FlopsPerSecond peak(OpClass op_class) const;
  // The bandwidth a kernel of this op class streams at (the optimizer's has its own efficiency).
  BytesPerSecond effective_bandwidth(OpClass op_class) const;
  // Host-to-device copy of `bytes`: pinned copies reach the PCIe link's efficiency, pageable
  // copies the (lower) staged rate; both pay the copy latency.
  SimTime host_to_device_time(Bytes bytes, bool pinned) const;

  const GpuSpec& gpu() const { return gpu_; }
  const HardwareProfile& profile() const { return profile_; }
  TrainingPrecision precision() const { return precision_; }

 private:
  GpuSpec gpu_;
  HardwareProfile profile_;
  TrainingPrecision precision_;
  FlopsPerSecond matrix_peak_;  // GEMM and convolution units at this precision
  FlopsPerSecond vector_peak_;  // FP32 CUDA cores
};

// Element sizes of tensors under a training precision (mixed precision keeps fp32 weights).
CostOptions cost_options(TrainingPrecision precision);

}  // namespace epochcast::sim

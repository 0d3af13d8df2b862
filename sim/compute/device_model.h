// How long a kernel occupies a GPU: a roofline with utilisation.
//
// Peaks are the catalogue's datasheet rates, at the boost clock.
//   time = max(FLOPs / (peak(precision, op class) x efficiency(op class) x min(utilisation, s)),
//              bytes / (memory bandwidth x memory efficiency x memory utilisation))
// where s is the board's sustained over boost clock (1 unless the catalogue's clocks_mhz.sustained
// is lower): a power-limited board's clock falls as more of its SMs switch, so a kernel that
// keeps a small part of the GPU busy runs at boost and a full one at the sustained clock.
//   (the optimizer's kernels use the profile's optimizer memory efficiency)
//   time = max(time, minimum kernel time)
// except a GEMM on a CPU, whose BLAS packs its operands before it computes (GemmTiles::cpu_blas):
//   time = max(compute time + memory time, minimum kernel time)
//
// GEMMs and convolutions are cut into output tiles (sim/compute/gemm_tiles.h): padding of the
// edge tiles, the idle slots of a last partial wave and uneven split-K slices lower their
// compute utilisation. Under tensor-core precisions their feature dimensions are padded to the
// tensor cores' multiple. Convolutions run the algorithm cuDNN would pick for their geometry
// (sim/compute/conv_algorithms.h): with cudnn.benchmark the fastest of implicit GEMM, Winograd
// and FFT; without it the heuristic's implicit GEMM; each algorithm's kernels add up. Every
// other kernel is cut into blocks as its library launches it (sim/compute/kernel_launch.h: a
// block per row for LayerNorm, per channel for BatchNorm's statistics, 512 elements for
// element-wise kernels, ...). Memory traffic reaches full bandwidth once every SM has a block
// (or a tile): below that, utilisation is blocks / SMs. Small per-GPU batches, and kernels whose
// launch gives few blocks, thus under-use a large GPU.
#pragma once

#include <string>

#include "core/model/analysis.h"
#include "core/spec/hardware_spec.h"
#include "core/spec/profile_spec.h"
#include "core/spec/scenario_spec.h"
#include "sim/compute/conv_algorithms.h"
#include "sim/compute/gemm_tiles.h"
#include "sim/compute/kernel_launch.h"
#include "sim/engine/sim_time.h"

namespace epochcast::sim {

// Why a kernel takes the time it does: the three bounds of the roofline and which one decides.
enum class KernelBound { compute, memory, floor, serial };
struct KernelExplanation {
  double flops = 0, bytes = 0;
  double compute_s = 0;  // at the class's efficiency and the kernel's compute utilisation
  double memory_s = 0;   // at the effective bandwidth and the memory utilisation
  double seconds = 0;    // what kernel_time() gives
  KernelBound bound = KernelBound::compute;
  // The memory and compute times add instead of overlapping: a CPU BLAS packs the operands of a
  // GEMM in a pass of its own before computing on them (GemmTiles::cpu_blas).
  bool packed = false;
  // A CPU's serial Bernoulli draws (KernelWork::bernoulli_draws at the profile's
  // cpu_bernoulli_ns), on top of both bounds: one core's loop that no vector unit shares.
  double serial_draws_s = 0;
  double compute_utilisation = 1, memory_utilisation = 1;
  double efficiency = 0;  // the op class's fraction of `peak`
  // The clock its compute ran at over the boost clock: below 1 where the board's power limit
  // held it (a kernel keeping more of the GPU busy than the sustained clock allows).
  double clock_fraction = 1;
  FlopsPerSecond peak;
  BytesPerSecond bandwidth;  // effective (after memory efficiency)
  // What runs: "GEMM 512x512x512, tiles 64x64, split-K 3", "Winograd F(4x4,3x3) + ...".
  std::string algorithm;
  int parts = 1;  // kernels the algorithm launches
};
const char* bound_name(KernelBound bound);

class DeviceModel {
 public:
  DeviceModel(const GpuSpec& gpu, const HardwareProfile& profile, TrainingPrecision precision,
              const ConvolutionSettings& convolution = {});

  SimTime kernel_time(const KernelWork& kernel, std::int64_t batch) const;
  KernelExplanation explain(const KernelWork& kernel, std::int64_t batch) const;
  // Fraction of the GPU's compute a kernel keeps busy, averaged over its waves (0, 1]. For a
  // GEMM: its useful multiply-adds over what its tiles cost (padding and idle slots included).
  double compute_utilisation(const KernelWork& kernel, std::int64_t batch) const;
  // Fraction of the memory bandwidth it can draw on (0, 1]: its blocks (or tiles) over the SMs.
  double memory_utilisation(const KernelWork& kernel, std::int64_t batch) const;
  // The blocks a kernel without a GEMM shape launches (kernel.launch on this GPU).
  LaunchGrid launch(const KernelWork& kernel, std::int64_t batch) const;
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
  // Whether GEMMs run on tensor cores (a matrix unit faster than fp32).
  bool tensor_cores() const { return matrix_peak_.value() > vector_peak_.value(); }
  // Whether convolutions do: under fp32 they differ from GEMMs (cuDNN's TF32 is on by default,
  // cuBLAS's off).
  bool conv_tensor_cores() const { return conv_peak_.value() > vector_peak_.value(); }
  // A CPU device: eager ops compute on the thread that dispatches them, so a kernel runs after its
  // dispatch and the next dispatch after it, where a GPU's queue lets the two overlap.
  bool computes_inline() const { return cpu_; }

 private:
  KernelExplanation explain_part(const KernelPart& part, std::int64_t batch) const;
  // A GEMM-shaped kernel's tiles: cuBLAS's CUDA-core SGEMM tiles (by batching and operand
  // layout) for a GEMM handed to cuBLAS off tensor cores, else the architecture's family with
  // (when pad_features) the tensor cores' padding.
  TileChoice tiles(const KernelWork& kernel, std::int64_t batch, bool tensor_cores,
                   bool pad_features = true) const;

  GpuSpec gpu_;
  HardwareProfile profile_;
  TrainingPrecision precision_;
  ConvolutionSettings convolution_;
  ConvContext conv_context_;
  TileFamily tile_family_;
  LaunchTarget launch_target_;
  FlopsPerSecond matrix_peak_;        // the GEMM unit at this precision
  FlopsPerSecond conv_peak_;          // the convolution unit at this precision
  FlopsPerSecond vector_peak_;        // FP32 CUDA cores
  double sustained_fraction_ = 1;     // sustained over boost clock, in (0, 1]
  bool packs_gemm_operands_ = false;  // a CPU BLAS: GEMMs stream, then compute
  // A CPU device: ops compute on the dispatching thread, a mask's random numbers are drawn one
  // after another, convolutions are oneDNN's.
  bool cpu_ = false;
  double fp32_lanes_per_sm_ = 64;  // FP32 CUDA cores per SM
  // The unit an op class's tensor-core kernels run on (conv_peak_ or matrix_peak_).
  FlopsPerSecond unit_peak(OpClass op_class) const;
  bool on_tensor_cores(OpClass op_class) const;
};

// Element sizes of tensors under a training precision (mixed precision keeps fp32 weights).
CostOptions cost_options(TrainingPrecision precision);

}  // namespace epochcast::sim

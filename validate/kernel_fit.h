// The kernel model against kernel-level measurements: how far the device model's time for each
// measured operator is from its measured time, per operator class and GPU; the profile figures
// that bring them closest; and whether figures fitted on some GPUs predict another
// (leave one GPU out), the test of a model meant for hardware nobody has measured.
//
// Measured times are CUDA-event times around one eager operator, so they hold what the measuring
// loop's host spends on it: events enclose the host's work before the kernel's launch (the GPU
// waits for it) and the operator cannot take less than the host's whole dispatch. The public
// data set's shortest times are 25-60 us per operator whatever its size, and above them each
// (operator, device) follows t = offset + bytes / bandwidth to within 1% for element-wise
// kernels, with the offset 0.53-0.87 of that floor. So a measured operator is predicted as
//   max(floor, offset_fraction(operator) x floor + the device model's kernel time),
// the floor read from each (operator, device)'s own shortest time (a property of the measuring
// host, not of the GPU; a held-out GPU's too) and each operator's offset fraction fitted with
// its class's figures (how much of its host work precedes its launch is its code path's).
// Accuracy is judged on the rows the GPU decides: those measured at 1.5 floors or more (by the
// measured time alone, so that no fit can drop a row by predicting it faster).
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/spec/hardware_spec.h"
#include "core/spec/profile_spec.h"
#include "core/spec/scenario_spec.h"
#include "validate/kernel_measurements.h"

namespace epochcast::validate {

// The measuring loop's floor per (operator, catalogue id): the shortest time measured.
using MeasurementFloors = std::map<std::pair<std::string, std::string>, double>;
MeasurementFloors measurement_floors(const std::vector<KernelMeasurement>& rows);

// How the measured operators ran (NeuSight's collect.py): float32 math without TF32 in cuBLAS
// (PyTorch's default) or cuDNN (torch.backends.cudnn.allow_tf32 = False), and
// torch.backends.cudnn.benchmark = True, so cuDNN timed its algorithms and kept the fastest.
inline constexpr TrainingPrecision kKernelMeasurementPrecision = TrainingPrecision::fp32_strict;
inline constexpr ConvolutionSettings kKernelMeasurementConvolution{.cudnn_benchmark = true};

// What the measuring loop adds before an operator's kernel, per operator ("add", "ln", ...):
// the part of its floor that precedes the launch, a fraction in [0, 1]. The host's code path
// decides it (LayerNorm allocates its statistics before launching, an element-wise op does
// part of its work after), not the GPU, so it transfers between GPUs measured by one harness.
// An operator not listed takes kDefaultOffsetFraction, about what the public kernel data's
// element-wise operators show (0.53-0.71 of their floors).
using MeasuringOffsets = std::map<std::string, double>;
inline constexpr double kDefaultOffsetFraction = 0.6;
double offset_for(const MeasuringOffsets& offsets, const std::string& op);

// A row's prediction.
struct KernelPrediction {
  double kernel_s = 0;     // the device model's time for the operator's kernels
  double predicted_s = 0;  // max(floor, offset + kernel_s)
  double measured_s = 0;
  bool gpu_decided = false;  // measured at kGpuDecidedFloors floors or more
};
inline constexpr double kGpuDecidedFloors = 1.5;

// Predictions for every row under `profile` (its per-architecture figures applied per GPU).
std::vector<KernelPrediction> predict_kernels(const std::vector<KernelMeasurement>& rows,
                                              const HardwareProfile& profile,
                                              const GpuCatalogue& catalogue,
                                              const MeasurementFloors& floors,
                                              const MeasuringOffsets& offsets = {});

// What the device model runs for each row: the algorithm of the operator's longest kernel
// ("GEMM 215x6233x512, tiles 64x128", "Winograd batched GEMM (36) ...", "implicit GEMM ..."),
// to set beside the row's library_kernel when checking the model's choice of algorithm and
// tiles against the library's.
std::vector<std::string> modelled_kernels(const std::vector<KernelMeasurement>& rows,
                                          const HardwareProfile& profile,
                                          const GpuCatalogue& catalogue);

// Accuracy of one class on one GPU, over its GPU-decided rows.
struct ClassAccuracy {
  KernelClass kernel_class = KernelClass::gemm;
  std::string gpu_id;
  int rows = 0;             // in all
  int gpu_decided = 0;      // counted below; the figures are 0 and 1 when there is none
  double mape = 0;          // mean |predicted - measured| / measured, a fraction
  double median_ratio = 1;  // median predicted / measured: below 1 predicts too fast
};
// Sorted by class, then GPU id.
std::vector<ClassAccuracy> class_accuracy(const std::vector<KernelMeasurement>& rows,
                                          const std::vector<KernelPrediction>& predictions);

// One step of a fit: `figures` (keys of profile_figures.h) moved to fit the rows of `classes`,
// the figures of earlier steps held; with `offset`, the measuring loop's offset of each of its
// operators too.
struct FitStage {
  std::vector<KernelClass> classes;
  std::vector<std::string> figures;
  bool offset = false;
};
// Each figure from the class that sees it most plainly, every stage with its operators'
// offsets: the element-wise kernels' offsets alone (their times follow offset + bytes /
// bandwidth to within 1%, the bandwidth each board's own streaming figure from the catalogue:
// one fitted efficiency would replace every board's), then the row-wise kernels' relative
// bandwidth, then the GEMM efficiency with the batched GEMM tiles' staging cost, then the
// convolution efficiency, each with the figures before it held.
std::vector<FitStage> kernel_fit_stages();
// One stage over every class: `figures` and every operator's offset, fitted together.
std::vector<FitStage> joint_fit(const std::vector<std::string>& figures);

struct KernelFit {
  HardwareProfile profile;                // the prior with the fitted figures
  std::map<std::string, double> figures;  // key -> fitted value, in the key's unit
  MeasuringOffsets offsets;               // the measuring loop's, of the operators fitted
  double cost = 0;  // the last stage's: mean over its classes of the mean squared log ratio
  // Figures of stages whose classes have rows but no GPU-decided one: kept at the prior, not
  // fitted. (Stages with no row at all keep the prior silently.)
  std::vector<std::string> unseen;
  // Figures that every measured GPU's architecture gives (the prior's
  // efficiency_by_architecture, each from its own kernel-level source): kept, not fitted.
  std::vector<std::string> held;
};
// The values of each stage's figures that bring its classes' predictions closest in log ratio
// on the GPU-decided rows, every class weighing the same and every GPU within a class the same;
// each figure stays within its physical bounds. Deterministic. The figures fitted are the
// profile's defaults, the ones that must transfer to any GPU; the per-architecture figures
// stay as the prior gives them (public large-GEMM benchmarks, not these rows), and a figure
// every measured GPU's architecture gives is held, not fitted (KernelFit::held).
KernelFit fit_kernel_figures(const std::vector<KernelMeasurement>& rows,
                             const HardwareProfile& prior, const GpuCatalogue& catalogue,
                             const MeasurementFloors& floors, const std::vector<FitStage>& stages);

// Each operator's offset fraction that fits its rows under `profile`; an operator without a
// GPU-decided row is not listed (it takes kDefaultOffsetFraction).
MeasuringOffsets fit_measuring_offsets(const std::vector<KernelMeasurement>& rows,
                                       const HardwareProfile& profile,
                                       const GpuCatalogue& catalogue,
                                       const MeasurementFloors& floors);

// For each GPU of the rows: figures fitted on the other GPUs' rows, accuracy on its own. Boards
// of one chip (the same architecture and SM count: A100 PCIe 40 GB and 80 GB) are one GPU here,
// held out together, so that no board of the held-out chip informs its fit. Needs rows of two
// chips or more (std::invalid_argument otherwise).
struct LeaveOneOut {
  std::string gpu_id;                   // the held-out boards' ids, joined by '+'
  KernelFit fit;                        // on the other GPUs
  std::vector<ClassAccuracy> held_out;  // this GPU's classes under that fit
};
std::vector<LeaveOneOut> leave_one_gpu_out(const std::vector<KernelMeasurement>& rows,
                                           const HardwareProfile& prior,
                                           const GpuCatalogue& catalogue,
                                           const std::vector<FitStage>& stages);

}  // namespace epochcast::validate

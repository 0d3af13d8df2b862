// Calibration: fits the simulator's free parameters to measurements by least squares and returns
// them as a hardware profile.
//
//  - op-class compute efficiencies, memory efficiency and minimum kernel time, from the per-layer
//    profiles (each layer's kernels costed by the roofline; the bound of each kernel is re-decided
//    after each solve, so the non-linear max() is fitted by iterated linear least squares on
//    relative residuals, with non-negative parameters);
//  - per-op host cost, from the dispatch microbenchmark;
//  - the input pipeline's CPU time per sample, from the loaders' own clocks;
//  - link and copy alpha and beta, from collective and copy microbenchmarks (t = alpha + bytes /
//    beta);
//  - then every figure the measured epochs and iterations depend on, by nonlinear least squares
//    with the simulator in the loop, the figures above entering with their fits as priors
//    (end_to_end_fit.h).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/measure/measurements.h"
#include "core/spec/scenario_spec.h"
#include "validate/kernel_measurements.h"

namespace epochcast::validate {

// Told where a long fit stands: what it is doing ("fitting: start 2 of 4, iteration 7") and
// about how much of the work is done (0 to 1). For a progress line only; results never depend
// on it.
using FitProgress = std::function<void(const std::string& stage, double fraction)>;

// Measurements of one scenario, with the scenario they ran.
struct MeasuredScenario {
  std::string file;  // the measurement file
  MeasurementFile measurements;
  ScenarioSpec scenario;
};

// Whether a measured point takes part (the rest are held out).
using PointFilter = std::function<bool(const MeasuredPoint&)>;

struct FittedParameter {
  std::string key;   // the profile key, e.g. "gpu.efficiency.gemm"
  double value = 0;  // in the unit the key names
  int observations = 0;
  // Of the observations it was fitted to, after the fit: relative to the step (layer fits) or to
  // the measurement (the others).
  double rms_relative_residual = 0;
  std::string from;  // which measurements
  // How many of the observations are independent: the layer times of one profiling pass share
  // that pass's conditions (a busier host slows all of them), so a layer figure counts the
  // measured points it was fitted over. 0: all of them.
  int independent = 0;
  // The figure's relative standard error where the fit estimated one from its residuals as they
  // cluster (the layer fit's, by measured point and by layer pass); 0: the relative residual over
  // the square root of the independent observations stands for it.
  double spread = 0;
};

struct EndToEndFit;

struct Calibration {
  HardwareProfile profile;
  std::vector<FittedParameter> fitted;
  std::vector<std::string> notes;  // parameters left at their prior, and why
  // Structural gaps: what the measurements show that no figure within its physical range can
  // represent (the figure is held at its range's bound, and the measurements that wanted it
  // beyond are named with the time they leave unexplained).
  std::vector<std::string> gaps;
  // The end-to-end fit's report: every figure's estimate and whether the points constrain it,
  // leave-one-out error, the next point worth measuring.
  std::shared_ptr<const EndToEndFit> end_to_end;
};

// Starts from each scenario's own profile (they must share a machine) and fits what the
// measurements determine. `progress` hears how the end-to-end fit, the long part, goes.
//
// `kernels` are kernel times measured as kernels (profiler traces, validate/kernel_trace.h) of
// the same device: the kernel model's figures are fitted to them as the default profile's were
// (validate/kernel_fit.h), and replace what the per-layer times give for the same figures
// (kernel times hold nothing of the host's; a layer's replay does).
Calibration calibrate(const std::vector<MeasuredScenario>& inputs, const PointFilter& use,
                      const std::vector<std::string>& file_names, const FitProgress& progress = {},
                      const std::vector<KernelMeasurement>& kernels = {});

}  // namespace epochcast::validate

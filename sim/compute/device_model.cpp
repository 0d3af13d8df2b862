// Roofline with wave quantisation.
#include "sim/compute/device_model.h"

#include <algorithm>
#include <cmath>

namespace epochcast::sim {

namespace {

constexpr double kTileEdges[] = {128, 64, 32, 16};  // GEMM output tiles, largest first
constexpr std::int64_t kTilesPerSm = 2;             // resident GEMM tiles per SM
constexpr std::int64_t kSplitKSlice = 128;          // the least K extent a split-K slice covers
constexpr std::int64_t kElementsPerBlock = 1024;    // 256 threads x 4 elements
constexpr std::int64_t kBlocksPerSm = 8;            // 2048 resident threads / 256
// A cap that keeps simulated time inside 64-bit nanoseconds for absurd inputs (a year).
constexpr double kLongestKernel = 3.15e7;

double ceil_div(double a, double b) {
  return std::ceil(a / b);
}

bool is_matrix_op(OpClass op) {
  return op == OpClass::gemm || op == OpClass::conv || op == OpClass::depthwise_conv;
}

}  // namespace

CostOptions cost_options(TrainingPrecision precision) {
  CostOptions options;
  options.parameter_dtype = DType::float32;
  switch (precision) {
    case TrainingPrecision::amp_fp16:
      options.activation_dtype = DType::float16;
      break;
    case TrainingPrecision::amp_bf16:
      options.activation_dtype = DType::bfloat16;
      break;
    case TrainingPrecision::fp32:
    case TrainingPrecision::tf32:
      options.activation_dtype = DType::float32;
      break;
  }
  return options;
}

DeviceModel::DeviceModel(const GpuSpec& gpu, const HardwareProfile& profile,
                         TrainingPrecision precision)
    : gpu_(gpu), profile_(profile), precision_(precision) {
  // A profile straight from its file still has its per-architecture table (scenarios resolve it
  // when they load): the figures for this GPU and precision apply.
  resolve_for_device(profile_, gpu.architecture, efficiency_precision(precision));
  vector_peak_ = *gpu.peak_for(Precision::fp32);
  auto at_least_fp32 = [&](Precision p) {
    std::optional<FlopsPerSecond> rate = gpu.peak_for(p);
    // Without a faster unit for this precision, libraries compute in fp32 (e.g. fp16 GEMMs
    // with fp32 accumulation on Pascal run at the fp32 rate).
    return rate && rate->value() > vector_peak_.value() ? *rate : vector_peak_;
  };
  switch (precision) {
    case TrainingPrecision::fp32:
      matrix_peak_ = vector_peak_;
      break;
    case TrainingPrecision::tf32:
      matrix_peak_ = at_least_fp32(Precision::tf32);
      break;
    case TrainingPrecision::amp_fp16:
      matrix_peak_ = at_least_fp32(Precision::fp16);
      break;
    case TrainingPrecision::amp_bf16:
      matrix_peak_ = at_least_fp32(Precision::bf16);
      break;
  }
}

FlopsPerSecond DeviceModel::peak(OpClass op_class) const {
  return is_matrix_op(op_class) && op_class != OpClass::depthwise_conv ? matrix_peak_
                                                                       : vector_peak_;
}

BytesPerSecond DeviceModel::effective_bandwidth(OpClass op_class) const {
  double efficiency = op_class == OpClass::optimizer ? profile_.gpu.optimizer_memory_or_default()
                                                     : profile_.gpu.memory;
  return BytesPerSecond(gpu_.memory_bandwidth.value() * efficiency);
}

namespace {

struct Work {
  double units;     // tiles (GEMMs) or blocks (everything else)
  double capacity;  // units resident at once
};

// Counted in double: sizes come from user files and batches and must never overflow.
Work parallel_work(const KernelWork& kernel, std::int64_t batch, int sms) {
  if (kernel.has_gemm_shape) {
    // Like cuBLAS/cuDNN heuristics: the largest output tile that still gives every resident
    // slot a tile, and for too few tiles a split of the reduction that fills one wave.
    const GemmShape& g = kernel.gemm;
    double capacity = static_cast<double>(sms * kTilesPerSm);
    double tiles = 0;
    for (double tile : kTileEdges) {
      tiles = scaled(g.batches, batch) * ceil_div(scaled(g.m, batch), tile) *
              ceil_div(scaled(g.n, batch), tile);
      if (tiles >= capacity) break;
    }
    double units = tiles;
    if (tiles < capacity) {
      double split = std::min(ceil_div(scaled(g.k, batch), static_cast<double>(kSplitKSlice)),
                              std::floor(capacity / tiles));
      units = tiles * std::max(split, 1.0);
    }
    return {std::max(units, 1.0), capacity};
  }
  double blocks = ceil_div(std::max(scaled(kernel.parallelism, batch), 1.0),
                           static_cast<double>(kElementsPerBlock));
  return {blocks, static_cast<double>(sms * kBlocksPerSm)};
}

}  // namespace

double DeviceModel::compute_utilisation(const KernelWork& kernel, std::int64_t batch) const {
  Work work = parallel_work(kernel, batch, gpu_.sm_count);
  if (!kernel.has_gemm_shape) return std::min(1.0, work.units / gpu_.sm_count);
  double waves = ceil_div(work.units, work.capacity);
  return work.units / (waves * work.capacity);
}

double DeviceModel::memory_utilisation(const KernelWork& kernel, std::int64_t batch) const {
  Work work = parallel_work(kernel, batch, gpu_.sm_count);
  return std::min(1.0, work.units / gpu_.sm_count);
}

const char* bound_name(KernelBound bound) {
  switch (bound) {
    case KernelBound::compute:
      return "compute";
    case KernelBound::memory:
      return "memory";
    case KernelBound::floor:
      return "launch floor";
  }
  return "";
}

KernelExplanation DeviceModel::explain(const KernelWork& kernel, std::int64_t batch) const {
  KernelExplanation e;
  e.flops = scaled(kernel.flops, batch);
  e.bytes = scaled(kernel.bytes, batch);
  e.efficiency = profile_.gpu.compute[static_cast<std::size_t>(kernel.op_class)];
  e.peak = peak(kernel.op_class);
  e.bandwidth = effective_bandwidth(kernel.op_class);
  e.compute_utilisation = compute_utilisation(kernel, batch);
  e.memory_utilisation = memory_utilisation(kernel, batch);
  e.compute_s = e.flops / (e.peak.value() * e.efficiency) / e.compute_utilisation;
  e.memory_s = e.bytes / e.bandwidth.value() / e.memory_utilisation;
  e.seconds = std::max(e.compute_s, e.memory_s);
  e.bound = e.compute_s >= e.memory_s ? KernelBound::compute : KernelBound::memory;
  if (profile_.gpu.min_kernel.value() > e.seconds) {
    e.seconds = profile_.gpu.min_kernel.value();
    e.bound = KernelBound::floor;
  }
  e.seconds = std::min(e.seconds, kLongestKernel);
  return e;
}

SimTime DeviceModel::kernel_time(const KernelWork& kernel, std::int64_t batch) const {
  return SimTime::from_seconds(Seconds(explain(kernel, batch).seconds));
}

SimTime DeviceModel::host_to_device_time(Bytes bytes, bool pinned) const {
  double efficiency =
      pinned ? profile_.transfer.pcie_efficiency : profile_.transfer.pageable_efficiency;
  double rate = gpu_.pcie_bandwidth().value() * efficiency;
  double seconds =
      static_cast<double>(bytes.value()) / rate + profile_.transfer.copy_latency.value();
  return SimTime::from_seconds(Seconds(seconds));
}

}  // namespace epochcast::sim

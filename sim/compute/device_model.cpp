// Roofline with wave quantisation.
#include "sim/compute/device_model.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/model/kernel_launches.h"
#include "core/spec/architecture_traits.h"
#include "core/yaml/strict_yaml.h"

namespace epochcast::sim {

namespace {

// A cap that keeps simulated time inside 64-bit nanoseconds for absurd inputs (a year).
constexpr double kLongestKernel = 3.15e7;
// Tensor-core kernels read their operands in 16-byte vectors: feature dimensions are padded
// to 8 elements of 16 bits (NVIDIA developer forum thread 57827: on Volta with cuDNN 7.0.5, an
// fp16 NHWC tensor-core convolution fails unless output channels are a multiple of 8) and so
// to 4 elements of tf32.
constexpr std::int64_t kTensorCoreBytes = 16;

bool is_matrix_op(OpClass op) {
  return op == OpClass::gemm || op == OpClass::conv || op == OpClass::depthwise_conv;
}

// A GEMM the framework hands to cuBLAS (nn.Linear, matmul, bmm), not a convolution's or a
// fused attention kernel's.
bool is_cublas(const KernelWork& kernel) {
  return kernel.op_class == OpClass::gemm && !kernel.has_conv_geometry && kernel.gemm.blas;
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
    case TrainingPrecision::fp32_strict:
      options.activation_dtype = DType::float32;
      break;
  }
  return options;
}

DeviceModel::DeviceModel(const GpuSpec& gpu, const HardwareProfile& profile,
                         TrainingPrecision precision, const ConvolutionSettings& convolution)
    : gpu_(gpu),
      profile_(profile),
      precision_(precision),
      convolution_(convolution),
      tile_family_(tile_family(gpu.architecture)),
      launch_target_{gpu.sm_count, architecture_traits(gpu.architecture).max_threads_per_sm,
                     convolution.channels_last} {
  // A profile straight from its file still has its per-architecture table (scenarios resolve it
  // when they load): the figures for this GPU and precision apply.
  resolve_for_device(profile_, gpu, efficiency_precision(precision));
  // Datasheet peaks are rates at the boost clock. A board that its power limit holds below
  // boost under a load on every SM (the catalogue's clocks_mhz.sustained) has that much less
  // compute in all: explain_part caps each kernel's rate there.
  sustained_fraction_ = gpu.sustained_clock_fraction();
  packs_gemm_operands_ = architecture_traits(gpu.architecture).gemm_tiles == GemmTiles::cpu_blas;
  cpu_ = is_cpu_architecture(gpu.architecture);
  vector_peak_ = *gpu.peak_for(Precision::fp32);
  // The fp32 peak is lanes x SMs x 2 x boost clock: 64 lanes on GP100, GV100, TU10x and GA100,
  // 128 on GP10x, GA10x, Ada, Hopper and Blackwell. A GPU described without clocks: 64.
  if (gpu.clocks && gpu.clocks->boost_mhz > 0 && gpu.sm_count > 0) {
    fp32_lanes_per_sm_ = std::max(
        1.0, std::round(vector_peak_.value() / (2.0 * gpu.sm_count * gpu.clocks->boost_mhz * 1e6)));
  }
  auto at_least_fp32 = [&](Precision p) {
    std::optional<FlopsPerSecond> rate = gpu.peak_for(p);
    // Without a faster unit for this precision, libraries compute in fp32 (e.g. fp16 GEMMs
    // with fp32 accumulation on Pascal run at the fp32 rate).
    return rate && rate->value() > vector_peak_.value() ? *rate : vector_peak_;
  };
  switch (precision) {
    case TrainingPrecision::fp32:
      // PyTorch's default float32 math (since 1.12): cuBLAS in fp32
      // (torch.backends.cuda.matmul.allow_tf32 = False), cuDNN convolutions on TF32 tensor cores
      // where the GPU has them (torch.backends.cudnn.allow_tf32 = True); PyTorch docs, "CUDA
      // semantics: TensorFloat-32 (TF32) on Ampere (and later) devices".
      matrix_peak_ = vector_peak_;
      conv_peak_ = at_least_fp32(Precision::tf32);
      break;
    case TrainingPrecision::fp32_strict:
      matrix_peak_ = conv_peak_ = vector_peak_;
      break;
    case TrainingPrecision::tf32:
      matrix_peak_ = conv_peak_ = at_least_fp32(Precision::tf32);
      break;
    case TrainingPrecision::amp_fp16:
      matrix_peak_ = conv_peak_ = at_least_fp32(Precision::fp16);
      break;
    case TrainingPrecision::amp_bf16:
      matrix_peak_ = conv_peak_ = at_least_fp32(Precision::bf16);
      break;
  }
  const CostOptions sizes = cost_options(precision);
  conv_context_.activation_bytes = element_bytes(sizes.activation_dtype);
  conv_context_.weight_bytes = element_bytes(sizes.parameter_dtype);
  conv_context_.tensor_cores = conv_tensor_cores();
  // tf32 reads fp32 operands; the 16-bit precisions read 2-byte ones.
  conv_context_.channel_multiple =
      kTensorCoreBytes /
      (precision == TrainingPrecision::tf32 ? 4 : conv_context_.activation_bytes);
  conv_context_.channels_last = convolution.channels_last;
  conv_context_.onednn = cpu_;
  conv_context_.threads = std::max(1, gpu.sm_count);  // a CPU device's cores: its threads
}

FlopsPerSecond DeviceModel::unit_peak(OpClass op_class) const {
  return op_class == OpClass::conv ? conv_peak_ : matrix_peak_;
}

bool DeviceModel::on_tensor_cores(OpClass op_class) const {
  return is_matrix_op(op_class) && op_class != OpClass::depthwise_conv &&
         unit_peak(op_class).value() > vector_peak_.value();
}

FlopsPerSecond DeviceModel::peak(OpClass op_class) const {
  return is_matrix_op(op_class) && op_class != OpClass::depthwise_conv ? unit_peak(op_class)
                                                                       : vector_peak_;
}

BytesPerSecond DeviceModel::effective_bandwidth(OpClass op_class) const {
  const GpuEfficiency& e = profile_.gpu;
  const double efficiency =
      op_class == OpClass::optimizer
          ? e.optimizer_memory_or_default()
          : e.memory_or_default() * e.bandwidth_relative[static_cast<std::size_t>(op_class)];
  return BytesPerSecond(gpu_.memory_bandwidth.value() * efficiency);
}

TileChoice DeviceModel::tiles(const KernelWork& kernel, std::int64_t batch, bool tensor_cores,
                              bool pad_features) const {
  const GemmShape& g = kernel.gemm;
  // On tensor cores the feature dimensions (those that do not grow with the batch) are padded
  // to the cores' multiple; dimensions made of samples are not. Convolution plans pad their
  // channels before (window x channels must pad per channel), so this changes nothing there.
  auto dimension = [&](const PerBatch<std::int64_t>& d) {
    double size = scaled(d, batch);
    if (!tensor_cores || !pad_features || d.per_sample != 0) return size;
    return static_cast<double>(round_up(d.fixed, conv_context_.channel_multiple));
  };
  const double batches = scaled(g.batches, batch);
  const TileFamily sgemm = sgemm_family(gpu_.architecture, batches > 1, g.layout);
  // Tensor-core and convolution tiles, a CPU's BLAS (the runtime's host device) and Pascal's
  // "nn"/"nt" products (no kernel data; openai-gemm's cuBLAS table is reproduced by the
  // architecture's rule) keep the architecture's family.
  if (!is_cublas(kernel) || tensor_cores || sgemm == tile_family_) {
    TileCosts costs;
    costs.split_reduction = g.split_reduction;
    return choose_tiles(batches, dimension(g.m), dimension(g.n), dimension(g.k), gpu_.sm_count,
                        tile_family_, costs);
  }
  // cuBLAS's CUDA-core SGEMM, as the public kernel data show it on five GPUs
  // (shared/data/kernels, docs/evidence/sgemm-tiles.md; `epochcast kernels` fits the staging
  // figure): one tile at a time per SM fits every GPU's times better than two sharing it, and
  // each step pays for staging its operands where that takes longer than its multiply-adds.
  TileCosts costs;
  costs.tiles_per_sm = 1;
  costs.staging = profile_.gpu.tile_staging_cycles_or_default() * fp32_lanes_per_sm_;
  return choose_tiles(batches, dimension(g.m), dimension(g.n), dimension(g.k), gpu_.sm_count, sgemm,
                      costs);
}

double DeviceModel::compute_utilisation(const KernelWork& kernel, std::int64_t batch) const {
  if (kernel.has_gemm_shape) {
    const TileChoice t = tiles(kernel, batch, on_tensor_cores(kernel.op_class));
    const GemmShape& g = kernel.gemm;
    const double useful =
        scaled(g.batches, batch) * scaled(g.m, batch) * scaled(g.n, batch) * scaled(g.k, batch);
    return std::clamp(useful / t.slot_work, 1e-12, 1.0);
  }
  return memory_utilisation(kernel, batch);
}

LaunchGrid DeviceModel::launch(const KernelWork& kernel, std::int64_t batch) const {
  return launch_grid(kernel.launch, batch, launch_target_);
}

double DeviceModel::memory_utilisation(const KernelWork& kernel, std::int64_t batch) const {
  const double blocks = kernel.has_gemm_shape
                            ? tiles(kernel, batch, on_tensor_cores(kernel.op_class), false).units
                            : launch(kernel, batch).blocks;
  return std::min(1.0, blocks / gpu_.sm_count);
}

const char* bound_name(KernelBound bound) {
  switch (bound) {
    case KernelBound::compute:
      return "compute";
    case KernelBound::memory:
      return "memory";
    case KernelBound::floor:
      return "launch floor";
    case KernelBound::serial:
      return "serial draws";
  }
  return "";
}

KernelExplanation DeviceModel::explain_part(const KernelPart& part, std::int64_t batch) const {
  const KernelWork& kernel = part.work;
  KernelExplanation e;
  e.flops = scaled(kernel.flops, batch);
  e.bytes = scaled(kernel.bytes, batch);
  e.efficiency = profile_.gpu.compute[static_cast<std::size_t>(kernel.op_class)];
  e.peak = part.tensor_cores ? unit_peak(kernel.op_class) : vector_peak_;
  e.bandwidth = effective_bandwidth(kernel.op_class);
  e.memory_utilisation = memory_utilisation(kernel, batch);
  if (kernel.has_gemm_shape) {
    const TileChoice t = tiles(kernel, batch, part.tensor_cores);
    const GemmShape& g = kernel.gemm;
    const double useful =
        scaled(g.batches, batch) * scaled(g.m, batch) * scaled(g.n, batch) * scaled(g.k, batch);
    e.compute_utilisation = std::clamp(useful / t.slot_work, 1e-12, 1.0);
    // What the tiles cost (two FLOPs a multiply-add), plus any work beyond the product itself
    // (a fused bias).
    const double extra = std::max(0.0, e.flops - 2 * useful);
    // A power-limited board's clock falls as more of it switches: its tiles run at boost until
    // the work would need more than the sustained share of the whole GPU.
    const double busy_work = std::max(2 * t.slot_work, 2 * useful / sustained_fraction_);
    e.clock_fraction = 2 * t.slot_work / busy_work;
    e.compute_s = (busy_work + extra) / (e.peak.value() * e.efficiency);
    std::string shape =
        fmt::format("{}x{}x{}", scaled(g.m, batch), scaled(g.n, batch), scaled(g.k, batch));
    const double batches = scaled(g.batches, batch);
    if (batches > 1) shape = fmt::format("{} x {}", batches, shape);
    e.algorithm = fmt::format("{} {}, tiles {}x{}", part.what, shape, t.tile_m, t.tile_n);
    if (t.split_k > 1) e.algorithm += fmt::format(", split-K {}", t.split_k);
  } else {
    e.compute_utilisation = e.memory_utilisation;
    e.clock_fraction = std::min(1.0, sustained_fraction_ / e.compute_utilisation);
    e.compute_s = e.flops / (e.peak.value() * e.efficiency) /
                  std::min(e.compute_utilisation, sustained_fraction_);
    e.algorithm = part.what.empty() ? launch(kernel, batch).rule : part.what;
  }
  e.memory_s = e.bytes / e.bandwidth.value() / e.memory_utilisation;
  e.packed = kernel.has_gemm_shape && packs_gemm_operands_;
  e.seconds = e.packed ? e.compute_s + e.memory_s : std::max(e.compute_s, e.memory_s);
  e.bound = e.compute_s >= e.memory_s ? KernelBound::compute : KernelBound::memory;
  if (e.packed) e.algorithm += ", operands packed first";
  const double draws = cpu_ ? scaled(kernel.bernoulli_draws, batch) : 0;
  if (draws > 0) {
    e.serial_draws_s = draws * profile_.gpu.cpu_bernoulli_ns_or_default() * 1e-9;
    e.seconds += e.serial_draws_s;
    e.algorithm += ", mask drawn serially";
    if (e.serial_draws_s > std::max(e.compute_s, e.memory_s)) e.bound = KernelBound::serial;
  }
  if (profile_.gpu.min_kernel.value() > e.seconds) {
    e.seconds = profile_.gpu.min_kernel.value();
    e.bound = KernelBound::floor;
  }
  e.seconds = std::min(e.seconds, kLongestKernel);
  return e;
}

KernelExplanation DeviceModel::explain(const KernelWork& kernel, std::int64_t batch) const {
  if (!kernel.has_conv_geometry) {
    KernelPart part{kernel, false, kernel.has_gemm_shape ? "GEMM" : ""};
    part.tensor_cores = on_tensor_cores(kernel.op_class);
    if (kernel.op_class == OpClass::depthwise_conv) {
      // A direct kernel over the output (PyTorch's depthwise convolution), not a tiled GEMM:
      // one filter per channel leaves no product to tile.
      // DepthwiseConv2d.cu: forward and input gradient a thread per output in blocks of 1,024
      // (GET_BLOCKS); the weight gradient a block of up to 256 threads per filter weight, each
      // summing over every sample's positions.
      part.work.has_gemm_shape = false;
      const GemmShape& g = kernel.gemm;
      if (g.k.per_sample > 0) {
        const std::int64_t weights = g.batches.fixed * g.m.fixed * g.n.fixed;
        part.work.launch = launch::blocks_of({0, weights}, 1, 256);
        part.what = fmt::format("direct depthwise weight gradient, a block per weight ({})",
                                yaml::readable_integer(weights));
      } else {
        part.work.launch = launch::blocks_of(kernel.launch.units, 1024, 1024);
        part.what = "direct depthwise, blocks of 1,024 outputs";
      }
    }
    return explain_part(part, batch);
  }
  // Each algorithm's kernels run one after another; its time is theirs summed.
  std::vector<KernelExplanation> options;
  ConvContext context = conv_context_;
  context.batch = batch;
  for (const ConvPlan& plan : conv_plans(kernel, context)) {
    KernelExplanation total;
    double longest = -1;
    for (const KernelPart& part : plan.parts) {
      KernelExplanation e = explain_part(part, batch);
      if (total.algorithm.empty()) total.algorithm = e.algorithm;  // the main kernel's shape
      total.bytes += e.bytes;
      total.compute_s += e.compute_s;
      total.memory_s += e.memory_s;
      total.seconds += e.seconds;
      if (e.seconds > longest) {  // the part that takes longest says what bounds the kernel
        longest = e.seconds;
        total.bound = e.bound;
        total.compute_utilisation = e.compute_utilisation;
        total.memory_utilisation = e.memory_utilisation;
        total.efficiency = e.efficiency;
        total.clock_fraction = e.clock_fraction;
        total.peak = e.peak;
        total.bandwidth = e.bandwidth;
        total.packed = e.packed;
      }
    }
    total.flops = scaled(kernel.flops, batch);  // the direct convolution's count, as papers do
    total.seconds = std::min(total.seconds, kLongestKernel);
    total.parts = static_cast<int>(plan.parts.size());
    if (plan.algorithm != ConvAlgorithm::implicit_gemm) {
      total.algorithm =
          fmt::format("{} ({} kernels)", conv_algorithm_name(plan.algorithm), plan.parts.size());
    } else if (plan.parts.size() > 1) {
      total.algorithm += " + NCHW<->NHWC transposes";
    }
    options.push_back(total);
    // Without cudnn.benchmark nothing is timed: the heuristic's implicit GEMM runs.
    if (!convolution_.cudnn_benchmark) break;
  }
  // cudnn.benchmark keeps the fastest (the first on a tie: implicit GEMM).
  return *std::min_element(
      options.begin(), options.end(),
      [](const KernelExplanation& a, const KernelExplanation& b) { return a.seconds < b.seconds; });
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

// A hardware profile: the simulator's free parameters — how close each kind of GPU kernel gets
// to the datasheet peaks, and what the host pays per operation. The bundled default profile
// gives sourced estimates; calibration (epochcast calibrate) writes fitted ones.
#pragma once

#include <algorithm>
#include <array>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/model/analysis.h"
#include "core/units.h"

namespace epochcast {

struct GpuSpec;

// Precisions a profile can give efficiencies for: what the matrix units run at under each
// training precision (amp_fp16 -> fp16, amp_bf16 -> bf16).
inline constexpr std::string_view kEfficiencyPrecisions[] = {"fp32", "tf32", "fp16", "bf16"};

// Op classes whose memory-bound kernels stream differently from a copy: read-mostly reductions,
// normalisations with their statistics passes, pooling windows, gathered embedding rows. Each
// has a bandwidth relative to memory_efficiency; every other class streams at memory_efficiency
// (element-wise kernels are the streaming reference; GEMM and convolution operands too).
inline constexpr OpClass kBandwidthKinds[] = {OpClass::normalization, OpClass::pooling,
                                              OpClass::reduction, OpClass::embedding};
bool has_own_bandwidth(OpClass op_class);
// Bounds of a relative bandwidth: a thousandth of a copy's (a CPU's small reductions) to four
// times it (L2-resident data).
inline constexpr double kBandwidthRelativeLow = 1e-3, kBandwidthRelativeHigh = 4;

// What one GPU architecture reaches where it differs from the profile's defaults: per precision,
// the op classes given; its memory efficiency; and its kinds' relative bandwidths.
struct ArchitectureEfficiency {
  // precision ("fp32", ...) -> op class -> fraction of that precision's peak
  std::map<std::string, std::map<std::size_t, double>> compute;
  std::optional<double> memory;
  std::map<std::size_t, double> bandwidth_relative;  // op class -> relative bandwidth
};

struct GpuEfficiency {
  // Fraction of the precision's peak FLOP/s each op class reaches when it fills the GPU.
  std::array<double, kOpClassCount> compute{};
  // Per architecture ("pascal", "volta", ...): figures that replace the ones above for that
  // architecture (and precision). resolve_for_device() folds them in and empties this.
  std::map<std::string, ArchitectureEfficiency> by_architecture;
  // Fraction of datasheet memory bandwidth reached by streaming kernels. Unset, the board's
  // own (GpuSpec::streaming_fraction, a public microbenchmark's), or kDefaultMemory for a GPU
  // described without one: resolve_for_device() fills it in.
  std::optional<double> memory;
  static constexpr double kDefaultMemory = 0.8;
  double memory_or_default() const { return memory.value_or(kDefaultMemory); }
  // Per op class (kBandwidthKinds only; the others stay 1): the bandwidth its memory-bound
  // kernels reach relative to `memory`.
  std::array<double, kOpClassCount> bandwidth_relative = [] {
    std::array<double, kOpClassCount> ones{};
    ones.fill(1.0);
    return ones;
  }();
  // The same for the optimizer's and zero_grad's kernels, which stream whole parameter tensors
  // rather than a layer's activations; unset, they reach `memory`. The two agree on GPUs; on
  // CPUs long streams run several times faster than a small batch's layer kernels, so
  // calibration fits this one apart, from the step time the profiled layers leave unexplained.
  std::optional<double> optimizer_memory;
  double optimizer_memory_or_default() const {
    return optimizer_memory.value_or(memory_or_default());
  }
  Seconds min_kernel;  // shortest time a kernel occupies the GPU
  // How much GPUs of one model differ in speed, as the coefficient of variation across GPUs:
  // a synchronous step of N GPUs waits for the slowest. Unset, kDefaultSpeedSpread.
  std::optional<double> speed_spread;
  static constexpr double kDefaultSpeedSpread = 0.01;
  double speed_spread_or_default() const { return speed_spread.value_or(kDefaultSpeedSpread); }
  // What a cuBLAS CUDA-core GEMM tile's reduction step costs beside its multiply-adds
  // (sim/compute/gemm_tiles.h): SM cycles to stage each of its tm + tn operand elements (the
  // SM's load and shared-memory path, as wide on a 128-lane SM as on a 64-lane one). Staging
  // overlaps the multiply-adds; a step takes the longer of the two. Unset, 0.
  std::optional<double> tile_staging_cycles;
  // At more than a cycle per element even a 64-lane SM's 128x128 tiles would wait on staging,
  // which their large-GEMM figures (a V100's 0.92, an A100's 0.97 of peak) rule out.
  static constexpr double kTileStagingHigh = 1;
  double tile_staging_cycles_or_default() const { return tile_staging_cycles.value_or(0); }
  // A CPU's time per element of a Bernoulli mask (dropout's), nanoseconds: PyTorch's CPU
  // bernoulli_ is a serial loop on one core, two mt19937 numbers an element
  // (aten/src/ATen/native/cpu/DistributionTemplates.h, bernoulli_kernel; PyTorch 1.13 took
  // MKL's parallel generator on Intel CPUs only, later releases on none: pytorch issue 132395),
  // which no vector unit or second core speeds up. GPUs draw inside the kernel (Philox), in its
  // FLOPs. Unset, kDefaultCpuBernoulliNs: default.yaml's figure, with its source.
  std::optional<double> cpu_bernoulli_ns;
  static constexpr double kDefaultCpuBernoulliNs = 13.5;
  // Two mt19937 numbers take a few cycles at least (0.5 ns is 2 cycles at 4 GHz); a microsecond
  // an element is no generator's, but something else in the layer.
  static constexpr double kCpuBernoulliNsLow = 0.5, kCpuBernoulliNsHigh = 1000;
  double cpu_bernoulli_ns_or_default() const {
    return cpu_bernoulli_ns.value_or(kDefaultCpuBernoulliNs);
  }
};

// CPU-side costs of an eager framework, per operation, on the profile's host.
struct HostCosts {
  Seconds forward_op;     // a forward op: Python module call, dispatch, kernel launch
  Seconds backward_op;    // an autograd-engine op (C++ only) and its launch
  Seconds optimizer_op;   // one optimizer/zero_grad kernel launch from Python
  Seconds step_overhead;  // per training step: loop, DataLoader next(), logging
  Seconds sync;           // a device-to-host read of a scalar (loss.item()) once the GPU is done
  Seconds batch_fetch;    // handing a prepared batch from a loader worker to the main thread
};

struct DeviceMemoryCosts {
  Bytes context;    // CUDA context and library handles: device memory the allocator never sees
  Bytes workspace;  // cuDNN/cuBLAS workspaces held across a step
  double allocator_overhead =
      0;  // fraction added by the caching allocator's rounding/fragmentation
};

struct TransferCosts {
  double pcie_efficiency = 0.8;      // pinned host-to-device copies, fraction of the PCIe link
  double pageable_efficiency = 0.4;  // copies from pageable memory, staged by the driver
  Seconds copy_latency;              // fixed cost of one copy
};

// Interconnect links as applications see them, per kind of link (LinkKind order: PCIe through a
// switch, socket, NVLink, NVSwitch, network, PCIe into a CPU's host bridge, and NCCL's
// shared-memory transport staging through host memory, NVLink SHARP through an NVSwitch, and
// SHARP's reduction in the network's switches).
inline constexpr std::string_view kLinkKindKeys[] = {
    "pcie", "socket", "nvlink", "nvswitch", "network", "host_bridge", "shm", "nvls", "sharp"};
inline constexpr std::size_t kLinkKinds = std::size(kLinkKindKeys);
struct LinkCosts {
  // Fraction of a link's datasheet bandwidth that transfers reach.
  std::array<double, kLinkKinds> efficiency{};
  // Software latency of one step of a collective whose slowest hop is this kind of link (NCCL's
  // per-step latency), on top of the links' own latencies.
  std::array<Seconds, kLinkKinds> step_latency{};
  Seconds collective_launch;  // host cost of launching one collective (NCCL call, stream sync)
  // What one host thread takes to launch one GPU's NCCL kernel when it does nothing else (a CUDA
  // kernel launch with NCCL's enqueue around it): nccl-tests' -g N thread launches N of them an
  // iteration in turn, which set its small sizes' time. Unset, kDefaultNcclLaunchUs:
  // default.yaml's figure, with its source.
  std::optional<Seconds> nccl_launch;
  static constexpr double kDefaultNcclLaunchUs = 4;
  Seconds nccl_launch_or_default() const {
    return nccl_launch.value_or(microseconds(kDefaultNcclLaunchUs));
  }

  // How this machine's GPUs run NCCL's LL and LL128 protocols, where a user's NCCL and GPUs
  // differ from what NCCL's tuner assumes (an older NCCL, another generation). Each unset figure
  // is the tuner's (below). NCCL picks a collective's algorithm and protocol by its tuner's
  // figures whatever the GPUs do, so these move a collective's time, never its choice.
  // - ll_step_latency: LL's latency a ring step whose slowest link is of the kind (NCCL's hwLat).
  // - ll_rate / ll128_rate: the protocol's data rates (its share of the links, NCCL's llMaxBw or
  //   LL128's channel rate) relative to the tuner's.
  std::array<std::optional<Seconds>, kLinkKinds> ll_step_latency{};
  std::optional<double> ll_rate, ll128_rate;
  // NCCL's LL ring hwLat by link kind (src/graph/tuning.cc, NCCL 2.19-2.21: NVLink 0.6, PCI 1.0,
  // network 2.7 us; every intra-node graph without NVLink, shared memory included, costs as PCI).
  static constexpr double kNcclLlStepLatencyUs[kLinkKinds] = {1.0, 1.0, 0.6, 0.6, 2.7,
                                                              1.0, 1.0, 0.6, 2.7};
  // The ranges a machine's figures can physically take. An LL step inside a node from half to
  // twice NCCL's hwLat for its kind of link: public 8-GPU tables put NVLink's at 0.6 (DGX H100,
  // NCCL 2.19+) to 0.76 us (ABCI's A100s, NCCL 2.8.4; docs/evidence/nccl-all-reduce-sizes.md),
  // and a floor twice NCCL's is something else's (a host thread's launches). Over the network
  // (and SHARP) from half NCCL's to a millisecond, as Simple's: a step there is the transport's,
  // 2-3 us on InfiniBand, tens of microseconds over TCP (A3 Mega's GPUDirect-TCPX takes 123 us
  // for 8 B over two nodes). The rates from a twentieth of the tuner's (a stack that barely runs
  // the protocol) to twice it (LL) or to all of the links (LL128, which the tuner gives 0.92).
  static constexpr double kLlStepLatencyLowShare = 0.5, kLlStepLatencyHighShare = 2;
  static constexpr double kLlNetworkStepLatencyHighUs = 1000;
  static constexpr double ll_step_latency_low_us(std::size_t kind) {
    return kNcclLlStepLatencyUs[kind] * kLlStepLatencyLowShare;
  }
  static constexpr double ll_step_latency_high_us(std::size_t kind) {
    const bool network = kLinkKindKeys[kind] == "network" || kLinkKindKeys[kind] == "sharp";
    return network ? kLlNetworkStepLatencyHighUs
                   : kNcclLlStepLatencyUs[kind] * kLlStepLatencyHighShare;
  }
  static constexpr double kRateRelativeLow = 0.05, kLlRateHigh = 2, kLl128RateHigh = 1 / 0.92;
  Seconds ll_step_latency_or_default(std::size_t kind) const {
    return ll_step_latency[kind].value_or(microseconds(kNcclLlStepLatencyUs[kind]));
  }
  double ll_rate_or_default() const { return ll_rate.value_or(1.0); }
  double ll128_rate_or_default() const { return ll128_rate.value_or(1.0); }
  // Whether any protocol figure is the machine's own.
  bool own_protocol_figures() const {
    return ll_rate || ll128_rate ||
           std::any_of(ll_step_latency.begin(), ll_step_latency.end(),
                       [](const auto& l) { return l.has_value(); });
  }
};

// Where a calibrated profile comes from (empty for hand-made ones).
struct CalibrationOrigin {
  std::string device;  // the catalogue device measured, e.g. "NVIDIA H100 80GB HBM3"
  std::string date;    // the newest measurement's start, UTC, ISO 8601
  std::vector<std::string> measurements;  // the measurement files it was fitted to
};

// How uncertain calibration left its fitted figures: the covariance of their natural logarithms
// (so a standard deviation of 0.05 is about 5%), from the fit's Jacobian at the solution.
// `predict` turns it into an interval per point.
struct ProfileUncertainty {
  std::vector<std::string> figures;  // keys of profile_figures.h
  std::vector<std::vector<double>> log_covariance;
  // The error no fitted figure accounts for: the spread (standard deviation of the natural log
  // of predicted over measured) with which refits without each point predicted it. Added to the
  // figures' share, so that an interval covers what the model gets wrong, not only what the
  // calibration left uncertain.
  double model_log_sd = 0;
  bool empty() const { return figures.empty(); }
};

struct HardwareProfile {
  std::string name;
  std::string source_file;
  CalibrationOrigin calibration;
  // The measured CPU time per sample of the input pipeline the profile was calibrated with;
  // when present it replaces the scenario's loader.sample_cpu_us (apply_profile). Calibrated on
  // data sets of several sample sizes, it is a cost per sample plus one per byte of the sample
  // as the loader makes it (sample_cpu_per_byte, seconds a byte), so that it carries over to a
  // data set of another size.
  std::optional<Seconds> sample_cpu;
  std::optional<double> sample_cpu_per_byte;
  // The same pipeline's CPU time a batch beyond its samples (collating them); when present it
  // replaces the scenario's loader.batch_cpu_us. Calibrated from the loaders' clocks at several
  // batch sizes, where their cost per sample falls as the batch grows.
  std::optional<Seconds> batch_cpu;
  GpuEfficiency gpu;
  HostCosts host;
  DeviceMemoryCosts memory;
  TransferCosts transfer;
  LinkCosts links;
  ProfileUncertainty uncertainty;
  std::map<std::string, std::string> sources;  // figure key -> where it comes from
  // `host` is what a Python training loop pays. A profile calibrated on epochcast-run (a C++
  // LibTorch loop) also keeps that loop's own costs here, for scenarios whose training.loop is
  // libtorch (the runtime's measurements are); without them such scenarios use `host`.
  std::optional<HostCosts> host_libtorch;
};

// Folds the profile's figures for the GPU's architecture at `precision` ("fp32", "tf32",
// "fp16", "bf16") into its defaults and drops the per-architecture table, so that every reader
// (the device model, calibration, its output) sees the figures that apply to this device; a
// streaming efficiency that neither gives becomes the board's (GpuSpec::streaming_fraction).
// The sources then name the architecture's and the board's. Idempotent.
void resolve_for_device(HardwareProfile& profile, const GpuSpec& gpu, std::string_view precision);

HardwareProfile load_profile(const std::filesystem::path& file);
// The profile as a YAML file that load_profile() reads back.
std::string profile_yaml(const HardwareProfile& profile, const std::string& description);
HardwareProfile load_profile_from_string(const std::string& text, const std::string& name);

}  // namespace epochcast

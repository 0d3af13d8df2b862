// The key table of profile_figures.h.
#include "core/spec/profile_figures.h"

#include <stdexcept>
#include <type_traits>

#include <fmt/format.h>

namespace epochcast {

namespace {

constexpr double kFractionLow = 1e-4, kFractionHigh = 1;
constexpr double kMicrosLow = 1e-3, kMicrosHigh = 1e9;

std::vector<ProfileFigure> make_figures() {
  std::vector<ProfileFigure> figures;
  auto fraction = [&](std::string key) {
    figures.push_back({std::move(key), FigureKind::fraction, kFractionLow, kFractionHigh});
  };
  auto micros = [&](std::string key) {
    figures.push_back({std::move(key), FigureKind::microseconds, kMicrosLow, kMicrosHigh});
  };
  for (std::string_view op_class : kOpClassNames)
    fraction(fmt::format("gpu.efficiency.{}", op_class));
  fraction("gpu.memory_efficiency");
  for (OpClass kind : kBandwidthKinds) {
    figures.push_back({fmt::format("gpu.bandwidth_relative.{}", name_of(kind)), FigureKind::ratio,
                       kBandwidthRelativeLow, kBandwidthRelativeHigh});
  }
  fraction("gpu.optimizer_memory_efficiency");
  fraction("gpu.speed_spread");
  micros("gpu.min_kernel_us");
  figures.push_back(
      {"gpu.tile_staging_cycles", FigureKind::tile_cost, 0, GpuEfficiency::kTileStagingHigh, true});
  figures.push_back({"gpu.cpu_bernoulli_ns", FigureKind::nanoseconds,
                     GpuEfficiency::kCpuBernoulliNsLow, GpuEfficiency::kCpuBernoulliNsHigh, true});
  for (const char* key : {"forward_op_us", "backward_op_us", "optimizer_op_us", "step_overhead_us",
                          "sync_us", "batch_fetch_us"})
    micros(fmt::format("host.{}", key));
  micros("input.sample_cpu_us");
  // Nanoseconds a byte of the loader's sample, beside the cost per sample (same bounds: a time
  // per unit of work).
  micros("input.sample_cpu_ns_per_byte");
  // Set from the loaders' clocks: in epoch times a batch's cost is the step's, which the loop's
  // overhead a step already is.
  figures.push_back({"input.batch_cpu_us", FigureKind::microseconds, 0, kMicrosHigh, true});
  fraction("transfer.pcie_efficiency");
  fraction("transfer.pageable_efficiency");
  micros("transfer.copy_latency_us");
  for (std::string_view kind : kLinkKindKeys)
    fraction(fmt::format("links.efficiency.{}", kind));
  for (std::string_view kind : kLinkKindKeys)
    micros(fmt::format("links.step_latency_us.{}", kind));
  micros("links.collective_launch_us");
  // Only collective benchmarks (nccl-tests' -g runs) time it: training steps never show it.
  figures.push_back(
      {"links.nccl_launch_us", FigureKind::microseconds, kMicrosLow, kMicrosHigh, true});
  // How the GPUs run NCCL's LL and LL128: only collectives timed size by size show them.
  for (std::size_t i = 0; i < kLinkKinds; ++i) {
    figures.push_back({fmt::format("links.ll_step_latency_us.{}", kLinkKindKeys[i]),
                       FigureKind::microseconds, LinkCosts::ll_step_latency_low_us(i),
                       LinkCosts::ll_step_latency_high_us(i), true});
  }
  figures.push_back({"links.ll_rate_relative", FigureKind::ratio, LinkCosts::kRateRelativeLow,
                     LinkCosts::kLlRateHigh, true});
  figures.push_back({"links.ll128_rate_relative", FigureKind::ratio, LinkCosts::kRateRelativeLow,
                     LinkCosts::kLl128RateHigh, true});
  return figures;
}

// The storage behind a key: a fraction, or seconds shown as microseconds. `Profile` is
// HardwareProfile or const HardwareProfile, so reads need no copy.
template <class Profile>
struct Slot {
  static constexpr bool kConst = std::is_const_v<Profile>;
  std::conditional_t<kConst, const double, double>* fraction = nullptr;
  std::conditional_t<kConst, const Seconds, Seconds>* time = nullptr;
};

template <class Profile>
Slot<Profile> slot(Profile& p, std::string_view key) {
  for (std::size_t i = 0; i < kOpClassCount; ++i) {
    if (key == fmt::format("gpu.efficiency.{}", kOpClassNames[i])) return {&p.gpu.compute[i]};
  }
  for (OpClass kind : kBandwidthKinds) {
    if (key == fmt::format("gpu.bandwidth_relative.{}", name_of(kind)))
      return {&p.gpu.bandwidth_relative[static_cast<std::size_t>(kind)]};
  }
  for (std::size_t i = 0; i < kLinkKinds; ++i) {
    if (key == fmt::format("links.efficiency.{}", kLinkKindKeys[i]))
      return {&p.links.efficiency[i]};
    if (key == fmt::format("links.step_latency_us.{}", kLinkKindKeys[i]))
      return {nullptr, &p.links.step_latency[i]};
  }
  if (key == "gpu.min_kernel_us") return {nullptr, &p.gpu.min_kernel};
  if (key == "host.forward_op_us") return {nullptr, &p.host.forward_op};
  if (key == "host.backward_op_us") return {nullptr, &p.host.backward_op};
  if (key == "host.optimizer_op_us") return {nullptr, &p.host.optimizer_op};
  if (key == "host.step_overhead_us") return {nullptr, &p.host.step_overhead};
  if (key == "host.sync_us") return {nullptr, &p.host.sync};
  if (key == "host.batch_fetch_us") return {nullptr, &p.host.batch_fetch};
  if (key == "transfer.pcie_efficiency") return {&p.transfer.pcie_efficiency};
  if (key == "transfer.pageable_efficiency") return {&p.transfer.pageable_efficiency};
  if (key == "transfer.copy_latency_us") return {nullptr, &p.transfer.copy_latency};
  if (key == "links.collective_launch_us") return {nullptr, &p.links.collective_launch};
  throw std::invalid_argument(fmt::format("no profile figure '{}'", key));
}

}  // namespace

std::optional<PhysicalRange> gpu_physical_range(std::string_view key) {
  // GEMMs reach 0.44-0.97 of their precision's peak in the public kernel measurements
  // (shared/data/kernels, five GPUs, fp32/TF32/fp16: the default profile's
  // efficiency_by_architecture), cuDNN's fp32 convolutions 0.55-0.85 at the tiles they launch
  // (docs/evidence/cudnn-conv-kernels.md) and the H200's bf16 convolutions 0.23 in its per-layer
  // campaign: a product class below a fifth of its peak is time the products do not take.
  if (key == "gpu.efficiency.gemm" || key == "gpu.efficiency.conv")
    return PhysicalRange{0.2, 1,
                         "matrix products reach 0.23-0.97 of their peak in kernel "
                         "measurements"};
  // Every other class streams memory on a GPU; a fit that makes one compute-bound below a
  // twentieth of the vector peak is absorbing time its bytes and FLOPs do not explain.
  if (key.starts_with("gpu.efficiency."))
    return PhysicalRange{0.05, 1,
                         "a streaming kernel class bound by its arithmetic at under a "
                         "twentieth of the vector peak"};
  // Public BabelStream-type figures put every board in the catalogue at 0.75-0.94 of its
  // datasheet bandwidth (docs/evidence/streaming-bandwidth.md).
  if (key == "gpu.memory_efficiency")
    return PhysicalRange{0.5, 1, "boards stream at 0.75-0.94 of their datasheet bandwidth"};
  // The optimizer's many small per-tensor kernels may stream well below a copy's rate.
  if (key == "gpu.optimizer_memory_efficiency")
    return PhysicalRange{0.2, 1,
                         "an optimizer's per-tensor kernels stream at a fifth of the "
                         "datasheet bandwidth or more"};
  // LayerNorm and softmax stream at 1.02-1.09 of the element-wise rate on five GPUs (the kernel
  // measurements); a kind at under half or over twice it is not streaming as costed.
  if (key.starts_with("gpu.bandwidth_relative."))
    return PhysicalRange{0.5, 2,
                         "row-wise and reduction kernels stream at 1.02-1.09 of the "
                         "element-wise rate in kernel measurements"};
  // A kernel launch and its shortest run take a few microseconds on every GPU generation.
  if (key == "gpu.min_kernel_us")
    return PhysicalRange{1, 20, "a GPU kernel's launch-to-finish floor is a few microseconds"};
  return std::nullopt;
}

const std::vector<ProfileFigure>& profile_figures() {
  static const std::vector<ProfileFigure> figures = make_figures();
  return figures;
}

const ProfileFigure* find_profile_figure(std::string_view key) {
  for (const ProfileFigure& f : profile_figures()) {
    if (f.key == key) return &f;
  }
  return nullptr;
}

std::optional<double> profile_figure_value(const HardwareProfile& profile, std::string_view key) {
  if (key == "input.sample_cpu_us") {
    if (!profile.sample_cpu) return std::nullopt;
    return profile.sample_cpu->value() * 1e6;
  }
  if (key == "input.sample_cpu_ns_per_byte") {
    if (!profile.sample_cpu || !profile.sample_cpu_per_byte) return std::nullopt;
    return *profile.sample_cpu_per_byte * 1e9;
  }
  if (key == "input.batch_cpu_us") {
    if (!profile.sample_cpu || !profile.batch_cpu) return std::nullopt;
    return profile.batch_cpu->value() * 1e6;
  }
  if (key == "gpu.memory_efficiency") return profile.gpu.memory_or_default();
  if (key == "gpu.optimizer_memory_efficiency") return profile.gpu.optimizer_memory_or_default();
  if (key == "gpu.speed_spread") return profile.gpu.speed_spread_or_default();
  if (key == "gpu.tile_staging_cycles") return profile.gpu.tile_staging_cycles_or_default();
  if (key == "gpu.cpu_bernoulli_ns") return profile.gpu.cpu_bernoulli_ns_or_default();
  if (key == "links.nccl_launch_us") return profile.links.nccl_launch_or_default().value() * 1e6;
  for (std::size_t i = 0; i < kLinkKinds; ++i) {
    if (key == fmt::format("links.ll_step_latency_us.{}", kLinkKindKeys[i]))
      return profile.links.ll_step_latency_or_default(i).value() * 1e6;
  }
  if (key == "links.ll_rate_relative") return profile.links.ll_rate_or_default();
  if (key == "links.ll128_rate_relative") return profile.links.ll128_rate_or_default();
  Slot<const HardwareProfile> s = slot(profile, key);
  return s.fraction ? *s.fraction : s.time->value() * 1e6;
}

void set_profile_figure(HardwareProfile& profile, std::string_view key, double value) {
  if (key == "input.sample_cpu_us") {
    profile.sample_cpu = Seconds(value * 1e-6);
    return;
  }
  if (key == "input.sample_cpu_ns_per_byte") {
    // Only beside a cost per sample (which apply_profile needs to use either): never invented.
    profile.sample_cpu_per_byte = value * 1e-9;
    return;
  }
  if (key == "input.batch_cpu_us") {
    profile.batch_cpu = Seconds(value * 1e-6);
    return;
  }
  if (key == "gpu.memory_efficiency") {
    profile.gpu.memory = value;
    return;
  }
  if (key == "gpu.optimizer_memory_efficiency") {
    profile.gpu.optimizer_memory = value;
    return;
  }
  if (key == "gpu.speed_spread") {
    profile.gpu.speed_spread = value;
    return;
  }
  if (key == "gpu.tile_staging_cycles") {
    profile.gpu.tile_staging_cycles = value;
    return;
  }
  if (key == "gpu.cpu_bernoulli_ns") {
    profile.gpu.cpu_bernoulli_ns = value;
    return;
  }
  if (key == "links.nccl_launch_us") {
    profile.links.nccl_launch = microseconds(value);
    return;
  }
  for (std::size_t i = 0; i < kLinkKinds; ++i) {
    if (key == fmt::format("links.ll_step_latency_us.{}", kLinkKindKeys[i])) {
      profile.links.ll_step_latency[i] = microseconds(value);
      return;
    }
  }
  if (key == "links.ll_rate_relative") {
    profile.links.ll_rate = value;
    return;
  }
  if (key == "links.ll128_rate_relative") {
    profile.links.ll128_rate = value;
    return;
  }
  Slot<HardwareProfile> s = slot(profile, key);
  if (s.fraction) {
    *s.fraction = value;
  } else {
    *s.time = Seconds(value * 1e-6);
  }
}

void copy_profile_figure(HardwareProfile& to, const HardwareProfile& from, std::string_view key) {
  // The optional figures, whose absence means their default.
  if (key == "input.sample_cpu_us") {
    to.sample_cpu = from.sample_cpu;
  } else if (key == "input.sample_cpu_ns_per_byte") {
    to.sample_cpu_per_byte = from.sample_cpu_per_byte;
  } else if (key == "input.batch_cpu_us") {
    to.batch_cpu = from.batch_cpu;
  } else if (key == "gpu.memory_efficiency") {
    to.gpu.memory = from.gpu.memory;
  } else if (key == "gpu.optimizer_memory_efficiency") {
    to.gpu.optimizer_memory = from.gpu.optimizer_memory;
  } else if (key == "gpu.speed_spread") {
    to.gpu.speed_spread = from.gpu.speed_spread;
  } else if (key == "gpu.tile_staging_cycles") {
    to.gpu.tile_staging_cycles = from.gpu.tile_staging_cycles;
  } else if (key == "gpu.cpu_bernoulli_ns") {
    to.gpu.cpu_bernoulli_ns = from.gpu.cpu_bernoulli_ns;
  } else if (key == "links.nccl_launch_us") {
    to.links.nccl_launch = from.links.nccl_launch;
  } else if (key == "links.ll_rate_relative") {
    to.links.ll_rate = from.links.ll_rate;
  } else if (key == "links.ll128_rate_relative") {
    to.links.ll128_rate = from.links.ll128_rate;
  } else if (key.starts_with("links.ll_step_latency_us.")) {
    for (std::size_t i = 0; i < kLinkKinds; ++i) {
      if (key == fmt::format("links.ll_step_latency_us.{}", kLinkKindKeys[i]))
        to.links.ll_step_latency[i] = from.links.ll_step_latency[i];
    }
  } else {
    set_profile_figure(to, key, *profile_figure_value(from, key));
  }
}

}  // namespace epochcast

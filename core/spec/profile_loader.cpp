// Reads hardware profiles (kind: profile).

#include <algorithm>
#include <cmath>
#include <vector>

#include <Eigen/Dense>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/spec/file_kind.h"
#include "core/spec/profile_figures.h"
#include "core/spec/profile_spec.h"
#include "core/spec/scenario_spec.h"
#include "core/yaml/strict_yaml.h"

namespace epochcast {

namespace {

// Every figure of a profile, as "section.key"; each needs a source.
constexpr std::string_view kFigures[] = {"gpu.efficiency",
                                         "gpu.min_kernel_us",
                                         "host.forward_op_us",
                                         "host.backward_op_us",
                                         "host.optimizer_op_us",
                                         "host.step_overhead_us",
                                         "host.sync_us",
                                         "host.batch_fetch_us",
                                         "memory.context_mib",
                                         "memory.workspace_mib",
                                         "memory.allocator_overhead",
                                         "transfer.pcie_efficiency",
                                         "transfer.pageable_efficiency",
                                         "transfer.copy_latency_us",
                                         "links.efficiency",
                                         "links.step_latency_us",
                                         "links.collective_launch_us"};
// Figures a profile may leave out; given, they need a source too.
constexpr std::string_view kOptionalFigures[] = {
    "gpu.memory_efficiency",     "gpu.optimizer_memory_efficiency",
    "gpu.bandwidth_relative",    "gpu.efficiency_by_architecture",
    "gpu.speed_spread",          "gpu.tile_staging_cycles",
    "gpu.cpu_bernoulli_ns",      "links.nccl_launch_us",
    "links.ll_step_latency_us",  "links.ll_rate_relative",
    "links.ll128_rate_relative", "host_libtorch"};

bool any_bandwidth_relative(const GpuEfficiency& gpu) {
  return std::any_of(gpu.bandwidth_relative.begin(), gpu.bandwidth_relative.end(),
                     [](double r) { return r != 1.0; });
}

// The figures of `p` that need a source: every required one, and the optional ones it gives.
std::vector<std::string_view> sourced_figures(const HardwareProfile& p) {
  std::vector<std::string_view> figures(std::begin(kFigures), std::end(kFigures));
  // Beside gpu.efficiency, where a profile's own figure has always been listed.
  if (p.gpu.memory) figures.insert(figures.begin() + 1, "gpu.memory_efficiency");
  if (p.gpu.optimizer_memory) figures.push_back("gpu.optimizer_memory_efficiency");
  if (p.gpu.speed_spread) figures.push_back("gpu.speed_spread");
  if (p.gpu.tile_staging_cycles) figures.push_back("gpu.tile_staging_cycles");
  if (p.gpu.cpu_bernoulli_ns) figures.push_back("gpu.cpu_bernoulli_ns");
  if (p.links.nccl_launch) figures.push_back("links.nccl_launch_us");
  if (std::any_of(p.links.ll_step_latency.begin(), p.links.ll_step_latency.end(),
                  [](const auto& l) { return l.has_value(); }))
    figures.push_back("links.ll_step_latency_us");
  if (p.links.ll_rate) figures.push_back("links.ll_rate_relative");
  if (p.links.ll128_rate) figures.push_back("links.ll128_rate_relative");
  if (any_bandwidth_relative(p.gpu) || p.sources.count("gpu.bandwidth_relative"))
    figures.push_back("gpu.bandwidth_relative");
  if (!p.gpu.by_architecture.empty()) figures.push_back("gpu.efficiency_by_architecture");
  if (p.host_libtorch) figures.push_back("host_libtorch");
  return figures;
}

// Efficiencies: a millionth of the peak is already a machine that does nothing; 0 would divide.
double fraction(const yaml::Node& node) {
  return node.as_number_in(1e-6, 1);
}

// Host and link costs: up to a thousand seconds per operation.
Seconds micros(const yaml::Node& node) {
  return microseconds(node.as_number_in(0, 1e9));
}

// Memory reserves: up to a pebibyte.
Bytes mebibytes(const yaml::Node& node) {
  return Bytes(static_cast<std::int64_t>(node.as_number_in(0, 1e9) * static_cast<double>(kMiB)));
}

// The covariance calibrate wrote: figures it fitted, and a symmetric matrix over them.
ProfileUncertainty read_uncertainty(const yaml::Node& node) {
  yaml::MapReader reader(node, {"figures", "log_covariance", "model_log_sd"});
  ProfileUncertainty u;
  if (auto model = reader.optional("model_log_sd")) u.model_log_sd = model->as_number_in(0, 5);
  std::vector<std::string_view> keys;
  for (const ProfileFigure& f : profile_figures())
    keys.push_back(f.key);
  for (const yaml::Node& item : reader.required("figures").items(1)) {
    std::string key = item.as_string();
    if (!find_profile_figure(key))
      item.fail(fmt::format("'{}' is not a figure of a profile{}", key, did_you_mean(key, keys)));
    if (std::find(u.figures.begin(), u.figures.end(), key) != u.figures.end())
      item.fail(fmt::format("'{}' is named twice", key));
    u.figures.push_back(key);
  }
  const std::size_t n = u.figures.size();
  yaml::Node rows_node = reader.required("log_covariance");
  std::vector<yaml::Node> rows = rows_node.items();
  if (rows.size() != n)
    rows_node.fail(fmt::format("expected {} rows, one per figure, got {}", n, rows.size()));
  std::vector<std::vector<yaml::Node>> cells;
  for (const yaml::Node& row : rows) {
    cells.push_back(row.items());
    if (cells.back().size() != n)
      row.fail(fmt::format("expected {} numbers, one per figure, got {}", n, cells.back().size()));
    std::vector<double> values;
    for (std::size_t j = 0; j < n; ++j)
      values.push_back(cells.back()[j].as_number_in(cells.size() - 1 == j ? 0 : -100, 100));
    u.log_covariance.push_back(std::move(values));
  }
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      const double a = u.log_covariance[i][j], b = u.log_covariance[j][i];
      if (std::abs(a - b) > 1e-9 * std::max({1.0, std::abs(a), std::abs(b)}) ||
          a * a > u.log_covariance[i][i] * u.log_covariance[j][j] * (1 + 1e-6)) {
        cells[i][j].fail(
            "expected a covariance: symmetric, and no entry larger than the product of its two "
            "standard deviations");
      }
    }
  }
  // Each pair may pass and the whole still be no covariance: three figures cannot each be
  // strongly anti-correlated with the other two. A covariance has no negative eigenvalue; the
  // eigenvector of one that is names the figures whose correlations contradict each other.
  Eigen::MatrixXd matrix(static_cast<Eigen::Index>(n), static_cast<Eigen::Index>(n));
  double largest = 0;
  for (std::size_t i = 0; i < n; ++i) {
    largest = std::max(largest, u.log_covariance[i][i]);
    for (std::size_t j = 0; j < n; ++j)
      matrix(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j)) = u.log_covariance[i][j];
  }
  const Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eigen(matrix);
  const double lowest = eigen.eigenvalues()(0);
  if (eigen.info() != Eigen::Success || lowest < -1e-9 * std::max(largest, 1e-300)) {
    std::vector<std::string> involved;
    const Eigen::VectorXd direction = eigen.eigenvectors().col(0);
    for (std::size_t i = 0; i < n; ++i) {
      if (std::abs(direction(static_cast<Eigen::Index>(i))) > 0.1) involved.push_back(u.figures[i]);
    }
    rows_node.fail(fmt::format(
        "expected a covariance (positive semi-definite): the correlations of {} contradict each "
        "other (an eigenvalue of {:.3g}, below zero); write the uncertainty calibrate computed, "
        "or remove it",
        fmt::join(involved, ", "), lowest));
  }
  return u;
}

// {normalization: r, pooling: r, ...}: relative bandwidths of the kinds that have their own.
std::map<std::size_t, double> read_bandwidth_relative(const yaml::Node& node) {
  std::vector<std::string_view> kinds;
  for (OpClass kind : kBandwidthKinds)
    kinds.push_back(name_of(kind));
  yaml::MapReader reader(node, std::span<const std::string_view>(kinds));
  std::map<std::size_t, double> out;
  for (OpClass kind : kBandwidthKinds) {
    if (auto value = reader.optional(name_of(kind)))
      out[static_cast<std::size_t>(kind)] =
          value->as_number_in(kBandwidthRelativeLow, kBandwidthRelativeHigh);
  }
  return out;
}

// gpu.efficiency_by_architecture: {ARCH: {fp32: {CLASS: fraction, ...}, ..., memory: fraction,
// bandwidth_relative: {KIND: ratio, ...}}}.
std::map<std::string, ArchitectureEfficiency> read_architectures(const yaml::Node& node) {
  if (!node.is_map()) node.fail("expected a map of GPU architectures (pascal, volta, ...)");
  std::map<std::string, ArchitectureEfficiency> out;
  for (const auto& entry : node.raw()) {
    if (!entry.first.IsScalar()) node.fail("expected architecture names (pascal, volta, ...)");
    const std::string architecture = entry.first.Scalar();
    yaml::Node arch_node(entry.second, node.source(), node.path() + "." + architecture);
    if (out.count(architecture))
      arch_node.fail(fmt::format("'{}' is given twice; give each architecture once", architecture));
    // Only the architectures a catalogue may name: any other key would silently never apply.
    if (find_architecture(architecture) == nullptr) {
      arch_node.fail(
          fmt::format("'{}' is not an architecture a GPU can have: expected one of "
                      "{}{}",
                      architecture, join_alternatives(kArchitectureNames),
                      did_you_mean(architecture, kArchitectureNames)));
    }
    std::vector<std::string_view> keys(std::begin(kEfficiencyPrecisions),
                                       std::end(kEfficiencyPrecisions));
    keys.push_back("memory");
    keys.push_back("bandwidth_relative");
    yaml::MapReader arch(arch_node, std::span<const std::string_view>(keys));
    ArchitectureEfficiency& e = out[architecture];
    if (auto memory = arch.optional("memory")) e.memory = fraction(*memory);
    if (auto relative = arch.optional("bandwidth_relative"))
      e.bandwidth_relative = read_bandwidth_relative(*relative);
    for (std::string_view precision : kEfficiencyPrecisions) {
      auto classes = arch.optional(precision);
      if (!classes) continue;
      yaml::MapReader reader(*classes, std::span<const std::string_view>(kOpClassNames));
      for (std::size_t i = 0; i < kOpClassCount; ++i) {
        if (auto value = reader.optional(kOpClassNames[i]))
          e.compute[std::string(precision)][i] = fraction(*value);
      }
    }
  }
  return out;
}

HostCosts read_host_costs(const yaml::Node& node) {
  yaml::MapReader host(node, {"forward_op_us", "backward_op_us", "optimizer_op_us",
                              "step_overhead_us", "sync_us", "batch_fetch_us"});
  HostCosts h;
  h.forward_op = micros(host.required("forward_op_us"));
  h.backward_op = micros(host.required("backward_op_us"));
  h.optimizer_op = micros(host.required("optimizer_op_us"));
  h.step_overhead = micros(host.required("step_overhead_us"));
  h.sync = micros(host.required("sync_us"));
  h.batch_fetch = micros(host.required("batch_fetch_us"));
  return h;
}

HardwareProfile read_profile(const yaml::Document& document) {
  yaml::Node root = document.root();
  expect_file_kind(root, FileKind::profile);
  yaml::MapReader top(
      root, {"kind", "name", "description", "calibration", "input", "gpu", "host", "host_libtorch",
             "memory", "transfer", "links", "uncertainty", "sources"});
  HardwareProfile p;
  p.source_file = document.file_name();
  p.name = top.required("name").as_string();
  if (auto c = top.optional("calibration")) {
    yaml::MapReader calibration(*c, {"device", "date", "measurements"});
    p.calibration.device = calibration.required("device").as_string();
    p.calibration.date = calibration.required("date").as_string();
    for (const yaml::Node& file : calibration.required("measurements").items(1))
      p.calibration.measurements.push_back(file.as_string());
  }
  if (auto i = top.optional("input")) {
    yaml::MapReader input(*i, {"sample_cpu_us", "sample_cpu_ns_per_byte", "batch_cpu_us"});
    p.sample_cpu = micros(input.required("sample_cpu_us"));
    if (auto per_byte = input.optional("sample_cpu_ns_per_byte"))
      p.sample_cpu_per_byte = per_byte->as_number_in(0, 1e9) * 1e-9;
    if (auto per_batch = input.optional("batch_cpu_us")) p.batch_cpu = micros(*per_batch);
  }
  if (auto d = top.optional("description")) d->as_string();

  yaml::MapReader gpu(top.required("gpu"),
                      {"efficiency", "memory_efficiency", "bandwidth_relative",
                       "optimizer_memory_efficiency", "min_kernel_us", "efficiency_by_architecture",
                       "speed_spread", "tile_staging_cycles", "cpu_bernoulli_ns"});
  if (auto table = gpu.optional("efficiency_by_architecture"))
    p.gpu.by_architecture = read_architectures(*table);
  yaml::MapReader efficiency(gpu.required("efficiency"),
                             std::span<const std::string_view>(kOpClassNames));
  for (std::size_t i = 0; i < kOpClassCount; ++i) {
    p.gpu.compute[i] = fraction(efficiency.required(kOpClassNames[i]));
  }
  if (auto memory = gpu.optional("memory_efficiency")) p.gpu.memory = fraction(*memory);
  if (auto relative = gpu.optional("bandwidth_relative")) {
    for (const auto& [op_class, value] : read_bandwidth_relative(*relative))
      p.gpu.bandwidth_relative[op_class] = value;
  }
  if (auto optimizer = gpu.optional("optimizer_memory_efficiency"))
    p.gpu.optimizer_memory = fraction(*optimizer);
  p.gpu.min_kernel = micros(gpu.required("min_kernel_us"));
  if (auto spread = gpu.optional("speed_spread")) p.gpu.speed_spread = spread->as_number_in(0, 0.5);
  if (auto staging = gpu.optional("tile_staging_cycles"))
    p.gpu.tile_staging_cycles = staging->as_number_in(0, GpuEfficiency::kTileStagingHigh);
  if (auto bernoulli = gpu.optional("cpu_bernoulli_ns")) {
    p.gpu.cpu_bernoulli_ns = bernoulli->as_number_in(GpuEfficiency::kCpuBernoulliNsLow,
                                                     GpuEfficiency::kCpuBernoulliNsHigh);
  }

  p.host = read_host_costs(top.required("host"));
  if (auto libtorch = top.optional("host_libtorch")) p.host_libtorch = read_host_costs(*libtorch);

  yaml::MapReader memory(top.required("memory"),
                         {"context_mib", "workspace_mib", "allocator_overhead"});
  p.memory.context = mebibytes(memory.required("context_mib"));
  p.memory.workspace = mebibytes(memory.required("workspace_mib"));
  p.memory.allocator_overhead = memory.required("allocator_overhead").as_fraction();

  yaml::MapReader transfer(top.required("transfer"),
                           {"pcie_efficiency", "pageable_efficiency", "copy_latency_us"});
  p.transfer.pcie_efficiency = fraction(transfer.required("pcie_efficiency"));
  p.transfer.pageable_efficiency = fraction(transfer.required("pageable_efficiency"));
  p.transfer.copy_latency = micros(transfer.required("copy_latency_us"));

  yaml::MapReader links(top.required("links"),
                        {"efficiency", "step_latency_us", "collective_launch_us", "nccl_launch_us",
                         "ll_step_latency_us", "ll_rate_relative", "ll128_rate_relative"});
  yaml::MapReader link_efficiency(links.required("efficiency"),
                                  std::span<const std::string_view>(kLinkKindKeys));
  yaml::MapReader step_latency(links.required("step_latency_us"),
                               std::span<const std::string_view>(kLinkKindKeys));
  // Profiles written before the host bridge had its own figures gave one PCIe figure for both;
  // those written before the shared-memory transport had its own took the host bridge's for it.
  // Those written before NVLink SHARP had figures take the default's: its efficiency relative
  // to the NVSwitch links' (0.78 of 0.80) and 5.75 us per iteration of NVLS's loop, as
  // topologies/profiles/default.yaml cites them.
  // Those written before SHARP had figures take NCCL's model of CollNet: the network links'
  // efficiency times 0.85 and 31 us a step (tuning.cc), as default.yaml cites them.
  constexpr std::size_t kNvswitch = 3, kNetwork = 4, kHostBridge = 5, kShm = 6, kNvls = 7,
                        kSharp = 8;
  static_assert(kLinkKindKeys[kNvswitch] == "nvswitch" && kLinkKindKeys[kNetwork] == "network" &&
                kLinkKindKeys[kHostBridge] == "host_bridge" && kLinkKindKeys[kShm] == "shm" &&
                kLinkKindKeys[kNvls] == "nvls" && kLinkKindKeys[kSharp] == "sharp");
  // A kind NCCL models on top of another: `factor` of that kind's efficiency, `latency_us` a
  // step, unless the profile gives its own.
  auto nccl_model = [&](std::size_t i, std::size_t on, double factor, double latency_us) {
    auto e = link_efficiency.optional(kLinkKindKeys[i]);
    auto l = step_latency.optional(kLinkKindKeys[i]);
    p.links.efficiency[i] = e ? fraction(*e) : p.links.efficiency[on] * factor;
    p.links.step_latency[i] = l ? micros(*l) : microseconds(latency_us);
  };
  for (std::size_t i = 0; i < kLinkKinds; ++i) {
    if (i == kSharp) {
      nccl_model(i, kNetwork, 0.85, 31);  // CollNet Direct on Hopper, hwLat NET
      continue;
    }
    if (i == kNvls) {
      nccl_model(i, kNvswitch, 0.975, 5.75);  // default.yaml's 0.78 over its NVSwitch 0.80
      continue;
    }
    if (i == kHostBridge || i == kShm) {
      const std::size_t older = i == kHostBridge ? 0 : kHostBridge;
      auto e = link_efficiency.optional(kLinkKindKeys[i]);
      auto l = step_latency.optional(kLinkKindKeys[i]);
      p.links.efficiency[i] = e ? fraction(*e) : p.links.efficiency[older];
      p.links.step_latency[i] = l ? micros(*l) : p.links.step_latency[older];
      continue;
    }
    p.links.efficiency[i] = fraction(link_efficiency.required(kLinkKindKeys[i]));
    p.links.step_latency[i] = micros(step_latency.required(kLinkKindKeys[i]));
  }
  p.links.collective_launch = micros(links.required("collective_launch_us"));
  if (auto launch = links.optional("nccl_launch_us")) p.links.nccl_launch = micros(*launch);
  // How the GPUs run LL and LL128 where the profile says (absent: NCCL's tuner's figures).
  if (auto ll = links.optional("ll_step_latency_us")) {
    yaml::MapReader kinds(*ll, std::span<const std::string_view>(kLinkKindKeys));
    for (std::size_t i = 0; i < kLinkKinds; ++i) {
      if (auto l = kinds.optional(kLinkKindKeys[i]))
        p.links.ll_step_latency[i] = microseconds(l->as_number_in(
            LinkCosts::ll_step_latency_low_us(i), LinkCosts::ll_step_latency_high_us(i)));
    }
  }
  if (auto rate = links.optional("ll_rate_relative"))
    p.links.ll_rate = rate->as_number_in(LinkCosts::kRateRelativeLow, LinkCosts::kLlRateHigh);
  if (auto rate = links.optional("ll128_rate_relative"))
    p.links.ll128_rate = rate->as_number_in(LinkCosts::kRateRelativeLow, LinkCosts::kLl128RateHigh);

  if (auto u = top.optional("uncertainty")) p.uncertainty = read_uncertainty(*u);

  yaml::Node sources_node = top.required("sources");
  std::vector<std::string_view> known(std::begin(kFigures), std::end(kFigures));
  known.insert(known.end(), std::begin(kOptionalFigures), std::end(kOptionalFigures));
  yaml::MapReader sources(sources_node, known);
  for (std::string_view figure : known) {
    if (auto source = sources.optional(figure))
      p.sources[std::string(figure)] = source->as_string();
  }
  for (std::string_view figure : sourced_figures(p)) {
    if (!p.sources.count(std::string(figure))) {
      throw InputError(sources_node.mark(), fmt::format("sources.{}", figure),
                       "the figure has no source; say where it comes from (a datasheet, a "
                       "publication, or a calibration run with date and versions)");
    }
  }
  return p;
}

}  // namespace

HardwareProfile load_profile(const std::filesystem::path& file) {
  return read_profile(yaml::Document::load_file(file));
}

HardwareProfile load_profile_from_string(const std::string& text, const std::string& name) {
  return read_profile(yaml::Document::load_string(text, name));
}

}  // namespace epochcast

namespace epochcast {

namespace {

// Long text as a literal block (`|-`, lines as they are) where that reads back exactly: the
// first line decides the block's indentation and `-` strips trailing newlines, so text that
// starts with a space or an empty line, ends with a newline, or holds other control characters
// than newlines is quoted instead.
std::string folded(const std::string& text, int indent) {
  bool literal = !text.empty() && text.front() != ' ' && text.front() != '\n' &&
                 text.back() != '\n' && text.back() != ' ';
  for (char c : text) {
    if ((static_cast<unsigned char>(c) < 0x20 && c != '\n') || c == 0x7f) literal = false;
  }
  if (!literal) return yaml::quoted(text);
  std::string pad(static_cast<std::size_t>(indent), ' ');
  std::string out = "|-\n";
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    out += pad + text.substr(start, end - start) + "\n";
    start = end + 1;
  }
  out.pop_back();
  return out;
}

// Shortest text that reads back to the same double.
std::string number(double value) {
  return fmt::format("{}", value);
}
std::string us(Seconds s) {
  return number(s.value() * 1e6);
}
std::string mib(Bytes b) {
  return number(static_cast<double>(b.value()) / (1024.0 * 1024.0));
}

}  // namespace

std::string profile_yaml(const HardwareProfile& p, const std::string& description) {
  std::string y = "kind: profile\n";
  y += "name: " + yaml::quoted(p.name) + "\n";
  y += "description: " + folded(description, 2) + "\n";
  if (!p.calibration.device.empty()) {
    y += "calibration:\n";
    y += "  device: " + yaml::quoted(p.calibration.device) + "\n";
    y += "  date: " + yaml::quoted(p.calibration.date) + "\n";
    y += "  measurements:\n";
    for (const std::string& file : p.calibration.measurements)
      y += "    - " + yaml::quoted(file) + "\n";
  }
  if (p.sample_cpu) y += "input:\n  sample_cpu_us: " + us(*p.sample_cpu) + "\n";
  if (p.sample_cpu && p.sample_cpu_per_byte)
    y += "  sample_cpu_ns_per_byte: " + number(*p.sample_cpu_per_byte * 1e9) + "\n";
  if (p.sample_cpu && p.batch_cpu) y += "  batch_cpu_us: " + us(*p.batch_cpu) + "\n";
  y += "gpu:\n  efficiency:\n";
  for (std::size_t i = 0; i < kOpClassCount; ++i)
    y += fmt::format("    {}: {}\n", kOpClassNames[i], number(p.gpu.compute[i]));
  if (p.gpu.memory) y += "  memory_efficiency: " + number(*p.gpu.memory) + "\n";
  if (any_bandwidth_relative(p.gpu) || p.sources.count("gpu.bandwidth_relative")) {
    y += "  bandwidth_relative: {";
    for (std::size_t i = 0; i < std::size(kBandwidthKinds); ++i) {
      const OpClass kind = kBandwidthKinds[i];
      y += fmt::format("{}{}: {}", i ? ", " : "", name_of(kind),
                       number(p.gpu.bandwidth_relative[static_cast<std::size_t>(kind)]));
    }
    y += "}\n";
  }
  if (p.gpu.optimizer_memory)
    y += "  optimizer_memory_efficiency: " + number(*p.gpu.optimizer_memory) + "\n";
  y += "  min_kernel_us: " + us(p.gpu.min_kernel) + "\n";
  if (p.gpu.speed_spread) y += "  speed_spread: " + number(*p.gpu.speed_spread) + "\n";
  if (p.gpu.tile_staging_cycles)
    y += "  tile_staging_cycles: " + number(*p.gpu.tile_staging_cycles) + "\n";
  if (p.gpu.cpu_bernoulli_ns) y += "  cpu_bernoulli_ns: " + number(*p.gpu.cpu_bernoulli_ns) + "\n";
  if (!p.gpu.by_architecture.empty()) {
    y += "  efficiency_by_architecture:\n";
    for (const auto& [architecture, e] : p.gpu.by_architecture) {
      y += "    " + architecture + ":\n";
      for (const auto& [precision, classes] : e.compute) {
        y += "      " + precision + ": {";
        bool first = true;
        for (const auto& [op_class, value] : classes) {
          y += fmt::format("{}{}: {}", first ? "" : ", ", kOpClassNames[op_class], number(value));
          first = false;
        }
        y += "}\n";
      }
      if (e.memory) y += "      memory: " + number(*e.memory) + "\n";
      if (!e.bandwidth_relative.empty()) {
        y += "      bandwidth_relative: {";
        bool first = true;
        for (const auto& [op_class, value] : e.bandwidth_relative) {
          y += fmt::format("{}{}: {}", first ? "" : ", ", kOpClassNames[op_class], number(value));
          first = false;
        }
        y += "}\n";
      }
    }
  }
  auto host_block = [&](const char* name, const HostCosts& h) {
    y += std::string(name) + ":\n";
    y += "  forward_op_us: " + us(h.forward_op) + "\n";
    y += "  backward_op_us: " + us(h.backward_op) + "\n";
    y += "  optimizer_op_us: " + us(h.optimizer_op) + "\n";
    y += "  step_overhead_us: " + us(h.step_overhead) + "\n";
    y += "  sync_us: " + us(h.sync) + "\n";
    y += "  batch_fetch_us: " + us(h.batch_fetch) + "\n";
  };
  host_block("host", p.host);
  if (p.host_libtorch) host_block("host_libtorch", *p.host_libtorch);
  y += "memory:\n";
  y += "  context_mib: " + mib(p.memory.context) + "\n";
  y += "  workspace_mib: " + mib(p.memory.workspace) + "\n";
  y += "  allocator_overhead: " + number(p.memory.allocator_overhead) + "\n";
  y += "transfer:\n";
  y += "  pcie_efficiency: " + number(p.transfer.pcie_efficiency) + "\n";
  y += "  pageable_efficiency: " + number(p.transfer.pageable_efficiency) + "\n";
  y += "  copy_latency_us: " + us(p.transfer.copy_latency) + "\n";
  y += "links:\n  efficiency: {";
  for (std::size_t i = 0; i < std::size(kLinkKindKeys); ++i)
    y += fmt::format("{}{}: {}", i ? ", " : "", kLinkKindKeys[i], number(p.links.efficiency[i]));
  y += "}\n  step_latency_us: {";
  for (std::size_t i = 0; i < std::size(kLinkKindKeys); ++i)
    y += fmt::format("{}{}: {}", i ? ", " : "", kLinkKindKeys[i], us(p.links.step_latency[i]));
  y += "}\n  collective_launch_us: " + us(p.links.collective_launch) + "\n";
  if (p.links.nccl_launch) y += "  nccl_launch_us: " + us(*p.links.nccl_launch) + "\n";
  std::string ll_latencies;
  for (std::size_t i = 0; i < kLinkKinds; ++i) {
    if (p.links.ll_step_latency[i])
      ll_latencies += fmt::format("{}{}: {}", ll_latencies.empty() ? "" : ", ", kLinkKindKeys[i],
                                  us(*p.links.ll_step_latency[i]));
  }
  if (!ll_latencies.empty()) y += "  ll_step_latency_us: {" + ll_latencies + "}\n";
  if (p.links.ll_rate) y += "  ll_rate_relative: " + number(*p.links.ll_rate) + "\n";
  if (p.links.ll128_rate) y += "  ll128_rate_relative: " + number(*p.links.ll128_rate) + "\n";
  if (!p.uncertainty.empty()) {
    y += "uncertainty:\n  # covariance of the natural logarithms of the fitted figures\n";
    y += "  figures: [";
    for (std::size_t i = 0; i < p.uncertainty.figures.size(); ++i)
      y += (i ? ", " : "") + p.uncertainty.figures[i];
    y += "]\n  log_covariance:\n";
    for (const std::vector<double>& row : p.uncertainty.log_covariance) {
      y += "    - [";
      for (std::size_t j = 0; j < row.size(); ++j)
        y += (j ? ", " : "") + number(row[j]);
      y += "]\n";
    }
    if (p.uncertainty.model_log_sd > 0) {
      y += "  # the error of points predicted by refits without them, beyond the figures'\n";
      y += "  model_log_sd: " + number(p.uncertainty.model_log_sd) + "\n";
    }
  }
  y += "sources:\n";
  for (std::string_view figure : sourced_figures(p)) {
    auto found = p.sources.find(std::string(figure));
    std::string text = found != p.sources.end() ? found->second : "not given";
    y += fmt::format("  {}: {}\n", figure, folded(text, 4));
  }
  return y;
}

namespace {

void resolve_architecture(HardwareProfile& p, std::string_view architecture,
                          std::string_view precision) {
  if (p.gpu.by_architecture.empty()) return;
  auto found = p.gpu.by_architecture.find(std::string(architecture));
  if (found != p.gpu.by_architecture.end()) {
    const ArchitectureEfficiency& e = found->second;
    auto classes = e.compute.find(std::string(precision));
    std::vector<std::string> given;
    if (classes != e.compute.end()) {
      for (const auto& [op_class, value] : classes->second) {
        p.gpu.compute[op_class] = value;
        given.push_back(std::string(kOpClassNames[op_class]));
      }
    }
    if (e.memory) p.gpu.memory = *e.memory;
    std::vector<std::string> kinds;
    for (const auto& [op_class, value] : e.bandwidth_relative) {
      p.gpu.bandwidth_relative[op_class] = value;
      kinds.push_back(std::string(kOpClassNames[op_class]));
    }
    auto source = p.sources.find("gpu.efficiency_by_architecture");
    if (source != p.sources.end() && !kinds.empty()) {
      std::string& text = p.sources["gpu.bandwidth_relative"];
      text += fmt::format("{}for {} ({}): {}", text.empty() ? "" : "; ", architecture,
                          fmt::join(kinds, ", "), source->second);
    }
    if (source != p.sources.end() && (!given.empty() || e.memory)) {
      const std::string note = fmt::format(
          "for {} at {} ({}{}{}): {}", architecture, precision, fmt::join(given, ", "),
          e.memory && !given.empty() ? ", " : "", e.memory ? "memory" : "", source->second);
      for (const char* key : {"gpu.efficiency", "gpu.memory_efficiency"})
        p.sources[key] += "; " + note;
    }
  }
  p.gpu.by_architecture.clear();
  p.sources.erase("gpu.efficiency_by_architecture");
}

}  // namespace

void resolve_for_device(HardwareProfile& p, const GpuSpec& gpu, std::string_view precision) {
  resolve_architecture(p, gpu.architecture, precision);
  if (p.gpu.memory) return;
  if (std::optional<double> board = gpu.streaming_fraction()) {
    p.gpu.memory = *board;
    auto source = gpu.sources.find("streaming_gb_per_s");
    p.sources["gpu.memory_efficiency"] =
        fmt::format("the {}'s streaming bandwidth over its datasheet rate (GPU catalogue: {})",
                    gpu.name, source != gpu.sources.end() ? source->second : "no source given");
  } else {
    p.gpu.memory = GpuEfficiency::kDefaultMemory;
    p.sources["gpu.memory_efficiency"] = fmt::format("{} has no streaming figure: the default {}",
                                                     gpu.name, GpuEfficiency::kDefaultMemory);
  }
}

bool has_own_bandwidth(OpClass op_class) {
  return std::find(std::begin(kBandwidthKinds), std::end(kBandwidthKinds), op_class) !=
         std::end(kBandwidthKinds);
}

std::string_view efficiency_precision(TrainingPrecision precision) {
  switch (precision) {
    case TrainingPrecision::tf32:
      return "tf32";
    case TrainingPrecision::amp_fp16:
      return "fp16";
    case TrainingPrecision::amp_bf16:
      return "bf16";
    case TrainingPrecision::fp32:
    case TrainingPrecision::fp32_strict:
      break;
  }
  return "fp32";
}

const HostCosts& loop_host_costs(const ScenarioSpec& scenario) {
  const HardwareProfile& p = scenario.profile;
  return scenario.training.loop == TrainingLoop::libtorch && p.host_libtorch ? *p.host_libtorch
                                                                             : p.host;
}

std::int64_t loader_sample_bytes(const ScenarioSpec& scenario) {
  const std::int64_t element = scenario.model.input_dtype == DType::int64 ? 8
                               : scenario.loader.normalize_on_gpu         ? 1
                                                                          : 4;
  return scenario.dataset.sample_shape.elements() * element;
}

std::optional<Seconds> profile_sample_cpu(const HardwareProfile& profile,
                                          const ScenarioSpec& scenario) {
  // Batches made once on the GPU cost the loader nothing per sample.
  if (!profile.sample_cpu || scenario.loader.source == LoaderSource::synthetic_gpu)
    return std::nullopt;
  const double per_byte = profile.sample_cpu_per_byte.value_or(0);
  return Seconds(profile.sample_cpu->value() +
                 per_byte * static_cast<double>(loader_sample_bytes(scenario)));
}

void apply_input_costs(const HardwareProfile& profile, ScenarioSpec& scenario) {
  if (auto cost = profile_sample_cpu(profile, scenario)) scenario.loader.sample_cpu = *cost;
  if (profile.sample_cpu && profile.batch_cpu &&
      scenario.loader.source != LoaderSource::synthetic_gpu)
    scenario.loader.batch_cpu = *profile.batch_cpu;
}

void apply_profile(ScenarioSpec& scenario, HardwareProfile profile) {
  resolve_for_device(profile, scenario.machine.gpu,
                     efficiency_precision(scenario.training.precision));
  apply_input_costs(profile, scenario);
  scenario.profile = std::move(profile);
}

std::string cross_device_note(const ScenarioSpec& scenario) {
  const CalibrationOrigin& origin = scenario.profile.calibration;
  if (origin.device.empty() || origin.device == scenario.machine.gpu.name) return "";
  return fmt::format(
      "cross-device prediction: the profile was calibrated on {} and is applied to {} "
      "(compute-bound work scaled by peak FLOP/s, memory-bound work by bandwidth, host costs "
      "kept)",
      origin.device, scenario.machine.gpu.name);
}

}  // namespace epochcast

// Reads the GPU catalogue and machine files.
#include <array>
#include <mutex>

#include <fmt/format.h>

#include "core/spec/data_paths.h"
#include "core/spec/file_kind.h"
#include "core/spec/hardware_spec.h"
#include "core/yaml/strict_yaml.h"

namespace epochcast {

std::optional<FlopsPerSecond> GpuSpec::peak_for(Precision precision) const {
  auto found = peak.find(precision);
  if (found == peak.end()) return std::nullopt;
  return found->second;
}

BytesPerSecond GpuSpec::pcie_bandwidth() const {
  // GB/s per lane and direction after line encoding: 8b/10b for gen 1-2, 128b/130b for 3-5,
  // FLIT mode (242/256) for gen 6.
  static constexpr std::array<double, 7> kPerLane = {0, 0.25, 0.5, 0.985, 1.969, 3.938, 7.563};
  return gigabytes_per_second(kPerLane[static_cast<std::size_t>(pcie_generation)] * pcie_lanes);
}

const GpuSpec* GpuCatalogue::find(std::string_view id) const {
  for (const GpuSpec& gpu : gpus) {
    if (gpu.id == id) return &gpu;
  }
  return nullptr;
}

namespace {

constexpr std::array<std::string_view, 10> kGpuKeys = {
    "name",        "architecture", "sm_count", "memory_gib", "memory_bandwidth_gb_per_s",
    "peak_tflops", "pcie",         "nvlink",   "sources",    "notes"};

// Figures that need a source: every key above except the descriptive ones.
bool is_figure(std::string_view key) {
  return key != "name" && key != "architecture" && key != "sources" && key != "notes";
}

GpuSpec read_gpu(const yaml::Node& node, std::string id) {
  yaml::MapReader map(node, kGpuKeys);
  GpuSpec gpu;
  gpu.id = std::move(id);
  gpu.mark = node.mark();
  gpu.name = map.required("name").as_string();
  gpu.architecture = map.required("architecture").as_string();
  gpu.sm_count = static_cast<int>(map.required("sm_count").as_int_at_least(1));
  gpu.memory = Bytes(static_cast<std::int64_t>(map.required("memory_gib").as_positive_number() *
                                               static_cast<double>(kGiB)));
  gpu.memory_bandwidth =
      gigabytes_per_second(map.required("memory_bandwidth_gb_per_s").as_positive_number());

  yaml::Node peak_node = map.required("peak_tflops");
  yaml::MapReader peaks(peak_node, kPrecisionNames);
  for (std::size_t i = 0; i < std::size(kPrecisionNames); ++i) {
    if (auto value = peaks.optional(kPrecisionNames[i])) {
      gpu.peak[static_cast<Precision>(i)] = teraflops(value->as_positive_number());
    }
  }
  if (!gpu.peak.contains(Precision::fp32)) {
    peak_node.fail("needs at least fp32, the rate every GPU has");
  }

  yaml::MapReader pcie(map.required("pcie"), {"generation", "lanes"});
  gpu.pcie_generation = static_cast<int>(pcie.required("generation").as_int_at_least(1));
  if (gpu.pcie_generation > 6) pcie.required("generation").fail("PCIe generations run 1 to 6");
  gpu.pcie_lanes = static_cast<int>(pcie.required("lanes").as_int_at_least(1));
  if (gpu.pcie_lanes > 32) pcie.required("lanes").fail("a PCIe link has at most 32 lanes");

  if (auto nvlink_node = map.optional("nvlink")) {
    yaml::MapReader nvlink(*nvlink_node,
                           {"generation", "links", "per_link_gb_per_s_per_direction"});
    NvlinkSpec spec;
    spec.generation = static_cast<int>(nvlink.required("generation").as_int_at_least(1));
    spec.links = static_cast<int>(nvlink.required("links").as_int_at_least(1));
    spec.per_link_per_direction = gigabytes_per_second(
        nvlink.required("per_link_gb_per_s_per_direction").as_positive_number());
    gpu.nvlink = spec;
  }
  if (auto notes = map.optional("notes")) notes->as_string();

  // Every figure must say where it comes from: `sources.<figure>` or, for one precision,
  // `sources.peak_tflops.<precision>` falling back to `sources.peak_tflops`.
  yaml::Node sources_node = map.required("sources");
  std::vector<std::string_view> source_keys;
  for (std::string_view key : kGpuKeys) {
    if (is_figure(key)) source_keys.push_back(key);
  }
  yaml::MapReader sources(sources_node, source_keys);
  for (std::string_view key : source_keys) {
    if (!map.has(key)) continue;
    std::optional<yaml::Node> source = sources.optional(key);
    if (!source) {
      throw InputError(sources_node.mark(), fmt::format("{}.{}", sources_node.path(), key),
                       fmt::format("the figure '{}' has no source; say where it comes from "
                                   "(datasheet, whitepaper, or a measured run with date)",
                                   key));
    }
    if (source->is_map()) {
      // Per-precision sources for peak_tflops.
      yaml::MapReader per(*source, kPrecisionNames);
      for (const auto& [precision, value] : gpu.peak) {
        std::string_view p = kPrecisionNames[static_cast<std::size_t>(precision)];
        std::optional<yaml::Node> text = per.optional(p);
        if (!text) {
          throw InputError(source->mark(), fmt::format("{}.{}", source->path(), p),
                           "the figure has no source");
        }
        gpu.sources[fmt::format("{}.{}", key, p)] = text->as_string();
      }
    } else {
      gpu.sources[std::string(key)] = source->as_string();
    }
  }
  return gpu;
}

GpuCatalogue read_catalogue(const yaml::Document& document) {
  yaml::Node root = document.root();
  expect_file_kind(root, FileKind::gpu_catalogue);
  yaml::MapReader top(root, {"kind", "description", "gpus"});
  if (auto d = top.optional("description")) d->as_string();
  GpuCatalogue catalogue;
  catalogue.source_file = document.file_name();
  yaml::Node gpus = top.required("gpus");
  yaml::MapReader entries(gpus, [&] {
    // Any id is allowed here; duplicates are still rejected by the reader.
    std::vector<std::string_view> ids;
    if (gpus.is_map()) {
      for (auto it = gpus.raw().begin(); it != gpus.raw().end(); ++it) {
        if (it->first.IsScalar()) ids.push_back(it->first.Scalar());
      }
    }
    return ids;
  }());
  for (const std::string& id : entries.keys()) {
    catalogue.gpus.push_back(read_gpu(entries.required(id), id));
  }
  if (catalogue.gpus.empty()) gpus.fail("the catalogue lists no GPU");
  return catalogue;
}

MachineSpec read_machine(const yaml::Document& document, const GpuCatalogue& catalogue) {
  yaml::Node root = document.root();
  expect_file_kind(root, FileKind::machine);
  yaml::MapReader top(root,
                      {"kind", "name", "description", "gpu", "gpus_per_node", "nodes", "host"});
  MachineSpec machine;
  machine.source_file = document.file_name();
  machine.name = top.required("name").as_string();
  if (auto d = top.optional("description")) machine.description = d->as_string();

  yaml::Node gpu_node = top.required("gpu");
  std::string gpu_id = gpu_node.as_string();
  const GpuSpec* gpu = catalogue.find(gpu_id);
  if (gpu == nullptr) {
    std::vector<std::string_view> ids;
    for (const GpuSpec& g : catalogue.gpus)
      ids.push_back(g.id);
    gpu_node.fail(fmt::format("'{}' is not in the GPU catalogue ({}){}", gpu_id,
                              catalogue.source_file, did_you_mean(gpu_id, ids)));
  }
  machine.gpu = *gpu;
  machine.gpus_per_node = static_cast<int>(top.required("gpus_per_node").as_int_at_least(1));
  if (machine.gpus_per_node > 64) {
    top.required("gpus_per_node").fail("at most 64 GPUs per node are supported");
  }
  if (auto nodes = top.optional("nodes")) {
    machine.nodes = static_cast<int>(nodes->as_int_at_least(1));
    if (machine.nodes > 65536) nodes->fail("at most 65536 nodes are supported");
  }

  std::optional<yaml::Node> profile = top.optional("profile");
  std::filesystem::path relative_to = std::filesystem::path(document.file_name()).parent_path();
  machine.profile_file =
      resolve_data_file(profile ? profile->as_string() : "default", relative_to,
                        "topologies/profiles", profile ? profile->mark() : root.mark(), "profile");

  yaml::MapReader host(top.required("host"), {"cpu", "sockets", "cores", "memory_gib"});
  machine.host.cpu = host.required("cpu").as_string();
  if (auto s = host.optional("sockets"))
    machine.host.sockets = static_cast<int>(s->as_int_at_least(1));
  machine.host.cores = static_cast<int>(host.required("cores").as_int_at_least(1));
  if (machine.host.cores < machine.host.sockets) {
    host.required("cores").fail("fewer cores than sockets");
  }
  if (auto m = host.optional("memory_gib")) {
    machine.host.memory =
        Bytes(static_cast<std::int64_t>(m->as_positive_number() * static_cast<double>(kGiB)));
  }
  return machine;
}

}  // namespace

GpuCatalogue load_gpu_catalogue(const std::filesystem::path& file) {
  return read_catalogue(yaml::Document::load_file(file));
}

GpuCatalogue load_gpu_catalogue_from_string(const std::string& text, const std::string& name) {
  return read_catalogue(yaml::Document::load_string(text, name));
}

const GpuCatalogue& bundled_gpu_catalogue() {
  static std::once_flag once;
  static GpuCatalogue catalogue;
  std::call_once(once, [] {
    std::filesystem::path file = resolve_data_file("topologies/gpus.yaml", ".", "topologies",
                                                   SourceMark{"<built-in>", 0, 0}, "catalogue");
    catalogue = load_gpu_catalogue(file);
  });
  return catalogue;
}

MachineSpec load_machine(const std::filesystem::path& file, const GpuCatalogue& catalogue) {
  return read_machine(yaml::Document::load_file(file), catalogue);
}

MachineSpec load_machine_from_string(const std::string& text, const std::string& name,
                                     const GpuCatalogue& catalogue) {
  return read_machine(yaml::Document::load_string(text, name), catalogue);
}

}  // namespace epochcast

// Reads the GPU catalogue and machine files.
#include <algorithm>
#include <array>
#include <cctype>
#include <mutex>
#include <set>
#include <span>
#include <tuple>

#include <fmt/format.h>

#include "core/spec/data_paths.h"
#include "core/spec/file_kind.h"
#include "core/spec/hardware_spec.h"
#include "core/spec/limits.h"
#include "core/yaml/strict_yaml.h"

namespace epochcast {

double GpuSpec::sustained_clock_fraction() const {
  if (!clocks || clocks->boost_mhz <= 0) return 1.0;
  return clocks->sustained_or_boost() / clocks->boost_mhz;
}

std::optional<double> GpuSpec::streaming_fraction() const {
  if (!streaming_bandwidth || memory_bandwidth.value() <= 0) return std::nullopt;
  return streaming_bandwidth->value() / memory_bandwidth.value();
}

std::optional<FlopsPerSecond> GpuSpec::peak_for(Precision precision) const {
  auto found = peak.find(precision);
  if (found == peak.end()) return std::nullopt;
  return found->second;
}

BytesPerSecond pcie_link_bandwidth(int generation, int lanes) {
  // GB/s per lane and direction after line encoding.
  static constexpr std::array<double, 7> kPerLane = {0, 0.25, 0.5, 0.985, 1.969, 3.938, 7.563};
  return gigabytes_per_second(kPerLane[static_cast<std::size_t>(std::clamp(generation, 0, 6))] *
                              lanes);
}

BytesPerSecond GpuSpec::pcie_bandwidth() const {
  return pcie_link_bandwidth(pcie_generation, pcie_lanes);
}

const GpuSpec* GpuCatalogue::find(std::string_view id) const {
  for (const GpuSpec& gpu : gpus) {
    if (gpu.id == id) return &gpu;
  }
  return nullptr;
}

namespace {

constexpr std::array<std::string_view, 15> kGpuKeys = {"name",
                                                       "architecture",
                                                       "sm_count",
                                                       "memory_gib",
                                                       "memory_bandwidth_gb_per_s",
                                                       "streaming_gb_per_s",
                                                       "memory_type",
                                                       "l2_mib",
                                                       "clocks_mhz",
                                                       "board_power_w",
                                                       "peak_tflops",
                                                       "pcie",
                                                       "nvlink",
                                                       "sources",
                                                       "notes"};
// An entry written inline in a machine file also says its id (the catalogue's key).
constexpr auto kInlineGpuKeys = [] {
  std::array<std::string_view, kGpuKeys.size() + 1> keys{"id"};
  std::copy(kGpuKeys.begin(), kGpuKeys.end(), keys.begin() + 1);
  return keys;
}();

// Figures that need a source: every key above except the descriptive ones.
bool is_figure(std::string_view key) {
  return key != "name" && key != "architecture" && key != "sources" && key != "notes";
}

GpuSpec read_gpu(const yaml::Node& node, std::string id, bool inline_entry = false) {
  yaml::MapReader map(node, inline_entry ? std::span<const std::string_view>(kInlineGpuKeys)
                                         : std::span<const std::string_view>(kGpuKeys));
  GpuSpec gpu;
  gpu.id = std::move(id);
  if (inline_entry) {
    // Without an id, the name as an id: "NVIDIA GeForce RTX 3090" -> nvidia-geforce-rtx-3090.
    if (auto given = map.optional("id")) {
      gpu.id = given->as_string();
    } else {
      for (char c : map.required("name").as_string())
        gpu.id += std::isalnum(static_cast<unsigned char>(c)) != 0
                      ? static_cast<char>(std::tolower(static_cast<unsigned char>(c)))
                      : '-';
    }
  }
  gpu.mark = node.mark();
  gpu.name = map.required("name").as_string();
  gpu.architecture =
      std::string(kArchitectureNames[map.required("architecture").as_choice(kArchitectureNames)]);
  gpu.sm_count = map.required("sm_count").as_int32_in(1, 100'000);
  gpu.memory = Bytes(static_cast<std::int64_t>(map.required("memory_gib").as_number_in(1e-3, 1e6) *
                                               static_cast<double>(kGiB)));
  gpu.memory_bandwidth =
      gigabytes_per_second(map.required("memory_bandwidth_gb_per_s").as_number_in(1e-3, 1e6));
  if (auto streaming = map.optional("streaming_gb_per_s")) {
    // No kernel streams faster than the memory's datasheet rate.
    gpu.streaming_bandwidth =
        gigabytes_per_second(streaming->as_number_in(1e-3, gpu.memory_bandwidth.value() / 1e9));
  }

  if (auto type = map.optional("memory_type")) {
    gpu.memory_type = std::string(kMemoryTypeNames[type->as_choice(kMemoryTypeNames)]);
  }
  if (auto l2 = map.optional("l2_mib")) {
    gpu.l2_cache =
        Bytes(static_cast<std::int64_t>(l2->as_number_in(1e-3, 1e6) * static_cast<double>(kMiB)));
  }
  if (auto clocks_node = map.optional("clocks_mhz")) {
    yaml::MapReader clocks(*clocks_node, {"base", "boost", "sustained"});
    GpuClocks c;
    c.boost_mhz = clocks.required("boost").as_number_in(1, 1e5);
    if (auto base = clocks.optional("base")) c.base_mhz = base->as_number_in(1, c.boost_mhz);
    if (auto sustained = clocks.optional("sustained")) {
      // A board may hold less than its base clock under a power cap, never more than boost.
      c.sustained_mhz = sustained->as_number_in(1, c.boost_mhz);
    }
    gpu.clocks = c;
  }
  if (auto power = map.optional("board_power_w")) {
    gpu.board_power_w = power->as_number_in(1, 1e5);
  }

  yaml::Node peak_node = map.required("peak_tflops");
  yaml::MapReader peaks(peak_node, kPrecisionNames);
  for (std::size_t i = 0; i < std::size(kPrecisionNames); ++i) {
    if (auto value = peaks.optional(kPrecisionNames[i])) {
      gpu.peak[static_cast<Precision>(i)] = teraflops(value->as_number_in(1e-6, 1e6));
    }
  }
  if (!gpu.peak.contains(Precision::fp32)) {
    peak_node.fail("needs at least fp32, the rate every GPU has");
  }

  yaml::MapReader pcie(map.required("pcie"), {"generation", "lanes"});
  gpu.pcie_generation = pcie.required("generation").as_int32_in(1, 6);
  gpu.pcie_lanes = pcie.required("lanes").as_int32_in(1, 32);

  if (auto nvlink_node = map.optional("nvlink")) {
    yaml::MapReader nvlink(*nvlink_node,
                           {"generation", "links", "per_link_gb_per_s_per_direction"});
    NvlinkSpec spec;
    spec.generation = nvlink.required("generation").as_int32_in(1, 100);
    spec.links = nvlink.required("links").as_int32_in(1, 1024);
    spec.per_link_per_direction = gigabytes_per_second(
        nvlink.required("per_link_gb_per_s_per_direction").as_number_in(1e-3, 1e6));
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
        std::string_view p = name_of(precision);
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

// power_references: {ARCHITECTURE: {board: ID, source: TEXT}}: each board must be in the
// catalogue with the figures the rule divides (board power, fp32 peak, clocks).
void read_power_references(const yaml::Node& node, GpuCatalogue& catalogue) {
  yaml::MapReader architectures(node, kArchitectureNames);
  for (const std::string& architecture : architectures.keys()) {
    // source: what shows the board holding its boost clock (a non-empty string).
    yaml::MapReader fields(architectures.required(architecture), {"board", "source"});
    yaml::Node board = fields.required("board");
    PowerReference reference{board.as_string(), fields.required("source").as_string()};
    const GpuSpec* gpu = catalogue.find(reference.board);
    if (gpu == nullptr) {
      board.fail(fmt::format("no GPU '{}' in this catalogue to take as the power reference",
                             reference.board));
    }
    if (!gpu->board_power_w || !gpu->peak_for(Precision::fp32) || !gpu->clocks) {
      board.fail(fmt::format(
          "the power reference '{}' needs board_power_w, clocks_mhz and peak_tflops.fp32",
          reference.board));
    }
    if (gpu->clocks->sustained_mhz) {
      board.fail(
          fmt::format("the power reference '{}' gives a sustained clock below boost; the "
                      "rule needs a board that holds its boost clock",
                      reference.board));
    }
    catalogue.power_references[architecture] = std::move(reference);
  }
}

// Boards without a sustained clock of their own get the power rule's where their architecture
// has a reference (PowerReference, core/spec/hardware_spec.h) and they have less power per
// fp32 TFLOP/s than it.
void apply_power_rule(GpuCatalogue& catalogue) {
  for (GpuSpec& gpu : catalogue.gpus) {
    auto reference = catalogue.power_references.find(gpu.architecture);
    if (reference == catalogue.power_references.end()) continue;
    const std::optional<FlopsPerSecond> fp32 = gpu.peak_for(Precision::fp32);
    if (!gpu.clocks || gpu.clocks->sustained_mhz || !gpu.board_power_w || !fp32) continue;
    const GpuSpec& ref = *catalogue.find(reference->second.board);
    const double ref_tflops = ref.peak_for(Precision::fp32)->value() / 1e12;
    const double tflops = fp32->value() / 1e12;
    const double watts_per_tflops = *gpu.board_power_w / tflops;
    const double ref_watts_per_tflops = *ref.board_power_w / ref_tflops;
    const double fraction = watts_per_tflops / ref_watts_per_tflops;
    if (fraction >= 1) continue;
    gpu.clocks->sustained_mhz = std::max(1.0, gpu.clocks->boost_mhz * fraction);
    gpu.clocks->sustained_from_power_rule = true;
    gpu.sources["clocks_mhz.sustained"] = fmt::format(
        "power rule: {:g} W for {:.3g} fp32 TFLOP/s is {:.3g} W per TFLOP/s, {:.3f} of the {:.3g} "
        "that the {} ({:g} W, {:.3g} TFLOP/s) holds its boost clock with ({})",
        *gpu.board_power_w, tflops, watts_per_tflops, fraction, ref_watts_per_tflops, ref.name,
        *ref.board_power_w, ref_tflops, reference->second.source);
  }
}

GpuCatalogue read_catalogue(const yaml::Document& document) {
  yaml::Node root = document.root();
  expect_file_kind(root, FileKind::gpu_catalogue);
  yaml::MapReader top(root, {"kind", "description", "gpus", "power_references"});
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
  if (auto references = top.optional("power_references")) {
    read_power_references(*references, catalogue);
    apply_power_rule(catalogue);
  }
  return catalogue;
}

std::pair<int, int> read_pcie_link(const yaml::Node& node) {
  yaml::MapReader link(node, {"generation", "lanes"});
  int generation = link.required("generation").as_int32_in(1, 6);
  int lanes = link.required("lanes").as_int32_in(1, 32);
  return {generation, lanes};
}

double read_gb_per_s(const yaml::Node& node) {
  // From a thousandth of a GB/s (slower is not a link) to a petabyte per second.
  return node.as_number_in(1e-3, 1e6);
}

Seconds read_latency(const yaml::Node& node) {
  return microseconds(node.as_number_in(0, 1e6));
}

MachineTopology read_topology(const yaml::Node& node, const MachineSpec& m) {
  yaml::MapReader top(node, {"pcie", "sockets", "nvlink", "network", "sources"});
  MachineTopology t;
  const int gpus = m.gpus_per_node;
  if (auto pcie_node = top.optional("pcie")) {
    yaml::MapReader pcie(*pcie_node, {"switches_per_socket", "peer_to_peer", "nccl_p2p_level",
                                      "link", "uplink", "hop_latency_us"});
    if (auto s = pcie.optional("switches_per_socket")) {
      t.pcie.switches_per_socket = s->as_int32_in(0, 64);
      // A switch joins GPUs to the root complex; one with no GPU behind it carries nothing,
      // and the GPUs are spread over the switches of every socket.
      const int switches = t.pcie.switches_per_socket * m.host.sockets;
      if (switches > gpus) {
        s->fail(fmt::format(
            "{} PCIe switches per socket on {} socket{} is more switches than "
            "the node's {} GPUs; each switch needs a GPU behind it",
            t.pcie.switches_per_socket, m.host.sockets, m.host.sockets == 1 ? "" : "s", gpus));
      }
    }
    if (auto p2p = pcie.optional("peer_to_peer")) t.pcie.peer_to_peer = p2p->as_bool();
    if (auto level = pcie.optional("nccl_p2p_level")) {
      t.pcie.nccl_p2p_level = static_cast<P2pLevel>(level->as_choice(kP2pLevelNames));
    }
    if (auto link = pcie.optional("link")) {
      std::tie(t.pcie.generation, t.pcie.lanes) = read_pcie_link(*link);
    }
    if (auto uplink = pcie.optional("uplink")) {
      std::tie(t.pcie.uplink_generation, t.pcie.uplink_lanes) = read_pcie_link(*uplink);
    }
    if (auto h = pcie.optional("hop_latency_us")) t.pcie.hop_latency = read_latency(*h);
  }
  if (auto sockets_node = top.optional("sockets")) {
    if (m.host.sockets < 2)
      sockets_node->fail("an inter-socket link needs host.sockets of 2 or more");
    yaml::MapReader sockets(*sockets_node, {"bandwidth_gb_per_s", "latency_us"});
    t.sockets = SocketInterconnect{
        gigabytes_per_second(read_gb_per_s(sockets.required("bandwidth_gb_per_s"))),
        read_latency(sockets.required("latency_us"))};
  } else if (m.host.sockets > 1) {
    throw InputError(node.mark(), node.path() + ".sockets",
                     "missing: a host with several sockets needs its inter-socket link "
                     "({bandwidth_gb_per_s, latency_us})");
  }
  if (auto nvlink_node = top.optional("nvlink")) {
    yaml::MapReader nvlink(*nvlink_node, {"shape", "latency_us", "links"});
    yaml::Node shape_node = nvlink.required("shape");
    t.nvlink.shape = static_cast<NvlinkShape>(shape_node.as_choice(kNvlinkShapeNames));
    if (auto l = nvlink.optional("latency_us")) t.nvlink.latency = read_latency(*l);
    if (t.nvlink.shape != NvlinkShape::none && !m.gpu.nvlink) {
      shape_node.fail(fmt::format("the {} has no NVLink in the GPU catalogue", m.gpu.name));
    }
    if (t.nvlink.shape == NvlinkShape::pairs && gpus % 2 != 0) {
      shape_node.fail("NVLink pairs need an even number of GPUs per node");
    }
    if (t.nvlink.shape == NvlinkShape::cube_mesh && gpus != 8) {
      shape_node.fail("the hybrid cube-mesh joins exactly 8 GPUs");
    }
    std::optional<yaml::Node> links = nvlink.optional("links");
    if ((t.nvlink.shape == NvlinkShape::explicit_links) != links.has_value()) {
      (links ? *links : shape_node)
          .fail("'links: [[gpu, gpu, count], ...]' goes with shape explicit, and only with it");
    }
    if (links) {
      std::vector<int> per_gpu(static_cast<std::size_t>(gpus), 0);
      for (const yaml::Node& item : links->items(1)) {
        std::vector<std::int64_t> v = item.as_int_list_in(0, 1024, 3);
        if (v.size() != 3) item.fail("expected [gpu, gpu, links]");
        if (v[0] >= gpus || v[1] >= gpus || v[0] == v[1] || v[2] < 1) {
          item.fail(
              fmt::format("expected two different GPUs below {} and at least one link", gpus));
        }
        NvlinkTopology::Pair pair{static_cast<int>(v[0]), static_cast<int>(v[1]),
                                  static_cast<int>(v[2])};
        for (const NvlinkTopology::Pair& earlier : t.nvlink.pairs) {
          if (std::minmax(earlier.a, earlier.b) == std::minmax(pair.a, pair.b)) {
            item.fail(
                fmt::format("GPUs {} and {} are already joined by an earlier entry; give "
                            "all the NVLinks of a pair in one entry",
                            pair.a, pair.b));
          }
        }
        per_gpu[static_cast<std::size_t>(pair.a)] += pair.links;
        per_gpu[static_cast<std::size_t>(pair.b)] += pair.links;
        if (per_gpu[static_cast<std::size_t>(pair.a)] > m.gpu.nvlink->links ||
            per_gpu[static_cast<std::size_t>(pair.b)] > m.gpu.nvlink->links) {
          item.fail(fmt::format("more NVLinks on a GPU than the {} has ({})", m.gpu.name,
                                m.gpu.nvlink->links));
        }
        t.nvlink.pairs.push_back(pair);
      }
    }
  }
  if (auto network_node = top.optional("network")) {
    yaml::MapReader network(*network_node,
                            {"nics_per_node", "nic_gbit_per_s", "latency_us", "nodes_per_leaf",
                             "oversubscription", "in_network_reduction"});
    NetworkTopology n;
    yaml::Node nics = network.required("nics_per_node");
    n.nics_per_node = nics.as_int32_in(1, limits::kMaxGpusPerNode);
    if (gpus % n.nics_per_node != 0) {
      nics.fail(fmt::format("{} GPUs do not share {} NICs evenly", gpus, n.nics_per_node));
    }
    // Network datasheets give gigaBITS per second.
    n.nic_bandwidth = gigabytes_per_second(read_gb_per_s(network.required("nic_gbit_per_s")) / 8);
    n.latency = read_latency(network.required("latency_us"));
    if (auto leaf = network.optional("nodes_per_leaf")) {
      n.nodes_per_leaf = leaf->as_int32_in(1, limits::kMaxNodes);
    }
    if (auto o = network.optional("oversubscription")) {
      // 1 is non-blocking; beyond a thousand to one nothing is left of a fabric.
      n.oversubscription = o->as_number_in(1, 1000);
    }
    if (auto sharp = network.optional("in_network_reduction")) {
      n.in_network_reduction = sharp->as_bool();
    }
    t.network = n;
  }
  // Every section given says where its layout comes from.
  yaml::Node sources_node = top.required("sources");
  yaml::MapReader sources(sources_node, {"pcie", "sockets", "nvlink", "network"});
  for (std::string_view section : {"pcie", "sockets", "nvlink", "network"}) {
    if (!top.has(section)) continue;
    std::optional<yaml::Node> source = sources.optional(section);
    if (!source) {
      throw InputError(sources_node.mark(), fmt::format("{}.{}", sources_node.path(), section),
                       "the section has no source; say where the layout comes from");
    }
    t.sources[std::string(section)] = source->as_string();
  }
  return t;
}

MachineSpec read_machine(const yaml::Document& document, const GpuCatalogue& catalogue) {
  yaml::Node root = document.root();
  expect_file_kind(root, FileKind::machine);
  yaml::MapReader top(root, {"kind", "name", "description", "gpu", "gpus_per_node", "nodes", "host",
                             "topology", "profile", "price"});
  MachineSpec machine;
  machine.source_file = document.file_name();
  machine.name = top.required("name").as_string();
  if (auto d = top.optional("description")) machine.description = d->as_string();

  yaml::Node gpu_node = top.required("gpu");
  if (gpu_node.is_map()) {
    // A GPU of one's own, described as the catalogue describes its entries.
    machine.gpu = read_gpu(gpu_node, "", true);
  } else {
    std::string gpu_id = gpu_node.as_string();
    const GpuSpec* gpu = catalogue.find(gpu_id);
    if (gpu == nullptr) {
      std::vector<std::string_view> ids;
      for (const GpuSpec& g : catalogue.gpus)
        ids.push_back(g.id);
      gpu_node.fail(fmt::format(
          "'{}' is not in the GPU catalogue ({}){}. A GPU the catalogue lacks can be described "
          "in place, gpu: {{id, name, architecture, sm_count, memory_gib, "
          "memory_bandwidth_gb_per_s, peak_tflops, pcie, sources}} as the catalogue's entries "
          "are, or in a catalogue file of your own given with --catalogue FILE "
          "(docs/formats.md)",
          gpu_id, catalogue.source_file, did_you_mean(gpu_id, ids)));
    }
    machine.gpu = *gpu;
  }
  machine.gpus_per_node = top.required("gpus_per_node").as_int32_in(1, limits::kMaxGpusPerNode);
  if (auto nodes = top.optional("nodes")) machine.nodes = nodes->as_int32_in(1, limits::kMaxNodes);

  if (auto price = top.optional("price")) {
    yaml::MapReader p(*price, {"per_gpu_hour", "source"});
    machine.price.emplace();
    machine.price->per_gpu_hour = p.required("per_gpu_hour").as_number_in(1e-6, 1e6);
    machine.price->source = p.required("source").as_string();
  }

  std::optional<yaml::Node> profile = top.optional("profile");
  std::filesystem::path relative_to = std::filesystem::path(document.file_name()).parent_path();
  machine.profile_file =
      resolve_data_file(profile ? profile->as_string() : "default", relative_to,
                        "topologies/profiles", profile ? profile->mark() : root.mark(), "profile");

  yaml::MapReader host(top.required("host"),
                       {"cpu", "sockets", "cores", "memory_gib", "memory_bandwidth_gbps"});
  machine.host.cpu = host.required("cpu").as_string();
  if (auto s = host.optional("sockets")) machine.host.sockets = s->as_int32_in(1, 8);
  machine.host.cores = host.required("cores").as_int32_in(1, 1'000'000);
  if (machine.host.cores < machine.host.sockets) {
    host.required("cores").fail("fewer cores than sockets");
  }
  if (auto m = host.optional("memory_gib")) {
    machine.host.memory =
        Bytes(static_cast<std::int64_t>(m->as_number_in(1e-3, 1e6) * static_cast<double>(kGiB)));
  }
  if (auto b = host.optional("memory_bandwidth_gbps"))
    machine.host.memory_bandwidth = BytesPerSecond(b->as_number_in(1, 1e5) * 1e9);
  if (auto topology = top.optional("topology")) {
    machine.topology = read_topology(*topology, machine);
  } else if (machine.host.sockets > 1 || machine.nodes > 1) {
    throw InputError(root.mark(), "topology",
                     "missing: a machine with several sockets or nodes needs its topology "
                     "(how sockets and nodes are linked)");
  }
  if (machine.nodes > 1 && !machine.topology.network) {
    throw InputError(root.mark(), "topology.network",
                     "missing: a machine with several nodes needs its network");
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

namespace {

GpuCatalogue& process_catalogue() {
  static std::once_flag once;
  static GpuCatalogue catalogue;
  std::call_once(once, [] {
    std::filesystem::path file = resolve_data_file("topologies/gpus.yaml", ".", "topologies",
                                                   SourceMark{"<built-in>", 0, 0}, "catalogue");
    catalogue = load_gpu_catalogue(file);
  });
  return catalogue;
}

}  // namespace

const GpuCatalogue& bundled_gpu_catalogue() {
  return process_catalogue();
}

namespace {

// Whether two entries give the same figures (the same catalogue file found at two paths, or a
// copy of it).
bool same_figures(const GpuSpec& a, const GpuSpec& b) {
  const bool same_nvlink =
      a.nvlink.has_value() == b.nvlink.has_value() &&
      (!a.nvlink ||
       (a.nvlink->generation == b.nvlink->generation && a.nvlink->links == b.nvlink->links &&
        a.nvlink->per_link_per_direction == b.nvlink->per_link_per_direction));
  auto same_clocks = [](const std::optional<GpuClocks>& x, const std::optional<GpuClocks>& y) {
    if (x.has_value() != y.has_value()) return false;
    return !x || (x->base_mhz == y->base_mhz && x->boost_mhz == y->boost_mhz &&
                  x->sustained_mhz == y->sustained_mhz);
  };
  return a.name == b.name && a.architecture == b.architecture && a.sm_count == b.sm_count &&
         a.memory == b.memory && a.memory_bandwidth == b.memory_bandwidth && a.peak == b.peak &&
         same_clocks(a.clocks, b.clocks) && a.l2_cache == b.l2_cache &&
         a.memory_type == b.memory_type && a.board_power_w == b.board_power_w &&
         a.pcie_generation == b.pcie_generation && a.pcie_lanes == b.pcie_lanes && same_nvlink;
}

}  // namespace

void extend_gpu_catalogue(const std::filesystem::path& file) {
  // Each file once: a command's --catalogue and the same file recorded in a measurement file.
  static std::set<std::filesystem::path> extended;
  std::error_code error;
  std::filesystem::path key = std::filesystem::weakly_canonical(file, error);
  if (error) key = std::filesystem::absolute(file).lexically_normal();
  if (extended.contains(key)) return;
  GpuCatalogue& catalogue = process_catalogue();
  GpuCatalogue added = load_gpu_catalogue(file);
  // Every id checked before any is added: a refused file adds nothing. An entry the catalogue
  // already has with the same figures (a copy of the file) is taken as it.
  std::vector<GpuSpec> fresh;
  for (GpuSpec& gpu : added.gpus) {
    if (const GpuSpec* known = catalogue.find(gpu.id)) {
      if (same_figures(*known, gpu)) continue;
      throw InputError(gpu.mark, fmt::format("gpus.{}", gpu.id),
                       fmt::format("the catalogue already has a GPU '{}' ({}:{}); give yours "
                                   "another id",
                                   gpu.id, known->mark.file, known->mark.line));
    }
    fresh.push_back(std::move(gpu));
  }
  for (GpuSpec& gpu : fresh)
    catalogue.gpus.push_back(std::move(gpu));
  catalogue.source_file += " and " + added.source_file;
  extended.insert(key);
}

MachineSpec load_machine(const std::filesystem::path& file, const GpuCatalogue& catalogue) {
  return read_machine(yaml::Document::load_file(file), catalogue);
}

MachineSpec load_machine_from_string(const std::string& text, const std::string& name,
                                     const GpuCatalogue& catalogue) {
  return read_machine(yaml::Document::load_string(text, name), catalogue);
}

}  // namespace epochcast

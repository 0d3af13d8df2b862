// Hardware as specs describe it: the GPU catalogue (topologies/gpus.yaml) and machine files
// (topologies/<machine>.yaml). Every catalogue figure carries its source.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/enum_name.h"
#include "core/input_error.h"
#include "core/spec/architecture_traits.h"
#include "core/units.h"

namespace epochcast {

// Numeric precisions a GPU can compute in. tf32/fp16/bf16 peaks are tensor-core rates where
// the GPU has tensor cores for them, else the CUDA-core rate.
enum class Precision { fp32, tf32, fp16, bf16 };
inline constexpr std::string_view kPrecisionNames[] = {"fp32", "tf32", "fp16", "bf16"};
inline std::string_view name_of(Precision value) {
  return enum_name(kPrecisionNames, value);
}

struct NvlinkSpec {
  int generation = 0;
  int links = 0;
  BytesPerSecond per_link_per_direction;
};

// The memory technologies of GPU boards (datasheets' "memory type").
inline constexpr std::string_view kMemoryTypeNames[] = {
    "gddr5", "gddr5x", "gddr6", "gddr6x", "gddr7", "hbm2", "hbm2e", "hbm3", "hbm3e", "lpddr5x"};

// Clocks of the SMs, in MHz. Datasheet peaks are computed at `boost`; `sustained` is what the
// board holds under a long dense load that keeps every SM busy, where its power or thermal limit
// keeps it lower (unset: the boost clock, the datasheet's own assumption). Given in the file, or
// derived by the catalogue's power rule (GpuCatalogue::power_references).
struct GpuClocks {
  double base_mhz = 0;  // 0 when not known
  double boost_mhz = 0;
  std::optional<double> sustained_mhz;
  bool sustained_from_power_rule = false;
  double sustained_or_boost() const { return sustained_mhz.value_or(boost_mhz); }
};

struct GpuSpec {
  std::string id;    // catalogue key, e.g. "gtx-1080-ti"
  std::string name;  // marketing name
  std::string architecture;
  int sm_count = 0;
  Bytes memory;
  BytesPerSecond memory_bandwidth;  // datasheet
  // What a streaming kernel reaches on the board (BabelStream's Add: two arrays read, one
  // written), as public microbenchmarks measure it: the part of the datasheet rate that the
  // memory's controller, refresh and ECC leave, which no datasheet states (0.75 on a T4's
  // ECC-protected GDDR6, 0.94 on a V100's HBM2; docs/evidence/streaming-bandwidth.md). The
  // default profile's streaming efficiency is this over memory_bandwidth. Optional.
  std::optional<BytesPerSecond> streaming_bandwidth;
  // Optional in a file (a GPU described by hand may not know them); every bundled entry has
  // them (tests/core/test_gpu_catalogue.cpp).
  std::optional<GpuClocks> clocks;
  std::optional<Bytes> l2_cache;
  std::string memory_type;  // one of kMemoryTypeNames, or empty when not given
  std::optional<double> board_power_w;
  // Dense peak throughput per precision; absent when the GPU cannot run that precision.
  std::map<Precision, FlopsPerSecond> peak;
  int pcie_generation = 0;
  int pcie_lanes = 0;
  std::optional<NvlinkSpec> nvlink;
  std::map<std::string, std::string> sources;  // figure key -> where it comes from
  SourceMark mark;

  std::optional<FlopsPerSecond> peak_for(Precision precision) const;
  // Sustained over boost clock, the fraction of the datasheet peaks a long dense load keeps
  // (1 without clocks or a sustained figure).
  double sustained_clock_fraction() const;
  // streaming_bandwidth over memory_bandwidth, when the board has a streaming figure.
  std::optional<double> streaming_fraction() const;
  // Unidirectional PCIe bandwidth from generation and lanes (PCI-SIG line rates and encoding).
  BytesPerSecond pcie_bandwidth() const;
};

// The power rule's reference for one architecture: a board that kernel measurements show
// holding its boost clock under a dense load. A dense load draws power in proportion to the
// FP32 lanes switching per second (the fp32 peak), so a board of the architecture with fewer
// watts per fp32 TFLOP/s than the reference cannot hold boost: its sustained clock is
//   boost x (board_power_w / fp32 peak) / (the reference's board_power_w / fp32 peak).
// A bound, not a measurement: the reference may need less than it has, so a board may hold a
// little more than the rule gives.
struct PowerReference {
  std::string board;  // a catalogue id of the architecture (or a named sibling)
  std::string source;
};

struct GpuCatalogue {
  std::string source_file;
  std::vector<GpuSpec> gpus;
  std::map<std::string, PowerReference> power_references;  // architecture -> reference

  const GpuSpec* find(std::string_view id) const;
};

// How a machine's parts are connected, as shorthands that the simulator expands into a graph
// (sim/network/topology). Omitted parts default to GPUs on the CPU's PCIe root complex with
// peer-to-peer allowed, one socket, no NVLink and, for one node, no network.
// GPUs (and NICs) fill sockets, and switches within them, in order: of G GPUs over K groups,
// GPU g sits in group floor(g * K / G).
// How far apart two GPUs may be for NCCL to use CUDA peer-to-peer between them
// (NCCL_P2P_LEVEL, in nvidia-smi topo -m's words): farther pairs without NVLink go through
// NCCL's shared-memory transport, staged in host memory. NCCL's default is pxb: "by default
// don't use P2P across CPU host bridges and further apart" (NVIDIA/nccl src/graph/paths.cc,
// ncclTopoCheckP2p, p2pLevel = PATH_PXB; earlier NCCL releases allowed PHB on Intel CPUs
// other than Broadwell, and current ones allow SYS on AMD CPUs with two GPUs).
enum class P2pLevel { loc, pix, pxb, phb, sys };
inline constexpr std::string_view kP2pLevelNames[] = {"loc", "pix", "pxb", "phb", "sys"};
inline std::string_view name_of(P2pLevel value) {
  return enum_name(kP2pLevelNames, value);
}

struct PcieTopology {
  int switches_per_socket = 0;  // 0: GPUs attach to the root complex directly
  bool peer_to_peer = true;     // false: peer traffic is staged through host memory
  P2pLevel nccl_p2p_level = P2pLevel::pxb;
  int generation = 0;  // GPU links; 0 = the GPU's own (catalogue)
  int lanes = 0;
  int uplink_generation = 0;  // switch-to-CPU links; 0 = as the GPU links
  int uplink_lanes = 0;
  Seconds hop_latency = microseconds(0.5);
};

struct SocketInterconnect {
  BytesPerSecond bandwidth;  // per direction
  Seconds latency;
};

enum class NvlinkShape { none, pairs, cube_mesh, nvswitch, explicit_links };
inline constexpr std::string_view kNvlinkShapeNames[] = {"none", "pairs", "cube-mesh", "nvswitch",
                                                         "explicit"};
inline std::string_view name_of(NvlinkShape value) {
  return enum_name(kNvlinkShapeNames, value);
}

struct NvlinkTopology {
  NvlinkShape shape = NvlinkShape::none;
  // For `explicit` (and filled in for the other shapes when expanded): GPU a, GPU b, links.
  struct Pair {
    int a = 0, b = 0, links = 1;
  };
  std::vector<Pair> pairs;
  Seconds latency = microseconds(0.7);
};

struct NetworkTopology {
  int nics_per_node = 1;
  BytesPerSecond nic_bandwidth;   // per direction
  Seconds latency;                // NIC to NIC through the fabric
  int nodes_per_leaf = 0;         // 0: every node on one non-blocking switch
  double oversubscription = 1.0;  // leaf downlink / uplink capacity
  // The switches reduce in the network (NVIDIA SHARP on Quantum InfiniBand switches), which
  // NCCL's CollNet algorithms use when enabled (NCCL_COLLNET_ENABLE=1 and the SHARP plugin).
  bool in_network_reduction = false;
};

struct MachineTopology {
  PcieTopology pcie;
  std::optional<SocketInterconnect> sockets;
  NvlinkTopology nvlink;
  std::optional<NetworkTopology> network;
  std::map<std::string, std::string> sources;  // section -> where the layout comes from
};

struct HostSpec {
  std::string cpu;
  int sockets = 1;
  int cores = 1;  // physical cores in total
  std::optional<Bytes> memory;
  // What streaming code sustains from the node's memory, all sockets together (STREAM Triad;
  // about three quarters of the DDR channels' peak): what a CPU optimizer step is bound by.
  std::optional<BytesPerSecond> memory_bandwidth;
};

// What a GPU-hour of the machine costs (rented, or amortised), in one currency throughout.
struct PriceSpec {
  double per_gpu_hour = 0;
  std::string source;
};

// A machine: some nodes, each with GPUs of one model and a host. Topology (links, switches,
// NICs) extends this format in the multi-GPU work.
struct MachineSpec {
  std::string name;
  std::string description;
  std::string source_file;
  GpuSpec gpu;
  int gpus_per_node = 1;
  int nodes = 1;
  HostSpec host;
  MachineTopology topology;
  std::optional<PriceSpec> price;  // for `epochcast compare`: cost per epoch
  // The hardware profile (topologies/profiles/) this machine runs with unless a scenario
  // names another: `profile:` in the file, else the bundled default.
  std::filesystem::path profile_file;

  int total_gpus() const { return gpus_per_node * nodes; }
};

// Unidirectional PCIe bandwidth of a link: PCI-SIG line rate times lanes after encoding
// (8b/10b for generations 1-2, 128b/130b for 3-5, FLIT mode for 6).
BytesPerSecond pcie_link_bandwidth(int generation, int lanes);

GpuCatalogue load_gpu_catalogue(const std::filesystem::path& file);
GpuCatalogue load_gpu_catalogue_from_string(const std::string& text, const std::string& name);

// The catalogue bundled with epochcast (topologies/gpus.yaml in the data directory), with the
// entries of every file given to extend_gpu_catalogue.
const GpuCatalogue& bundled_gpu_catalogue();
// Adds a catalogue file's GPUs to bundled_gpu_catalogue() (the commands' --catalogue FILE; a
// file already added is skipped); an id the catalogue already has is an error naming both
// places. Call before loading machines, from one thread.
void extend_gpu_catalogue(const std::filesystem::path& file);

// Loads a machine file; its `gpu` names an entry of `catalogue`, or is an entry itself (the
// catalogue's keys and sources, with an optional `id`).
MachineSpec load_machine(const std::filesystem::path& file, const GpuCatalogue& catalogue);
MachineSpec load_machine_from_string(const std::string& text, const std::string& name,
                                     const GpuCatalogue& catalogue);

}  // namespace epochcast

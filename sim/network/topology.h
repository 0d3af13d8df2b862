// A machine as a graph — GPUs, CPU sockets (PCIe root complexes), PCIe switches, NVSwitch
// fabrics, NICs and network switches, joined by full-duplex links with a bandwidth per
// direction and a latency — built from the machine file's shorthands, with the route between
// any two GPUs as NCCL and the CUDA driver would take it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/enum_name.h"
#include "core/spec/hardware_spec.h"
#include "core/units.h"
#include "sim/network/fabric_way.h"

namespace epochcast::sim {

enum class VertexKind { gpu, cpu, pcie_switch, nvswitch, nic, leaf_switch, spine_switch };
// PCIe links are two kinds: `pcie` ends at a PCIe switch, `host_bridge` at a CPU's root complex
// (a GPU or switch attached to the CPU), where peer traffic runs far below the link rate.
// `shm` is no link of the graph: it names the rate and step latency of NCCL's shared-memory
// transport, which stages a collective's steps through host memory over the PCIe links of a
// route where NCCL does not use peer-to-peer (Topology::nccl_peer_to_peer).
// `nvls` likewise names the rate and step latency of NVLink SHARP's exchanges with an NVSwitch
// fabric over a GPU's NVSwitch links, and `sharp` those of a reduction in the network's
// switches (NCCL's CollNet) over a GPU's NIC.
enum class LinkKind { pcie, socket, nvlink, nvswitch, network, host_bridge, shm, nvls, sharp };
inline constexpr std::string_view kLinkKindNames[] = {"PCIe",          "socket",  "NVLink",
                                                      "NVSwitch",      "network", "host bridge",
                                                      "shared memory", "NVLS",    "network SHARP"};
inline std::string_view name_of(LinkKind value) {
  return enum_name(kLinkKindNames, value);
}

struct Vertex {
  VertexKind kind = VertexKind::gpu;
  std::string name;
  int node = 0;  // machine node (cluster member); -1 for network switches shared by nodes
};

struct TopologyLink {
  int a = 0, b = 0;  // vertices
  LinkKind kind = LinkKind::pcie;
  BytesPerSecond bandwidth;  // each direction
  Seconds latency;
  int lanes = 0;      // NVLinks in the link, or PCIe lanes
  std::string label;  // e.g. "PCIe 4.0 x16", "NVLink3 x12"
  std::string source;
  bool down = false;  // a fault: no path uses it
  // Its rate before any fault, by which routes are chosen (a degraded link still carries them).
  BytesPerSecond routing_bandwidth;
};

// One direction of one link.
struct Hop {
  int link = 0;
  bool forward = true;  // a -> b
};

struct Path {
  std::vector<Hop> hops;
  Seconds latency;
  BytesPerSecond bottleneck;
};

// nvidia-smi topo -m vocabulary for how two GPUs are connected.
enum class PathType { self, nvlink, pix, pxb, phb, sys, net };

class Topology {
 public:
  // Builds `nodes` copies of the machine's node and the network joining them. With
  // `attach_network`, a single node also gets its NICs and leaf switch (for mirror paths, when
  // one node stands for a whole cluster).
  static Topology build(const MachineSpec& machine, int nodes, bool attach_network = false);

  int gpus() const { return static_cast<int>(gpu_vertices_.size()); }
  int gpus_per_node() const { return gpus_per_node_; }
  int nodes() const { return nodes_; }
  bool peer_to_peer() const { return peer_to_peer_; }
  // The GPUs' boost clock (MHz; 0 where the catalogue gives none): what SM-bound protocol work
  // (NCCL's LL) runs at.
  double gpu_boost_mhz() const { return gpu_boost_mhz_; }
  // Whether NCCL moves data between GPUs a and b of one node by CUDA peer-to-peer: over NVLink
  // always, over PCIe only when the driver allows it (peer_to_peer) and the path type is within
  // the machine's NCCL P2P level; otherwise NCCL's shared-memory transport stages it.
  bool nccl_peer_to_peer(int a, int b) const;
  const std::vector<Vertex>& vertices() const { return vertices_; }
  const std::vector<TopologyLink>& links() const { return links_; }
  int gpu_vertex(int gpu) const { return gpu_vertices_[static_cast<std::size_t>(gpu)]; }
  int node_of(int gpu) const { return gpu / gpus_per_node_; }

  // The route from GPU a to GPU b (computed once, then cached).
  const Path& path(int a, int b) const;
  // In a symmetric simulation of a cluster: out of GPU `gpu`'s node through the NIC of its rail,
  // into the network and back into the same GPU — the links one node's share of a cross-node
  // step loads.
  const Path& mirror_path(int gpu) const;
  bool has_network() const { return !nics_.empty(); }
  // Whether the network's switches reduce (SHARP), for NCCL's CollNet.
  bool in_network_reduction() const { return in_network_reduction_; }
  // Between GPU `gpu` and its node's NVSwitch fabric (NVLink SHARP): into it and back into the
  // same GPU, or one way.
  const Path& fabric_path(int gpu, FabricWay way = FabricWay::round_trip) const;
  // The NVSwitch fabric vertex GPU `gpu` is attached to; -1 if none.
  int nvswitch_of(int gpu) const;
  PathType path_type(int a, int b) const;
  // NVLinks joining a and b directly or through an NVSwitch fabric; 0 if none.
  int nvlinks(int a, int b) const;
  // NVLinks joining a and b directly (not through a switch); 0 if none.
  int direct_nvlinks(int a, int b) const;
  // "X", "NV12", "PIX", "PXB", "PHB", "SYS", "NET".
  std::string path_label(int a, int b) const;

  // Faults, applied before any path is asked for: the link at `fraction` of its bandwidth, or
  // down (fraction 0), when paths go around it where the graph allows (Dijkstra without it).
  void degrade(int link, double fraction);
  // The link between node `node`'s NIC `nic` and its leaf switch; a leaf's uplink to the spine.
  // -1 when the topology has none (fewer nodes or leaves than that).
  int nic_link(int node, int nic) const;
  int leaf_uplink(int leaf) const;
  // Whether every GPU still reaches every other (through switches, never through a GPU).
  bool gpus_connected() const;

 private:
  int add_vertex(VertexKind kind, std::string name, int node);
  int add_link(int a, int b, LinkKind kind, BytesPerSecond bandwidth, Seconds latency, int lanes,
               std::string label, std::string source);
  Path shortest(int from, int to) const;
  // The leaf switch vertex node `node`'s NICs hang off; -1 without a network.
  int leaf_of_node(int node) const;

  std::vector<Vertex> vertices_;
  std::vector<TopologyLink> links_;
  std::vector<std::vector<int>> adjacency_;  // vertex -> links
  std::vector<int> gpu_vertices_;
  std::vector<int> gpu_root_;  // the CPU socket each GPU hangs off
  int gpus_per_node_ = 1;
  int nodes_ = 1;
  bool peer_to_peer_ = true;
  bool in_network_reduction_ = false;
  double gpu_boost_mhz_ = 0;
  P2pLevel nccl_p2p_level_ = P2pLevel::pxb;
  std::vector<std::vector<int>> nics_;       // per node: NIC vertices
  std::vector<std::vector<int>> nic_links_;  // per node: each NIC's link to its leaf
  std::vector<int> leaf_uplinks_;
  std::vector<int> leaf_of_node_;  // per node, its leaf's vertex
  // Scratch of shortest(), by vertex: figures valid where stamp equals round.
  struct Search {
    std::vector<std::uint32_t> stamp;
    std::vector<double> cost;
    std::vector<int> via;
    std::uint32_t round = 0;
  };
  mutable Search search_;
  mutable std::map<std::pair<int, int>, Path> paths_;
  mutable std::map<int, Path> mirror_paths_;
  mutable std::map<std::pair<int, FabricWay>, Path> fabric_paths_;
};

// The DGX-1 hybrid cube-mesh: (GPU, GPU, NVLinks) for the 8 V100s.
const std::vector<NvlinkTopology::Pair>& dgx1_cube_mesh();

}  // namespace epochcast::sim

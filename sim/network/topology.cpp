// Expanding machine shorthands into a graph, and routing between GPUs.
#include "sim/network/topology.h"

#include <algorithm>
#include <limits>
#include <queue>
#include <stdexcept>

#include <fmt/format.h>

namespace epochcast::sim {

const std::vector<NvlinkTopology::Pair>& dgx1_cube_mesh() {
  // DGX-1 with V100: two fully connected quads (0-3, 4-7) joined GPU i to GPU i+4, with six
  // NVLinks per GPU; pairs carrying two links as nvidia-smi topo -m shows them (NV2).
  static const std::vector<NvlinkTopology::Pair> kPairs = {
      {0, 1, 1}, {0, 2, 1}, {0, 3, 2}, {0, 4, 2}, {1, 2, 2}, {1, 3, 1}, {1, 5, 2}, {2, 3, 2},
      {2, 6, 1}, {3, 7, 1}, {4, 5, 1}, {4, 6, 1}, {4, 7, 2}, {5, 6, 2}, {5, 7, 1}, {6, 7, 2}};
  return kPairs;
}

int Topology::add_vertex(VertexKind kind, std::string name, int node) {
  vertices_.push_back({kind, std::move(name), node});
  adjacency_.emplace_back();
  return static_cast<int>(vertices_.size() - 1);
}

int Topology::add_link(int a, int b, LinkKind kind, BytesPerSecond bandwidth, Seconds latency,
                       int lanes, std::string label, std::string source) {
  links_.push_back({a, b, kind, bandwidth, latency, lanes, std::move(label), std::move(source),
                    false, bandwidth});
  int id = static_cast<int>(links_.size() - 1);
  adjacency_[static_cast<std::size_t>(a)].push_back(id);
  adjacency_[static_cast<std::size_t>(b)].push_back(id);
  return id;
}

namespace {

std::string pcie_label(int generation, int lanes) {
  return fmt::format("PCIe {}.0 x{}", generation, lanes);
}

std::string pcie_source(int generation, int lanes) {
  return fmt::format(
      "PCI-SIG: generation {} line rate x {} lanes after encoding ({:.2f} GB/s per "
      "direction)",
      generation, lanes, pcie_link_bandwidth(generation, lanes).value() / 1e9);
}

std::string section_source(const MachineSpec& m, const std::string& section) {
  auto found = m.topology.sources.find(section);
  return found == m.topology.sources.end() ? std::string("default layout (no topology given)")
                                           : found->second;
}

}  // namespace

Topology Topology::build(const MachineSpec& m, int nodes, bool attach_network) {
  Topology t;
  const MachineTopology& topo = m.topology;
  t.gpus_per_node_ = m.gpus_per_node;
  t.nodes_ = nodes;
  t.peer_to_peer_ = topo.pcie.peer_to_peer;
  if (m.gpu.clocks) t.gpu_boost_mhz_ = m.gpu.clocks->boost_mhz;
  t.in_network_reduction_ = topo.network && topo.network->in_network_reduction;
  t.nccl_p2p_level_ = topo.pcie.nccl_p2p_level;
  const int sockets = m.host.sockets;
  const int switches = topo.pcie.switches_per_socket;
  const int groups = sockets * std::max(1, switches);
  const int gen = topo.pcie.generation > 0 ? topo.pcie.generation : m.gpu.pcie_generation;
  const int lanes = topo.pcie.lanes > 0 ? topo.pcie.lanes : m.gpu.pcie_lanes;
  const int up_gen = topo.pcie.uplink_generation > 0 ? topo.pcie.uplink_generation : gen;
  const int up_lanes = topo.pcie.uplink_lanes > 0 ? topo.pcie.uplink_lanes : lanes;
  const Seconds hop = topo.pcie.hop_latency;
  const std::string pcie_layout = section_source(m, "pcie");
  const NetworkTopology* network = topo.network ? &*topo.network : nullptr;
  if (nodes > 1 && network == nullptr) {
    throw std::logic_error("a topology of several nodes needs a network");
  }

  // The network fabric: one non-blocking switch, or leaves under a spine.
  const bool networked = network != nullptr && (nodes > 1 || attach_network);
  std::vector<int> leaves;
  if (networked) {
    int per_leaf = network->nodes_per_leaf > 0 ? std::min(network->nodes_per_leaf, nodes) : nodes;
    int leaf_count = (nodes + per_leaf - 1) / per_leaf;
    int spine = leaf_count > 1 ? t.add_vertex(VertexKind::spine_switch, "spine", -1) : -1;
    for (int l = 0; l < leaf_count; ++l) {
      int leaf = t.add_vertex(VertexKind::leaf_switch, fmt::format("leaf{}", l), -1);
      leaves.push_back(leaf);
      if (spine >= 0) {
        BytesPerSecond up(static_cast<double>(per_leaf * network->nics_per_node) *
                          network->nic_bandwidth.value() / network->oversubscription);
        t.leaf_uplinks_.push_back(
            t.add_link(leaf, spine, LinkKind::network, up, Seconds(0), 0,
                       fmt::format("leaf uplink (1:{:g})", network->oversubscription),
                       section_source(m, "network")));
      }
    }
  }

  for (int n = 0; n < nodes; ++n) {
    std::string prefix = nodes > 1 ? fmt::format("n{}.", n) : "";
    std::vector<int> cpus;
    for (int s = 0; s < sockets; ++s) {
      cpus.push_back(t.add_vertex(VertexKind::cpu, fmt::format("{}cpu{}", prefix, s), n));
    }
    for (int a = 0; a < sockets; ++a) {
      for (int b = a + 1; b < sockets; ++b) {
        t.add_link(cpus[static_cast<std::size_t>(a)], cpus[static_cast<std::size_t>(b)],
                   LinkKind::socket, topo.sockets->bandwidth, topo.sockets->latency, 0,
                   "inter-socket", section_source(m, "sockets"));
      }
    }
    // Attachment points of the PCIe groups: switches, or the root complexes themselves.
    std::vector<int> group_vertex;
    std::vector<int> group_socket;
    const LinkKind into_group = switches == 0 ? LinkKind::host_bridge : LinkKind::pcie;
    for (int g = 0; g < groups; ++g) {
      int socket = g / std::max(1, switches);
      group_socket.push_back(socket);
      if (switches == 0) {
        group_vertex.push_back(cpus[static_cast<std::size_t>(socket)]);
        continue;
      }
      int sw = t.add_vertex(VertexKind::pcie_switch, fmt::format("{}pcie-switch{}", prefix, g), n);
      t.add_link(sw, cpus[static_cast<std::size_t>(socket)], LinkKind::host_bridge,
                 pcie_link_bandwidth(up_gen, up_lanes), hop, up_lanes, pcie_label(up_gen, up_lanes),
                 pcie_source(up_gen, up_lanes) + "; layout: " + pcie_layout);
      group_vertex.push_back(sw);
    }
    std::vector<int> gpus;
    for (int g = 0; g < m.gpus_per_node; ++g) {
      int v = t.add_vertex(VertexKind::gpu, fmt::format("{}gpu{}", prefix, g), n);
      int group = g * groups / m.gpus_per_node;
      t.add_link(v, group_vertex[static_cast<std::size_t>(group)], into_group,
                 pcie_link_bandwidth(gen, lanes), hop, lanes, pcie_label(gen, lanes),
                 pcie_source(gen, lanes) + "; layout: " + pcie_layout);
      gpus.push_back(v);
      t.gpu_vertices_.push_back(v);
      t.gpu_root_.push_back(
          cpus[static_cast<std::size_t>(group_socket[static_cast<std::size_t>(group)])]);
    }
    if (topo.nvlink.shape != NvlinkShape::none) {
      const NvlinkSpec& nv = *m.gpu.nvlink;
      std::string nv_source = "link rate: GPU catalogue (" + m.gpu.sources.at("nvlink") +
                              "); layout: " + section_source(m, "nvlink");
      auto link_pairs = [&](const std::vector<NvlinkTopology::Pair>& pairs) {
        for (const NvlinkTopology::Pair& p : pairs) {
          t.add_link(gpus[static_cast<std::size_t>(p.a)], gpus[static_cast<std::size_t>(p.b)],
                     LinkKind::nvlink, nv.per_link_per_direction * static_cast<double>(p.links),
                     topo.nvlink.latency, p.links,
                     fmt::format("NVLink{} x{}", nv.generation, p.links), nv_source);
        }
      };
      switch (topo.nvlink.shape) {
        case NvlinkShape::pairs: {
          std::vector<NvlinkTopology::Pair> pairs;
          for (int g = 0; g + 1 < m.gpus_per_node; g += 2)
            pairs.push_back({g, g + 1, nv.links});
          link_pairs(pairs);
          break;
        }
        case NvlinkShape::cube_mesh:
          link_pairs(dgx1_cube_mesh());
          break;
        case NvlinkShape::explicit_links:
          link_pairs(topo.nvlink.pairs);
          break;
        case NvlinkShape::nvswitch: {
          // The NVSwitch planes act as one non-blocking fabric; each GPU reaches it with all
          // of its NVLinks.
          int fabric = t.add_vertex(VertexKind::nvswitch, prefix + "nvswitch", n);
          for (int v : gpus) {
            t.add_link(v, fabric, LinkKind::nvswitch,
                       nv.per_link_per_direction * static_cast<double>(nv.links),
                       topo.nvlink.latency, nv.links,
                       fmt::format("NVLink{} x{} to NVSwitch", nv.generation, nv.links), nv_source);
          }
          break;
        }
        case NvlinkShape::none:
          break;
      }
    }
    if (networked) {
      t.nics_.emplace_back();
      t.nic_links_.emplace_back();
      int per_leaf = network->nodes_per_leaf > 0 ? std::min(network->nodes_per_leaf, nodes) : nodes;
      int leaf = leaves[static_cast<std::size_t>(n / per_leaf)];
      t.leaf_of_node_.push_back(leaf);
      for (int i = 0; i < network->nics_per_node; ++i) {
        int nic = t.add_vertex(VertexKind::nic, fmt::format("{}nic{}", prefix, i), n);
        t.nics_.back().push_back(nic);
        int group = i * groups / network->nics_per_node;
        t.add_link(nic, group_vertex[static_cast<std::size_t>(group)], into_group,
                   pcie_link_bandwidth(gen, lanes), hop, lanes, pcie_label(gen, lanes),
                   pcie_source(gen, lanes) + "; layout: " + pcie_layout);
        // The machine file gives NIC-to-NIC latency through the fabric: half on each side.
        t.nic_links_.back().push_back(
            t.add_link(nic, leaf, LinkKind::network, network->nic_bandwidth, network->latency * 0.5,
                       0, fmt::format("{:g} Gb/s NIC", network->nic_bandwidth.value() * 8 / 1e9),
                       section_source(m, "network")));
      }
    }
  }
  return t;
}

void Topology::degrade(int link, double fraction) {
  if (!paths_.empty() || !mirror_paths_.empty() || !fabric_paths_.empty()) {
    throw std::logic_error("a link degraded after paths were computed");
  }
  if (link < 0 || link >= static_cast<int>(links_.size()) || !(fraction >= 0 && fraction <= 1)) {
    throw std::logic_error("a fault on an unknown link or at a fraction outside [0, 1]");
  }
  TopologyLink& l = links_[static_cast<std::size_t>(link)];
  if (fraction == 0) {
    l.down = true;
  } else {
    l.bandwidth = BytesPerSecond(l.bandwidth.value() * fraction);
  }
}

int Topology::nic_link(int node, int nic) const {
  if (node < 0 || node >= static_cast<int>(nic_links_.size())) return -1;
  const std::vector<int>& links = nic_links_[static_cast<std::size_t>(node)];
  return nic >= 0 && nic < static_cast<int>(links.size()) ? links[static_cast<std::size_t>(nic)]
                                                          : -1;
}

int Topology::leaf_of_node(int node) const {
  return node >= 0 && node < static_cast<int>(leaf_of_node_.size())
             ? leaf_of_node_[static_cast<std::size_t>(node)]
             : -1;
}

int Topology::leaf_uplink(int leaf) const {
  return leaf >= 0 && leaf < static_cast<int>(leaf_uplinks_.size())
             ? leaf_uplinks_[static_cast<std::size_t>(leaf)]
             : -1;
}

bool Topology::gpus_connected() const {
  if (gpu_vertices_.empty()) return true;
  std::vector<bool> seen(vertices_.size(), false);
  std::vector<int> stack = {gpu_vertices_.front()};
  seen[static_cast<std::size_t>(stack.front())] = true;
  while (!stack.empty()) {
    const int v = stack.back();
    stack.pop_back();
    if (v != gpu_vertices_.front() &&
        vertices_[static_cast<std::size_t>(v)].kind == VertexKind::gpu)
      continue;  // an endpoint, never a relay
    for (int l : adjacency_[static_cast<std::size_t>(v)]) {
      const TopologyLink& link = links_[static_cast<std::size_t>(l)];
      const int w = link.a == v ? link.b : link.a;
      if (link.down || seen[static_cast<std::size_t>(w)]) continue;
      seen[static_cast<std::size_t>(w)] = true;
      stack.push_back(w);
    }
  }
  return std::all_of(gpu_vertices_.begin(), gpu_vertices_.end(),
                     [&](int g) { return seen[static_cast<std::size_t>(g)]; });
}

Path Topology::shortest(int from, int to) const {
  // Dijkstra with a cost per hop of its latency plus the time to move 1 MiB, so fast links win
  // and ties break on link order. GPUs are endpoints, never relays, and so are the other
  // nodes: a route enters no machine but its ends' (a host does not forward between its NICs),
  // which also keeps the search to two nodes and the switches, not the whole cluster (a search
  // per pair across 2,048 nodes was most of a prediction's time).
  const std::size_t n = vertices_.size();
  const int from_node = vertices_[static_cast<std::size_t>(from)].node;
  const int to_node = vertices_[static_cast<std::size_t>(to)].node;
  // The search's figures per vertex live across searches, valid where stamped with this one:
  // a search touches two nodes and the switches, and clearing arrays the size of the cluster
  // for each was most of its cost.
  if (search_.stamp.size() != n) search_ = Search{std::vector<std::uint32_t>(n, 0), {}, {}, 0};
  search_.cost.resize(n);
  search_.via.resize(n);
  if (search_.round == std::numeric_limits<std::uint32_t>::max()) {
    std::fill(search_.stamp.begin(), search_.stamp.end(), 0);
    search_.round = 0;
  }
  const std::uint32_t round = ++search_.round;
  auto cost = [&](int v) -> double& {
    const auto i = static_cast<std::size_t>(v);
    if (search_.stamp[i] != round) {
      search_.stamp[i] = round;
      search_.cost[i] = std::numeric_limits<double>::infinity();
      search_.via[i] = -1;
    }
    return search_.cost[i];
  };
  auto via = [&](int v) -> int& {
    cost(v);
    return search_.via[static_cast<std::size_t>(v)];
  };
  using Item = std::pair<double, int>;
  std::priority_queue<Item, std::vector<Item>, std::greater<>> queue;
  cost(from) = 0;
  queue.push({0, from});
  while (!queue.empty()) {
    auto [c, v] = queue.top();
    queue.pop();
    if (c > cost(v)) continue;
    if (v == to) break;
    if (v != from && vertices_[static_cast<std::size_t>(v)].kind == VertexKind::gpu) continue;
    for (int l : adjacency_[static_cast<std::size_t>(v)]) {
      const TopologyLink& link = links_[static_cast<std::size_t>(l)];
      if (link.down) continue;
      int w = link.a == v ? link.b : link.a;
      const Vertex& next = vertices_[static_cast<std::size_t>(w)];
      if (next.node >= 0 && next.node != from_node && next.node != to_node) continue;
      // Nor does it cross a leaf but its ends' (another leaf leads only to other nodes): with
      // thousands of nodes, expanding every leaf under the spine was most of a search.
      if (next.kind == VertexKind::leaf_switch && from_node >= 0 && to_node >= 0 &&
          w != leaf_of_node(from_node) && w != leaf_of_node(to_node))
        continue;
      // Routes follow the links' nominal rates: a degraded link (a fault) is slower, not avoided.
      double step =
          link.latency.value() + static_cast<double>(kMiB) / link.routing_bandwidth.value();
      if (c + step < cost(w)) {
        cost(w) = c + step;
        via(w) = l;
        queue.push({c + step, w});
      }
    }
  }
  if (via(to) < 0 && from != to) {
    throw std::logic_error(fmt::format("no route from {} to {}",
                                       vertices_[static_cast<std::size_t>(from)].name,
                                       vertices_[static_cast<std::size_t>(to)].name));
  }
  Path path;
  path.bottleneck = BytesPerSecond(std::numeric_limits<double>::infinity());
  for (int v = to; v != from;) {
    int l = via(v);
    const TopologyLink& link = links_[static_cast<std::size_t>(l)];
    int u = link.a == v ? link.b : link.a;
    path.hops.push_back({l, link.a == u});
    path.latency += link.latency;
    path.bottleneck = std::min(path.bottleneck, link.bandwidth);
    v = u;
  }
  std::reverse(path.hops.begin(), path.hops.end());
  return path;
}

const Path& Topology::path(int a, int b) const {
  auto key = std::make_pair(a, b);
  auto found = paths_.find(key);
  if (found != paths_.end()) return found->second;
  int va = gpu_vertex(a), vb = gpu_vertex(b);
  Path p;
  if (a != b && !peer_to_peer_ && node_of(a) == node_of(b) && nvlinks(a, b) == 0) {
    // Without peer-to-peer, the driver stages the data through host memory: up to the sender's
    // root complex, then down to the receiver (across sockets if need be).
    int root = gpu_root_[static_cast<std::size_t>(a)];
    Path up = shortest(va, root);
    Path down = shortest(root, vb);
    p.hops = up.hops;
    p.hops.insert(p.hops.end(), down.hops.begin(), down.hops.end());
    p.latency = up.latency + down.latency;
    p.bottleneck = std::min(up.bottleneck, down.bottleneck);
  } else {
    p = shortest(va, vb);
  }
  return paths_.emplace(key, std::move(p)).first->second;
}

const Path& Topology::mirror_path(int gpu) const {
  auto found = mirror_paths_.find(gpu);
  if (found != mirror_paths_.end()) return found->second;
  if (nics_.empty()) throw std::logic_error("a mirror path needs the node's network");
  const std::vector<int>& nics = nics_[static_cast<std::size_t>(node_of(gpu))];
  int local = gpu % gpus_per_node_;
  // The GPU's own NIC, or with its network link down (a fault), the next NIC of the node.
  const int count = static_cast<int>(nics.size());
  const int own = local * count / gpus_per_node_;
  int nic = -1, network_link = -1;
  for (int k = 0; k < count && network_link < 0; ++k) {
    nic = nics[static_cast<std::size_t>((own + k) % count)];
    for (int l : adjacency_[static_cast<std::size_t>(nic)]) {
      const TopologyLink& link = links_[static_cast<std::size_t>(l)];
      if (link.kind == LinkKind::network && !link.down) network_link = l;
    }
  }
  if (network_link < 0) throw std::logic_error("a mirror path from a node whose NICs are all down");
  Path up = shortest(gpu_vertex(gpu), nic);
  Path down = shortest(nic, gpu_vertex(gpu));
  const TopologyLink& wire = links_[static_cast<std::size_t>(network_link)];
  Path p;
  p.hops = up.hops;
  p.hops.push_back({network_link, wire.a == nic});
  p.hops.push_back({network_link, wire.a != nic});
  p.hops.insert(p.hops.end(), down.hops.begin(), down.hops.end());
  p.latency = up.latency + down.latency + wire.latency * 2.0;
  p.bottleneck = std::min({up.bottleneck, down.bottleneck, wire.bandwidth});
  return mirror_paths_.emplace(gpu, std::move(p)).first->second;
}

int Topology::nvswitch_of(int gpu) const {
  const int v = gpu_vertex(gpu);
  for (int l : adjacency_[static_cast<std::size_t>(v)]) {
    const TopologyLink& link = links_[static_cast<std::size_t>(l)];
    if (link.kind == LinkKind::nvswitch) return link.a == v ? link.b : link.a;
  }
  return -1;
}

const Path& Topology::fabric_path(int gpu, FabricWay way) const {
  auto found = fabric_paths_.find({gpu, way});
  if (found != fabric_paths_.end()) return found->second;
  const int fabric = nvswitch_of(gpu);
  if (fabric < 0 || way == FabricWay::none) {
    throw std::logic_error("a fabric path needs an NVSwitch and a way");
  }
  Path p;
  if (way == FabricWay::out_of_switch) {
    p = shortest(fabric, gpu_vertex(gpu));
  } else {
    p = shortest(gpu_vertex(gpu), fabric);
  }
  if (way == FabricWay::round_trip) {
    Path down = shortest(fabric, gpu_vertex(gpu));
    p.hops.insert(p.hops.end(), down.hops.begin(), down.hops.end());
    p.latency = p.latency + down.latency;
    p.bottleneck = std::min(p.bottleneck, down.bottleneck);
  }
  return fabric_paths_.emplace(std::make_pair(gpu, way), std::move(p)).first->second;
}

int Topology::direct_nvlinks(int a, int b) const {
  int va = gpu_vertex(a), vb = gpu_vertex(b);
  for (int l : adjacency_[static_cast<std::size_t>(va)]) {
    const TopologyLink& link = links_[static_cast<std::size_t>(l)];
    if (link.kind == LinkKind::nvlink && (link.a == vb || link.b == vb)) return link.lanes;
  }
  return 0;
}

int Topology::nvlinks(int a, int b) const {
  int va = gpu_vertex(a), vb = gpu_vertex(b);
  int fabric_links = 0;
  for (int l : adjacency_[static_cast<std::size_t>(va)]) {
    const TopologyLink& link = links_[static_cast<std::size_t>(l)];
    if (link.kind == LinkKind::nvlink && (link.a == vb || link.b == vb)) return link.lanes;
    if (link.kind == LinkKind::nvswitch) {
      int fabric = link.a == va ? link.b : link.a;
      for (int m : adjacency_[static_cast<std::size_t>(vb)]) {
        const TopologyLink& other = links_[static_cast<std::size_t>(m)];
        if (other.kind == LinkKind::nvswitch && (other.a == fabric || other.b == fabric)) {
          fabric_links = std::min(link.lanes, other.lanes);
        }
      }
    }
  }
  return fabric_links;
}

PathType Topology::path_type(int a, int b) const {
  if (a == b) return PathType::self;
  if (node_of(a) != node_of(b)) return PathType::net;
  if (nvlinks(a, b) > 0) return PathType::nvlink;
  int switches = 0;
  bool cpu = false, socket = false;
  for (const Hop& hop : path(a, b).hops) {
    const TopologyLink& link = links_[static_cast<std::size_t>(hop.link)];
    if (link.kind == LinkKind::socket) socket = true;
    for (int v : {link.a, link.b}) {
      VertexKind kind = vertices_[static_cast<std::size_t>(v)].kind;
      if (kind == VertexKind::cpu) cpu = true;
      if (kind == VertexKind::pcie_switch) ++switches;
    }
  }
  if (socket) return PathType::sys;
  if (cpu) return PathType::phb;
  // Each switch on the path is counted once per adjacent hop.
  return switches <= 2 ? PathType::pix : PathType::pxb;
}

bool Topology::nccl_peer_to_peer(int a, int b) const {
  if (a == b || node_of(a) != node_of(b) || nvlinks(a, b) > 0) return true;
  if (!peer_to_peer_) return false;
  switch (path_type(a, b)) {
    case PathType::pix:
      return nccl_p2p_level_ >= P2pLevel::pix;
    case PathType::pxb:
      return nccl_p2p_level_ >= P2pLevel::pxb;
    case PathType::phb:
      return nccl_p2p_level_ >= P2pLevel::phb;
    case PathType::sys:
      return nccl_p2p_level_ >= P2pLevel::sys;
    case PathType::self:
    case PathType::nvlink:
    case PathType::net:
      break;
  }
  return true;
}

std::string Topology::path_label(int a, int b) const {
  switch (path_type(a, b)) {
    case PathType::self:
      return "X";
    case PathType::nvlink:
      return fmt::format("NV{}", nvlinks(a, b));
    case PathType::pix:
      return "PIX";
    case PathType::pxb:
      return "PXB";
    case PathType::phb:
      return "PHB";
    case PathType::sys:
      return "SYS";
    case PathType::net:
      return "NET";
  }
  return "?";
}

}  // namespace epochcast::sim

// Registering topology links and routes with the flow network.
#include "sim/network/network_map.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

namespace epochcast::sim {

BytesPerSecond usable_rate(BytesPerSecond nominal, LinkKind kind, const HardwareProfile& profile) {
  return nominal * profile.links.efficiency[static_cast<std::size_t>(kind)];
}

BytesPerSecond link_capacity(const TopologyLink& link, const HardwareProfile& profile) {
  const LinkKind carries = link.kind == LinkKind::host_bridge ? LinkKind::pcie : link.kind;
  return usable_rate(link.bandwidth, carries, profile);
}

NetworkMap::NetworkMap(const Topology& topology, const HardwareProfile& profile,
                       MaxMinFairNetwork& network,
                       std::vector<std::array<Seconds, kLinkKinds>> step_tables)
    : topology_(topology),
      profile_(profile),
      network_(network),
      step_tables_(std::move(step_tables)) {
  if (step_tables_.empty()) step_tables_.push_back(profile.links.step_latency);
  for (const TopologyLink& link : topology.links()) {
    const BytesPerSecond capacity = link_capacity(link, profile);
    const std::string& a = topology.vertices()[static_cast<std::size_t>(link.a)].name;
    const std::string& b = topology.vertices()[static_cast<std::size_t>(link.b)].name;
    network.add_link(fmt::format("{} {}->{}", link.label, a, b), capacity);
    network.add_link(fmt::format("{} {}->{}", link.label, b, a), capacity);
  }
  mark_never_binding();
}

void NetworkMap::mark_never_binding() {
  // A leaf's uplink to the spine: no route starts, ends or turns back at a network switch there
  // (routes join GPUs, or a GPU and its NVSwitch; a mirror route turns back at its leaf only on
  // its own NIC's link), so a flow on the uplink came into the leaf by one of the leaf's NIC
  // links, or leaves the leaf by one. When those links together carry no more than the uplink,
  // its flows can never fill it: a non-blocking leaf's uplink, as wide as the leaf's NICs
  // together, is no flow's bottleneck whatever the traffic, and the allocation is the same
  // without it. The NIC links stay in the allocation (the argument leans on them), and so does
  // a degraded or oversubscribed uplink, which is narrower.
  const std::vector<TopologyLink>& links = topology_.links();
  const std::vector<Vertex>& vertices = topology_.vertices();
  auto network_switch = [&](int v) {
    const VertexKind kind = vertices[static_cast<std::size_t>(v)].kind;
    return kind == VertexKind::leaf_switch || kind == VertexKind::spine_switch;
  };
  auto capacity = [&](const TopologyLink& link) {
    return link.down ? 0.0 : link_capacity(link, profile_).value();
  };
  // Per vertex: its links to vertices other than switches, summed; its links to switches.
  std::vector<double> edge_capacity(vertices.size(), 0);
  std::vector<int> switch_links(vertices.size(), 0);
  for (const TopologyLink& link : links) {
    for (const auto& [end, other] : {std::pair{link.a, link.b}, std::pair{link.b, link.a}}) {
      if (network_switch(other)) {
        ++switch_links[static_cast<std::size_t>(end)];
      } else {
        edge_capacity[static_cast<std::size_t>(end)] += capacity(link);
      }
    }
  }
  // Sums of a few hundred links' capacities round: a relative tolerance far below a nanosecond.
  constexpr double kTolerance = 1e-9;
  for (std::size_t i = 0; i < links.size(); ++i) {
    const TopologyLink& link = links[i];
    const double own = capacity(link);
    if (link.down || !(own > 0) || !network_switch(link.a) || !network_switch(link.b)) continue;
    // At a leaf whose only link to a switch is this one, fed by links to its NICs.
    auto bounded_at = [&](int end) {
      const auto v = static_cast<std::size_t>(end);
      return switch_links[v] == 1 && edge_capacity[v] <= own * (1 + kTolerance);
    };
    if (!bounded_at(link.a) && !bounded_at(link.b)) continue;
    network_.set_never_binding(static_cast<std::uint32_t>(2 * i));
    network_.set_never_binding(static_cast<std::uint32_t>(2 * i + 1));
  }
}

RouteRate route_rate(const Topology& topology, const HardwareProfile& profile, const Path& path,
                     std::optional<LinkKind> transport) {
  RouteRate rate;
  bool first = true;
  for (const Hop& hop : path.hops) {
    const TopologyLink& link = topology.links()[static_cast<std::size_t>(hop.link)];
    const BytesPerSecond effective = link_capacity(link, profile);
    if (first || effective < rate.bandwidth) {
      rate.bandwidth = effective;
      rate.slowest = link.kind;
      rate.nominal = link.bandwidth;
      first = false;
    }
  }
  // The links' own capacity along the path, against which a slower route's flows are scaled.
  const BytesPerSecond capacity = rate.bandwidth;
  if (transport != LinkKind::shm && topology.peer_to_peer()) {
    // Peer to peer through a root complex (or a NIC's traffic through it): forwarded between
    // two of its ports, far below the links' DMA rate (links.efficiency.host_bridge). Where the
    // driver allows no peer-to-peer it stages a copy through host memory instead, DMA at the
    // links' rate.
    for (const Hop& hop : path.hops) {
      const TopologyLink& link = topology.links()[static_cast<std::size_t>(hop.link)];
      if (link.kind != LinkKind::host_bridge) continue;
      const BytesPerSecond forwarded = usable_rate(link.bandwidth, LinkKind::host_bridge, profile);
      if (forwarded < rate.bandwidth) {
        rate.bandwidth = forwarded;
        rate.slowest = LinkKind::host_bridge;
        rate.nominal = link.bandwidth;
      }
    }
  }
  if (transport && !path.hops.empty()) {
    // NCCL's shared-memory transport: the sender's kernel writes into mapped host memory and
    // the receiver's reads it back (NVIDIA/nccl src/transport/shm.cc), both across PCIe.
    // NVLink SHARP: the switch reduces and multicasts. Either's rate is taken against the
    // narrowest link the data crosses.
    BytesPerSecond narrowest =
        topology.links()[static_cast<std::size_t>(path.hops[0].link)].bandwidth;
    for (const Hop& hop : path.hops) {
      narrowest =
          std::min(narrowest, topology.links()[static_cast<std::size_t>(hop.link)].bandwidth);
    }
    const BytesPerSecond reached = usable_rate(narrowest, *transport, profile);
    if (reached < rate.bandwidth) rate.bandwidth = reached;
    rate.slowest = *transport;
    rate.nominal = narrowest;
  }
  if (rate.bandwidth < capacity) rate.data_factor = capacity.value() / rate.bandwidth.value();
  return rate;
}

std::uint32_t NetworkMap::add(const Path& path, int step_table, std::optional<LinkKind> transport,
                              int steps, std::optional<std::uint32_t> kernel) {
  std::vector<std::uint32_t> links;
  Seconds latency;
  for (const Hop& hop : path.hops) {
    links.push_back(directed_link(hop));
    latency += topology_.links()[static_cast<std::size_t>(hop.link)].latency;
  }
  if (kernel && !links.empty()) links.push_back(*kernel);
  const RouteRate rate = route_rate(topology_, profile_, path, transport);
  if (step_table >= 0 && !path.hops.empty()) {
    // NCCL's per-step latencies are measured hop to hop, wire included: they replace the
    // links' own (which plain copies pay).
    latency = step_tables_.at(
        static_cast<std::size_t>(step_table))[static_cast<std::size_t>(rate.slowest)];
  }
  // Each step's latency rounded as a single step's is, so that the steps cost what a chain of
  // single steps costs.
  const SimTime per_step = SimTime::from_seconds(latency);
  std::uint32_t id = network_.add_route(std::move(links), SimTime::from_ns(per_step.ns() * steps));
  if (data_factors_.size() <= id) data_factors_.resize(id + 1, 1.0);
  data_factors_[id] = rate.data_factor;
  return id;
}

double NetworkMap::data_factor(std::uint32_t route) const {
  return route < data_factors_.size() ? data_factors_[route] : 1.0;
}

std::uint32_t NetworkMap::cached(int src, int dst, Via via, int step_table, FabricWay way,
                                 int steps) {
  // GPUs below 2^24, step tables from -1 below 2^10, and the two enums in 3 bits each.
  if (src < 0 || dst < 0 || src >= (1 << 24) || dst >= (1 << 24) || step_table < -1 ||
      step_table >= (1 << 10) - 1 || steps < 1) {
    throw std::logic_error("a route key out of range");
  }
  const std::uint64_t key = static_cast<std::uint64_t>(src) << 40 |
                            static_cast<std::uint64_t>(dst) << 16 |
                            static_cast<std::uint64_t>(step_table + 1) << 6 |
                            static_cast<std::uint64_t>(via) << 3 | static_cast<std::uint64_t>(way);
  const auto source = static_cast<std::size_t>(src);
  if (source >= recent_.size()) recent_.resize(source + 1);
  if (recent_[source].key == key && recent_[source].steps == steps) return recent_[source].id;
  const std::uint32_t id = lookup(src, dst, via, step_table, way, steps, key);
  recent_[source] = Recent{key, steps, id};
  return id;
}

std::uint32_t NetworkMap::lookup(int src, int dst, Via via, int step_table, FabricWay way,
                                 int steps, std::uint64_t key) {
  if (steps == 1) {
    auto found = routes_.find(key);
    if (found != routes_.end()) return found->second;
  } else {
    auto found = multi_step_routes_.find({key, steps});
    if (found != multi_step_routes_.end()) return found->second;
  }
  std::uint32_t id = 0;
  switch (via) {
    case Via::peer: {
      id = add(topology_.path(src, dst), step_table, peer_transport(src, dst, step_table), steps);
      break;
    }
    case Via::mirror:
      id = add(topology_.mirror_path(src), step_table, std::nullopt, steps);
      break;
    case Via::in_network:
      id = add(topology_.mirror_path(src), step_table, LinkKind::sharp, steps);
      break;
    case Via::fabric:
      id = add(topology_.fabric_path(src, way), step_table, LinkKind::nvls, steps);
      break;
  }
  if (steps == 1) {
    routes_.emplace(key, id);
  } else {
    multi_step_routes_.emplace(std::pair{key, steps}, id);
  }
  return id;
}

std::optional<LinkKind> NetworkMap::peer_transport(int src, int dst, int step_table) const {
  if (step_table >= 0 && !topology_.nccl_peer_to_peer(src, dst)) return LinkKind::shm;
  return std::nullopt;
}

std::uint32_t NetworkMap::kernel_link(int gpu, double rate) {
  auto [found, added] = kernel_links_.try_emplace({gpu, rate}, 0);
  if (added) {
    found->second = network_.add_link(fmt::format("gpu{} NCCL kernel {:.4g} GB/s", gpu, rate / 1e9),
                                      BytesPerSecond(rate));
  }
  return found->second;
}

std::uint32_t NetworkMap::through_kernel(std::uint32_t plain, int gpu, const Path& path,
                                         int step_table, std::optional<LinkKind> transport,
                                         int steps, double rate) {
  auto [found, added] = kernel_routes_.try_emplace({plain, rate}, 0);
  if (added) found->second = add(path, step_table, transport, steps, kernel_link(gpu, rate));
  return found->second;
}

std::uint32_t NetworkMap::route(int src, int dst, int step_table, int steps, double kernel_rate) {
  const std::uint32_t plain = cached(src, dst, Via::peer, step_table, FabricWay::none, steps);
  if (!(kernel_rate > 0)) return plain;
  return through_kernel(plain, src, topology_.path(src, dst), step_table,
                        peer_transport(src, dst, step_table), steps, kernel_rate);
}

std::uint32_t NetworkMap::mirror_route(int gpu, int step_table, bool in_network, int steps,
                                       double kernel_rate) {
  const std::uint32_t plain = cached(gpu, gpu, in_network ? Via::in_network : Via::mirror,
                                     step_table, FabricWay::none, steps);
  if (!(kernel_rate > 0)) return plain;
  return through_kernel(plain, gpu, topology_.mirror_path(gpu), step_table,
                        in_network ? std::optional<LinkKind>(LinkKind::sharp) : std::nullopt, steps,
                        kernel_rate);
}

std::uint32_t NetworkMap::fabric_route(int gpu, int step_table, FabricWay way, int steps) {
  return cached(gpu, gpu, Via::fabric, step_table, way, steps);
}

}  // namespace epochcast::sim

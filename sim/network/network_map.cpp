// Registering topology links and routes with the flow network.
#include "sim/network/network_map.h"

#include <fmt/format.h>

namespace epochcast::sim {

NetworkMap::NetworkMap(const Topology& topology, const HardwareProfile& profile,
                       MaxMinFairNetwork& network,
                       std::vector<std::array<Seconds, kLinkKinds>> step_tables)
    : topology_(topology),
      profile_(profile),
      network_(network),
      step_tables_(std::move(step_tables)) {
  if (step_tables_.empty()) step_tables_.push_back(profile.links.step_latency);
  for (const TopologyLink& link : topology.links()) {
    BytesPerSecond capacity =
        link.bandwidth * profile.links.efficiency[static_cast<std::size_t>(link.kind)];
    const std::string& a = topology.vertices()[static_cast<std::size_t>(link.a)].name;
    const std::string& b = topology.vertices()[static_cast<std::size_t>(link.b)].name;
    network.add_link(fmt::format("{} {}->{}", link.label, a, b), capacity);
    network.add_link(fmt::format("{} {}->{}", link.label, b, a), capacity);
  }
}

std::uint32_t NetworkMap::add(const Path& path, int step_table) {
  std::vector<std::uint32_t> links;
  Seconds latency;
  double slowest = 0;
  LinkKind slowest_kind = LinkKind::pcie;
  bool first = true;
  for (const Hop& hop : path.hops) {
    const TopologyLink& link = topology_.links()[static_cast<std::size_t>(hop.link)];
    links.push_back(directed_link(hop));
    latency += link.latency;
    double capacity =
        link.bandwidth.value() * profile_.links.efficiency[static_cast<std::size_t>(link.kind)];
    if (first || capacity < slowest) {
      slowest = capacity;
      slowest_kind = link.kind;
      first = false;
    }
  }
  if (step_table >= 0 && !path.hops.empty()) {
    latency += step_tables_.at(
        static_cast<std::size_t>(step_table))[static_cast<std::size_t>(slowest_kind)];
  }
  return network_.add_route(std::move(links), SimTime::from_seconds(latency));
}

std::uint32_t NetworkMap::route(int src, int dst, int step_table) {
  auto key = std::make_tuple(src, dst, false, step_table);
  auto found = routes_.find(key);
  if (found != routes_.end()) return found->second;
  std::uint32_t id = add(topology_.path(src, dst), step_table);
  routes_.emplace(key, id);
  return id;
}

std::uint32_t NetworkMap::mirror_route(int gpu, int step_table) {
  auto key = std::make_tuple(gpu, gpu, true, step_table);
  auto found = routes_.find(key);
  if (found != routes_.end()) return found->second;
  std::uint32_t id = add(topology_.mirror_path(gpu), step_table);
  routes_.emplace(key, id);
  return id;
}

}  // namespace epochcast::sim

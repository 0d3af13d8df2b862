// The bridge between a topology and the flow network: one directed link per direction of every
// topology link (at its effective bandwidth), and the route of every GPU pair registered once.
#pragma once

#include <map>
#include <utility>

#include "core/spec/profile_spec.h"
#include "sim/network/max_min_fair.h"
#include "sim/network/topology.h"

namespace epochcast::sim {

class NetworkMap {
 public:
  // Adds the links of `topology` to `network` (which it must outlive).
  NetworkMap(const Topology& topology, const HardwareProfile& profile, MaxMinFairNetwork& network);

  // Route ids for the network's flows. `step_latency`: add the profile's per-step software
  // latency of the slowest link kind (for collective steps; plain copies pass false).
  std::uint32_t route(int src, int dst, bool step_latency);
  std::uint32_t mirror_route(int gpu, bool step_latency);

  std::uint32_t directed_link(const Hop& hop) const {
    return static_cast<std::uint32_t>(2 * hop.link + (hop.forward ? 0 : 1));
  }

 private:
  std::uint32_t add(const Path& path, bool step_latency);

  const Topology& topology_;
  const HardwareProfile& profile_;
  MaxMinFairNetwork& network_;
  std::map<std::tuple<int, int, bool, bool>, std::uint32_t> routes_;
};

}  // namespace epochcast::sim

// The bridge between a topology and the flow network: one directed link per direction of every
// topology link (at its effective bandwidth), and the route of every GPU pair registered once.
#pragma once

#include <array>
#include <map>
#include <utility>
#include <vector>

#include "core/spec/profile_spec.h"
#include "sim/network/max_min_fair.h"
#include "sim/network/topology.h"

namespace epochcast::sim {

class NetworkMap {
 public:
  // Adds the links of `topology` to `network` (which it must outlive). `step_tables`: per-step
  // software latencies by the slowest link's kind, one table per way of stepping (NCCL's
  // protocols); without them, the profile's own.
  NetworkMap(const Topology& topology, const HardwareProfile& profile, MaxMinFairNetwork& network,
             std::vector<std::array<Seconds, kLinkKinds>> step_tables = {});

  // Route ids for the network's flows. `step_table`: add that table's per-step latency for the
  // slowest link kind (collective steps); -1 for plain copies.
  std::uint32_t route(int src, int dst, int step_table);
  std::uint32_t mirror_route(int gpu, int step_table);

  std::uint32_t directed_link(const Hop& hop) const {
    return static_cast<std::uint32_t>(2 * hop.link + (hop.forward ? 0 : 1));
  }

 private:
  std::uint32_t add(const Path& path, int step_table);

  const Topology& topology_;
  const HardwareProfile& profile_;
  MaxMinFairNetwork& network_;
  std::vector<std::array<Seconds, kLinkKinds>> step_tables_;
  std::map<std::tuple<int, int, bool, int>, std::uint32_t> routes_;
};

}  // namespace epochcast::sim

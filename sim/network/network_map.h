// The bridge between a topology and the flow network: one directed link per direction of every
// topology link (at its effective bandwidth), and the route of every GPU pair registered once.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <unordered_map>
#include <vector>

#include "core/spec/profile_spec.h"
#include "sim/network/max_min_fair.h"
#include "sim/network/topology.h"

namespace epochcast::sim {

// The rate data reaches over a link of `kind` whose datasheet rate is `nominal`: that times the
// profile's efficiency for the kind (links.efficiency, formats.md). Every link capacity and
// transport rate of the flow network is this one product.
BytesPerSecond usable_rate(BytesPerSecond nominal, LinkKind kind, const HardwareProfile& profile);
// A topology link's capacity in the flow network: usable_rate of its own bandwidth and kind. A
// link into a CPU's root complex (host_bridge) carries DMA to and from host memory, which is
// what NCCL's shared-memory transport moves, at a PCIe link's rate (links.efficiency.pcie, as
// pinned copies); its own figure, links.efficiency.host_bridge, is the rate at which the root
// complex forwards peer-to-peer traffic between two of its ports, which route_rate gives the
// routes that carry such traffic.
BytesPerSecond link_capacity(const TopologyLink& link, const HardwareProfile& profile);

// How fast data moves along a path, and which kind of link sets it.
struct RouteRate {
  BytesPerSecond bandwidth;           // effective bottleneck
  LinkKind slowest = LinkKind::pcie;  // the kind whose figures set the rate and step latency
  BytesPerSecond nominal;             // datasheet bandwidth of the bottleneck link
  // Flows carry their bytes times this on the path's links (at their own capacities), so a
  // transfer slower than its links (staged through host memory, forwarded by a root complex)
  // takes as long as `bandwidth` says.
  double data_factor = 1;
};
// The rate of a path. On a machine whose driver allows peer-to-peer, a path through a root
// complex that is not NCCL's shared-memory transport is forwarded peer to peer there, at
// links.efficiency.host_bridge of its links into the root complex (without peer-to-peer the
// driver stages a copy through host memory: DMA at the links' rate). With a `transport` (shm:
// NCCL's shared-memory transport; nvls: NVLink SHARP), at the profile's efficiency for it of the
// path's narrowest link, never faster than the links themselves; that kind then sets the step
// latency.
RouteRate route_rate(const Topology& topology, const HardwareProfile& profile, const Path& path,
                     std::optional<LinkKind> transport);

class NetworkMap {
 public:
  // Adds the links of `topology` to `network` (which it must outlive). `step_tables`: per-step
  // software latencies by the slowest link's kind, one table per way of stepping (NCCL's
  // protocols); without them, the profile's own.
  NetworkMap(const Topology& topology, const HardwareProfile& profile, MaxMinFairNetwork& network,
             std::vector<std::array<Seconds, kLinkKinds>> step_tables = {});

  // Route ids for the network's flows. `step_table`: that table's per-step latency for the
  // slowest link kind (collective steps, staged through host memory where NCCL does not use
  // peer-to-peer); -1 for plain copies. `steps`: the hop made that many times back to back
  // (Transfer::steps), each step paying the latency. `kernel_rate` > 0: the flow also crosses a
  // link of that capacity that stands for the sending GPU's collective kernel, which every flow
  // from `src` at the same rate shares (a protocol's pace, TransferPlan::rank_rate_limit, in the
  // bytes the flows carry).
  std::uint32_t route(int src, int dst, int step_table, int steps = 1, double kernel_rate = 0);
  // `in_network`: the switches reduce the data (SHARP), at the profile's sharp figures.
  // `kernel_rate`: as route's.
  std::uint32_t mirror_route(int gpu, int step_table, bool in_network = false, int steps = 1,
                             double kernel_rate = 0);
  // NVLink SHARP (Topology::fabric_path).
  std::uint32_t fabric_route(int gpu, int step_table, FabricWay way, int steps = 1);
  // What a flow on the route carries per byte of data (RouteRate::data_factor).
  double data_factor(std::uint32_t route) const;

  std::uint32_t directed_link(const Hop& hop) const {
    return static_cast<std::uint32_t>(2 * hop.link + (hop.forward ? 0 : 1));
  }

 private:
  std::uint32_t add(const Path& path, int step_table, std::optional<LinkKind> transport, int steps,
                    std::optional<std::uint32_t> kernel = std::nullopt);
  // A collective step between two GPUs farther apart than NCCL's P2P level stages through host
  // memory (NCCL's shared-memory transport); plain copies (step_table -1) and the rest: none.
  std::optional<LinkKind> peer_transport(int src, int dst, int step_table) const;
  // The link of `gpu`'s collective kernel at `rate` (route's kernel_rate), added once.
  std::uint32_t kernel_link(int gpu, double rate);
  // `plain` (a route from `gpu` over `path`) through `gpu`'s kernel link at `rate`, added once.
  std::uint32_t through_kernel(std::uint32_t plain, int gpu, const Path& path, int step_table,
                               std::optional<LinkKind> transport, int steps, double rate);
  void mark_never_binding();
  enum class Via { peer, mirror, in_network, fabric };
  std::uint32_t cached(int src, int dst, Via via, int step_table, FabricWay way, int steps);
  // The route of a packed key (cached's), from the maps or added.
  std::uint32_t lookup(int src, int dst, Via via, int step_table, FabricWay way, int steps,
                       std::uint64_t key);

  const Topology& topology_;
  const HardwareProfile& profile_;
  MaxMinFairNetwork& network_;
  std::vector<std::array<Seconds, kLinkKinds>> step_tables_;
  // Keyed by (src, dst, via, step table, way) packed into 64 bits: a lookup per transfer of
  // every plan, so it has to be cheap.
  struct KeyHash {  // splitmix64's finaliser: the packed fields spread over every bit
    std::size_t operator()(std::uint64_t x) const {
      x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
      x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
      return static_cast<std::size_t>(x ^ (x >> 31));
    }
  };
  std::unordered_map<std::uint64_t, std::uint32_t, KeyHash> routes_;
  // Routes of several steps (few: one per mirrored rail), by (key, steps).
  std::map<std::pair<std::uint64_t, int>, std::uint32_t> multi_step_routes_;
  std::vector<double> data_factors_;  // by route id
  // Routes through a kernel's link (few: small collectives under LL or LL128), by the plain
  // route and the rate, and those links by (GPU, rate).
  std::map<std::pair<std::uint32_t, double>, std::uint32_t> kernel_routes_;
  std::map<std::pair<int, double>, std::uint32_t> kernel_links_;
  // Each source's last route, checked before the hash map: a plan's transfers from one GPU
  // mostly go the same way (a ring's next rank, a chain's next node), and this array stays in
  // cache where the map's nodes did not (docs/performance.md, "The flow network").
  struct Recent {
    std::uint64_t key = ~std::uint64_t{0};
    int steps = 0;
    std::uint32_t id = 0;
  };
  std::vector<Recent> recent_;  // by source GPU
};

}  // namespace epochcast::sim

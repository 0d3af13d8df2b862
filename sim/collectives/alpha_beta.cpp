// Alpha-beta costs and algorithm choice.
#include "sim/collectives/alpha_beta.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <future>
#include <limits>
#include <stdexcept>
#include <system_error>
#include <unordered_map>

#include "sim/network/network_map.h"

namespace epochcast::sim {

TransferRoute transfer_route(const Topology& topology, const HardwareProfile& profile,
                             const Transfer& transfer) {
  return transfer_route(topology, profile, transfer, profile.links.step_latency);
}

TransferRoute transfer_route(const Topology& topology, const HardwareProfile& profile,
                             const Transfer& transfer,
                             const std::array<Seconds, kLinkKinds>& step_latency) {
  TransferRoute route;
  const bool fabric = transfer.fabric != FabricWay::none;
  const Path& path = fabric            ? topology.fabric_path(transfer.src, transfer.fabric)
                     : transfer.mirror ? topology.mirror_path(transfer.src)
                                       : topology.path(transfer.src, transfer.dst);
  route.hops = path.hops;
  std::optional<LinkKind> transport;
  if (fabric) {
    transport = LinkKind::nvls;
  } else if (transfer.in_network) {
    transport = LinkKind::sharp;
  } else if (!transfer.mirror && !topology.nccl_peer_to_peer(transfer.src, transfer.dst)) {
    transport = LinkKind::shm;
  }
  const RouteRate rate = route_rate(topology, profile, path, transport);
  route.bandwidth = rate.bandwidth;
  route.slowest = rate.slowest;
  route.nominal = rate.nominal;
  if (!route.hops.empty()) {
    // NCCL's per-step latencies are measured hop to hop, wire included: they replace the
    // links' own (which plain copies pay).
    route.latency = step_latency[static_cast<std::size_t>(route.slowest)];
  }
  return route;
}

namespace {

// What a plan's routes cost apart from the protocol, each distinct route once: a plan over many
// ranks crosses the same few kinds of hop many times, and the tuner times each candidate under
// every protocol.
struct PlanRoutes {
  struct Figures {
    bool moves = false;  // a route with hops (a copy onto itself moves nothing)
    LinkKind slowest = LinkKind::pcie;
    double bandwidth = 0;
  };
  std::vector<Figures> figures;
  std::vector<std::uint32_t> of_transfer;  // index into figures
  double ll_clock_scale = 1;               // the GPUs' (protocols.h)
};

PlanRoutes plan_routes(const Topology& topology, const HardwareProfile& profile,
                       const TransferPlan& plan) {
  PlanRoutes routes;
  routes.ll_clock_scale = ll_clock_scale(topology);
  std::unordered_map<std::uint64_t, std::uint32_t> known;  // by (src, dst, how)
  routes.of_transfer.reserve(plan.transfers.size());
  for (const Transfer& t : plan.transfers) {
    const std::uint64_t key = static_cast<std::uint64_t>(static_cast<std::uint32_t>(t.src)) << 32 |
                              static_cast<std::uint64_t>(static_cast<std::uint32_t>(t.dst)) << 5 |
                              static_cast<std::uint64_t>(t.fabric) << 2 |
                              static_cast<std::uint64_t>(t.mirror) << 1 |
                              static_cast<std::uint64_t>(t.in_network);
    auto [found, added] = known.try_emplace(key, static_cast<std::uint32_t>(routes.figures.size()));
    if (added) {
      const TransferRoute route = transfer_route(topology, profile, t);
      routes.figures.push_back({!route.hops.empty(), route.slowest, route.bandwidth.value()});
    }
    routes.of_transfer.push_back(found->second);
  }
  return routes;
}

// plan_time with the plan's routes found already, under the machine's or the tuner's protocol
// figures.
Seconds plan_time(const PlanRoutes& routes, const HardwareProfile& profile,
                  const TransferPlan& plan, ProtocolFigures figures = ProtocolFigures::machine) {
  const std::array<Seconds, kLinkKinds> step =
      protocol_step_latencies(profile, plan.protocol, figures, routes.ll_clock_scale);
  const double share = protocol_bandwidth_share(profile, plan.protocol, figures);
  // A rank's kernel paces all of its sends: each of the plan's channels (rings) has one at a
  // time.
  const double per_send_limit = plan.rank_rate_limit / std::max(1, plan.channels);
  // Transfers are stored after their dependencies, so one pass finds the critical path.
  std::vector<double> finish(plan.transfers.size(), 0);
  double end = 0;
  for (std::size_t i = 0; i < plan.transfers.size(); ++i) {
    const Transfer& t = plan.transfers[i];
    double start = 0;
    for (int d : t.deps)
      start = std::max(start, finish[static_cast<std::size_t>(d)]);
    const PlanRoutes::Figures& route = routes.figures[routes.of_transfer[i]];
    double seconds = 0;
    if (route.moves) {
      // NCCL's per-step latencies are measured hop to hop, wire included (transfer_route).
      const double latency = step[static_cast<std::size_t>(route.slowest)].value();
      double rate = route.bandwidth * share / t.sharing;
      if (per_send_limit > 0) rate = std::min(rate, per_send_limit);
      seconds = (t.pipelined ? 0 : latency * t.steps) + static_cast<double>(t.bytes.value()) / rate;
    }
    finish[i] = start + seconds;
    end = std::max(end, finish[i]);
  }
  return Seconds(end);
}

Seconds collective_time(const PlanRoutes& routes, const HardwareProfile& profile,
                        const TransferPlan& plan,
                        ProtocolFigures figures = ProtocolFigures::machine) {
  // A collective of one rank moves nothing: no kernel worth a base latency.
  if (plan.transfers.empty()) return Seconds(0);
  return protocol_base_latency(plan.algorithm, plan.protocol) +
         plan_time(routes, profile, plan, figures);
}

}  // namespace

Seconds plan_time(const Topology& topology, const HardwareProfile& profile,
                  const TransferPlan& plan) {
  return plan_time(plan_routes(topology, profile, plan), profile, plan);
}

Seconds collective_time(const Topology& topology, const HardwareProfile& profile,
                        const TransferPlan& plan) {
  // A collective of one rank moves nothing: no kernel worth a base latency.
  if (plan.transfers.empty()) return Seconds(0);
  return protocol_base_latency(plan.algorithm, plan.protocol) + plan_time(topology, profile, plan);
}

namespace {

std::vector<int> flatten(const std::vector<std::vector<int>>& nodes) {
  std::vector<int> out;
  for (const auto& node : nodes)
    out.insert(out.end(), node.begin(), node.end());
  return out;
}

// Whether the node's GPUs all hang off one NVSwitch fabric.
bool on_one_nvswitch(const Topology& topology, const std::vector<int>& node) {
  const int fabric = topology.nvswitch_of(node.front());
  return fabric >= 0 && std::all_of(node.begin(), node.end(),
                                    [&](int gpu) { return topology.nvswitch_of(gpu) == fabric; });
}

// Candidates 0 to count - 1, each built by `build` (a pure function of its index, which reads
// no Topology: its caches are not shared safely). With every rank of a large cluster each is
// millions of transfers, so all but the first are built on threads of their own meanwhile (the
// same plans either way); small ones, or where no thread can be had, one after another.
std::vector<TransferPlan> build_candidates(std::size_t count, int ranks,
                                           const std::function<TransferPlan(std::size_t)>& build) {
  std::vector<TransferPlan> candidates(count);
  std::vector<std::future<TransferPlan>> others(count);
  if (ranks >= kRanksWorthAThread) {
    for (std::size_t i = 1; i < count; ++i) {
      try {
        others[i] = std::async(std::launch::async, build, i);
      } catch (const std::system_error&) {
        break;  // no thread to be had: the rest are built below
      }
    }
  }
  for (std::size_t i = 0; i < count; ++i)
    candidates[i] = others[i].valid() ? others[i].get() : build(i);
  return candidates;
}

// An all-reduce across nodes: every algorithm NCCL could run for it, as NCCL_ALGO allows.
std::vector<TransferPlan> all_reduce_across_nodes(const CollectiveRequest& request,
                                                  const Topology& topology) {
  const Bytes chunk(kPipelineChunkBytes);
  const Hierarchy rings{request.nodes, build_rings(topology, request.nodes.front()),
                        request.total_nodes, request.symmetric};
  const int local = static_cast<int>(request.nodes.front().size());
  const int pieces = hierarchy_pieces(request.bytes, request.nodes.front().size());
  // NCCL's tree chunk, each rail running two trees across the nodes (double_tree_all_reduce):
  // its channels. NVLSTree keeps kPipelineChunkBytes: NCCL sizes its chunk by the NVLS heads
  // and channels (enqueue.cc), which the plan does not model.
  const Bytes across_tree_chunk =
      tree_chunk(request.bytes, 2 * local, request.total_nodes * local, request.total_nodes);
  // Built on threads of their own (build_candidates): what it reads it names, and no Topology.
  auto plan = [&rings, &request, &across_tree_chunk, &chunk, pieces](InsideNodes inside,
                                                                     AcrossNodes across) {
    Hierarchy h = rings;
    h.inside = inside;
    const bool nccl_tree = across == AcrossNodes::tree && inside == InsideNodes::rings;
    return hierarchical_all_reduce(h, request.bytes, across, nccl_tree ? across_tree_chunk : chunk,
                                   pieces);
  };
  const CollectiveAlgorithm a = request.algorithm;
  const bool automatic = a == CollectiveAlgorithm::automatic;
  const bool nvls_inside =
      nvls_available(topology, request.architecture, request.nodes.front(), 1, request.collective);
  const bool switches_reduce = topology.in_network_reduction();
  std::vector<std::pair<InsideNodes, AcrossNodes>> stages;
  if (automatic || a == CollectiveAlgorithm::ring)
    stages.emplace_back(InsideNodes::rings, AcrossNodes::ring);
  if (automatic || a == CollectiveAlgorithm::tree)
    stages.emplace_back(InsideNodes::rings, AcrossNodes::tree);
  // NVLSTree: NVLS inside each node, trees across (NCCL enables it across nodes wherever NVLS
  // runs inside them).
  if ((automatic || a == CollectiveAlgorithm::nvls_tree) && nvls_inside)
    stages.emplace_back(InsideNodes::nvls, AcrossNodes::tree);
  // NCCL_ALGO=NVLS across nodes: NVLS inside, the switches reduce across, which NCCL runs only
  // with CollNet enabled (NCCL_COLLNET_ENABLE=1).
  if (a == CollectiveAlgorithm::nvls && nvls_inside && switches_reduce)
    stages.emplace_back(InsideNodes::nvls, AcrossNodes::in_network);
  // CollNet only when asked for (NCCL_COLLNET_ENABLE is off by default and needs the SHARP
  // plugin), and only over switches that reduce: Direct where the node's GPUs share an
  // NVSwitch (NCCL disables it elsewhere), Chain otherwise.
  if (a == CollectiveAlgorithm::collnet && switches_reduce) {
    stages.emplace_back(
        on_one_nvswitch(topology, request.nodes.front()) ? InsideNodes::direct : InsideNodes::rings,
        AcrossNodes::in_network);
  }
  if (stages.empty()) {
    // Asked for where NCCL cannot run it: NCCL's fallback, rings and trees.
    stages.emplace_back(InsideNodes::rings, AcrossNodes::ring);
    stages.emplace_back(InsideNodes::rings, AcrossNodes::tree);
  }
  return build_candidates(
      stages.size(), static_cast<int>(flatten(request.nodes).size()),
      [&plan, &stages](std::size_t i) { return plan(stages[i].first, stages[i].second); });
}

// Another collective across nodes: NCCL runs reduce-scatter, all-gather, broadcast and reduce on
// rings, all-to-all as direct point-to-point sends.
TransferPlan other_across_nodes(const CollectiveRequest& request, const Topology& topology) {
  const Collective c = request.collective;
  if (c == Collective::reduce_scatter || c == Collective::all_gather) {
    const Hierarchy h{request.nodes, build_rings(topology, request.nodes.front()),
                      request.total_nodes, request.symmetric};
    return hierarchical_collective(h, c, request.bytes, AcrossNodes::ring,
                                   Bytes(kPipelineChunkBytes),
                                   hierarchy_pieces(request.bytes, request.nodes.front().size()));
  }
  if (c == Collective::all_to_all) {
    return request.symmetric
               ? mirrored_all_to_all(request.nodes.front(), request.total_nodes, request.bytes)
               : direct_all_to_all(flatten(request.nodes), request.bytes);
  }
  throw std::logic_error("across nodes: no scatter, gather or send/receive (chains: chain_plan)");
}

// Broadcast or reduce, as NCCL runs them: a pipelined chain along the rings from or to the root,
// cut in `chunks` (chain_chunks: each protocol forwards its own unit). Inside one node on its
// rings; across nodes one channel per rail (chain_across_nodes).
TransferPlan chain_plan(const CollectiveRequest& request, const Topology& topology,
                        ChainChunks chunks) {
  const bool broadcast = request.collective == Collective::broadcast;
  if (request.total_nodes == 1) {
    const std::vector<Ring> rings = build_rings(topology, flatten(request.nodes));
    return broadcast ? ring_broadcast(rings, request.root, request.bytes, chunks)
                     : ring_reduce(rings, request.root, request.bytes, chunks);
  }
  const Hierarchy h{request.nodes, build_rings(topology, request.nodes.front()),
                    request.total_nodes, request.symmetric};
  // In a symmetric cluster node 0 stands for the root's node: the root's place in its node.
  const std::vector<int>& node = request.nodes.front();
  const int root =
      request.symmetric
          ? node[static_cast<std::size_t>(request.root % static_cast<int>(node.size()))]
          : request.root;
  return chain_across_nodes(h, request.collective, root, request.bytes, chunks);
}

// A collective inside one node. As in NCCL, trees only across nodes: inside a node NCCL's tree
// is a chain, which a ring matches in latency and beats in bandwidth (broadcast and reduce:
// chain_plan).
TransferPlan in_one_node(const CollectiveRequest& request, const Topology& topology) {
  const std::vector<int> ranks = flatten(request.nodes);
  switch (request.collective) {
    case Collective::all_reduce:
      return ring_all_reduce(build_rings(topology, ranks), request.bytes);
    case Collective::broadcast:
    case Collective::reduce:
      throw std::logic_error("chains are built by chain_plan, one per protocol");
    case Collective::reduce_scatter:
      return ring_reduce_scatter(build_rings(topology, ranks), request.bytes);
    case Collective::all_gather:
      return ring_all_gather(build_rings(topology, ranks), request.bytes);
    case Collective::scatter:
      return direct_scatter(ranks, request.root, request.bytes);
    case Collective::gather:
      return direct_gather(ranks, request.root, request.bytes);
    case Collective::send_recv:
      return send_recv(ranks.at(0), ranks.at(1), request.bytes);
    case Collective::all_to_all:
      break;
  }
  return direct_all_to_all(ranks, request.bytes);
}

// The ranks of the request's communicator: every node's, node 0's standing for all of them in a
// symmetric request.
int communicator_size(const CollectiveRequest& request) {
  return static_cast<int>(request.nodes.front().size()) *
         (request.symmetric ? request.total_nodes : static_cast<int>(request.nodes.size()));
}

// Direct copies are NCCL's point-to-point sends, outside its tuner: LL up to
// NCCL_P2P_LL_THRESHOLD bytes a send (16384, src/enqueue.cc), Simple beyond.

Protocol point_to_point_protocol(const CollectiveRequest& request, const TransferPlan& plan) {
  std::int64_t largest = 0;
  for (const Transfer& t : plan.transfers)
    largest = std::max(largest, t.bytes.value());
  if (request.collective == Collective::all_to_all) {
    // A mirror transfer carries many sends at once: each is one rank's share.
    const std::int64_t total = communicator_size(request);
    largest = (request.bytes.value() + total - 1) / total;
  }
  return largest <= kP2pLlThresholdBytes ? Protocol::ll : Protocol::simple;
}

// NVLS, NVLSTree and CollNet run Simple only (tuning.cc).
bool simple_only(Algorithm algorithm) {
  return algorithm == Algorithm::nvls || algorithm == Algorithm::nvls_tree ||
         algorithm == Algorithm::collnet_direct || algorithm == Algorithm::collnet_chain;
}

}  // namespace

CollectiveChoice choose_collective(const CollectiveRequest& request, const Topology& topology,
                                   const HardwareProfile& profile) {
  const std::vector<int> ranks = flatten(request.nodes);
  std::vector<Protocol> protocols;
  if (request.protocol) {
    protocols.push_back(*request.protocol);
  } else {
    for (std::size_t p = 0; p < kProtocolCount; ++p) {
      const auto protocol = static_cast<Protocol>(p);
      if (protocol_enabled(protocol, topology, request.architecture, request.nodes.front()))
        protocols.push_back(protocol);
    }
  }
  std::vector<TransferPlan> candidates;
  // The protocol a candidate is cut for, timed under that one only (a chain per protocol).
  std::vector<std::optional<Protocol>> cut_for;
  if (request.collective == Collective::broadcast || request.collective == Collective::reduce) {
    for (Protocol protocol : protocols) {
      candidates.push_back(chain_plan(request, topology, chain_chunks(protocol)));
      cut_for.emplace_back(protocol);
    }
  } else if (request.total_nodes == 1) {
    candidates.push_back(in_one_node(request, topology));
  } else if (request.collective == Collective::all_reduce) {
    candidates = all_reduce_across_nodes(request, topology);
  } else {
    candidates.push_back(other_across_nodes(request, topology));
  }
  cut_for.resize(candidates.size());
  // NVLink SHARP where NCCL can run it: the tuner weighs it against the rings; NCCL_ALGO=NVLS
  // takes it alone. Simple is its only protocol.
  if ((request.algorithm == CollectiveAlgorithm::automatic ||
       request.algorithm == CollectiveAlgorithm::nvls) &&
      (!request.protocol || *request.protocol == Protocol::simple) &&
      nvls_available(topology, request.architecture, ranks, request.total_nodes,
                     request.collective)) {
    if (request.algorithm == CollectiveAlgorithm::nvls) {
      candidates.clear();
      cut_for.clear();
    }
    candidates.push_back(nvls_collective(request.collective, ranks, request.bytes));
    cut_for.emplace_back();
  }
  // As NCCL's tuner: each candidate timed under the tuner's protocol figures, the fastest taken;
  // then timed as the machine runs it.
  const int communicator = communicator_size(request);
  const auto rate_limit = [&](const TransferPlan& plan, ProtocolFigures figures) {
    return kernel_rate_limit(plan, nccl_launch(plan, topology, request.bytes, communicator),
                             profile, request.architecture, request.total_nodes, figures);
  };
  CollectiveChoice best;
  Seconds tuned(std::numeric_limits<double>::infinity());
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    TransferPlan& plan = candidates[i];
    plan.collective = request.collective;
    std::optional<Protocol> fastest;
    double fastest_limit = 0;
    if (plan.algorithm == Algorithm::direct && !request.protocol) {
      plan.protocol = point_to_point_protocol(request, plan);
      const Seconds t = collective_time(plan_routes(topology, profile, plan), profile, plan,
                                        ProtocolFigures::tuner);
      if (t < tuned) {
        tuned = t;
        best.plan = std::move(plan);
      }
      continue;
    }
    const PlanRoutes routes = plan_routes(topology, profile, plan);
    for (Protocol protocol : protocols) {
      if (simple_only(plan.algorithm) && protocol != Protocol::simple) continue;
      if (cut_for[i] && protocol != *cut_for[i]) continue;
      plan.protocol = protocol;
      plan.rank_rate_limit = rate_limit(plan, ProtocolFigures::tuner);
      const Seconds t = collective_time(routes, profile, plan, ProtocolFigures::tuner);
      if (t < tuned) {
        tuned = t;
        fastest = protocol;
        fastest_limit = plan.rank_rate_limit;
      }
    }
    if (fastest) {
      plan.protocol = *fastest;
      plan.rank_rate_limit = fastest_limit;
      best.plan = std::move(plan);
    }
  }
  best.plan.collective = request.collective;
  best.time = tuned;
  // Where the machine's figures are the tuner's (the profile gives none of its own and the GPUs
  // run at the clock LL was checked at), its time is the one found.
  const bool machine_differs =
      profile.links.own_protocol_figures() || ll_clock_scale(topology) != 1.0;
  if (std::isfinite(tuned.value()) && machine_differs) {
    best.plan.rank_rate_limit = rate_limit(best.plan, ProtocolFigures::machine);
    best.time = collective_time(topology, profile, best.plan);
  }
  best.bandwidth_share = protocol_bandwidth_share(profile, best.plan.protocol);
  best.bytes = request.bytes;
  best.channels = nccl_channels(best.plan, topology, request.bytes, communicator);
  return best;
}

}  // namespace epochcast::sim

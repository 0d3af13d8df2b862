// Alpha-beta costs and algorithm choice.
#include "sim/collectives/alpha_beta.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "sim/network/network_map.h"

namespace epochcast::sim {

BytesPerSecond effective_bandwidth(const TopologyLink& link, const HardwareProfile& profile) {
  return link.bandwidth * profile.links.efficiency[static_cast<std::size_t>(link.kind)];
}

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

Seconds plan_time(const Topology& topology, const HardwareProfile& profile,
                  const TransferPlan& plan) {
  const std::array<Seconds, kLinkKinds> step = protocol_step_latencies(profile, plan.protocol);
  const double share = protocol_bandwidth_share(plan.protocol, plan.collective);
  // Transfers are stored after their dependencies, so one pass finds the critical path.
  std::vector<double> finish(plan.transfers.size(), 0);
  double end = 0;
  for (std::size_t i = 0; i < plan.transfers.size(); ++i) {
    const Transfer& t = plan.transfers[i];
    double start = 0;
    for (int d : t.deps)
      start = std::max(start, finish[static_cast<std::size_t>(d)]);
    const TransferRoute route = transfer_route(topology, profile, t, step);
    double seconds = 0;
    if (!route.hops.empty()) {
      seconds =
          (t.pipelined ? 0 : route.latency.value()) +
          static_cast<double>(t.bytes.value()) / (route.bandwidth.value() * share / t.sharing);
    }
    finish[i] = start + seconds;
    end = std::max(end, finish[i]);
  }
  return Seconds(end);
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

}  // namespace

CollectiveChoice choose_collective(const CollectiveRequest& request, const Topology& topology,
                                   const HardwareProfile& profile) {
  const Bytes chunk(kPipelineChunkBytes);
  std::vector<int> ranks = flatten(request.nodes);
  std::vector<TransferPlan> candidates;
  const bool across_nodes = request.total_nodes > 1;
  const Collective c = request.collective;
  if (across_nodes && c != Collective::all_reduce) {
    // NCCL runs reduce-scatter and all-gather across nodes on rings, all-to-all as direct
    // point-to-point sends.
    if (c == Collective::reduce_scatter || c == Collective::all_gather) {
      const Hierarchy h{request.nodes, build_rings(topology, request.nodes.front()),
                        request.total_nodes, request.symmetric};
      candidates.push_back(
          hierarchical_collective(h, c, request.bytes, AcrossNodes::ring, chunk,
                                  hierarchy_pieces(request.bytes, request.nodes.front().size())));
    } else if (c == Collective::all_to_all) {
      candidates.push_back(
          request.symmetric
              ? mirrored_all_to_all(request.nodes.front(), request.total_nodes, request.bytes)
              : direct_all_to_all(ranks, request.bytes));
    } else {
      throw std::logic_error("across nodes: all-reduce, reduce-scatter, all-gather, all-to-all");
    }
  }
  switch (across_nodes && c != Collective::all_reduce ? Collective::send_recv : c) {
    case Collective::all_reduce:
      // As in NCCL, trees only across nodes: inside a node NCCL's tree is a chain, which a ring
      // matches in latency and beats in bandwidth.
      if (across_nodes) {
        const Hierarchy h{request.nodes, build_rings(topology, request.nodes.front()),
                          request.total_nodes, request.symmetric};
        const int pieces = hierarchy_pieces(request.bytes, request.nodes.front().size());
        const CollectiveAlgorithm a = request.algorithm;
        // NCCL_ALGO=NVLS across nodes: NVLS inside, the switches reduce across, which NCCL
        // runs only with CollNet enabled (NCCL_COLLNET_ENABLE=1); without switches that reduce,
        // NCCL falls back to rings and trees.
        const bool nvls_inside = nvls_available(topology, request.architecture,
                                                request.nodes.front(), 1, request.collective);
        if (a == CollectiveAlgorithm::nvls && nvls_inside && topology.in_network_reduction()) {
          Hierarchy with_nvls = h;
          with_nvls.inside = InsideNodes::nvls;
          candidates.push_back(hierarchical_all_reduce(with_nvls, request.bytes,
                                                       AcrossNodes::in_network, chunk, pieces));
        }
        const bool fall_back = a == CollectiveAlgorithm::nvls && candidates.empty();
        if (a == CollectiveAlgorithm::automatic || a == CollectiveAlgorithm::ring || fall_back) {
          candidates.push_back(
              hierarchical_all_reduce(h, request.bytes, AcrossNodes::ring, chunk, pieces));
        }
        if (a == CollectiveAlgorithm::automatic || a == CollectiveAlgorithm::tree || fall_back) {
          candidates.push_back(
              hierarchical_all_reduce(h, request.bytes, AcrossNodes::tree, chunk, pieces));
        }
        // NVLSTree: NVLS inside each node, trees across (NCCL enables it across nodes wherever
        // NVLS runs inside them).
        if ((a == CollectiveAlgorithm::automatic || a == CollectiveAlgorithm::nvls_tree) &&
            nvls_inside) {
          Hierarchy with_nvls = h;
          with_nvls.inside = InsideNodes::nvls;
          candidates.push_back(
              hierarchical_all_reduce(with_nvls, request.bytes, AcrossNodes::tree, chunk, pieces));
        }
        // CollNet only when asked for (NCCL_COLLNET_ENABLE is off by default and needs the
        // SHARP plugin), and only over switches that reduce: Direct where the node's GPUs share
        // an NVSwitch (NCCL disables it elsewhere), Chain otherwise.
        if (a == CollectiveAlgorithm::collnet && topology.in_network_reduction()) {
          Hierarchy collnet = h;
          const std::vector<int>& node = request.nodes.front();
          const int fabric = topology.nvswitch_of(node.front());
          const bool on_nvswitch = fabric >= 0 && std::all_of(node.begin(), node.end(), [&](int g) {
                                     return topology.nvswitch_of(g) == fabric;
                                   });
          collnet.inside = on_nvswitch ? InsideNodes::direct : InsideNodes::rings;
          candidates.push_back(hierarchical_all_reduce(collnet, request.bytes,
                                                       AcrossNodes::in_network, chunk, pieces));
        }
        if (candidates.empty()) {
          // NVLSTree or CollNet asked for where NCCL cannot run it: NCCL's fallback, rings and
          // trees.
          candidates.push_back(
              hierarchical_all_reduce(h, request.bytes, AcrossNodes::ring, chunk, pieces));
          candidates.push_back(
              hierarchical_all_reduce(h, request.bytes, AcrossNodes::tree, chunk, pieces));
        }
      } else {
        candidates.push_back(ring_all_reduce(build_rings(topology, ranks), request.bytes));
      }
      break;
    // NCCL runs broadcast and reduce on rings only: a pipelined chain from or to the root.
    case Collective::broadcast:
      candidates.push_back(
          ring_broadcast(build_rings(topology, ranks), request.root, request.bytes, chunk));
      break;
    case Collective::reduce:
      candidates.push_back(
          ring_reduce(build_rings(topology, ranks), request.root, request.bytes, chunk));
      break;
    case Collective::reduce_scatter:
      candidates.push_back(ring_reduce_scatter(build_rings(topology, ranks), request.bytes));
      break;
    case Collective::all_gather:
      candidates.push_back(ring_all_gather(build_rings(topology, ranks), request.bytes));
      break;
    case Collective::scatter:
      candidates.push_back(direct_scatter(ranks, request.root, request.bytes));
      break;
    case Collective::gather:
      candidates.push_back(direct_gather(ranks, request.root, request.bytes));
      break;
    case Collective::send_recv:
      if (!across_nodes) candidates.push_back(send_recv(ranks.at(0), ranks.at(1), request.bytes));
      break;
    case Collective::all_to_all:
      candidates.push_back(direct_all_to_all(ranks, request.bytes));
      break;
  }
  // NVLink SHARP where NCCL can run it: the tuner weighs it against the rings; NCCL_ALGO=NVLS
  // takes it alone. Simple is its only protocol.
  if ((request.algorithm == CollectiveAlgorithm::automatic ||
       request.algorithm == CollectiveAlgorithm::nvls) &&
      (!request.protocol || *request.protocol == Protocol::simple) &&
      nvls_available(topology, request.architecture, ranks, request.total_nodes,
                     request.collective)) {
    if (request.algorithm == CollectiveAlgorithm::nvls) candidates.clear();
    candidates.push_back(nvls_collective(request.collective, ranks, request.bytes));
  }
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
  CollectiveChoice best;
  best.time = Seconds(std::numeric_limits<double>::infinity());
  for (TransferPlan& plan : candidates) {
    std::optional<Protocol> fastest;
    if (plan.algorithm == Algorithm::direct && !request.protocol) {
      // Direct copies are NCCL's point-to-point sends, outside its tuner: LL up to
      // NCCL_P2P_LL_THRESHOLD bytes a send (16384, src/enqueue.cc), Simple beyond.
      std::int64_t largest = 0;
      for (const Transfer& t : plan.transfers)
        largest = std::max(largest, t.bytes.value());
      if (c == Collective::all_to_all) {
        // A mirror transfer carries many sends at once: each is one rank's share.
        const auto total =
            static_cast<std::int64_t>(request.nodes.front().size()) *
            (request.symmetric ? request.total_nodes : static_cast<int>(request.nodes.size()));
        largest = (request.bytes.value() + total - 1) / total;
      }
      plan.protocol = largest <= kP2pLlThresholdBytes ? Protocol::ll : Protocol::simple;
      const Seconds t = collective_time(topology, profile, plan);
      if (t < best.time) {
        best.time = t;
        best.plan = std::move(plan);
      }
      continue;
    }
    for (Protocol protocol : protocols) {
      // NVLS, NVLSTree and CollNet run Simple only (tuning.cc).
      if ((plan.algorithm == Algorithm::nvls || plan.algorithm == Algorithm::nvls_tree ||
           plan.algorithm == Algorithm::collnet_direct ||
           plan.algorithm == Algorithm::collnet_chain) &&
          protocol != Protocol::simple)
        continue;
      plan.protocol = protocol;
      Seconds t = collective_time(topology, profile, plan);
      if (t < best.time) {
        best.time = t;
        fastest = protocol;
      }
    }
    if (fastest) {
      plan.protocol = *fastest;
      best.plan = std::move(plan);
    }
  }
  best.plan.collective = request.collective;
  best.bytes = request.bytes;
  return best;
}

}  // namespace epochcast::sim

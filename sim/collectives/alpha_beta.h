// The analytic (alpha-beta) cost of a transfer plan, and the choice of algorithm.
//
// A transfer over a route costs alpha + bytes / beta: alpha is the per-step latency of its
// slowest kind of link (NCCL's tuning model, measured hop to hop, so the wire is in it and the
// route's own link latencies are not added), beta the
// slowest link's bandwidth times the profile's efficiency for that kind of link. A plan costs
// its critical path through the transfers' dependencies, which reproduces the closed forms —
// e.g. ring all-reduce 2(n-1)(alpha + S/(n beta)), pipelined chain (n-1) alpha + (K + n - 2)
// S/(K beta), a chunk's latency hidden behind the chunk before it — and equals the flow
// simulation wherever no two transfers share a link direction.
#pragma once

#include <array>
#include <optional>
#include <string>

#include "core/spec/profile_spec.h"
#include "core/spec/scenario_spec.h"
#include "sim/collectives/algorithms.h"
#include "sim/collectives/protocols.h"
#include "sim/network/topology.h"

namespace epochcast::sim {

// The route a transfer takes, with its latency (NCCL's per-step latency) and bandwidth.
struct TransferRoute {
  std::vector<Hop> hops;
  Seconds latency;
  BytesPerSecond bandwidth;           // effective bottleneck
  LinkKind slowest = LinkKind::pcie;  // shm where NCCL stages the transfer through host memory
  BytesPerSecond nominal;             // datasheet bandwidth of the bottleneck
};
TransferRoute transfer_route(const Topology& topology, const HardwareProfile& profile,
                             const Transfer& transfer);
// The same with the per-step latencies of another protocol than the profile's (Simple).
TransferRoute transfer_route(const Topology& topology, const HardwareProfile& profile,
                             const Transfer& transfer,
                             const std::array<Seconds, kLinkKinds>& step_latency);

// The critical path of the plan's transfers under its protocol (each step at that protocol's
// latency and share of the bandwidth).
Seconds plan_time(const Topology& topology, const HardwareProfile& profile,
                  const TransferPlan& plan);
// The collective's time on the GPU: NCCL's base latency for its algorithm and protocol, then
// its transfers (plan_time). The host's cost of the call, links.collective_launch_us, is apart.
Seconds collective_time(const Topology& topology, const HardwareProfile& profile,
                        const TransferPlan& plan);

// From this many ranks, building a plan (a collective's candidates, an iteration's plans) takes
// long enough to be worth a thread of its own: with every rank of a large cluster, seconds.
inline constexpr int kRanksWorthAThread = 1024;

// A collective to run on some GPUs: their GPUs per node (in a symmetric simulation, node 0's
// only, with `total_nodes` saying how many there are).
struct CollectiveRequest {
  Collective collective = Collective::all_reduce;
  Bytes bytes;
  std::vector<std::vector<int>> nodes;
  int total_nodes = 1;
  bool symmetric = false;
  int root = 0;
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::automatic;  // across nodes
  std::optional<Protocol> protocol = std::nullopt;  // forced (NCCL_PROTO); none: the tuner's
  // The GPUs' (a name of core/spec/architecture_traits.h): the protocols and algorithms NCCL
  // enables on them. Required: an unknown or empty name is an InputError.
  std::string architecture = {};
};

struct CollectiveChoice {
  Bytes bytes;  // the message, as requested
  TransferPlan plan;
  Seconds time;      // analytic: collective_time
  int channels = 0;  // NCCL's at this size: its kernel's CTAs, the SMs it holds (nccl_channels)
  // The share of the links' bandwidth the plan's protocol gets on this machine
  // (protocol_bandwidth_share): the flows carry its data inflated by it.
  double bandwidth_share = 1;
};

// Like NCCL's tuner: every applicable algorithm under every enabled protocol is costed and the
// fastest is chosen — rings inside a node (NCCL's tree is a chain there, which a ring matches in
// latency and beats in bandwidth; broadcast and reduce are pipelined chains along the ring);
// across nodes, hierarchical rings (bandwidth) or trees (latency); LL for small messages, LL128
// or Simple for large ones. Candidates are costed under NCCL's own LL and LL128 figures
// (ProtocolFigures::tuner); the choice's `time` is then the machine's, under the profile's.
CollectiveChoice choose_collective(const CollectiveRequest& request, const Topology& topology,
                                   const HardwareProfile& profile);
// Point-to-point sends of at most this many bytes run under LL (NCCL_P2P_LL_THRESHOLD).
inline constexpr std::int64_t kP2pLlThresholdBytes = 16384;

}  // namespace epochcast::sim

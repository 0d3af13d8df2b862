// Collective communication as NCCL runs it, in three separate parts (the physical topology is
// sim/network/topology):
//   logical_topology.h - rings and trees laid over the GPUs;
//   ring.cpp, tree.cpp, direct.cpp, hierarchical.cpp - algorithms: a collective over a logical
//     topology becomes a plan of point-to-point transfers with dependencies;
//   alpha_beta.h - the analytic cost of a plan, and the choice of algorithm.
// A plan runs either as flows on the network (exact contention) or as its analytic time (fast).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "core/enum_name.h"
#include "core/units.h"
#include "sim/collectives/transfer_deps.h"
#include "sim/network/fabric_way.h"

namespace epochcast::sim {

enum class Collective {
  broadcast,
  reduce,
  all_reduce,
  reduce_scatter,
  all_gather,
  scatter,
  gather,
  send_recv,
  all_to_all,
};
inline constexpr std::string_view kCollectiveNames[] = {
    "broadcast", "reduce", "all_reduce", "reduce_scatter", "all_gather",
    "scatter",   "gather", "send_recv",  "all_to_all"};
inline std::string_view name_of(Collective value) {
  return enum_name(kCollectiveNames, value);
}

enum class Algorithm {
  ring,
  tree,
  direct,
  hierarchical_ring,
  hierarchical_tree,
  nvls,
  nvls_tree,
  collnet_direct,
  collnet_chain,
};

// NCCL's protocols (their costs: sim/collectives/protocols.h).
enum class Protocol { simple, ll, ll128 };
inline constexpr std::string_view kProtocolNames[] = {"simple", "ll", "ll128"};
inline std::string_view name_of(Protocol value) {
  return enum_name(kProtocolNames, value);
}
inline constexpr std::size_t kProtocolCount = 3;
inline constexpr std::string_view kAlgorithmNames[] = {
    "ring", "tree",      "direct",         "hierarchical ring", "hierarchical tree",
    "nvls", "nvls tree", "collnet direct", "collnet chain"};
inline std::string_view name_of(Algorithm value) {
  return enum_name(kAlgorithmNames, value);
}

// One point-to-point transfer between GPUs. A `mirror` transfer stands, in a symmetric
// simulation of a cluster, for the identical transfer every node makes to its neighbour: it
// leaves src's node through src's NIC and comes back into the same GPU through the network, so
// it loads exactly the links that one node's share of the traffic loads.
// A `fabric` transfer is a GPU's traffic with an NVSwitch fabric under NVLink SHARP, on the
// GPU's own NVSwitch links at the profile's nvls efficiency: out of src into the switch and
// back into the same GPU, or only one of the two ways (FabricWay).
struct Transfer {
  int src = 0;
  int dst = 0;
  bool mirror = false;
  Bytes bytes;
  TransferDeps deps;  // transfers (indices in the plan) that must finish first
  // Transfers of this plan that cross the same link at the same time (ring channels sharing an
  // NVLink pair): the analytic cost divides the bandwidth among them, as the flows do.
  int sharing = 1;
  FabricWay fabric = FabricWay::none;
  // A chunk behind another on the same hop of a pipeline: NCCL keeps several steps in flight per
  // channel (NCCL_STEPS, 8), so its step latency hides behind the chunk before and it costs only
  // its data. A chain of K chunks over n ranks then costs (n-1) alpha + (K+n-2) chunk/beta, as
  // NCCL's tuning model has it (latency per hop, not per chunk).
  bool pipelined = false;
  // A mirror transfer whose data the network's switches reduce (SHARP, NCCL's CollNet): out
  // through the NIC and the reduced result back, once each way, at the profile's sharp figures.
  bool in_network = false;
  // The same hop made `steps` times back to back, each step waiting for the one before and
  // paying its step latency, `bytes` in all: a mirrored ring's 2(N-1) steps through the NIC are
  // one transfer, so a plan's size does not grow with the node count. Alone on its links it
  // costs what the chain of single steps costs, but for the rounding of each step's end up to
  // the nanosecond (once here, once a step there); where other flows share its links, its
  // latencies come first and its bytes after, where the chain alternates them.
  int steps = 1;
};

struct TransferPlan {
  Collective collective = Collective::all_reduce;
  Algorithm algorithm = Algorithm::ring;
  std::vector<int> ranks;  // the GPUs simulated (in a symmetric cluster, node 0's)
  std::vector<Transfer> transfers;
  int channels = 1;  // rings the data is split over (one per distinct ring laid over the GPUs);
                     // NCCL's own channel count is nccl_channels (protocols.h)
  Protocol protocol = Protocol::simple;  // NCCL's protocol it runs under
  // The most data a rank's transfers together move per second under that protocol, whatever
  // the links (bytes of data, as Transfer::bytes; 0: no such limit): the pace of the CTAs NCCL
  // launches at this size (kernel_rate_limit, protocols.h).
  double rank_rate_limit = 0;

  int add(Transfer t) {
    transfers.push_back(std::move(t));
    return static_cast<int>(transfers.size() - 1);
  }
};

// nccl-tests' definitions (docs/metrics.md): algorithm bandwidth is the data size over the time;
// bus bandwidth scales it by the fraction of data each rank must move, so that it can be
// compared with link bandwidth whatever the number of ranks.
double algorithm_bandwidth(Bytes bytes, Seconds time);
double bus_bandwidth_factor(Collective collective, int ranks);
double bus_bandwidth(Collective collective, int ranks, Bytes bytes, Seconds time);

}  // namespace epochcast::sim

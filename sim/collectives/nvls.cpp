// NVLink SHARP collectives: each GPU's exchange with the NVSwitch fabric.
#include <algorithm>

#include "sim/collectives/algorithms.h"
#include "sim/network/topology.h"

namespace epochcast::sim {

TransferPlan nvls_collective(Collective collective, const std::vector<int>& ranks, Bytes bytes) {
  TransferPlan plan;
  plan.collective = collective;
  plan.algorithm = Algorithm::nvls;
  plan.ranks = ranks;
  const auto n = static_cast<std::int64_t>(ranks.size());
  const std::int64_t shard = (bytes.value() + n - 1) / n;
  // All-reduce: S(1 + 1/n) each way, one round trip. Reduce-scatter: the switch reads all of a
  // GPU's S and returns its reduced S/n; all-gather the reverse. Each way on its own links.
  auto add = [&](int rank, FabricWay way, std::int64_t bytes_that_way) {
    Transfer t;
    t.src = rank;
    t.dst = rank;
    t.fabric = way;
    t.bytes = Bytes(bytes_that_way);
    plan.add(std::move(t));
  };
  for (int rank : ranks) {
    if (collective == Collective::all_reduce) {
      add(rank, FabricWay::round_trip, bytes.value() + shard);
    } else {
      const bool gathers = collective == Collective::all_gather;
      add(rank, FabricWay::into_switch, gathers ? shard : bytes.value());
      add(rank, FabricWay::out_of_switch, gathers ? bytes.value() : shard);
    }
  }
  return plan;
}

bool nvls_available(const Topology& topology, std::string_view architecture,
                    const std::vector<int>& ranks, int total_nodes, Collective collective) {
  if (collective != Collective::all_reduce && collective != Collective::all_gather &&
      collective != Collective::reduce_scatter) {
    return false;
  }
  if (total_nodes != 1 || ranks.size() < 3) return false;
  if (architecture != "hopper" && architecture != "blackwell") return false;
  const int fabric = topology.nvswitch_of(ranks.front());
  return fabric >= 0 && std::all_of(ranks.begin(), ranks.end(), [&](int gpu) {
           return topology.node_of(gpu) == topology.node_of(ranks.front()) &&
                  topology.nvswitch_of(gpu) == fabric;
         });
}

}  // namespace epochcast::sim

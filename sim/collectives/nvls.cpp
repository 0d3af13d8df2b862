// NVLink SHARP collectives: each GPU's exchange with the NVSwitch fabric.
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/spec/architecture_traits.h"
#include "sim/collectives/algorithms.h"
#include "sim/network/topology.h"

namespace epochcast::sim {

NvlsLoop nvls_loop(Collective collective, Bytes bytes, int heads) {
  NvlsLoop loop;
  const std::int64_t operations = std::int64_t{kNvlsChannelsHopper} * std::max(heads, 1);
  std::int64_t chunk = 128 << 10;  // NCCL_NVLS_CHUNKSIZE
  const std::int64_t size = bytes.value();
  if (size < 64 * operations * chunk) chunk = 64 << 10;
  if (size < 8 * operations * chunk) chunk = 32 << 10;
  if (size < 2 * operations * chunk) chunk = 16 << 10;
  loop.chunk_bytes = chunk;
  loop.loop_bytes = operations * chunk;
  loop.loops = std::max<std::int64_t>(1, (size + loop.loop_bytes - 1) / loop.loop_bytes);
  loop.stages = collective == Collective::all_reduce ? 3 : 2;
  return loop;
}

TransferPlan nvls_collective(Collective collective, const std::vector<int>& ranks, Bytes bytes) {
  TransferPlan plan;
  plan.collective = collective;
  plan.algorithm = Algorithm::nvls;
  plan.ranks = ranks;
  const auto n = static_cast<std::int64_t>(ranks.size());
  const std::int64_t shard = (bytes.value() + n - 1) / n;
  const NvlsLoop loop = nvls_loop(collective, bytes, static_cast<int>(n));
  // The stages' fill and drain: the first loop's share of each way's bytes, once per stage
  // beyond the first.
  const std::int64_t first_loop = std::min(loop.loop_bytes, bytes.value());
  const double fill = bytes.value() > 0
                          ? static_cast<double>(loop.stages - 1) * static_cast<double>(first_loop) /
                                static_cast<double>(bytes.value())
                          : 0.0;
  // All-reduce: S(1 + 1/n) each way, one round trip. Reduce-scatter: the switch reads all of a
  // GPU's S and returns its reduced S/n; all-gather the reverse. Each way on its own links.
  auto add = [&](int rank, FabricWay way, std::int64_t bytes_that_way) {
    Transfer t;
    t.src = rank;
    t.dst = rank;
    t.fabric = way;
    t.bytes = Bytes(bytes_that_way + static_cast<std::int64_t>(
                                         std::llround(static_cast<double>(bytes_that_way) * fill)));
    t.steps = static_cast<int>(
        std::min<std::int64_t>(loop.loops + loop.stages, std::numeric_limits<int>::max()));
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
  if (!architecture_traits(architecture).nvlink_sharp) return false;
  const int fabric = topology.nvswitch_of(ranks.front());
  return fabric >= 0 && std::all_of(ranks.begin(), ranks.end(), [&](int gpu) {
           return topology.node_of(gpu) == topology.node_of(ranks.front()) &&
                  topology.nvswitch_of(gpu) == fabric;
         });
}

}  // namespace epochcast::sim

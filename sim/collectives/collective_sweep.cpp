// nccl-tests' sweep over the simulator's collectives.
#include "sim/collectives/collective_sweep.h"

#include <algorithm>
#include <cmath>

#include "sim/collectives/alpha_beta.h"
#include "sim/collectives/flow_run.h"
#include "sim/network/topology.h"

namespace epochcast::sim {

std::vector<std::int64_t> sweep_sizes(const CollectiveSweep& sweep, std::size_t most) {
  std::vector<std::int64_t> sizes;
  const std::int64_t unit =
      std::int64_t{std::max(1, sweep.element_bytes)} * std::max(1, sweep.parts);
  auto whole = [&](std::int64_t bytes) { return bytes / unit * unit; };
  for (std::int64_t bytes = sweep.min_bytes; bytes <= sweep.max_bytes && sizes.size() < most;) {
    sizes.push_back(whole(bytes));
    const std::int64_t next =
        sweep.increment > 0
            ? bytes + sweep.increment
            : static_cast<std::int64_t>(std::ceil(static_cast<double>(bytes) * sweep.factor));
    if (next <= bytes) break;  // a factor of 1 (nccl-tests then runs the one size)
    bytes = next;
  }
  return sizes;
}

std::vector<CollectiveRow> run_collective_sweep(const MachineSpec& machine,
                                                const HardwareProfile& profile,
                                                const CollectiveSweep& sweep) {
  const int per_node = sweep.gpus_per_node > 0 ? sweep.gpus_per_node : machine.gpus_per_node;
  const bool across = sweep.nodes > 1;
  // A cluster of identical nodes: node 0 stands for every node (its traffic to the next node is
  // a mirror transfer), as predict simulates it.
  Topology topology = Topology::build(machine, 1, across);
  std::vector<int> gpus;
  for (int g = 0; g < per_node; ++g)
    gpus.push_back(g);
  const int ranks = per_node * sweep.nodes;
  std::vector<CollectiveRow> rows;
  for (std::int64_t bytes : sweep_sizes(sweep)) {
    CollectiveRequest request;
    request.collective = sweep.collective;
    request.bytes = Bytes(std::max<std::int64_t>(bytes, 1));  // the plan NCCL would pick
    request.nodes = {gpus};
    request.total_nodes = sweep.nodes;
    request.symmetric = across;
    request.root = sweep.root;
    request.algorithm = sweep.algorithm;
    request.protocol = sweep.protocol;
    request.architecture = machine.gpu.architecture;
    CollectiveChoice choice = choose_collective(request, topology, profile);
    CollectiveRow row;
    row.bytes = bytes;
    row.count = bytes / std::max(1, sweep.element_bytes) / std::max(1, sweep.parts);
    // NCCL returns at once from a collective of no elements (it launches nothing).
    row.collective_seconds =
        bytes == 0    ? 0
        : sweep.flows ? (protocol_base_latency(choice.plan.algorithm, choice.plan.protocol) +
                         simulate_plan(choice.plan, topology, profile))
                            .value()
                      : choice.time.value();
    const double launches =
        bytes == 0 ? 0
                   : sweep.launches_per_iteration * profile.links.nccl_launch_or_default().value();
    row.launch_bound = launches > row.collective_seconds;
    row.seconds = std::max(row.collective_seconds, launches);
    if (row.seconds > 0) {
      row.algbw = algorithm_bandwidth(Bytes(bytes), Seconds(row.seconds));
      row.busbw = bus_bandwidth(sweep.collective, ranks, Bytes(bytes), Seconds(row.seconds));
    }
    row.algorithm = std::string(name_of(choice.plan.algorithm));
    row.protocol = std::string(name_of(choice.plan.protocol));
    row.channels = choice.channels;
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace epochcast::sim

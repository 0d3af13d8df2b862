// A transfer plan as flows on an otherwise idle network.
#include "sim/collectives/flow_run.h"

#include <cmath>

#include "sim/collectives/protocols.h"
#include "sim/engine/engine.h"
#include "sim/network/network_map.h"

namespace epochcast::sim {

Seconds simulate_plan(const TransferPlan& plan, const Topology& topology,
                      const HardwareProfile& profile) {
  Engine engine;
  auto owned = std::make_unique<MaxMinFairNetwork>("network");
  MaxMinFairNetwork& network = *owned;
  ResourceId id = engine.add_resource(std::move(owned));
  NetworkMap routes(topology, profile, network,
                    protocol_step_tables(profile, ll_clock_scale(topology)));
  // Under the plan's protocol: each step at its latency, the data inflated by its share of the
  // bandwidth (and by staging through host memory where NCCL does not use peer-to-peer).
  const double share = protocol_bandwidth_share(profile, plan.protocol);
  const int protocol_table = static_cast<int>(plan.protocol);
  // The pace of each rank's kernel, in the bytes its flows carry.
  const double kernel_rate = plan.rank_rate_limit / share;
  std::vector<TaskHandle> tasks;
  tasks.reserve(plan.transfers.size());
  std::size_t edges = 0;
  for (const Transfer& t : plan.transfers)
    edges += t.deps.size();
  engine.reserve(plan.transfers.size(), edges);
  std::vector<TaskHandle> deps;
  for (std::size_t i = 0; i < plan.transfers.size(); ++i) {
    const Transfer& t = plan.transfers[i];
    deps.clear();
    for (int d : t.deps)
      deps.push_back(tasks[static_cast<std::size_t>(d)]);
    const int step_table = t.pipelined ? kPipelinedStepTable : protocol_table;
    std::uint32_t route =
        t.fabric != FabricWay::none ? routes.fabric_route(t.src, step_table, t.fabric, t.steps)
        : t.mirror ? routes.mirror_route(t.src, step_table, t.in_network, t.steps, kernel_rate)
                   : routes.route(t.src, t.dst, step_table, t.steps, kernel_rate);
    const auto bytes = static_cast<std::int64_t>(
        std::ceil(static_cast<double>(t.bytes.value()) / share * routes.data_factor(route)));
    tasks.push_back(engine.add_task(id, bytes, i, deps, route));
  }
  engine.run();
  return Seconds(engine.now().seconds());
}

}  // namespace epochcast::sim

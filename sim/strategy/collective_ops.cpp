// Collectives as plan ops.
#include "sim/strategy/collective_ops.h"

#include <array>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "sim/collectives/protocols.h"

namespace epochcast::sim {

std::vector<std::int32_t> add_collective(IterationPlan& plan, const CollectiveChoice& choice,
                                         bool analytic, const std::vector<CollectiveSite>& sites,
                                         const std::string& name, bool nccl, double compute_speed) {
  const std::int64_t bytes = choice.bytes.value();
  std::map<int, std::int32_t> begin;
  PlanOp op;  // each op's fields in turn (reused, as a collective adds millions of flows)
  for (const CollectiveSite& site : sites) {
    op = PlanOp{};
    op.category = Category::communication;
    op.lane = site.lane;
    op.deps = site.ready;
    op.marker = Marker::collective_begin;
    op.collective_bytes = bytes;
    op.compute_speed = static_cast<float>(compute_speed);
    begin[site.gpu] = plan.add(op, name);
  }
  // What closes each rank's part.
  std::map<int, std::vector<std::int32_t>> touching;
  if (analytic) {
    op = PlanOp{};
    op.name = fmt::format("{} ({})", name, name_of(choice.plan.algorithm));
    op.category = Category::communication;
    op.lane = Lane{LaneKind::delay, 0};
    op.work = SimTime::from_seconds(choice.time).ns();
    for (const auto& [gpu, b] : begin)
      op.deps.push_back(b);
    std::int32_t all = plan.add(op);
    for (const auto& [gpu, b] : begin)
      touching[gpu].push_back(all);
  } else {
    // Under NCCL's protocol: each step at the protocol's latency, the data inflated by its share
    // of the bandwidth (LL moves half as fast), each rank's sends at its kernel's pace.
    const Protocol protocol = choice.plan.protocol;
    const double share = nccl ? choice.bandwidth_share : 1.0;
    const double kernel_rate = nccl ? choice.plan.rank_rate_limit / share : 0;
    // NCCL's base latency: each rank's part starts that long after the rank enters.
    const Seconds base = nccl && !choice.plan.transfers.empty()
                             ? protocol_base_latency(choice.plan.algorithm, protocol)
                             : Seconds(0);
    if (base.value() > 0) {
      const std::string base_name = fmt::format("{} (NCCL base latency)", name);
      for (auto& [gpu, b] : begin) {
        op = PlanOp{};
        op.category = Category::communication;
        op.lane = Lane{LaneKind::delay, 0};
        op.work = SimTime::from_seconds(base).ns();
        op.deps = {b};
        b = plan.add(op, base_name);
      }
    }
    std::vector<std::int32_t> ops(choice.plan.transfers.size());
    for (std::size_t i = 0; i < choice.plan.transfers.size(); ++i) {
      const Transfer& t = choice.plan.transfers[i];
      std::vector<std::int32_t> deps = std::move(op.deps);  // its memory, kept
      deps.clear();
      op = PlanOp{};
      op.deps = std::move(deps);
      op.category = Category::communication;
      op.lane = Lane{LaneKind::network, 0};
      op.work = static_cast<std::int64_t>(std::ceil(static_cast<double>(t.bytes.value()) / share));
      op.src_gpu = t.src;
      op.dst_gpu = t.dst;
      op.mirror = t.mirror;
      op.fabric = t.fabric;
      op.in_network = t.in_network;
      op.steps = t.steps;
      op.kernel_rate = t.fabric != FabricWay::none ? 0 : kernel_rate;
      op.step_protocol = !nccl         ? std::int8_t{-1}
                         : t.pipelined ? static_cast<std::int8_t>(kPipelinedStepTable)
                                       : static_cast<std::int8_t>(protocol);
      for (int d : t.deps)
        op.deps.push_back(ops[static_cast<std::size_t>(d)]);
      if (t.deps.empty() && t.fabric != FabricWay::none) {
        // NVLS: the switch reduces every GPU's shard of each chunk, so no GPU's exchange with
        // it gets ahead of the last GPU to enter.
        for (const auto& [gpu, b] : begin)
          op.deps.push_back(b);
      } else if (t.deps.empty()) {
        // A rank's first transfer needs both ends in the collective.
        for (int gpu : {t.src, t.dst}) {
          auto b = begin.find(gpu);
          if (b != begin.end()) op.deps.push_back(b->second);
        }
      }
      ops[i] = plan.add(op, name);  // flows show as link counters, never by name
    }
    // A rank's part ends with the last of its transfers: those that no later transfer of the same
    // rank waits for (the others are done by then), which keeps the end's dependencies few.
    auto touches = [](const Transfer& t, int gpu) { return t.src == gpu || t.dst == gpu; };
    std::vector<std::array<bool, 2>> followed(choice.plan.transfers.size(), {false, false});
    for (const Transfer& t : choice.plan.transfers) {
      for (int d : t.deps) {
        const Transfer& before = choice.plan.transfers[static_cast<std::size_t>(d)];
        auto& flags = followed[static_cast<std::size_t>(d)];
        if (touches(t, before.src)) flags[0] = true;
        if (touches(t, before.dst)) flags[1] = true;
      }
    }
    for (std::size_t i = 0; i < choice.plan.transfers.size(); ++i) {
      const Transfer& t = choice.plan.transfers[i];
      if (!followed[i][0]) touching[t.src].push_back(ops[i]);
      if (t.dst != t.src && !followed[i][1]) touching[t.dst].push_back(ops[i]);
    }
  }
  std::vector<std::int32_t> ends;
  for (const CollectiveSite& site : sites) {
    op = PlanOp{};
    op.category = Category::communication;
    op.lane = site.lane;
    op.deps = touching[site.gpu];
    op.deps.push_back(begin[site.gpu]);
    op.marker = Marker::collective_end;
    ends.push_back(plan.add(op, name));
  }
  return ends;
}

}  // namespace epochcast::sim

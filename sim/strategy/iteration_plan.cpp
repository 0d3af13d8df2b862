// Plans keep their ops compact: names interned, dependencies in one list.
#include "sim/strategy/iteration_plan.h"

#include <limits>
#include <stdexcept>

namespace epochcast::sim {

std::int32_t IterationPlan::add(PlanOp op) {
  const std::string name = std::move(op.name);
  return add(std::move(op), name);
}

std::int32_t IterationPlan::add(PlanOp op, std::string_view name) {
  if (ops.size() >= static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()) ||
      deps_.size() + op.deps.size() > std::numeric_limits<std::uint32_t>::max()) {
    throw std::logic_error("an iteration plan with more than 2^31 ops or 2^32 dependencies");
  }
  if (op.lane.kind == LaneKind::compute || op.lane.kind == LaneKind::copy) ++kernels;
  auto found = name_ids_.find(name);
  if (found == name_ids_.end()) {
    found = name_ids_.emplace(std::string(name), static_cast<std::uint32_t>(names_.size())).first;
    names_.emplace_back(name);
  }
  PlanEntry entry;
  entry.work_ns = op.work_ns;
  entry.collective_bytes = op.collective_bytes;
  entry.name = found->second;
  entry.first_dep = static_cast<std::uint32_t>(deps_.size());
  entry.dep_count = static_cast<std::uint32_t>(op.deps.size());
  deps_.insert(deps_.end(), op.deps.begin(), op.deps.end());
  entry.lane = op.lane;
  entry.after_lane = op.after_lane;
  entry.consumes_loader = op.consumes_loader;
  entry.launches_on_gpu = op.launches_on_gpu;
  entry.src_gpu = op.src_gpu;
  entry.dst_gpu = op.dst_gpu;
  entry.steps = op.steps;
  entry.compute_speed = op.compute_speed;
  entry.category = op.category;
  entry.marker = op.marker;
  entry.fabric = op.fabric;
  entry.mirror = op.mirror;
  entry.in_network = op.in_network;
  entry.step_protocol = op.step_protocol;
  ops.push_back(entry);
  return static_cast<std::int32_t>(ops.size() - 1);
}

}  // namespace epochcast::sim

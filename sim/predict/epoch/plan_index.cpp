// Plan indexing for the epoch driver (see plan_index.h).
#include "sim/predict/epoch/plan_index.h"

#include <algorithm>
#include <span>

#include <fmt/format.h>

namespace epochcast::sim::epoch {

std::size_t largest_plan(const EpochInput& in) {
  std::size_t largest = in.train.last.size();
  for (const IterationPlan& p : in.train.plans)
    largest = std::max(largest, p.size());
  if (in.validation.iterations > 0) {
    largest = std::max(largest, in.validation.last.size());
    for (const IterationPlan& p : in.validation.plans)
      largest = std::max(largest, p.size());
  }
  return largest;
}

std::uint8_t note_of(const PlanEntry& op) {
  const bool kernel = op.lane.kind == LaneKind::compute || op.lane.kind == LaneKind::copy;
  const bool look = op.marker != Marker::none || op.consumes_loader >= 0 ||
                    op.lane == Lane{LaneKind::cpu, 0} || (kernel && op.lane.index == 0);
  return static_cast<std::uint8_t>((kernel ? kKernelNote : 0) | (look ? kLookNote : 0));
}

PlanIndex index_plan(const IterationPlan& plan) {
  PlanIndex index;
  index.ends_cpu_thread.assign(plan.size(), false);
  std::vector<std::int64_t> last_on_thread;  // by CPU thread, its last op (-1: none)
  // By lane kind and number: whether the lane's latest op so far waits for a CPU thread.
  std::array<std::vector<char>, static_cast<std::size_t>(LaneKind::delay) + 1> lane_led;
  std::vector<char> led(plan.size(), 0);
  plan.for_each_op(
      [&](std::size_t i, std::size_t, const PlanEntry& op, std::span<const std::int32_t> deps) {
        index.edges += op.dep_count + 2;
        if (index.boundary_op < 0 && op.lane == Lane{LaneKind::cpu, 0}) {
          index.boundary_op = static_cast<std::int32_t>(i);
        }
        const auto lane = static_cast<std::size_t>(op.lane.index);
        std::vector<char>& kind_led = lane_led[static_cast<std::size_t>(op.lane.kind)];
        if (kind_led.size() <= lane) kind_led.resize(lane + 1, 0);
        if (op.lane.kind == LaneKind::cpu) {
          if (last_on_thread.size() <= lane) last_on_thread.resize(lane + 1, -1);
          last_on_thread[lane] = static_cast<std::int64_t>(i);
          led[i] = 1;
        } else {
          // A lane that runs in order waits for its op before; network and delay ops do not.
          const bool ordered_lane =
              op.lane.kind != LaneKind::network && op.lane.kind != LaneKind::delay;
          led[i] = ordered_lane && kind_led[lane] != 0;
          for (std::int32_t d : deps)
            led[i] = led[i] || led[static_cast<std::size_t>(d)] != 0;
        }
        kind_led[lane] = led[i];
        index.led_by_cpu = index.led_by_cpu && led[i] != 0;
      });
  if (index.boundary_op < 0) throw std::logic_error("an iteration plan without a main-thread op");
  for (std::size_t thread = 0; thread < last_on_thread.size(); ++thread) {
    if (last_on_thread[thread] < 0) continue;
    index.ends_cpu_thread[static_cast<std::size_t>(last_on_thread[thread])] = true;
    index.cpu_threads.push_back(static_cast<int>(thread));
  }
  return index;
}

bool ordered(LaneKind kind) {
  return kind != LaneKind::network && kind != LaneKind::delay;
}

std::string lane_name(const Lane& lane) {
  switch (lane.kind) {
    case LaneKind::cpu:
      return lane.index == 0 ? "CPU main thread" : fmt::format("CPU thread {}", lane.index);
    case LaneKind::compute:
      return fmt::format("GPU {} compute stream", lane.index);
    case LaneKind::copy:
      return fmt::format("GPU {} copy engine", lane.index);
    case LaneKind::comm:
      return fmt::format("GPU {} communication stream", lane.index);
    case LaneKind::network:
      return "network";
    case LaneKind::delay:
      return "collectives (analytic)";
  }
  return "lane";
}

}  // namespace epochcast::sim::epoch

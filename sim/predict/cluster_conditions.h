// What a scenario's stragglers and faults (ClusterConditions) do to one point: which apply to
// its ranks, the per-rank GPU speeds the epoch simulator runs at, and the links they degrade.
#pragma once

#include <string>
#include <vector>

#include "core/spec/scenario_spec.h"
#include "sim/network/topology.h"

namespace epochcast::sim {

struct PointConditions {
  std::vector<std::string> applied;  // each condition that touches the point, in words
  // [step][rank]: the speed of each rank's compute in an iteration of that step (steps repeat
  // in turn); empty when every GPU runs at its peers' speed.
  std::vector<std::vector<double>> gpu_speeds;
};

// The conditions that touch a point on `gpus` GPUs (ranks 0 to gpus - 1 on the first nodes).
PointConditions point_conditions(const ScenarioSpec& scenario, int gpus);
// Only the words of point_conditions (cheap: no per-rank speeds).
std::vector<std::string> conditions_applied(const ScenarioSpec& scenario, int gpus);
// Applies the link faults that touch the point to its (every-rank) topology: a degraded link
// keeps its routes at a lower rate, a link down is routed around. Raises InputError when links
// down leave some GPUs unable to reach others.
void apply_link_faults(const ScenarioSpec& scenario, Topology& topology);

}  // namespace epochcast::sim

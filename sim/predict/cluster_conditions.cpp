// Stragglers, jitter and link faults for one point.
#include "sim/predict/cluster_conditions.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>

#include <fmt/format.h>

#include "core/input_error.h"

namespace epochcast::sim {

namespace {

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// A standard normal draw for (seed, step, rank), the same on every platform and whatever the
// point's size: Box-Muller over two uniforms hashed from the triple.
double normal_draw(std::uint64_t seed, int step, int rank) {
  const std::uint64_t key = splitmix64(
      seed ^ splitmix64(static_cast<std::uint64_t>(step) << 32 | static_cast<std::uint32_t>(rank)));
  const double u1 = (static_cast<double>(splitmix64(key) >> 11) + 1) * 0x1.0p-53;  // (0, 1]
  const double u2 = static_cast<double>(splitmix64(key + 1) >> 11) * 0x1.0p-53;    // [0, 1)
  return std::sqrt(-2 * std::log(u1)) * std::cos(2 * std::numbers::pi * u2);
}

std::string percent(double fraction) {
  return fmt::format("{:g}%", 100 * fraction);
}

}  // namespace

namespace {

PointConditions conditions(const ScenarioSpec& scenario, int gpus, bool with_speeds) {
  const ClusterConditions& c = scenario.conditions;
  const int per_node = scenario.machine.gpus_per_node;
  const int nodes = (gpus + per_node - 1) / per_node;
  PointConditions out;
  std::vector<double> speed(with_speeds ? static_cast<std::size_t>(gpus) : 0, 1.0);
  bool slow = false;
  for (const SlowNode& n : c.slow_nodes) {
    if (n.node >= nodes) continue;
    out.applied.push_back(fmt::format("node {}'s GPUs at {} speed", n.node, percent(n.speed)));
    for (int g = n.node * per_node; with_speeds && g < std::min(gpus, (n.node + 1) * per_node); ++g)
      speed[static_cast<std::size_t>(g)] *= n.speed;
    slow = true;
  }
  for (const SlowGpu& g : c.slow_gpus) {
    if (g.gpu >= gpus) continue;
    out.applied.push_back(fmt::format("GPU {} at {} speed", g.gpu, percent(g.speed)));
    if (with_speeds) speed[static_cast<std::size_t>(g.gpu)] *= g.speed;
    slow = true;
  }
  const bool jitter = c.jitter.spread > 0 && gpus > 1;
  if (jitter) {
    out.applied.push_back(fmt::format(
        "per-step jitter: each GPU's compute time x N(1, {}) (seed {}, {} steps repeating)",
        percent(c.jitter.spread), c.jitter.seed, c.jitter.steps));
  }
  if (with_speeds && jitter) {
    for (int k = 0; k < c.jitter.steps; ++k) {
      std::vector<double> step = speed;
      for (int g = 0; g < gpus; ++g) {
        const double time =
            std::clamp(1 + c.jitter.spread * normal_draw(c.jitter.seed, k, g), 0.25, 1.75);
        step[static_cast<std::size_t>(g)] /= time;
      }
      out.gpu_speeds.push_back(std::move(step));
    }
  } else if (with_speeds && slow) {
    out.gpu_speeds.push_back(std::move(speed));
  }
  for (const LinkFault& f : c.links) {
    const std::string what =
        f.rate_fraction == 0 ? "down (routed around)" : "at " + percent(f.rate_fraction);
    if (f.leaf >= 0) {
      const int per_leaf = scenario.machine.topology.network->nodes_per_leaf;
      if (per_leaf <= 0 || nodes <= per_leaf || f.leaf >= (nodes + per_leaf - 1) / per_leaf)
        continue;
      out.applied.push_back(fmt::format("leaf {}'s uplink {}", f.leaf, what));
    } else {
      if (f.node >= nodes || nodes < 2) continue;
      out.applied.push_back(fmt::format("node {}'s NIC {} {}", f.node, f.nic, what));
    }
  }
  return out;
}

}  // namespace

PointConditions point_conditions(const ScenarioSpec& scenario, int gpus) {
  return conditions(scenario, gpus, true);
}

std::vector<std::string> conditions_applied(const ScenarioSpec& scenario, int gpus) {
  return conditions(scenario, gpus, false).applied;
}

void apply_link_faults(const ScenarioSpec& scenario, Topology& topology) {
  for (const LinkFault& f : scenario.conditions.links) {
    const int link = f.leaf >= 0 ? topology.leaf_uplink(f.leaf) : topology.nic_link(f.node, f.nic);
    if (link >= 0) topology.degrade(link, f.rate_fraction);
  }
  if (!topology.gpus_connected()) {
    throw InputError(scenario.conditions.faults_mark, "faults",
                     fmt::format("the links down leave some of the {} GPUs unable to reach the "
                                 "others: no collective could run",
                                 topology.gpus()));
  }
}

}  // namespace epochcast::sim

// Ring and tree construction.
#include "sim/collectives/logical_topology.h"

#include <algorithm>
#include <functional>

namespace epochcast::sim {

std::vector<int> Tree::children(int position) const {
  std::vector<int> out;
  for (int c : {2 * position + 1, 2 * position + 2}) {
    if (c < static_cast<int>(ranks.size())) out.push_back(c);
  }
  return out;
}

int Tree::depth() const {
  // Position p sits at level floor(log2(p + 1)); the deepest position is n - 1.
  int levels = 0;
  while ((std::size_t{2} << levels) <= ranks.size())
    ++levels;
  return levels;
}

std::vector<Ring> build_rings(const Topology& topology, const std::vector<int>& ranks) {
  const int n = static_cast<int>(ranks.size());
  if (n <= 2) return {Ring{ranks}};
  auto at = [n](std::vector<int>& m, int i, int j) -> int& {
    return m[static_cast<std::size_t>(i * n + j)];
  };
  // Direct NVLink lanes between positions i and j.
  std::vector<int> lanes(static_cast<std::size_t>(n * n), 0);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      if (i != j) {
        at(lanes, i, j) = topology.direct_nvlinks(ranks[static_cast<std::size_t>(i)],
                                                  ranks[static_cast<std::size_t>(j)]);
      }
    }
  }
  // Every Hamiltonian cycle over NVLink pairs, from position 0, each direction counted once.
  std::vector<std::vector<int>> cycles;
  std::vector<int> path = {0};
  std::vector<bool> used(static_cast<std::size_t>(n), false);
  used[0] = true;
  std::function<void()> extend = [&] {
    if (static_cast<int>(path.size()) == n) {
      if (at(lanes, path.back(), 0) > 0 && path[1] < path.back()) cycles.push_back(path);
      return;
    }
    for (int i = 1; i < n && cycles.size() < 4096; ++i) {
      if (used[static_cast<std::size_t>(i)] || at(lanes, path.back(), i) == 0) continue;
      used[static_cast<std::size_t>(i)] = true;
      path.push_back(i);
      extend();
      path.pop_back();
      used[static_cast<std::size_t>(i)] = false;
    }
  };
  extend();
  // The largest set of cycles whose use of each pair stays within its lanes (NCCL builds
  // several rings on an NVLink mesh); depth-first in cycle order, so deterministic.
  std::vector<int> best, chosen;
  std::vector<int> free = lanes;
  std::function<void(std::size_t)> choose = [&](std::size_t from) {
    if (chosen.size() > best.size()) best = chosen;
    for (std::size_t c = from; c < cycles.size(); ++c) {
      const std::vector<int>& cycle = cycles[c];
      bool fits = true;
      for (int i = 0; i < n && fits; ++i)
        fits = at(free, cycle[static_cast<std::size_t>(i)],
                  cycle[static_cast<std::size_t>((i + 1) % n)]) > 0;
      if (!fits) continue;
      for (int i = 0; i < n; ++i) {
        int a = cycle[static_cast<std::size_t>(i)],
            b = cycle[static_cast<std::size_t>((i + 1) % n)];
        --at(free, a, b);
        --at(free, b, a);
      }
      chosen.push_back(static_cast<int>(c));
      choose(c);  // a cycle may be taken again where lanes allow
      chosen.pop_back();
      for (int i = 0; i < n; ++i) {
        int a = cycle[static_cast<std::size_t>(i)],
            b = cycle[static_cast<std::size_t>((i + 1) % n)];
        ++at(free, a, b);
        ++at(free, b, a);
      }
    }
  };
  choose(0);
  std::vector<Ring> rings;
  for (int c : best) {
    Ring ring;
    for (int position : cycles[static_cast<std::size_t>(c)]) {
      ring.order.push_back(ranks[static_cast<std::size_t>(position)]);
    }
    // A lane carries data both ways: the reverse ring uses its other direction.
    Ring reverse;
    reverse.order.assign(ring.order.rbegin(), ring.order.rend());
    rings.push_back(std::move(ring));
    rings.push_back(std::move(reverse));
  }
  // Without an NVLink cycle (PCIe, or NVSwitch where all traffic shares each GPU's links to
  // the fabric), one ring in rank order: a second would load the same link directions.
  if (rings.empty()) rings.push_back(Ring{ranks});
  return rings;
}

}  // namespace epochcast::sim

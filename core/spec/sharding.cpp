// FSDP's units and ZeroRedundancyOptimizer's partition (see sharding.h).
#include "core/spec/sharding.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <string>

namespace epochcast {

std::vector<FsdpUnit> fsdp_units(const ModelAnalysis& analysis, FsdpWrap wrap) {
  FsdpUnit root;
  root.root = true;
  std::vector<FsdpUnit> units;
  std::map<std::string, std::size_t> by_block;
  std::set<std::string> tied;
  for (const LayerCosts& layer : analysis.layers) {
    if (!layer.layer.tied_to.empty()) tied.insert(layer.layer.tied_to);
  }
  for (std::size_t l = 0; l < analysis.layers.size(); ++l) {
    const LayerCosts& layer = analysis.layers[l];
    const bool shared = tied.contains(layer.layer.name);
    const bool in_block = wrap == FsdpWrap::block && !layer.layer.block.empty() && !shared;
    if (in_block) {
      auto [at, added] = by_block.emplace(layer.layer.block, units.size());
      if (added) units.emplace_back();
      units[at->second].layers.push_back(l);
      units[at->second].params += layer.params;
    } else if (wrap == FsdpWrap::layer && layer.params > 0 && !shared) {
      units.push_back(FsdpUnit{{l}, layer.params, false});
    } else if (layer.params > 0) {
      root.layers.push_back(l);
      root.params += layer.params;
    }
  }
  // A block without parameters has nothing to gather: its layers run under the root.
  std::erase_if(units, [](const FsdpUnit& u) { return u.params == 0; });
  if (root.params > 0) units.insert(units.begin(), std::move(root));
  return units;
}

std::vector<int> zero_partition(const ModelAnalysis& analysis, int ranks) {
  std::vector<std::int64_t> elements;
  elements.reserve(analysis.param_tensors.size());
  for (const ParamTensor& tensor : analysis.param_tensors)
    elements.push_back(tensor.elements);
  return zero_partition(elements, ranks);
}

std::vector<int> zero_partition(const std::vector<std::int64_t>& elements, int ranks) {
  std::vector<std::size_t> order(elements.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return elements[a] > elements[b]; });
  std::vector<std::int64_t> held(static_cast<std::size_t>(std::max(1, ranks)), 0);
  std::vector<int> owner(elements.size(), 0);
  for (std::size_t t : order) {
    const auto least = std::min_element(held.begin(), held.end());
    owner[t] = static_cast<int>(least - held.begin());
    *least += elements[t];
  }
  return owner;
}

}  // namespace epochcast

// How a sharded strategy divides a model among its ranks, one rule for the simulator
// (sim/strategy/sharded.cpp) and the runtime: FSDP's units and ZeroRedundancyOptimizer's
// partition of the parameter tensors.
#pragma once

#include <cstdint>
#include <vector>

#include "core/model/analysis.h"
#include "core/spec/scenario_spec.h"

namespace epochcast {

// A unit FSDP gathers and reduces as one flat parameter: the layers it covers (indices into the
// analysis, in order) and its parameter count. The root unit holds the parameters no other unit
// covers; it is gathered once at the start of forward and kept until its gradients are reduced
// after backward, as FSDP's root is.
struct FsdpUnit {
  std::vector<std::size_t> layers;
  std::int64_t params = 0;
  bool root = false;
};
// The units of `wrap`, the root (where it holds parameters) first, then the others in layer
// order. Every parameter is in exactly one unit. An embedding a later linear layer is tied to
// stays in the root, as FSDP requires of a parameter two units use (the wrap policies of
// Hugging Face models leave the embeddings in the root for that reason).
std::vector<FsdpUnit> fsdp_units(const ModelAnalysis& analysis, FsdpWrap wrap);

// ZeroRedundancyOptimizer's partition of the parameter tensors over `ranks`: largest first, each
// to the rank that holds the fewest elements so far (lowest rank on a tie). The owner of each
// tensor, in the analysis' order.
std::vector<int> zero_partition(const ModelAnalysis& analysis, int ranks);
// The same rule over tensors of `elements` each (the runtime's parameters, in order).
std::vector<int> zero_partition(const std::vector<std::int64_t>& elements, int ranks);

}  // namespace epochcast

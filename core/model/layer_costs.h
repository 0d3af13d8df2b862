// Internal to core/model: the shape rule and cost formulas of each primitive layer.
#pragma once

#include <array>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/model/analysis.h"

namespace epochcast::detail {

// A layer that does not fit its input. The analysis adds the layer's index, name and position.
struct ShapeProblem : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// What one primitive costs, plus how it holds tensors for backward, which the analysis turns
// into saved-activation bytes without counting a shared tensor twice.
struct PrimitiveCosts {
  LayerCosts costs;
  bool saves_input = false;
  bool saves_output = false;
  bool output_aliases_input = false;  // views and in-place ops share their input's storage
  bool saves_second_input = false;    // a product keeps both factors (cost_binary)
  PerBatch<Bytes> saved_extra;        // masks, indices, statistics private to the layer
};

// `needs_input_grad` tells whether the layer's input requires a gradient; layers before the
// first parameter skip that half of backward, as autograd does.
PrimitiveCosts cost_primitive(const Layer& layer, const TensorShape& input, DType input_dtype,
                              bool needs_input_grad, const CostOptions& options);

// A concat of `inputs` along the layer's dim: one copy forward; backward hands each input a
// slice of the gradient (views, no kernel).
PrimitiveCosts cost_concat(const Layer& layer, const std::vector<TensorShape>& inputs,
                           bool needs_input_grad, const CostOptions& options);

// The residual join: out = body + shortcut; backward sums the gradients at the fork.
PrimitiveCosts cost_residual_add(const Layer& layer, const TensorShape& shape, bool fork_needs_grad,
                                 const CostOptions& options);

// An add or mul of two outputs (`layer.type`), broadcast as PyTorch broadcasts: a size-1
// dimension of either stretches to the other's. `grads` says which inputs need a gradient; an
// input that was broadcast gets its gradient summed back to its shape. A gated block's join is
// the product of its two branches (same shapes).
PrimitiveCosts cost_binary(const Layer& layer, const TensorShape& first, const TensorShape& second,
                           std::array<bool, 2> grads, const CostOptions& options);

// Families of layers costed in files of their own (all share cost_building.h). `p` holds the
// layer and its input shape; they return it with the costs filled in.
// attention_costs.cpp: multihead_attention.
PrimitiveCosts attention_costs(PrimitiveCosts p, const CostOptions& options, bool needs_grad);
// elementwise_chains.cpp: layers that eager PyTorch runs as chains of small kernels.
PrimitiveCosts rmsnorm_costs(PrimitiveCosts p, const CostOptions& options, bool needs_grad);
PrimitiveCosts gelu_new_costs(PrimitiveCosts p, const CostOptions& options, bool needs_grad);
PrimitiveCosts stochastic_depth_costs(PrimitiveCosts p, const CostOptions& options,
                                      bool needs_grad);
PrimitiveCosts scale_costs(PrimitiveCosts p, const CostOptions& options, bool needs_grad);

}  // namespace epochcast::detail

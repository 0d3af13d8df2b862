// The optimizer step a scenario's framework runs. PyTorch 1.x's torch.optim (and LibTorch's C++
// optimizers) update parameter by parameter, several kernels each; PyTorch 2.x's default
// (foreach) runs the same arithmetic as a few multi-tensor kernels over every parameter at
// once (torch/optim/sgd.py and adam.py, _multi_tensor_*), which is what the simulator's
// `foreach` implementation costs (sim/strategy/step_builder.cpp).
#pragma once

#include <memory>
#include <vector>

#include <torch/torch.h>

#include "core/spec/scenario_spec.h"

namespace epochcast::runtime {

class StepOptimizer {
 public:
  virtual ~StepOptimizer() = default;
  // One update of every parameter with a gradient, from the gradients in place.
  virtual void step() = 0;
};

// The hyper-parameters are torch.optim's defaults where it has them: SGD lr 0.01 (momentum
// 0.9), Adam lr 1e-3, betas (0.9, 0.999), eps 1e-8, AdamW weight decay 0.01.
// `implementation`: for_loop (torch::optim's C++ optimizers) or foreach; fused is refused
// before a run (the C++ API has no fused optimizers).
// optimizer.zero_grad(set_to_none), as torch.optim does it (LibTorch 1.13 lacks the option):
// None, or zeroed in place (detached first only when the gradient has a graph: a gradient that
// is a view, as nn.DataParallel's reduced ones are, cannot be detached in place).
void zero_grad(const std::vector<torch::Tensor>& parameters, bool set_to_none);

std::unique_ptr<StepOptimizer> make_step_optimizer(Optimizer kind,
                                                   OptimizerImplementation implementation,
                                                   std::vector<torch::Tensor> parameters);

}  // namespace epochcast::runtime

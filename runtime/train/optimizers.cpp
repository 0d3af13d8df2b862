// Optimizer steps: torch::optim's per-parameter loop, and PyTorch 2's multi-tensor steps.
#include "runtime/train/optimizers.h"

#include <cmath>
#include <stdexcept>

#include <torch/version.h>

namespace epochcast::runtime {

namespace {

constexpr double kSgdLr = 0.01, kMomentum = 0.9;
constexpr double kAdamLr = 1e-3, kBeta1 = 0.9, kBeta2 = 0.999, kEps = 1e-8;
constexpr double kAdamWDecay = 0.01;

// LibTorch's C++ optimizers: a loop over the parameters, a few kernels each.
class LoopOptimizer final : public StepOptimizer {
 public:
  explicit LoopOptimizer(std::unique_ptr<torch::optim::Optimizer> optimizer)
      : optimizer_(std::move(optimizer)) {}
  void step() override { optimizer_->step(); }

 private:
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
};

std::unique_ptr<torch::optim::Optimizer> loop_optimizer(Optimizer kind,
                                                        std::vector<torch::Tensor> parameters) {
  switch (kind) {
    case Optimizer::sgd:
      return std::make_unique<torch::optim::SGD>(parameters, torch::optim::SGDOptions(kSgdLr));
    case Optimizer::momentum:
      return std::make_unique<torch::optim::SGD>(
          parameters, torch::optim::SGDOptions(kSgdLr).momentum(kMomentum));
    case Optimizer::adam:
      return std::make_unique<torch::optim::Adam>(
          parameters, torch::optim::AdamOptions(kAdamLr).betas({kBeta1, kBeta2}).eps(kEps));
    case Optimizer::adamw:
      return std::make_unique<torch::optim::AdamW>(parameters, torch::optim::AdamWOptions(kAdamLr)
                                                                   .betas({kBeta1, kBeta2})
                                                                   .eps(kEps)
                                                                   .weight_decay(kAdamWDecay));
  }
  throw std::logic_error("unknown optimizer");
}

// PyTorch 2.x's foreach steps (torch/optim/sgd.py _multi_tensor_sgd, adam.py
// _multi_tensor_adam, adamw.py): each at::_foreach_* call is one multi-tensor kernel (or a few,
// split by size) over every parameter with a gradient.
class ForeachOptimizer final : public StepOptimizer {
 public:
  ForeachOptimizer(Optimizer kind, std::vector<torch::Tensor> parameters)
      : kind_(kind), parameters_(std::move(parameters)), state_(parameters_.size()) {}

  void step() override {
    torch::NoGradGuard no_grad;
    // Parameters without a gradient (None) are skipped, as torch.optim does.
    std::vector<std::size_t> with_grad;
    std::vector<torch::Tensor> params, grads;
    for (std::size_t i = 0; i < parameters_.size(); ++i) {
      if (!parameters_[i].grad().defined()) continue;
      with_grad.push_back(i);
      params.push_back(parameters_[i]);
      grads.push_back(parameters_[i].grad());
    }
    if (params.empty()) return;
    switch (kind_) {
      case Optimizer::sgd:
        at::_foreach_add_(params, grads, -kSgdLr);
        return;
      case Optimizer::momentum:
        momentum_step(with_grad, params, grads);
        return;
      case Optimizer::adam:
      case Optimizer::adamw:
        adam_step(with_grad, params, grads);
        return;
    }
  }

 private:
  struct State {
    torch::Tensor first;   // the momentum buffer, or Adam's first moment
    torch::Tensor second;  // Adam's second moment
    std::int64_t steps = 0;
  };

  void momentum_step(const std::vector<std::size_t>& with_grad, std::vector<torch::Tensor>& params,
                     std::vector<torch::Tensor>& grads) {
    std::vector<torch::Tensor> buffers;
    bool all_started = true;
    for (std::size_t i : with_grad)
      all_started = all_started && state_[i].first.defined();
    if (all_started) {
      for (std::size_t i : with_grad)
        buffers.push_back(state_[i].first);
      at::_foreach_mul_(buffers, kMomentum);
      at::_foreach_add_(buffers, grads, 1.0);
    } else {
      // A buffer starts as a copy of its first gradient; the others step one by one.
      for (std::size_t k = 0; k < with_grad.size(); ++k) {
        State& s = state_[with_grad[k]];
        if (!s.first.defined()) {
          s.first = grads[k].clone().detach();
        } else {
          s.first.mul_(kMomentum).add_(grads[k]);
        }
        buffers.push_back(s.first);
      }
    }
    at::_foreach_add_(params, buffers, -kSgdLr);
  }

  void adam_step(const std::vector<std::size_t>& with_grad, std::vector<torch::Tensor>& params,
                 std::vector<torch::Tensor>& grads) {
    std::vector<torch::Tensor> exp_avgs, exp_avg_sqs;
    std::vector<at::Scalar> step_sizes, bias_correction2_sqrt;
    for (std::size_t i : with_grad) {
      State& s = state_[i];
      if (!s.first.defined()) {
        s.first = torch::zeros_like(parameters_[i]);
        s.second = torch::zeros_like(parameters_[i]);
      }
      ++s.steps;
      exp_avgs.push_back(s.first);
      exp_avg_sqs.push_back(s.second);
      const auto t = static_cast<double>(s.steps);
      step_sizes.emplace_back(-kAdamLr / (1 - std::pow(kBeta1, t)));
      bias_correction2_sqrt.emplace_back(std::sqrt(1 - std::pow(kBeta2, t)));
    }
    if (kind_ == Optimizer::adamw) at::_foreach_mul_(params, 1 - kAdamLr * kAdamWDecay);
#if TORCH_VERSION_MAJOR >= 2
    at::_foreach_lerp_(exp_avgs, grads, 1 - kBeta1);
#else
    // PyTorch 1.13's _multi_tensor_adam, before _foreach_lerp_ existed.
    at::_foreach_mul_(exp_avgs, kBeta1);
    at::_foreach_add_(exp_avgs, grads, 1 - kBeta1);
#endif
    at::_foreach_mul_(exp_avg_sqs, kBeta2);
    at::_foreach_addcmul_(exp_avg_sqs, grads, grads, 1 - kBeta2);
    std::vector<torch::Tensor> denominators = at::_foreach_sqrt(exp_avg_sqs);
    at::_foreach_div_(denominators, bias_correction2_sqrt);
    at::_foreach_add_(denominators, kEps);
    at::_foreach_addcdiv_(params, exp_avgs, denominators, step_sizes);
  }

  Optimizer kind_;
  std::vector<torch::Tensor> parameters_;
  std::vector<State> state_;  // per parameter
};

}  // namespace

void zero_grad(const std::vector<torch::Tensor>& parameters, bool set_to_none) {
  for (torch::Tensor p : parameters) {
    if (!p.grad().defined()) continue;
    if (set_to_none) {
      p.mutable_grad() = torch::Tensor();
      continue;
    }
    torch::Tensor& gradient = p.mutable_grad();
    if (gradient.grad_fn()) {
      gradient.detach_();
    } else {
      gradient.requires_grad_(false);
    }
    gradient.zero_();
  }
}

std::unique_ptr<StepOptimizer> make_step_optimizer(Optimizer kind,
                                                   OptimizerImplementation implementation,
                                                   std::vector<torch::Tensor> parameters) {
  switch (implementation) {
    case OptimizerImplementation::foreach:
      return std::make_unique<ForeachOptimizer>(kind, std::move(parameters));
    case OptimizerImplementation::for_loop:
      return std::make_unique<LoopOptimizer>(loop_optimizer(kind, std::move(parameters)));
    case OptimizerImplementation::automatic:
    case OptimizerImplementation::fused:
      break;
  }
  throw std::logic_error("an optimizer implementation the runtime does not run");
}

}  // namespace epochcast::runtime

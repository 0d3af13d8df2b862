// Training for real until a target is reached (run --to-target): the scenario's model on a real
// data set (dataset.files, MNIST-format IDX files), at each batch size of the sweep, with several
// seeds, evaluating on the test set every so many samples, under the scenario's learning-rate
// rule. Optionally measures the gradient noise scale B_simple along the way (--noise-scale).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "core/measure/target_runs.h"
#include "core/spec/scenario_spec.h"

namespace epochcast::runtime {

struct ToTargetOptions {
  int seeds = 3;
  std::uint64_t first_seed = 1;
  std::int64_t evaluate_every_samples = 4096;
  double max_epochs = 30;  // a run that has not reached the target by then stops, unreached
  bool noise_scale = false;
  std::int64_t noise_batch = 0;  // 0: the sweep's median batch
  std::int64_t noise_micro_batches = 4;
  bool quiet = false;
  torch::Device device = torch::kCPU;
  std::vector<std::string> arguments;  // as given, recorded in the file
};

// Every point and seed, in sweep order; `save` gets the file after each run (so that a stopped
// campaign keeps what it measured). Raises InputError for a scenario it cannot train: no
// target, no dataset.files, more than one GPU, a model whose input is not the data's.
TargetRunsFile run_to_target(const ScenarioSpec& scenario, const ToTargetOptions& options,
                             const std::function<void(const TargetRunsFile&)>& save,
                             const std::atomic<bool>& stop);

// McCandlish et al.'s unbiased estimates from gradients of `small` and `big` samples (their
// appendix A): |G|^2 = (big |G_big|^2 - small |G_small|^2) / (big - small) and
// tr(Sigma) = (|G_small|^2 - |G_big|^2) / (1/small - 1/big). B_simple = tr(Sigma) / |G|^2.
struct NoiseEstimate {
  double gradient_squared = 0;  // |G|^2
  double trace = 0;             // tr(Sigma)
};
NoiseEstimate estimate_noise(double small_norm_squared, std::int64_t small, double big_norm_squared,
                             std::int64_t big);

}  // namespace epochcast::runtime

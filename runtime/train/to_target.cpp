// Steps, epochs and seconds to a target on real data, and the gradient noise scale.
#include "runtime/train/to_target.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <optional>
#include <variant>

#include <fmt/format.h>
#include <torch/cuda.h>

#include "core/input_error.h"
#include "runtime/data/idx_dataset.h"
#include "runtime/model/torch_model.h"

namespace epochcast::runtime {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// torch.optim's defaults for the scenario's optimizer, at `rate`.
std::unique_ptr<torch::optim::Optimizer> make_optimizer(Optimizer kind,
                                                        std::vector<torch::Tensor> parameters,
                                                        double rate) {
  switch (kind) {
    case Optimizer::adam:
      return std::make_unique<torch::optim::Adam>(parameters, torch::optim::AdamOptions(rate));
    case Optimizer::adamw:
      return std::make_unique<torch::optim::AdamW>(parameters, torch::optim::AdamWOptions(rate));
    case Optimizer::momentum:
      return std::make_unique<torch::optim::SGD>(parameters,
                                                 torch::optim::SGDOptions(rate).momentum(0.9));
    case Optimizer::sgd:
      return std::make_unique<torch::optim::SGD>(parameters, torch::optim::SGDOptions(rate));
  }
  return nullptr;
}

double default_rate(Optimizer kind) {
  return kind == Optimizer::sgd || kind == Optimizer::momentum ? 0.01 : 1e-3;
}

void set_rate(torch::optim::Optimizer& optimizer, double rate) {
  for (auto& group : optimizer.param_groups())
    group.options().set_lr(rate);
}

struct Evaluation {
  double accuracy = 0;
  double loss = 0;
};

Evaluation evaluate(TorchModel& model, const IdxSplit& test, torch::Device device) {
  model->eval();
  torch::NoGradGuard no_grad;
  const std::int64_t n = test.images.size(0);
  constexpr std::int64_t kChunk = 1000;
  double correct = 0, loss = 0;
  for (std::int64_t at = 0; at < n; at += kChunk) {
    const std::int64_t end = std::min(n, at + kChunk);
    torch::Tensor x = test.images.slice(0, at, end).to(device);
    torch::Tensor y = test.labels.slice(0, at, end).to(device);
    torch::Tensor logits = model->forward(x);
    correct += logits.argmax(1).eq(y).sum().item<double>();
    loss += torch::nn::functional::cross_entropy(
                logits, y, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
                .item<double>();
  }
  model->train();
  return {correct / static_cast<double>(n), loss / static_cast<double>(n)};
}

bool reached(const TargetSpec& target, double metric) {
  return target.metric == TargetMetric::validation_accuracy ? metric >= target.value
                                                            : metric <= target.value;
}

// Every parameter's gradient, flattened into one vector (zeros for a parameter without one).
torch::Tensor flat_gradient(const std::vector<torch::Tensor>& parameters) {
  std::vector<torch::Tensor> parts;
  for (const torch::Tensor& p : parameters)
    parts.push_back(p.grad().defined() ? p.grad().flatten()
                                       : torch::zeros({p.numel()}, p.options()));
  return torch::cat(parts);
}

struct Trainer {
  const ScenarioSpec& scenario;
  const IdxDataset& data;
  const ToTargetOptions& options;
  const std::atomic<bool>& stop;

  // One seed at one batch. With `noise`, each step's gradient is the mean of micro-batch
  // gradients (the same step as the whole batch's: the model has no batch statistics), and
  // their norms against the mean's feed the noise estimates.
  std::optional<TargetRun> run(std::int64_t batch, std::uint64_t seed, double rate,
                               NoiseScaleRecord* noise) {
    torch::manual_seed(seed);
    TorchModel model = build_torch_model(scenario.model);
    model->to(options.device);
    model->train();
    std::vector<torch::Tensor> parameters = model->parameters();
    std::unique_ptr<torch::optim::Optimizer> optimizer =
        make_optimizer(scenario.training.optimizer, parameters, rate);
    const std::int64_t n = data.train.images.size(0);
    const std::int64_t warmup = scenario.training.learning_rate.warmup_steps;
    torch::Generator order = at::detail::createCPUGenerator(seed);
    torch::Tensor permutation = torch::randperm(n, order);
    std::int64_t position = 0, steps = 0, samples = 0, since_evaluation = 0;
    double training = 0, loss_window = 0;
    int loss_count = 0;
    TargetRun out;
    out.seed = seed;
    const auto max_samples = static_cast<std::int64_t>(options.max_epochs * static_cast<double>(n));
    while (samples < max_samples && !stop.load()) {
      if (position + batch > n) {  // full batches only, a fresh order each epoch
        permutation = torch::randperm(n, order);
        position = 0;
      }
      torch::Tensor indices = permutation.slice(0, position, position + batch);
      position += batch;
      const auto started = Clock::now();
      torch::Tensor x = data.train.images.index_select(0, indices).to(options.device);
      torch::Tensor y = data.train.labels.index_select(0, indices).to(options.device);
      if (warmup > 0 && steps < warmup) {
        set_rate(*optimizer, rate * static_cast<double>(steps + 1) / static_cast<double>(warmup));
      } else if (warmup > 0 && steps == warmup) {
        set_rate(*optimizer, rate);
      }
      optimizer->zero_grad();
      double step_loss = 0;
      if (noise == nullptr) {
        torch::Tensor loss = torch::nn::functional::cross_entropy(model->forward(x), y);
        loss.backward();
        step_loss = loss.item<double>();
      } else {
        const std::int64_t parts = options.noise_micro_batches, small = batch / parts;
        torch::Tensor sum;
        double small_norms = 0;
        std::vector<bool> used(parameters.size(), false);  // by any micro-batch
        for (std::int64_t i = 0; i < parts; ++i) {
          optimizer->zero_grad();
          torch::Tensor loss = torch::nn::functional::cross_entropy(
              model->forward(x.slice(0, i * small, (i + 1) * small)),
              y.slice(0, i * small, (i + 1) * small));
          loss.backward();
          for (std::size_t k = 0; k < parameters.size(); ++k)
            used[k] = used[k] || parameters[k].grad().defined();
          step_loss += loss.item<double>() / static_cast<double>(parts);
          torch::Tensor g = flat_gradient(parameters);
          small_norms += g.square().sum().item<double>() / static_cast<double>(parts);
          sum = sum.defined() ? sum + g : g.clone();
        }
        torch::Tensor mean = sum / static_cast<double>(parts);
        const NoiseEstimate e =
            estimate_noise(small_norms, small, mean.square().sum().item<double>(), small * parts);
        noise->add(e.trace, e.gradient_squared);
        // The whole batch's gradient, for the step. A parameter no micro-batch used keeps no
        // gradient, as in a plain step: a zero one would still be decayed (weight decay) and
        // count as a step in Adam's moments.
        std::int64_t offset = 0;
        for (std::size_t k = 0; k < parameters.size(); ++k) {
          torch::Tensor& p = parameters[k];
          if (used[k])
            p.mutable_grad() = mean.slice(0, offset, offset + p.numel()).view_as(p).clone();
          offset += p.numel();
        }
      }
      if (!std::isfinite(step_loss)) {
        // A diverged run would train on to --max-epochs without ever reaching the target.
        throw InputError(
            SourceMark{scenario.source_file, 0, 0}, "training.learning_rate",
            fmt::format("the loss became {} at step {} of batch {} (seed {}, learning rate {:g}): "
                        "the training diverged and would never reach the target; lower the "
                        "learning rate (training.learning_rate.base) or its scaling",
                        std::isnan(step_loss) ? "NaN" : "infinite", steps + 1, batch, seed, rate));
      }
      optimizer->step();
      if (options.device.is_cuda()) torch::cuda::synchronize();  // the step's own time
      training += seconds_since(started);
      ++steps;
      samples += batch;
      since_evaluation += batch;
      loss_window += step_loss;
      ++loss_count;
      if (since_evaluation < options.evaluate_every_samples) continue;
      since_evaluation = 0;
      double metric = 0;
      if (scenario.target->metric == TargetMetric::training_loss) {
        metric = loss_window / loss_count;
      } else {
        Evaluation e = evaluate(model, data.test, options.device);
        metric = scenario.target->metric == TargetMetric::validation_accuracy ? e.accuracy : e.loss;
      }
      loss_window = 0;
      loss_count = 0;
      record(out, steps, samples, training, metric);
      if (reached(*scenario.target, metric)) {
        out.reached = true;
        return out;
      }
    }
    // Stopped by a signal: no measurement. Out of epochs since the last evaluation: one more,
    // so the record says where the run ended.
    if (stop.load()) return std::nullopt;
    if (steps > out.steps) {
      double metric = loss_count > 0 ? loss_window / loss_count : 0;
      if (scenario.target->metric != TargetMetric::training_loss) {
        Evaluation e = evaluate(model, data.test, options.device);
        metric = scenario.target->metric == TargetMetric::validation_accuracy ? e.accuracy : e.loss;
      }
      record(out, steps, samples, training, metric);
      out.reached = reached(*scenario.target, metric);
    }
    return out;
  }

  void record(TargetRun& out, std::int64_t steps, std::int64_t samples, double training,
              double metric) const {
    out.steps = steps;
    out.epochs = static_cast<double>(samples) / static_cast<double>(data.train.images.size(0));
    out.seconds = training;
    out.metric = metric;
  }
};

std::string scenario_problem(const ScenarioSpec& s) {
  if (!s.target) return "the scenario states no target: add target: {metric, value}";
  if (s.dataset.files.empty())
    return "dataset.files must name a folder of MNIST-format IDX files to train on";
  for (int gpus : s.sweep.gpus) {
    if (gpus != 1) return "--to-target trains on one device: set sweep.gpus to [1] (--gpus 1)";
  }
  if (s.training.gradient_accumulation > 1) {
    return "--to-target steps once a batch: leave training.gradient_accumulation at 1";
  }
  return "";
}

// The files against the scenario: the sizes its predictions use, labels its model can score.
void check_data(const ScenarioSpec& s, const IdxDataset& data) {
  auto bad = [&](const std::string& problem) {
    throw InputError(SourceMark{s.source_file, 0, 0}, "dataset.files",
                     fmt::format("{} ({})", problem, s.dataset.files));
  };
  const std::int64_t train = data.train.images.size(0), test = data.test.images.size(0);
  if (train != s.dataset.train_samples) {
    bad(fmt::format("the files hold {} training samples but dataset.train_samples says {}", train,
                    s.dataset.train_samples));
  }
  const std::int64_t most = std::max(data.train.labels.max().item<std::int64_t>(),
                                     data.test.labels.max().item<std::int64_t>());
  if (most >= s.dataset.classes) {
    bad(fmt::format("the files have label {} but the data set has {} classes", most,
                    s.dataset.classes));
  }
  for (std::int64_t batch : s.sweep.batch) {
    if (batch > train) {
      bad(fmt::format("a batch of {} is larger than the {} training samples", batch, train));
    }
  }
  if (test == 0) bad("the test files hold no sample to evaluate on");
}

}  // namespace

NoiseEstimate estimate_noise(double small_norm_squared, std::int64_t small, double big_norm_squared,
                             std::int64_t big) {
  const auto b = static_cast<double>(small), B = static_cast<double>(big);
  NoiseEstimate e;
  e.gradient_squared = (B * big_norm_squared - b * small_norm_squared) / (B - b);
  e.trace = (small_norm_squared - big_norm_squared) / (1 / b - 1 / B);
  return e;
}

TargetRunsFile run_to_target(const ScenarioSpec& scenario, const ToTargetOptions& options,
                             const std::function<void(const TargetRunsFile&)>& save,
                             const std::atomic<bool>& stop) {
  if (std::string problem = scenario_problem(scenario); !problem.empty()) {
    throw InputError(SourceMark{scenario.source_file, 0, 0}, "", problem);
  }
  const auto campaign_start = Clock::now();
  IdxDataset data = load_idx_dataset(scenario.dataset.files);
  check_data(scenario, data);
  const std::vector<std::int64_t> sample(data.train.images.sizes().begin() + 1,
                                         data.train.images.sizes().end());
  if (sample != scenario.model.input_shape.dims) {
    throw InputError(SourceMark{scenario.source_file, 0, 0}, "dataset.files",
                     fmt::format("the files hold samples of [{}] but the model '{}' takes {}",
                                 fmt::join(sample, ", "), scenario.model.name,
                                 scenario.model.input_shape.str()));
  }
  TargetRunsFile file;
  file.scenario_name = scenario.name;
  file.model = scenario.model.name;
  file.arguments = options.arguments;
  file.device_name = options.device.is_cuda() ? "cuda" : "cpu";
  file.torch_version = TORCH_VERSION;
  file.metric = std::string(name_of(scenario.target->metric));
  file.value = scenario.target->value;
  file.evaluate_every_samples = options.evaluate_every_samples;
  file.max_epochs = options.max_epochs;
  file.train_samples = data.train.images.size(0);
  file.test_samples = data.test.images.size(0);
  Trainer trainer{scenario, data, options, stop};
  const double fallback = default_rate(scenario.training.optimizer);
  auto say = [&](const std::string& line) {
    if (!options.quiet) std::cerr << line << std::flush;
  };

  if (options.noise_scale) {
    std::vector<std::int64_t> batches = scenario.sweep.batch;
    std::sort(batches.begin(), batches.end());
    const std::int64_t batch =
        options.noise_batch > 0 ? options.noise_batch : batches[batches.size() / 2];
    const std::int64_t parts = options.noise_micro_batches;
    if (batch < 2 * parts || batch % parts != 0 || batch > file.train_samples) {
      throw InputError(SourceMark{"<command line>", 0, 0}, "--noise-batch",
                       fmt::format("the noise scale needs a batch that {} micro-batches of at "
                                   "least 2 divide evenly, within the {} training samples; got {}",
                                   parts, file.train_samples, batch));
    }
    if (scenario.analysis.buffers > 0) {
      throw InputError(SourceMark{"<command line>", 0, 0}, "--noise-scale",
                       fmt::format("the model '{}' keeps batch statistics (batch norm): its "
                                   "micro-batches would not take the whole batch's step",
                                   scenario.model.name));
    }
    say(fmt::format("noise scale at batch {} ({} micro-batches) ... ", batch,
                    options.noise_micro_batches));
    NoiseScaleRecord record;
    const double rate = learning_rate_at(scenario.training.learning_rate, batch, fallback);
    const std::optional<TargetRun> run = trainer.run(batch, options.first_seed, rate, &record);
    if (!run) {
      say("stopped\n");
    } else {
      auto measured = record.measurement(batch, options.noise_micro_batches);
      if (const auto* m = std::get_if<NoiseScaleMeasurement>(&measured)) {
        file.noise_scale = *m;
        say(fmt::format("B_simple {:.0f} samples (quartiles over {} windows {}-{}), {} steps\n",
                        m->b_simple, m->windows, quartile_text(m->low), quartile_text(m->high),
                        run->steps));
      } else {
        say(fmt::format("not measured ({})\n", std::get<std::string>(measured)));
      }
    }
    save(file);
  }

  for (std::int64_t batch : scenario.sweep.batch) {
    if (stop.load()) break;
    TargetPoint point;
    point.global_batch = batch;
    point.learning_rate = learning_rate_at(scenario.training.learning_rate, batch, fallback);
    for (int s = 0; s < options.seeds && !stop.load(); ++s) {
      const std::uint64_t seed = options.first_seed + static_cast<std::uint64_t>(s);
      say(fmt::format("[batch {}, seed {}] ... ", batch, seed));
      const std::optional<TargetRun> run = trainer.run(batch, seed, point.learning_rate, nullptr);
      if (!run) {
        say("stopped\n");
        break;
      }
      say(run->reached
              ? fmt::format("{} {:.4g} after {} steps ({:.3f} epochs, {:.1f} s)\n", file.metric,
                            run->metric, run->steps, run->epochs, run->seconds)
              : fmt::format("not reached in {:g} epochs (last {:.4g})\n", options.max_epochs,
                            run->metric));
      point.runs.push_back(*run);
    }
    if (!point.runs.empty()) file.points.push_back(std::move(point));
    file.campaign_seconds = seconds_since(campaign_start);
    save(file);
  }
  file.campaign_seconds = seconds_since(campaign_start);
  save(file);
  return file;
}

}  // namespace epochcast::runtime

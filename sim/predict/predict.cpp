// From a sweep point to a predicted epoch: build the step plans, simulate, explain.
#include "sim/predict/predict.h"

#include <algorithm>

#include <fmt/format.h>

#include "sim/compute/device_model.h"
#include "sim/strategy/step_builder.h"

namespace epochcast::sim {

namespace {

// Iterations and batch sizes of one pass over `samples` with batches of `batch`.
Phase make_phase(std::int64_t samples, std::int64_t batch, bool drop_last) {
  Phase phase;
  phase.full_batch = batch;
  if (samples == 0) return phase;
  if (drop_last) {
    phase.iterations = samples / batch;
    phase.last_batch = batch;
  } else {
    phase.iterations = (samples + batch - 1) / batch;
    phase.last_batch = samples - (phase.iterations - 1) * batch;
  }
  return phase;
}

double seconds(SimTime t) {
  return t.seconds();
}

std::string percent(double fraction) {
  return fmt::format("{:.0f}%", 100.0 * fraction);
}

void explain(PointResult& r, const ScenarioSpec& s, const IterationPlan& step) {
  const EpochStats& st = r.stats;
  const Breakdown& b = r.breakdown;
  double epoch = r.epoch_seconds;
  double compute = b.forward + b.backward + b.optimizer;
  double copy = b.h2d;
  struct Candidate {
    double share;
    const char* word;
  };
  std::vector<Candidate> candidates = {{compute / epoch, "compute"},
                                       {b.host / epoch, "host"},
                                       {b.data / epoch, "input"},
                                       {copy / epoch, "copy"},
                                       {b.communication / epoch, "communication"}};
  auto top =
      std::max_element(candidates.begin(), candidates.end(),
                       [](const Candidate& x, const Candidate& y) { return x.share < y.share; });
  r.bottleneck = top->word;
  double kernels_per_step = static_cast<double>(step.kernels);
  double host_per_step =
      seconds(st.cpu_busy[static_cast<std::size_t>(Category::forward)] +
              st.cpu_busy[static_cast<std::size_t>(Category::backward)] +
              st.cpu_busy[static_cast<std::size_t>(Category::optimizer)] +
              st.cpu_busy[static_cast<std::size_t>(Category::host)]) /
      static_cast<double>(std::max<std::int64_t>(r.train_iterations + r.validation_iterations, 1));
  if (r.bottleneck == std::string("compute")) {
    const char* part = b.backward >= b.forward && b.backward >= b.optimizer ? "the backward pass"
                       : b.forward >= b.optimizer                           ? "the forward pass"
                                                                            : "the optimizer step";
    double part_time = std::max({b.forward, b.backward, b.optimizer});
    r.diagnosis =
        fmt::format("compute-bound: the GPU is busy {} of the epoch, most of it in {} ({})",
                    percent(r.gpu_busy_fraction), part, percent(part_time / epoch));
  } else if (r.bottleneck == std::string("host")) {
    r.diagnosis = fmt::format(
        "host-bound: the GPU waits {} of the epoch while the CPU dispatches {:.0f} kernels per "
        "step ({:.2f} ms of host work per step); larger batches or fewer, fused kernels help",
        percent(b.host / epoch), kernels_per_step, host_per_step * 1e3);
  } else if (r.bottleneck == std::string("input")) {
    const LoaderSpec& loader = s.loader;
    double batch_load = loader.sample_cpu.value() * static_cast<double>(r.point.per_gpu_batch);
    r.diagnosis = fmt::format(
        "input-bound: the GPU waits {} of the epoch for data; a batch takes {:.1f} ms of CPU to "
        "load {}",
        percent(b.data / epoch), batch_load * 1e3,
        loader.workers == 0 ? std::string("in the training thread (workers: 0)")
                            : fmt::format("on each of {} workers", loader.workers));
  } else if (r.bottleneck == std::string("copy")) {
    r.diagnosis = fmt::format(
        "copy-bound: host-to-device copies take {} of the epoch over PCIe "
        "{}.0 x{} ({} memory)",
        percent(copy / epoch), s.machine.gpu.pcie_generation, s.machine.gpu.pcie_lanes,
        s.loader.pin_memory ? "pinned" : "pageable");
  } else {
    r.diagnosis = fmt::format("communication-bound: exposed communication takes {} of the epoch",
                              percent(b.communication / epoch));
  }
}

}  // namespace

PointResult predict_point(const ScenarioSpec& scenario, const SweepPoint& point,
                          const PredictOptions& options) {
  PointResult r;
  r.point = point;
  const TrainingSpec& training = scenario.training;
  DeviceModel device(scenario.machine.gpu, scenario.profile, training.precision);
  ModelAnalysis analysis = analyze_model(scenario.model, cost_options(training.precision));
  r.memory = estimate_memory(analysis, point.per_gpu_batch, training.optimizer, training.precision,
                             scenario.profile, scenario.machine.gpu.memory);

  EpochInput input;
  input.train = make_phase(scenario.dataset.train_samples, point.global_batch, training.drop_last);
  input.validation = make_phase(scenario.dataset.validation_samples, point.global_batch, false);
  input.loader = scenario.loader;
  r.train_iterations = input.train.iterations;
  r.validation_iterations = input.validation.iterations;
  if (!r.memory.fits) {
    r.bottleneck = "memory";
    r.diagnosis = fmt::format(
        "out of memory: a per-GPU batch of {} needs {:.2f} GiB of the GPU's {:.2f} GiB; the "
        "largest batch that fits is {}",
        point.per_gpu_batch, to_gib(r.memory.peak), to_gib(r.memory.capacity),
        r.memory.largest_batch);
    return r;
  }
  if (point.gpus != 1) {
    throw InputError(SourceMark{scenario.source_file, 0, 0}, "sweep.gpus",
                     fmt::format("{} GPUs: the {} strategy is simulated on one GPU per point",
                                 point.gpus, kStrategyNames[static_cast<int>(training.strategy)]));
  }
  StepContext context{scenario, analysis, device};
  input.train.full = single_device_training_step(context, input.train.full_batch);
  input.train.last = input.train.last_batch == input.train.full_batch
                         ? input.train.full
                         : single_device_training_step(context, input.train.last_batch);
  if (input.validation.iterations > 0) {
    input.validation.full = single_device_validation_step(context, input.validation.full_batch);
    input.validation.last =
        input.validation.last_batch == input.validation.full_batch
            ? input.validation.full
            : single_device_validation_step(context, input.validation.last_batch);
  }

  EpochOptions epoch_options;
  epoch_options.steady_state_shortcut = options.steady_state_shortcut;
  epoch_options.trace_iterations = options.trace_iterations;
  EpochSimulator simulator(input, epoch_options);
  r.stats = simulator.run();
  r.trace = simulator.trace();
  r.simulated = true;

  const EpochStats& st = r.stats;
  auto busy = [&](Category c) { return seconds(st.gpu_busy[static_cast<std::size_t>(c)]); };
  auto idle = [&](Category c) { return seconds(st.gpu_idle[static_cast<std::size_t>(c)]); };
  r.epoch_seconds = seconds(st.epoch);
  r.breakdown.data = idle(Category::data);
  r.breakdown.h2d = busy(Category::h2d) + idle(Category::h2d);
  r.breakdown.forward = busy(Category::forward);
  r.breakdown.backward = busy(Category::backward);
  r.breakdown.optimizer = busy(Category::optimizer);
  r.breakdown.communication = busy(Category::communication) + idle(Category::communication);
  r.breakdown.host =
      idle(Category::host) + busy(Category::host) + busy(Category::sync) + busy(Category::data);
  r.breakdown.other = seconds(st.gpu_idle_other);
  r.gpu_busy_fraction = seconds(st.gpu_busy_total()) / r.epoch_seconds;
  r.samples_per_second =
      static_cast<double>(
          scenario.dataset.train_samples -
          (training.drop_last ? scenario.dataset.train_samples % point.global_batch : 0)) /
      r.epoch_seconds;
  r.iteration_seconds = r.epoch_seconds / static_cast<double>(r.train_iterations);
  explain(r, scenario, input.train.full);
  return r;
}

std::vector<PointResult> predict(const ScenarioSpec& scenario, const PredictOptions& options) {
  std::vector<PointResult> results;
  for (const SweepPoint& point : expand_sweep(scenario)) {
    results.push_back(predict_point(scenario, point, options));
  }
  return results;
}

}  // namespace epochcast::sim

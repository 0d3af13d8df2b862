// Behaviour of single-GPU predictions that users rely on, with expectations derived from the
// models' own formulas: host-bound small models, compute-bound large ones, input pipelines,
// memory limits, and the exactness of the steady-state shortcut.
#include <functional>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "core/spec/scenario_spec.h"
#include "sim/compute/device_model.h"
#include "sim/predict/point_pool.h"
#include "sim/predict/predict.h"
#include "sim/report/report.h"
#include "sim/strategy/step_builder.h"
#include "support/paths.h"

using namespace epochcast;
using namespace epochcast::sim;

namespace {

// A plan's ops as they run, in order.
std::vector<PlanEntry> ops_of(const IterationPlan& plan) {
  std::vector<PlanEntry> ops;
  for (std::size_t i = 0; i < plan.size(); ++i)
    ops.push_back(plan.op(i));
  return ops;
}

ScenarioSpec scenario(const std::string& body) {
  return load_scenario_from_string("kind: scenario\nname: test\n" + body, "test.yaml",
                                   test::source_dir());
}

SweepPoint point(std::int64_t batch) {
  return SweepPoint{1, batch, batch};
}

// Host time of one training step: the CPU ops of the plan, outside data loading.
double host_seconds_per_step(const ScenarioSpec& s, std::int64_t batch) {
  ModelAnalysis analysis = analyze_model(s.model, cost_options(s.training.precision));
  DeviceModel device(s.machine.gpu, s.profile, s.training.precision);
  IterationPlan plan = single_device_training_step(StepContext{s, analysis, device}, batch);
  std::int64_t ns = 0;
  for (const PlanEntry& op : ops_of(plan)) {
    if (op.lane.kind == LaneKind::cpu && op.category != Category::data) ns += op.work;
  }
  return static_cast<double>(ns) * 1e-9;
}

// GPU time of one training step: the kernels and copies of the plan.
double gpu_seconds_per_step(const ScenarioSpec& s, std::int64_t batch) {
  ModelAnalysis analysis = analyze_model(s.model, cost_options(s.training.precision));
  DeviceModel device(s.machine.gpu, s.profile, s.training.precision);
  IterationPlan plan = single_device_training_step(StepContext{s, analysis, device}, batch);
  std::int64_t ns = 0;
  for (const PlanEntry& op : ops_of(plan)) {
    if (op.lane.kind != LaneKind::cpu) ns += op.work;
  }
  return static_cast<double>(ns) * 1e-9;
}

const char* kMnist = R"(model: mnist-cnn
hardware: seed003-desktop
dataset: {name: mnist, train_samples: 60000, classes: 10}
training: {strategy: single, optimizer: adam, precision: fp32}
sweep: {gpus: [1], batch: [8], batch_is: global}
)";

}  // namespace

TEST_CASE("mnist-cnn is host-bound at small batch: host time per step sets the epoch") {
  ScenarioSpec s = scenario(kMnist);
  for (std::int64_t batch : {8, 16}) {
    PointResult r = predict_point(s, point(batch));
    double iterations = static_cast<double>(r.train_iterations);
    double host = iterations * host_seconds_per_step(s, batch);
    double gpu = iterations * gpu_seconds_per_step(s, batch);
    INFO("batch " << batch);
    CHECK(host > gpu);
    // The CPU cannot finish before its own work, nor take longer than running everything
    // back to back; in between, its own work is most of it.
    CHECK(r.epoch_seconds >= host);
    CHECK(r.epoch_seconds <= host + gpu);
    // What the CPU does not cover is the GPU's work after the step's last launch, exposed at
    // the loss read: the convolutions' gradients (their few output tiles, unsplit, leave most
    // SMs idle) and the optimizer.
    CHECK(host / r.epoch_seconds > 0.65);
    // The small network leaves the GPU idle over a third of the time: the host or the GPU may
    // name the larger share, never by much.
    CHECK(r.gpu_busy_fraction < 0.65);
    CHECK((r.bottleneck == "host" || r.bottleneck == "compute"));
  }
  // Hence epoch time falls as 1/batch while host-bound.
  double ratio =
      predict_point(s, point(8)).epoch_seconds / predict_point(s, point(16)).epoch_seconds;
  CHECK(ratio == Approx(2.0).epsilon(0.10));
}

TEST_CASE("on a CPU device every op computes on its thread: host work and kernels add") {
  // An eager CPU op returns once it has computed, so the step is its dispatches and kernels
  // back to back, loading included; on a GPU (above) the two overlap.
  ScenarioSpec s = scenario(R"(model: mnist-cnn
hardware: host-cpu
dataset: {name: synthetic, train_samples: 512, sample_shape: [1, 28, 28], classes: 10}
loader: {workers: 0}
training: {strategy: single, optimizer: adam, precision: fp32}
sweep: {gpus: [1], batch: [8], batch_is: global}
)");
  for (std::int64_t batch : {2, 64}) {
    ModelAnalysis analysis = analyze_model(s.model, cost_options(s.training.precision));
    DeviceModel device(s.machine.gpu, s.profile, s.training.precision);
    IterationPlan plan = single_device_training_step(StepContext{s, analysis, device}, batch);
    std::int64_t serial = 0;
    for (const PlanEntry& op : ops_of(plan))
      serial += op.work;
    const PointResult r = predict_point(s, point(batch));
    INFO("batch " << batch);
    CHECK(r.epoch_seconds ==
          Approx(static_cast<double>(r.train_iterations) * static_cast<double>(serial) * 1e-9)
              .epsilon(1e-6));
  }
}

TEST_CASE("a loader's cost a batch is paid once a step, by the thread or the worker that loads") {
  // loader.batch_cpu_us: collating a batch, beside each sample's cost. On a CPU device the
  // training thread's loading adds to the step exactly; with workers, it is each worker's work
  // a batch (an input-bound loader shows it).
  auto cpu = [](const std::string& loader) {
    return scenario(R"(model: mnist-cnn
hardware: host-cpu
dataset: {name: synthetic, train_samples: 512, sample_shape: [1, 28, 28], classes: 10}
loader: )" + loader +
                    R"(
training: {strategy: single, optimizer: adam, precision: fp32}
sweep: {gpus: [1], batch: [8], batch_is: global}
)");
  };
  const PointResult without = predict_point(cpu("{workers: 0, sample_cpu_us: 40}"), point(8));
  const PointResult with =
      predict_point(cpu("{workers: 0, sample_cpu_us: 40, batch_cpu_us: 1000}"), point(8));
  CHECK(with.epoch_seconds - without.epoch_seconds ==
        Approx(static_cast<double>(without.train_iterations) * 1e-3).epsilon(1e-6));
  // Two workers each making every other batch at 5 ms a batch plus 10 us a sample keep a small
  // model's GPU waiting: the epoch is the workers' pace, the cost a batch included.
  const std::string mnist = kMnist;
  const PointResult pace =
      predict_point(scenario(mnist + "loader: {workers: 2, sample_cpu_us: 10}\n"), point(64));
  const PointResult collated = predict_point(
      scenario(mnist + "loader: {workers: 2, sample_cpu_us: 10, batch_cpu_us: 5000}\n"), point(64));
  CHECK(collated.epoch_seconds > pace.epoch_seconds);
  CHECK(collated.epoch_seconds ==
        Approx(static_cast<double>(collated.train_iterations) * (5e-3 + 64 * 10e-6) / 2)
            .epsilon(0.02));
}

TEST_CASE("mnist-cnn flattens once the GPU is busy: epoch time is samples x GPU time per sample") {
  ScenarioSpec s = scenario(kMnist);
  PointResult large = predict_point(s, point(4096));
  PointResult larger = predict_point(s, point(8192));
  CHECK(gpu_seconds_per_step(s, 4096) > host_seconds_per_step(s, 4096));
  double gpu_epoch = static_cast<double>(large.train_iterations) * gpu_seconds_per_step(s, 4096);
  CHECK(large.epoch_seconds == Approx(gpu_epoch).epsilon(0.10));
  CHECK(larger.epoch_seconds == Approx(large.epoch_seconds).epsilon(0.05));
  CHECK(large.bottleneck == "compute");
}

TEST_CASE("resnet-50 takes nearly constant time per sample above a small batch") {
  ScenarioSpec s = scenario(R"(model: resnet-50
hardware: seed001-box
dataset: {name: imagenet-subset, train_samples: 6400, classes: 1000}
loader: {workers: 8, pin_memory: true, sample_cpu_us: 2000}
training: {strategy: single, optimizer: momentum, precision: fp32}
sweep: {gpus: [1], batch: [16], batch_is: global}
)");
  double per_sample_16 = predict_point(s, point(16)).epoch_seconds / 6400.0;
  for (std::int64_t batch : {32, 64}) {
    CHECK(predict_point(s, point(batch)).epoch_seconds / 6400.0 ==
          Approx(per_sample_16).epsilon(0.05));
  }
  // Batch 1 leaves the GPU under-used: clearly slower per sample.
  CHECK(predict_point(s, point(1)).epoch_seconds / 6400.0 > 1.2 * per_sample_16);
}

TEST_CASE("spoken-digits-conv1d on one GTX 1080 Ti: epoch time falls with batch, then flattens") {
  ScenarioSpec s = load_scenario(test::source_dir() / "scenarios/seed-001/conv1d.yaml",
                                 {{"sweep.gpus", "[1]", ""}});
  std::vector<double> epochs;
  for (std::int64_t batch : s.sweep.batch)
    epochs.push_back(predict_point(s, point(batch)).epoch_seconds);
  CHECK(epochs.front() > epochs[3]);                        // batch 10 slower than batch 50
  CHECK(epochs[3] > epochs.back() * 1.0);                   // and 50 than 600
  CHECK(epochs.back() == Approx(epochs[8]).epsilon(0.01));  // 300 to 600: flat
  for (std::size_t i = 1; i < epochs.size(); ++i)
    CHECK(epochs[i] <= epochs[i - 1] * 1.01);
}

TEST_CASE("resnet-50 fp32 on an 11 GB GTX 1080 Ti: batch 100 fits, 256 does not") {
  ScenarioSpec s = scenario(R"(model: resnet-50
hardware: seed001-box
dataset: {name: imagenet, train_samples: 1281167, classes: 1000}
training: {strategy: single, optimizer: momentum, precision: fp32}
sweep: {gpus: [1], batch: [100, 256], batch_is: global}
)");
  PointResult fits = predict_point(s, point(100));
  PointResult oom = predict_point(s, point(256));
  CHECK(fits.memory.fits);
  CHECK(fits.simulated);
  CHECK_FALSE(oom.memory.fits);
  CHECK_FALSE(oom.simulated);  // reported, not an error
  CHECK(oom.bottleneck == "memory");
  std::int64_t largest = fits.memory.largest_batch;
  CHECK(largest >= 100);
  CHECK(largest < 256);
  // The largest batch is exactly the boundary of the memory formula.
  ModelAnalysis analysis = analyze_model(s.model, cost_options(s.training.precision));
  auto at = [&](std::int64_t b) {
    return estimate_memory(analysis, b, s.training.optimizer, s.training.precision, s.profile,
                           s.machine.gpu.memory);
  };
  CHECK(at(largest).fits);
  CHECK_FALSE(at(largest + 1).fits);
}

TEST_CASE("more loader workers help exactly until the GPU becomes the bottleneck") {
  const std::string body = R"(model: mnist-cnn
hardware: seed003-desktop
dataset: {name: mnist, train_samples: 65536, classes: 10}
loader: {workers: 1, prefetch_factor: 2, pin_memory: true, sample_cpu_us: 60}
training: {strategy: single, optimizer: sgd, precision: fp32}
sweep: {gpus: [1], batch: [64], batch_is: global}
)";
  // Every worker on a core of its own here; the desktop's 8 cores shared: below.
  ScenarioSpec s = scenario(body);
  s.training.share_cpu_cores = false;
  ScenarioSpec free_data = s;
  free_data.loader.sample_cpu = Seconds(0);
  double gpu_bound = predict_point(free_data, point(64)).epoch_seconds;
  double loading = 65536 * 60e-6;  // CPU seconds to load the data set once
  double previous = 1e9;
  for (int workers : {1, 2, 4, 8, 16, 32}) {
    s.loader.workers = workers;
    PointResult r = predict_point(s, point(64));
    INFO("workers " << workers);
    CHECK(r.epoch_seconds <= previous * 1.001);
    // Each worker loads its share in parallel, and no input pipeline beats the GPU.
    CHECK(r.epoch_seconds == Approx(std::max(loading / workers, gpu_bound)).epsilon(0.10));
    CHECK(r.epoch_seconds >= gpu_bound * 0.999);
    // The bottleneck names the largest share of the epoch: the GPU's own time (gpu_bound), or
    // its wait for batches (the rest, while loading sets the pace).
    const double waiting = std::max(loading / workers - gpu_bound, 0.0);
    CHECK(r.bottleneck == (waiting > gpu_bound ? "input" : "compute"));
    previous = r.epoch_seconds;
  }
  // On the desktop's 8 cores, workers beyond them cannot load faster, and the training thread
  // shares its core with them.
  ScenarioSpec shared = scenario(body);
  REQUIRE(shared.machine.host.cores == 8);
  shared.loader.workers = 4;
  const double four = predict_point(shared, point(64)).epoch_seconds;
  s.loader.workers = 4;
  CHECK(four == predict_point(s, point(64)).epoch_seconds);  // 5 threads on 8 cores
  shared.loader.workers = 32;
  const double many = predict_point(shared, point(64)).epoch_seconds;
  s.loader.workers = 32;
  CHECK(many > predict_point(s, point(64)).epoch_seconds);
}

namespace {

// Seed 001's linear model under DDP on two GPUs of its box, 7 loader workers per rank (3 batches
// each ahead) and micro-batch cycles of 3, with the data sets' sizes and the loaders' cost.
ScenarioSpec two_ranks_in_cycles(std::int64_t train_samples, std::int64_t validation_samples,
                                 double sample_cpu_us) {
  return scenario(fmt::format(R"(model: spoken-digits-linear
hardware: seed001-box
dataset: {{name: fsdd, train_samples: {}, validation_samples: {}, classes: 10}}
loader: {{workers: 7, prefetch_factor: 3, pin_memory: true, sample_cpu_us: {}}}
training: {{strategy: ddp, optimizer: adam, precision: fp32, gradient_accumulation: 3}}
sweep: {{gpus: [2], batch: [8], batch_is: per_gpu}}
)",
                              train_samples, validation_samples, sample_cpu_us));
}

void check_same_epoch(const PointResult& fast, const PointResult& full) {
  CHECK(fast.stats.epoch == full.stats.epoch);
  CHECK(fast.stats.gpu_busy == full.stats.gpu_busy);
  CHECK(fast.stats.gpu_idle == full.stats.gpu_idle);
  CHECK(fast.stats.gpu_idle_other == full.stats.gpu_idle_other);
  CHECK(fast.stats.cpu_busy == full.stats.cpu_busy);
  CHECK(fast.stats.communication == full.stats.communication);
  CHECK(fast.stats.collective_bytes == full.stats.collective_bytes);
  CHECK(fast.stats.kernels == full.stats.kernels);
}

}  // namespace

TEST_CASE("the steady-state shortcut gives exactly the full simulation's result") {
  std::vector<std::string> bodies = {std::string(kMnist),
                                     R"(model: mobilenet-v2
hardware: seed003-hpc-node
dataset: {name: imagenet, train_samples: 3001, validation_samples: 777, classes: 1000}
loader: {workers: 3, prefetch_factor: 2, pin_memory: false, sample_cpu_us: 2500}
training: {strategy: single, optimizer: adamw, precision: amp_fp16}
sweep: {gpus: [1], batch: [16], batch_is: global}
)",
                                     R"(model: spoken-digits-linear
hardware: seed001-box
dataset: {name: fsdd, train_samples: 2000, classes: 10}
training: {strategy: single, optimizer: adam, precision: fp32, framework: pytorch-1,
           sync_every_step: false}
sweep: {gpus: [1], batch: [10], batch_is: global}
)"};
  for (const std::string& body : bodies) {
    ScenarioSpec s = scenario(body);
    for (std::int64_t batch : {8, 16, 30}) {
      PredictOptions exact;
      exact.steady_state_shortcut = false;
      PointResult fast = predict_point(s, point(batch));
      PointResult full = predict_point(s, point(batch), exact);
      INFO(s.model.name << " batch " << batch);
      CHECK(fast.stats.simulated_iterations < full.stats.simulated_iterations);
      check_same_epoch(fast, full);
    }
  }
}

TEST_CASE("an epoch shorter than its loaders keep ahead is skipped once they have loaded it") {
  // 8 workers, 4 batches each ahead: the loaders are handed all 25 batches at the start. Fast
  // ones load them all early and the loop then repeats; slow ones are still loading when the
  // epoch ends, and nothing is skipped while they are.
  ScenarioSpec s = scenario(R"(model: mobilenet-v2
hardware: seed003-hpc-node
dataset: {name: imagenet, train_samples: 400, classes: 1000}
loader: {workers: 8, prefetch_factor: 4, pin_memory: true, sample_cpu_us: 50}
training: {strategy: single, optimizer: adamw, precision: amp_fp16}
sweep: {gpus: [1], batch: [16], batch_is: global}
)");
  PredictOptions exact;
  exact.steady_state_shortcut = false;
  for (double sample_us : {50.0, 30000.0}) {
    s.loader.sample_cpu = Seconds(sample_us * 1e-6);
    PointResult fast = predict_point(s, point(16));
    PointResult full = predict_point(s, point(16), exact);
    INFO(sample_us << " us a sample");
    REQUIRE(full.stats.simulated_iterations == 25);
    if (sample_us < 100) {
      CHECK(fast.stats.simulated_iterations < 10);
    } else {
      CHECK(fast.bottleneck == "input");
    }
    check_same_epoch(fast, full);
  }
  // Two ranks (a loader each), a validation pass and micro-batch cycles of 3, with the loaders
  // 21 batches ahead of epochs of 18 and 13: skipped in both phases, exactly; and in a longer
  // epoch, whose first skip comes while the loaders are still being handed batches, the tail
  // is skipped too.
  ScenarioSpec ddp = two_ranks_in_cycles(288, 200, 20);
  for (std::int64_t samples : {288, 2880}) {
    ddp.dataset.train_samples = samples;
    PointResult fast = predict_point(ddp, SweepPoint{2, 16, 8});
    PointResult full = predict_point(ddp, SweepPoint{2, 16, 8}, exact);
    INFO(samples << " training samples");
    CHECK(fast.stats.simulated_iterations < full.stats.simulated_iterations * 2 / 3);
    check_same_epoch(fast, full);
  }
}

TEST_CASE("the shortcut stays exact when skipped spans are not multiples of the loader workers") {
  // An input-bound DDP loop on two GPUs: 7 workers per rank, batches handed out in turn, and
  // micro-batch cycles of 3 — the state repeats only up to which worker plays which role.
  ScenarioSpec s = two_ranks_in_cycles(9000, 1001, 20000);
  PredictOptions exact;
  exact.steady_state_shortcut = false;
  for (int workers : {1, 5, 7}) {
    s.loader.workers = workers;
    PointResult fast = predict_point(s, SweepPoint{2, 16, 8});
    PointResult full = predict_point(s, SweepPoint{2, 16, 8}, exact);
    INFO("workers " << workers);
    CHECK(fast.bottleneck == "input");
    CHECK(fast.stats.simulated_iterations < full.stats.simulated_iterations / 4);
    check_same_epoch(fast, full);
  }
}

TEST_CASE("a long validation pass costs no more to simulate than a short one") {
  // DDP on eight PCIe GPUs with flows: the network sits idle during validation, which must not
  // keep its state from repeating.
  const std::string body = R"(model: mobilenet-v2
hardware: pcie-2socket-8gpu
dataset: {name: imagenet, train_samples: 4000, validation_samples: 2000, classes: 1000}
loader: {workers: 4, sample_cpu_us: 10}
training: {strategy: ddp, optimizer: momentum, precision: amp_fp16}
sweep: {gpus: [2], batch: [8], batch_is: per_gpu}
)";
  ScenarioSpec short_pass = scenario(body);
  ScenarioSpec long_pass = scenario(body);
  long_pass.dataset.validation_samples = 2'000'000'000;
  PointResult a = predict_point(short_pass, SweepPoint{2, 16, 8});
  PointResult b = predict_point(long_pass, SweepPoint{2, 16, 8});
  CHECK(b.validation_iterations == 1'000'000'000 / 8);
  CHECK(b.stats.simulated_iterations <= a.stats.simulated_iterations + 20);
  PredictOptions exact;
  exact.steady_state_shortcut = false;
  check_same_epoch(a, predict_point(short_pass, SweepPoint{2, 16, 8}, exact));
}

TEST_CASE("the breakdown adds up to the epoch") {
  ScenarioSpec s = scenario(kMnist);
  for (std::int64_t batch : {8, 512}) {
    PointResult r = predict_point(s, point(batch));
    const Breakdown& b = r.breakdown;
    double sum =
        b.data + b.h2d + b.forward + b.backward + b.optimizer + b.communication + b.host + b.other;
    CHECK(sum == Approx(r.epoch_seconds).epsilon(1e-9));
  }
}

TEST_CASE("the same input gives byte-identical output") {
  ScenarioSpec s = scenario(kMnist);
  std::vector<PointResult> a = {predict_point(s, point(32)), predict_point(s, point(64))};
  std::vector<PointResult> b = {predict_point(s, point(32)), predict_point(s, point(64))};
  CHECK(render_csv(s, a) == render_csv(s, b));
  CHECK(render_json(s, a) == render_json(s, b));
}

TEST_CASE("a validation pass adds forward-only time and drop_last drops the partial batch") {
  ScenarioSpec s = scenario(R"(model: mnist-cnn
hardware: seed003-desktop
dataset: {name: mnist, train_samples: 1000, validation_samples: 500, classes: 10}
training: {strategy: single, optimizer: sgd, precision: fp32}
sweep: {gpus: [1], batch: [64], batch_is: global}
)");
  PointResult with_validation = predict_point(s, point(64));
  CHECK(with_validation.train_iterations == (1000 + 63) / 64);
  CHECK(with_validation.validation_iterations == (500 + 63) / 64);
  ScenarioSpec without = s;
  without.dataset.validation_samples = 0;
  PointResult train_only = predict_point(without, point(64));
  double validation = with_validation.epoch_seconds - train_only.epoch_seconds;
  CHECK(validation > 0);
  // Half the samples, forward only: well under half the training time.
  CHECK(validation < 0.5 * train_only.epoch_seconds);
  without.training.drop_last = true;
  CHECK(predict_point(without, point(64)).train_iterations == 1000 / 64);
}

TEST_CASE("mixed precision runs matrix work on tensor cores and halves activation memory") {
  const std::string body = R"(model: resnet-50
hardware: seed003-hpc-node
dataset: {name: imagenet, train_samples: 3200, classes: 1000}
loader: {workers: 16, pin_memory: true, sample_cpu_us: 100}
training: {strategy: single, optimizer: momentum, precision: fp32}
sweep: {gpus: [1], batch: [64], batch_is: global}
)";
  ScenarioSpec fp32 = scenario(body);
  ScenarioSpec amp = scenario(body);
  amp.training.precision = TrainingPrecision::amp_fp16;
  PointResult a = predict_point(fp32, point(64));
  PointResult b = predict_point(amp, point(64));
  // V100: 112 tensor TFLOP/s against 14.1 FP32: compute-bound work speeds up several times.
  CHECK(b.epoch_seconds < 0.5 * a.epoch_seconds);
  CHECK(to_mib(b.memory.activations) < 0.6 * to_mib(a.memory.activations));
}

TEST_CASE("a point whose epoch outlasts the simulator's clock is refused, never wrapped") {
  // 10^12 samples one at a time on a thousandth of a GPU: about 10^10 s per epoch at least, more
  // than the 2^63 ns (292 years) the clock holds.
  ScenarioSpec s = scenario(R"(model: spoken-digits-linear
hardware: seed001-box
dataset: {name: fsdd, train_samples: 1000000000000, classes: 10}
contention: {gpu_share: 0.001}
training: {strategy: single, optimizer: adam, precision: fp32}
sweep: {gpus: [1], batch: [1], batch_is: global}
)");
  try {
    predict_point(s, point(1));
    FAIL("the point was predicted");
  } catch (const InputError& error) {
    INFO(error.what());
    CHECK(error.key() == "sweep");
    CHECK_THAT(error.problem(), Catch::Contains("the point 1 GPU, global batch 1 does not fit the "
                                                "simulator"));
  }
  // The same data set at a batch that keeps the epoch within the clock is simulated exactly.
  PointResult r = predict_point(s, point(100000));
  CHECK(r.epoch_seconds > 0);
  CHECK(r.train_iterations == 10'000'000);
}

TEST_CASE("a point that cannot run in its scenario is refused by name") {
  ScenarioSpec s = scenario(kMnist);
  try {
    predict_point(s, SweepPoint{4, 64, 16});
    FAIL("the point was predicted");
  } catch (const InputError& error) {
    CHECK_THAT(error.problem(), Catch::Contains("the point 4 GPUs, global batch 64 cannot run: 4 "
                                                "GPUs asked for, but the machine"));
  }
}

TEST_CASE("a point that does not settle within its simulation budget is refused by name") {
  // An input-bound ddp loop with 64 workers and a 3-step accumulation cycle settles only after
  // some 12,000 iterations (a burst of batches evens out one position per round of workers).
  ScenarioSpec s = scenario(R"(model: mnist-cnn
hardware: seed003-desktop
dataset: {name: mnist, train_samples: 10000000, classes: 10}
loader: {workers: 64, prefetch_factor: 1, sample_cpu_us: 1000000}
training: {strategy: ddp, optimizer: adam, precision: fp32, gradient_accumulation: 3}
sweep: {gpus: [1], batch: [1], batch_is: global}
)");
  PredictOptions generous;
  PointResult settled = predict_point(s, point(1), generous);
  CHECK(settled.stats.simulated_iterations > 10'000);
  CHECK(settled.stats.simulated_iterations < 20'000);
  PredictOptions tight;
  tight.simulation_budget = 100'000;
  try {
    predict_point(s, point(1), tight);
    FAIL("the point was predicted");
  } catch (const InputError& error) {
    INFO(error.what());
    CHECK_THAT(error.problem(), Catch::Contains("the point 1 GPU, global batch 1 did not settle "
                                                "into a repeating state within the simulation "
                                                "budget"));
    CHECK_THAT(error.problem(), Catch::Contains("many loader workers (64)"));
  }
  // --exact simulates every iteration however long that takes: no budget applies.
  ScenarioSpec small = s;
  small.dataset.train_samples = 30'000;
  tight.steady_state_shortcut = false;
  CHECK(predict_point(small, point(1), tight).stats.simulated_iterations == 30'000);
}

TEST_CASE("a plan's size alone never makes its point unsettled") {
  // Every rank of a cluster runs all its GPUs' tasks each iteration and snapshots all their
  // state: the budget is at least kBudgetIterations iterations of that work, so a budget far
  // below one iteration's still lets the loop settle, with the same result.
  ScenarioSpec s = scenario(R"(model: resnet-50
hardware: {base: dgx-h100-cluster, nodes: 2}
dataset: {name: imagenet, train_samples: 40960, classes: 1000}
loader: {workers: 16, pin_memory: true, sample_cpu_us: 10}
training: {strategy: ddp, optimizer: momentum, precision: amp_bf16, every_rank: true}
sweep: {gpus: [16], batch: [64], batch_is: per_gpu}
)");
  const SweepPoint p{16, 1024, 64};
  PredictOptions tight;
  tight.simulation_budget = 1000;
  const PointResult generous = predict_point(s, p);
  const PointResult settled = predict_point(s, p, tight);
  CHECK(settled.ranks_simulated == "every rank");
  CHECK(settled.stats.simulated_iterations < settled.train_iterations);
  CHECK(settled.stats.simulated_iterations == generous.stats.simulated_iterations);
  CHECK(settled.epoch_seconds == generous.epoch_seconds);
}

TEST_CASE("throughput in tables never reads as 0 for a slow point") {
  CHECK(throughput_text(8027.4) == "8027");
  CHECK(throughput_text(1.0) == "1");
  CHECK(throughput_text(0.00238) == "0.00238");
  CHECK(throughput_text(0.9999) == "1");
  CHECK(throughput_text(0) == "0");
}

TEST_CASE("a fused optimizer is one multi-tensor kernel and, under fp16, needs no found_inf sync") {
  // torch.optim's fused Adam reads parameter, gradient and both moments once and writes
  // parameter and moments once: 28 bytes per fp32 element, over 4-list multi-tensor chunks.
  ScenarioSpec s = scenario(R"(model: resnet-50
hardware: dgx-a100
dataset: {name: imagenet, train_samples: 1281167, classes: 1000, sample_shape: [3, 224, 224]}
training: {strategy: single, optimizer: adam, precision: amp_fp16, optimizer_implementation: fused}
sweep: {gpus: [1], batch: [64], batch_is: global}
)");
  ModelAnalysis analysis = analyze_model(s.model, cost_options(s.training.precision));
  DeviceModel device(s.machine.gpu, s.profile, s.training.precision);
  auto plan_of = [&](const ScenarioSpec& scenario) {
    return single_device_training_step(StepContext{scenario, analysis, device}, 64);
  };
  auto count = [](const IterationPlan& plan, const std::string& prefix) {
    const std::vector<PlanEntry> ops = ops_of(plan);
    return std::count_if(ops.begin(), ops.end(), [&](const PlanEntry& op) {
      return op.lane.kind != LaneKind::cpu && plan.name(op).rfind(prefix, 0) == 0;
    });
  };
  IterationPlan fused = plan_of(s);
  // 161 parameter tensors in 4-list chunks of at most 36 tensors: 5 launches.
  CHECK(count(fused, "_fused_adam_") == 5);
  CHECK(count(fused, "_foreach_") == 0);
  auto syncs = [](const IterationPlan& plan) {
    const std::vector<PlanEntry> ops = ops_of(plan);
    return std::count_if(ops.begin(), ops.end(), [&](const PlanEntry& op) {
      return plan.name(op) == "GradScaler found_inf.item()";
    });
  };
  CHECK(syncs(fused) == 0);
  CHECK(count(fused, "_amp_foreach_non_finite_check_and_unscale_") > 0);  // the check stays

  ScenarioSpec foreach = s;
  foreach
    .training.optimizer_implementation = OptimizerImplementation::automatic;  // pytorch-2
  IterationPlan multi_tensor = plan_of(foreach);
  CHECK(count(multi_tensor, "_foreach_addcdiv_") == 5);
  CHECK(syncs(multi_tensor) == 1);
  // The fused kernel moves 28 bytes per element against the foreach ops' 72: less GPU time.
  auto optimizer_ns = [](const IterationPlan& plan) {
    std::int64_t ns = 0;
    for (const PlanEntry& op : ops_of(plan)) {
      if (op.lane.kind != LaneKind::cpu && op.category == Category::optimizer) ns += op.work;
    }
    return ns;
  };
  CHECK(optimizer_ns(fused) < optimizer_ns(multi_tensor));
}

TEST_CASE("normalize_on_gpu: a quarter of the input bytes cross PCIe, three kernels normalise") {
  ScenarioSpec s = scenario(R"(model: resnet-50
hardware: dgx-a100
dataset: {name: imagenet, train_samples: 1281167, classes: 1000, sample_shape: [3, 224, 224]}
loader: {workers: 8, pin_memory: true}
training: {strategy: single, optimizer: sgd, precision: amp_bf16}
sweep: {gpus: [1], batch: [128], batch_is: global}
)");
  ModelAnalysis analysis = analyze_model(s.model, cost_options(s.training.precision));
  DeviceModel device(s.machine.gpu, s.profile, s.training.precision);
  ScenarioSpec uint8 = s;
  uint8.loader.normalize_on_gpu = true;
  const std::int64_t elements = 3 * 224 * 224;
  CHECK(sample_transfer_bytes(analysis) == 4 * elements + 8);
  CHECK(sample_transfer_bytes(analysis, true) == elements + 8);
  auto h2d = [&](const ScenarioSpec& scenario, LaneKind lane) {
    IterationPlan plan = single_device_training_step(StepContext{scenario, analysis, device}, 128);
    std::int64_t ns = 0;
    int kernels = 0;
    for (const PlanEntry& op : ops_of(plan)) {
      if (op.category != Category::h2d || op.lane.kind != lane) continue;
      ns += op.work;
      kernels += plan.name(op).rfind("normalize batch on GPU", 0) == 0;
    }
    return std::pair{ns, kernels};
  };
  // The copy takes about a quarter as long (the latency and the labels do not shrink).
  auto [float_copy, none] = h2d(s, LaneKind::copy);
  auto [byte_copy, also_none] = h2d(uint8, LaneKind::copy);
  CHECK(none + also_none == 0);
  CHECK(static_cast<double>(byte_copy) ==
        Approx(0.25 * static_cast<double>(float_copy)).epsilon(0.05));
  // On the compute stream: to float (1 byte in, 4 out), then sub_ and div_ (4 in, 4 out).
  auto [normalise_ns, kernels] = h2d(uint8, LaneKind::compute);
  CHECK(kernels == 3);
  CHECK(normalise_ns > 0);
}

TEST_CASE(
    "loader.source synthetic_gpu: no loading, no copy, the rest of the step as with a host "
    "loader") {
  ScenarioSpec host = scenario(R"(model: resnet-50
hardware: h200-sxm-1gpu
dataset: {name: imagenet, train_samples: 2560, classes: 1000, sample_shape: [3, 224, 224]}
loader: {workers: 0, pin_memory: true, sample_cpu_us: 1500}
training: {strategy: single, optimizer: sgd, precision: amp_bf16}
sweep: {gpus: [1], batch: [128], batch_is: global}
)");
  ScenarioSpec gpu = scenario(R"(model: resnet-50
hardware: h200-sxm-1gpu
dataset: {name: imagenet, train_samples: 2560, classes: 1000, sample_shape: [3, 224, 224]}
loader: {source: synthetic_gpu}
training: {strategy: single, optimizer: sgd, precision: amp_bf16}
sweep: {gpus: [1], batch: [128], batch_is: global}
)");
  CHECK(gpu.loader.sample_cpu.value() == 0);  // the profile's loader cost does not apply
  ModelAnalysis analysis = analyze_model(gpu.model, cost_options(gpu.training.precision));
  DeviceModel device(gpu.machine.gpu, gpu.profile, gpu.training.precision);
  auto of = [&](const ScenarioSpec& s, Category category) {
    IterationPlan plan = single_device_training_step(StepContext{s, analysis, device}, 128);
    std::int64_t ns = 0;
    int ops = 0;
    for (const PlanEntry& op : ops_of(plan)) {
      if (op.category != category) continue;
      ns += op.work;
      ++ops;
    }
    return std::pair{ns, ops};
  };
  CHECK(of(gpu, Category::data).second == 0);
  CHECK(of(gpu, Category::h2d).second == 0);
  CHECK(of(host, Category::data).first > 0);
  CHECK(of(host, Category::h2d).first > 0);
  // The same kernels on the GPU.
  CHECK(of(gpu, Category::forward) == of(host, Category::forward));
  CHECK(of(gpu, Category::backward) == of(host, Category::backward));
  // Over the epoch: no input time, and faster than the host loader's 1.5 ms a sample.
  const PointResult with_gpu = predict_point(gpu, expand_sweep(gpu).front());
  const PointResult with_host = predict_point(host, expand_sweep(host).front());
  CHECK(with_gpu.breakdown.data == 0);
  CHECK(with_gpu.breakdown.h2d == 0);
  CHECK(with_gpu.epoch_seconds < with_host.epoch_seconds);
}

TEST_CASE("prefetch_to_gpu: the next batch's copy hides behind the step's kernels") {
  ScenarioSpec s = scenario(R"(model: resnet-50
hardware: h100-sxm-1gpu
dataset: {name: imagenet, train_samples: 2560, classes: 1000, sample_shape: [3, 224, 224]}
loader: {workers: 16, pin_memory: true}
training: {strategy: single, optimizer: sgd, precision: amp_bf16}
sweep: {gpus: [1], batch: [256], batch_is: global}
)");
  ModelAnalysis analysis = analyze_model(s.model, cost_options(s.training.precision));
  DeviceModel device(s.machine.gpu, s.profile, s.training.precision);
  ScenarioSpec prefetch = s;
  prefetch.loader.prefetch_to_gpu = true;
  prefetch.loader.normalize_on_gpu = true;
  IterationPlan plan = single_device_training_step(StepContext{prefetch, analysis, device}, 256);
  // The copy and the normalising kernels run on the side stream; no kernel of this step waits
  // for them, and the step ends with the compute stream waiting for the side stream's last op.
  std::vector<std::int32_t> side;
  for (std::size_t i = 0; i < plan.size(); ++i) {
    if (plan.op(i).lane.kind == LaneKind::copy) side.push_back(static_cast<std::int32_t>(i));
  }
  REQUIRE(side.size() == 4);  // the copy, to float, sub_, div_
  CHECK(!plan.op(static_cast<std::size_t>(side[0])).after_lane);
  const PlanEntry last = plan.op(plan.size() - 1);
  CHECK(last.lane.kind == LaneKind::compute);
  CHECK(last.work == 0);
  CHECK(plan.deps(plan.size() - 1) == std::vector<std::int32_t>{side.back()});
  for (std::size_t i = 0; i + 1 < plan.size(); ++i) {
    if (plan.op(i).lane.kind != LaneKind::compute) continue;
    for (std::int32_t d : plan.deps(i))
      CHECK(plan.op(static_cast<std::size_t>(d)).lane.kind != LaneKind::copy);
  }

  // Over an epoch the step loses its copy: the saving is the copy's time, step after step.
  ScenarioSpec plain = s;
  prefetch.loader.normalize_on_gpu = false;
  IterationPlan plain_plan = single_device_training_step(StepContext{plain, analysis, device}, 256);
  std::int64_t copy_ns = 0;
  for (const PlanEntry& op : ops_of(plain_plan)) {
    if (op.lane.kind == LaneKind::copy) copy_ns += op.work;
  }
  const double steps = 10, copy_s = static_cast<double>(copy_ns) * 1e-9;
  REQUIRE(copy_s > 1e-3);  // 154 MB of fp32 images over PCIe 5.0
  const double saved = predict_point(plain, point(256)).epoch_seconds -
                       predict_point(prefetch, point(256)).epoch_seconds;
  CHECK(saved == Approx(steps * copy_s).epsilon(0.15));

  // From pageable memory the copy is synchronous: the CPU waits for it before it launches the
  // step's kernels, so nothing overlaps.
  plain.loader.pin_memory = false;
  prefetch.loader.pin_memory = false;
  const double pageable_saved = predict_point(plain, point(256)).epoch_seconds -
                                predict_point(prefetch, point(256)).epoch_seconds;
  CHECK(std::abs(pageable_saved) < 0.1 * steps * copy_s);
}

TEST_CASE("prefetch_to_gpu under DataParallel and DDP: every rank's copy overlaps") {
  for (const char* strategy : {"dp", "ddp"}) {
    ScenarioSpec s = scenario(fmt::format(R"(model: resnet-50
hardware: dgx-a100
dataset: {{name: imagenet, train_samples: 8192, classes: 1000, sample_shape: [3, 224, 224]}}
loader: {{workers: 8, pin_memory: true}}
training: {{strategy: {}, optimizer: sgd, precision: amp_bf16}}
sweep: {{gpus: [2], batch: [256], batch_is: global}}
)",
                                          strategy));
    ScenarioSpec prefetch = s;
    prefetch.loader.prefetch_to_gpu = true;
    SweepPoint p{2, 256, 128};
    INFO(strategy);
    CHECK(predict_point(prefetch, p).epoch_seconds < predict_point(s, p).epoch_seconds);
  }
}

TEST_CASE("gpu_decode_us: encoded files cross PCIe, the GPU decodes, the CPU keeps the rest") {
  ScenarioSpec s = scenario(R"(model: resnet-50
hardware: dgx-a100
dataset: {name: imagenet, train_samples: 12800, classes: 1000, sample_shape: [3, 224, 224]}
loader: {workers: 8, pin_memory: true, sample_cpu_us: 10000}
training: {strategy: single, optimizer: sgd, precision: amp_bf16}
sweep: {gpus: [1], batch: [128], batch_is: global}
)");
  ModelAnalysis analysis = analyze_model(s.model, cost_options(s.training.precision));
  DeviceModel device(s.machine.gpu, s.profile, s.training.precision);
  ScenarioSpec gpu = s;
  gpu.loader.gpu_decode = Seconds(50e-6);
  gpu.loader.encoded_sample_bytes = 110'000;
  gpu.loader.sample_cpu = Seconds(500e-6);  // reading files and the hybrid path's Huffman
  CHECK(sample_transfer_bytes(analysis, gpu.loader) == 110'000 + 8);
  CHECK(sample_transfer_bytes(analysis, s.loader) == sample_transfer_bytes(analysis));
  // One decoding kernel of 128 x 50 us after the copy, before the forward pass.
  for (bool prefetch : {false, true}) {
    gpu.loader.prefetch_to_gpu = prefetch;
    IterationPlan plan = single_device_training_step(StepContext{gpu, analysis, device}, 128);
    int decoders = 0;
    for (const PlanEntry& op : ops_of(plan)) {
      if (op.lane.kind != LaneKind::compute || op.category != Category::data) continue;
      ++decoders;
      CHECK(op.work == 128 * 50'000);
    }
    CHECK(decoders == 1);
    // Prefetched, the next batch is decoded at the end of the step.
    const PlanEntry last = plan.op(plan.size() - 1);
    CHECK((last.category == Category::data) == prefetch);
  }
  gpu.loader.prefetch_to_gpu = false;
  // 8 workers at 10 ms a sample feed 800 samples/s: input-bound on an A100. Decoding on the
  // GPU (0.5 ms of CPU a sample) removes that bound, and the GPU's decoding shows as input time.
  PointResult cpu_decode = predict_point(s, point(128));
  PointResult gpu_decode = predict_point(gpu, point(128));
  INFO(cpu_decode.epoch_seconds << " s decoding on the CPU, " << gpu_decode.epoch_seconds
                                << " s on the GPU");
  // The workers' 16 s, plus the first batch's 1.28 s before the pipeline is full.
  CHECK(cpu_decode.epoch_seconds == Approx(12800 * 10e-3 / 8 + 1.28).epsilon(0.02));
  CHECK(cpu_decode.breakdown.data > 0.3 * cpu_decode.epoch_seconds);
  CHECK(gpu_decode.epoch_seconds < 0.7 * cpu_decode.epoch_seconds);
  // The prediction says what it assumes about the decoding.
  CHECK_THAT(render_json(gpu, {gpu_decode}),
             Catch::Contains("GPU decoding takes loader.gpu_decode_us (50 us)"));
  const double decode_s = 12800 * 50e-6;
  CHECK(gpu_decode.breakdown.data >= decode_s);
  CHECK(gpu_decode.breakdown.data < decode_s + 0.1 * gpu_decode.epoch_seconds);
}

TEST_CASE("GPT-2 small with attention: sdpa trains faster and fits a larger batch than eager") {
  // 1,024 tokens a sample on an H100 in bf16: the eager path writes and reads 12 heads x 1024²
  // scores per layer and holds them for backward; the fused kernel does neither.
  ScenarioSpec math = scenario(R"(model: gpt2-small
hardware: h100-sxm-1gpu
dataset: {name: openwebtext, train_samples: 4096, classes: 50257}
training: {strategy: single, optimizer: adamw, precision: amp_bf16}
sweep: {gpus: [1], batch: [8], batch_is: global}
)");
  ScenarioSpec sdpa = math;
  std::function<void(std::vector<ModelNode>&)> fuse = [&](std::vector<ModelNode>& nodes) {
    for (ModelNode& node : nodes) {
      if (node.kind == ModelNode::Kind::layer && node.layer.type == LayerType::multihead_attention)
        node.layer.attention = AttentionKernels::sdpa;
      fuse(node.body);
      fuse(node.shortcut);
    }
  };
  fuse(sdpa.model.layers);
  PointResult a = predict_point(math, point(8));
  PointResult b = predict_point(sdpa, point(8));
  REQUIRE(a.simulated);
  REQUIRE(b.simulated);
  CHECK(b.epoch_seconds < a.epoch_seconds);
  CHECK(b.memory.activations < a.memory.activations);
  CHECK(b.memory.largest_batch > a.memory.largest_batch);
}

TEST_CASE(
    "points on several threads come back in sweep order, the first failure is the serial one") {
  auto simulate = [](std::size_t i) {
    if (i == 3 || i == 5) throw std::runtime_error("point " + std::to_string(i));
    PointResult r;
    r.point = SweepPoint{1, static_cast<std::int64_t>(i) + 1, 1};
    return r;
  };
  for (int jobs : {1, 2, 8}) {
    INFO(jobs << " threads");
    int done = 0;
    std::vector<PointResult> ok = simulate_points(
        3, jobs, [&](std::size_t i) { return simulate(i); },
        [&](std::size_t, const PointResult&) { ++done; });
    REQUIRE(ok.size() == 3);
    for (std::size_t i = 0; i < ok.size(); ++i)
      CHECK(ok[i].point.global_batch == int(i) + 1);
    CHECK(done == 3);
    CHECK_THROWS_WITH(simulate_points(8, jobs, simulate), "point 3");
  }
}

// The runtime on the CPU: loader, DDP buckets and reducer, a measured point, skip reasons,
// campaign resumption.
// clang-format off
// LibTorch's headers define a CHECK macro of their own: they must come before Catch's, whose
// CHECK then wins.
#include "runtime/bench/microbench.h"
#include "runtime/comm/communicator.h"
#include "runtime/data/synthetic_loader.h"
#include "runtime/measure/campaign.h"
#include "runtime/measure/collective_watchdog.h"
#include "runtime/measure/cpu_threads.h"
#include "runtime/measure/device_clock.h"
#include "runtime/model/torch_model.h"
#include "runtime/train/coalesced_buffers.h"
#include "runtime/train/data_parallel.h"
#include "runtime/train/ddp_reducer.h"
#include "runtime/train/kernel_trace.h"
#include "runtime/train/optimizers.h"
#include "runtime/train/precision.h"
#include "runtime/train/strategy_runner.h"
#include "runtime/train/profiler.h"
#include "runtime/train/trainer.h"
#include "runtime/train/to_target.h"
#include "runtime/data/idx_dataset.h"
#include "core/spec/rank_share.h"
#include "core/spec/sharding.h"
#include "core/spec/scenario_spec.h"

#include <catch2/catch.hpp>
// clang-format on

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include <ATen/record_function.h>
#include <dlfcn.h>
#include <fmt/format.h>
#include <torch/version.h>
#include <unistd.h>
#include <zlib.h>

#include "support/paths.h"

using namespace epochcast;
using namespace epochcast::runtime;

namespace {

std::string source(const std::string& relative) {
  return epochcast::test::source_file(relative);
}

World& world() {
  static int argc = 1;
  static char name[] = "epochcast_runtime_tests";
  static char* args[] = {name, nullptr};
  static char** argv = args;
  static World& initialized = []() -> World& {
    World& w = World::initialize(&argc, &argv);
    // Under mpirun every rank must finalize MPI before it exits ([mpi] tests).
    std::atexit([] { World::finalize(); });
    return w;
  }();
  return initialized;
}

SampleShape mnist_sample() {
  SampleShape s;
  s.shape.dims = {1, 28, 28};
  s.classes = 10;
  return s;
}

LoaderOptions loader_options(int workers) {
  LoaderOptions o;
  o.samples = 50;
  o.batch = 16;
  o.workers = workers;
  o.seed = 7;
  return o;
}

}  // namespace

TEST_CASE("the loader cuts an epoch into full batches and a partial one unless drop_last") {
  SyntheticLoader loader(mnist_sample(), loader_options(0), torch::kCPU);
  CHECK(loader.batches_per_epoch() == 4);  // 16 + 16 + 16 + 2
  for (int i = 0; i < 3; ++i)
    CHECK(loader.next().samples == 16);
  Batch last = loader.next();
  CHECK(last.samples == 2);
  CHECK(last.inputs.sizes() == torch::IntArrayRef({2, 1, 28, 28}));
  CHECK(loader.next().samples == 16);  // the next epoch starts over

  LoaderOptions dropping = loader_options(0);
  dropping.drop_last = true;
  SyntheticLoader dropped(mnist_sample(), dropping, torch::kCPU);
  CHECK(dropped.batches_per_epoch() == 3);
}

TEST_CASE("worker threads hand over exactly the batches the training thread would make") {
  SyntheticLoader inline_loader(mnist_sample(), loader_options(0), torch::kCPU);
  SyntheticLoader workers(mnist_sample(), loader_options(3), torch::kCPU);
  for (int i = 0; i < 6; ++i) {
    Batch a = inline_loader.next();
    Batch b = workers.next();
    CHECK(torch::equal(a.inputs, b.inputs));
    CHECK(torch::equal(a.labels, b.labels));
  }
  CHECK(workers.sample_cpu_seconds() > 0);
}

TEST_CASE("samples are normalised, labels lie below the class count, and seeds matter") {
  SyntheticLoader loader(mnist_sample(), loader_options(0), torch::kCPU);
  Batch batch = loader.next();
  torch::Tensor first = batch.inputs[0];
  CHECK(first.mean().item<double>() == Approx(0).margin(1e-4));
  CHECK(first.std().item<double>() == Approx(1).epsilon(1e-3));
  CHECK(batch.labels.min().item<std::int64_t>() >= 0);
  CHECK(batch.labels.max().item<std::int64_t>() < 10);
  LoaderOptions other = loader_options(0);
  other.seed = 8;
  SyntheticLoader reseeded(mnist_sample(), other, torch::kCPU);
  CHECK_FALSE(torch::equal(batch.inputs, reseeded.next().inputs));
}

TEST_CASE("with normalize_on_device, uint8 samples are converted and normalised after the copy") {
  LoaderOptions o = loader_options(2);
  o.normalize_on_device = true;
  SyntheticLoader loader(mnist_sample(), o, torch::kCPU);
  Batch batch = loader.next();
  CHECK(batch.inputs.scalar_type() == torch::kFloat);
  CHECK(batch.inputs.sizes() == torch::IntArrayRef({16, 1, 28, 28}));
  // Bytes 0..255 map to (x - 127.5) / 64: within +-2, spread over the whole range.
  CHECK(batch.inputs.min().item<double>() >= -127.5 / 64);
  CHECK(batch.inputs.max().item<double>() <= 127.5 / 64);
  CHECK(batch.inputs.max().item<double>() - batch.inputs.min().item<double>() > 3.5);
}

TEST_CASE("prefetch_to_device hands out the same batches in the same order, seeks included") {
  // On a CUDA device the next batch travels on a side stream; on a CPU there is nothing to
  // overlap and the option changes nothing. Either way the data must be the same.
  torch::Device device =
      torch::cuda::is_available() ? torch::Device(torch::kCUDA, 0) : torch::Device(torch::kCPU);
  LoaderOptions o = loader_options(2);
  o.normalize_on_device = true;
  o.pin_memory = device.is_cuda();
  SyntheticLoader plain(mnist_sample(), o, device);
  o.prefetch_to_device = true;
  SyntheticLoader prefetching(mnist_sample(), o, device);
  for (int step = 0; step < 5; ++step) {
    if (step == 3) {
      plain.seek(1);
      prefetching.seek(1);
    }
    Batch a = plain.next(), b = prefetching.next();
    INFO("step " << step);
    CHECK(a.samples == b.samples);
    CHECK(torch::equal(a.inputs.cpu(), b.inputs.cpu()));
    CHECK(torch::equal(a.labels.cpu(), b.labels.cpu()));
  }
}

TEST_CASE("made on the device, each batch size's batch is made once and handed out every step") {
  // loader.source synthetic_gpu: the loop then measures the device alone.
  torch::Device device =
      torch::cuda::is_available() ? torch::Device(torch::kCUDA, 0) : torch::Device(torch::kCPU);
  LoaderOptions o;
  o.samples = 10;
  o.batch = 4;
  o.workers = 2;  // nothing to do for them
  o.made_on_device = true;
  SyntheticLoader loader(mnist_sample(), o, device);
  Batch first = loader.next(), second = loader.next(), partial = loader.next(),
        again = loader.next();
  CHECK(first.samples == 4);
  CHECK(partial.samples == 2);  // the epoch's last batch, made once too
  CHECK(again.samples == 4);    // the next epoch
  CHECK(first.inputs.device() == device);
  CHECK(second.inputs.data_ptr() == first.inputs.data_ptr());
  CHECK(again.inputs.data_ptr() == first.inputs.data_ptr());
  CHECK(again.labels.data_ptr() == first.labels.data_ptr());
  CHECK(partial.inputs.data_ptr() != first.inputs.data_ptr());
}

TEST_CASE("seeking restarts the workers at the requested batch") {
  SyntheticLoader reference(mnist_sample(), loader_options(0), torch::kCPU);
  reference.next();
  reference.next();
  Batch third = reference.next();
  SyntheticLoader loader(mnist_sample(), loader_options(2), torch::kCPU);
  loader.next();
  loader.seek(2);
  CHECK(torch::equal(loader.next().inputs, third.inputs));
}

TEST_CASE("ddp buckets follow PyTorch's rule: reverse order, first cap, then the main cap") {
  // Parameters of 0.5, 0.75, 0.5 and 2 MiB in registration order.
  std::vector<torch::Tensor> p = {torch::zeros({131072}), torch::zeros({196608}),
                                  torch::zeros({131072}), torch::zeros({524288})};
  auto buckets = plan_buckets(p, 1 << 20, 1 << 20);
  // Reversed: 2 MiB closes the first bucket at once; 0.5 + 0.75 reaches 1 MiB; 0.5 remains.
  REQUIRE(buckets.size() == 3);
  CHECK(buckets[0] == std::vector<std::size_t>{3});
  CHECK(buckets[1] == std::vector<std::size_t>{2, 1});
  CHECK(buckets[2] == std::vector<std::size_t>{0});
}

TEST_CASE("resnet-50 has as many ddp buckets as the simulator plans (5 at 25 MiB / 1 MiB)") {
  TorchModel model = build_torch_model(load_model(source("scenarios/models/resnet-50.yaml")));
  CHECK(plan_buckets(model->parameters(), 1 << 20, 25 << 20).size() == 5);
}

TEST_CASE("on one rank the ddp reducer leaves exactly the gradients of plain backward") {
  torch::manual_seed(3);
  TorchModel model = build_torch_model(load_model(source("scenarios/models/mnist-cnn.yaml")));
  model->eval();  // dropout off: both passes compute the same function
  torch::Tensor input = torch::randn({4, 1, 28, 28});
  model->forward(input).sum().backward();
  std::vector<torch::Tensor> expected;
  for (const torch::Tensor& p : model->parameters())
    expected.push_back(p.grad().clone());
  model->zero_grad();

  Group group = Group::first_ranks(world(), 1);
  DdpReducer reducer(model->parameters(), group, 1 << 20, 25 << 20);
  // Two micro-batches of the same input, synchronised on the last: twice the gradient.
  reducer.prepare(false);
  model->forward(input).sum().backward();
  reducer.finish();
  reducer.prepare(true);
  model->forward(input).sum().backward();
  reducer.finish();
  auto parameters = model->parameters();
  for (std::size_t i = 0; i < parameters.size(); ++i)
    CHECK(torch::allclose(parameters[i].grad(), 2 * expected[i], 1e-5, 1e-6));
}

// Whether a tensor's storage holds its bytes (FSDP frees a unit's gathered parameters in place).
bool held(const torch::Tensor& t) {
  return t.storage().nbytes() > 0;
}

TEST_CASE("fsdp gathers a unit for its forward and frees it after, zero2 keeps it to backward") {
  ScenarioSpec scenario = load_scenario(source("tests/runtime/scenarios/fsdp-2rank-cpu.yaml"));
  const SweepPoint point{1, 4, 4};
  Group group = Group::first_ranks(world(), 1);
  for (Strategy strategy : {Strategy::fsdp, Strategy::zero2}) {
    INFO(name_of(strategy));
    scenario.training.strategy = strategy;
    torch::manual_seed(5);
    TorchModel model = build_torch_model(scenario.model);
    model->eval();  // dropout off: the sharded pass computes what the plain one does
    const torch::Tensor tokens = random_model_input(model->analysis(), 4);
    model->forward(tokens).sum().backward();
    std::vector<torch::Tensor> expected;
    for (const torch::Tensor& p : model->parameters())
      expected.push_back(p.grad().clone());
    model->zero_grad();

    const std::vector<FsdpUnit> units = fsdp_units(model->analysis(), FsdpWrap::block);
    REQUIRE(units.size() == 3);  // the root (embeddings, ln_f) and two blocks
    const torch::Tensor block_weight = model->layer_parameters(units[1].layers.front()).front();
    const torch::Tensor root_weight = model->parameters().front();  // wte
    RunnerContext context{scenario, point, group, torch::kCPU, model, model->parameters()};
    std::unique_ptr<StrategyRunner> runner = group_runner(context);
    REQUIRE(runner->start());
    CHECK_FALSE(held(block_weight));  // sharded: each rank holds its slice only
    runner->before_forward(0, 1);
    torch::Tensor loss = runner->forward(tokens).sum();
    CHECK(held(root_weight));  // the root is kept from forward to its reduction
    CHECK(held(block_weight) == (strategy == Strategy::zero2));
    loss.backward();
    runner->after_backward();
    CHECK_FALSE(held(block_weight));
    CHECK_FALSE(held(root_weight));
    // The optimizer steps the shards; on one rank they are the whole flat gradients, padding
    // included, and the parameters' own gradients are gone.
    const std::vector<torch::Tensor> shards = runner->optimized();
    REQUIRE(shards.size() == units.size());
    std::int64_t elements = 0;
    for (std::size_t u = 0; u < units.size(); ++u) {
      CHECK(shards[u].numel() == units[u].params);
      REQUIRE(shards[u].grad().defined());
      elements += shards[u].numel();
    }
    CHECK(elements == model->analysis().params);
    for (const torch::Tensor& p : model->parameters())
      CHECK_FALSE(p.grad().defined());
    // detach() makes the model whole again: every parameter held, the same values.
    REQUIRE(runner->detach());
    for (const torch::Tensor& p : model->parameters())
      CHECK(held(p));
    // The flat gradients hold each parameter's, where the unit's offsets put them.
    std::vector<torch::Tensor> parameters = model->parameters();
    std::vector<torch::Tensor> flat_expected;
    for (const FsdpUnit& u : units) {
      std::vector<torch::Tensor> pieces;
      for (std::size_t l : u.layers) {
        for (const torch::Tensor& p : model->layer_parameters(l)) {
          const auto at = static_cast<std::size_t>(
              std::find_if(parameters.begin(), parameters.end(),
                           [&](const torch::Tensor& q) { return q.is_same(p); }) -
              parameters.begin());
          pieces.push_back(expected.at(at).flatten());
        }
      }
      flat_expected.push_back(torch::cat(pieces));
    }
    for (std::size_t u = 0; u < units.size(); ++u)
      CHECK(torch::equal(shards[u].grad(), flat_expected[u]));
  }
}

TEST_CASE("the profiling pass times every layer of the model") {
  TorchModel model = build_torch_model(load_model(source("scenarios/models/mnist-cnn.yaml")));
  ProfileOptions options;
  options.trials = 2;
  auto timings = profile_layers(model, torch::randn({8, 1, 28, 28}), options);
  REQUIRE(timings.size() == model->layer_count());
  for (std::size_t i = 0; i < timings.size(); ++i) {
    CHECK(timings[i].index == static_cast<int>(i));
    CHECK(timings[i].forward_s > 0);
    CHECK(timings[i].name == model->layer_costs(i).layer.name);
  }
}

TEST_CASE("a CPU device computes on as many threads as it has cores, a GPU's leaves LibTorch's") {
  const int before = torch::get_num_threads();
  MachineSpec cpu = load_scenario(source("tests/validate/scenarios/cpu-mnist-cnn.yaml")).machine;
  REQUIRE(cpu.gpu.sm_count == 1);
  cpu.gpu.sm_count = 2;
  compute_on_device_cores(cpu);
  CHECK(torch::get_num_threads() == 2);
  cpu.gpu.sm_count = 1;
  CHECK(compute_on_device_cores(cpu).empty());
  CHECK(torch::get_num_threads() == 1);
  // A BLAS with its own thread pool (Debian's LibTorch calls OpenBLAS's pthread build for
  // nn.Linear) is held to the device's cores too, whatever OPENBLAS_NUM_THREADS says.
  using GetThreads = int (*)();
  if (void* symbol = dlsym(RTLD_DEFAULT, "openblas_get_num_threads")) {
    CHECK(reinterpret_cast<GetThreads>(reinterpret_cast<std::uintptr_t>(symbol))() == 1);
  } else {
    WARN("no OpenBLAS in this process: LibTorch's own pool is the only one");
  }
  // More cores than this host has threads: the steps share them, and the run says so.
  cpu.gpu.sm_count = static_cast<int>(std::thread::hardware_concurrency()) + 1;
  CHECK_THAT(compute_on_device_cores(cpu), Catch::Contains("the steps share them"));
  torch::set_num_threads(3);
  MachineSpec gpu = load_scenario(source("scenarios/calibration/gpu-mnist-cnn.yaml")).machine;
  CHECK(compute_on_device_cores(gpu).empty());
  CHECK(torch::get_num_threads() == 3);
  torch::set_num_threads(before);
}

TEST_CASE("a point trained on the CPU reports its iteration spread, epoch and memory") {
  ScenarioSpec scenario = load_scenario(source("tests/runtime/scenarios/mnist-cnn-cpu.yaml"));
  RunOptions options;
  options.warmup_iterations = 2;
  options.timed_iterations = 4;
  options.validation_iterations = 2;
  std::atomic<bool> interrupted{false};
  DevicePlan cpu = plan_devices(DeviceChoice::cpu);
  SweepPoint point{1, 64, 64};
  MeasuredPoint m = measure_point(scenario, point, options, cpu, world(), interrupted);
  REQUIRE(m.status == PointStatus::ok);
  CHECK(m.device == "cpu");
  CHECK(m.iteration_samples_s.size() == 4);
  CHECK(m.iteration_s.count == 4);
  CHECK(m.iteration_s.min <= m.iteration_s.median);
  CHECK(m.iterations_per_epoch == 200 / 64);
  CHECK(m.partial_batch == 200 % 64);
  REQUIRE(m.partial_iteration_s);
  REQUIRE(m.validation_iteration_s);
  CHECK(m.validation_iterations == 1);  // 40 samples in one batch of up to 64
  double expected = 3 * m.iteration_s.median + *m.partial_iteration_s + *m.validation_iteration_s;
  CHECK(m.epoch_s_estimated == Approx(expected));
  CHECK(m.samples_per_s == Approx(64 / m.iteration_s.median));
  CHECK(std::isfinite(m.last_loss));
  CHECK(m.peak_memory_bytes > 0);
  CHECK(m.memory_source == "process_peak_rss");
  CHECK_FALSE(m.parameters_identical);  // one rank: nothing to compare
}

TEST_CASE(
    "a point's kernel trace is written where LibTorch has Kineto, and its timings stand either "
    "way") {
  ScenarioSpec scenario = load_scenario(source("tests/runtime/scenarios/mnist-cnn-cpu.yaml"));
  RunOptions options;
  options.warmup_iterations = 1;
  options.timed_iterations = 2;
  options.validation_iterations = 0;
  const std::filesystem::path directory(epochcast::test::output_file("kernel-traces"));
  std::filesystem::remove_all(directory);
  std::filesystem::create_directories(directory);
  options.kernel_trace = directory.string();
  std::atomic<bool> interrupted{false};
  SweepPoint point{1, 32, 32};
  MeasuredPoint m = measure_point(scenario, point, options, plan_devices(DeviceChoice::cpu),
                                  world(), interrupted);
  REQUIRE(m.status == PointStatus::ok);
  CHECK(m.iteration_samples_s.size() == 2);
  const std::filesystem::path trace = kernel_trace_path(directory.string(), point);
  CHECK(trace.filename() == "kernels-1gpu-batch32.json");
  std::string why;
  if (kernel_tracing_available(why)) {
    // PyTorch's own LibTorch: the trace holds the steps' operators with their shapes, and how
    // they ran.
    REQUIRE(std::filesystem::exists(trace));
    std::stringstream text;
    text << std::ifstream(trace).rdbuf();
    CHECK_THAT(text.str(), Catch::Contains("\"traceEvents\"") &&
                               Catch::Contains("\"cudnn_allow_tf32\"") &&
                               Catch::Contains("aten::conv2d") && Catch::Contains("Input Dims"));
  } else {
    // Debian's libtorch 1.13 has no Kineto: no file, and the point says why.
    CHECK_THAT(why, Catch::Contains("Kineto"));
    CHECK_FALSE(std::filesystem::exists(trace));
    CHECK_THAT(m.profile_note, Catch::Contains("the kernel trace was not written"));
  }
}

TEST_CASE("a segmentation model trains against a label per pixel") {
  ScenarioSpec scenario = load_scenario(source("tests/runtime/scenarios/segmentation-cpu.yaml"));
  RunOptions options;
  options.warmup_iterations = 1;
  options.timed_iterations = 3;
  std::atomic<bool> interrupted{false};
  DevicePlan cpu = plan_devices(DeviceChoice::cpu);
  MeasuredPoint m =
      measure_point(scenario, SweepPoint{1, 8, 8}, options, cpu, world(), interrupted);
  REQUIRE(m.status == PointStatus::ok);
  // Cross-entropy over 3 classes at each of 16x16 pixels of random labels: about ln 3 at first.
  CHECK(m.first_loss == Approx(std::log(3.0)).epsilon(0.1));
  CHECK(std::isfinite(m.last_loss));
  // The loader draws one label per pixel.
  SampleShape sample;
  sample.shape.dims = {1, 16, 16};
  sample.classes = 3;
  sample.label_shape = {16, 16};
  LoaderOptions o = loader_options(0);
  SyntheticLoader loader(sample, o, torch::kCPU);
  Batch batch = loader.next();
  CHECK(batch.labels.sizes().vec() == std::vector<std::int64_t>{16, 16, 16});
  CHECK(batch.labels.max().item<std::int64_t>() < 3);
}

TEST_CASE("points the CPU cannot run are skipped with the reason in words") {
  ScenarioSpec scenario = load_scenario(source("tests/runtime/scenarios/mnist-cnn-cpu.yaml"));
  DevicePlan cpu = plan_devices(DeviceChoice::cpu);
  scenario.training.precision = TrainingPrecision::amp_fp16;
  CHECK_THAT(why_not_runnable(scenario, {1, 16, 16}, cpu, world()),
             Catch::Contains("amp_fp16 needs a CUDA GPU"));
  scenario.training.precision = TrainingPrecision::fp32;
  scenario.training.strategy = Strategy::dp;
  CHECK_THAT(why_not_runnable(scenario, {2, 32, 16}, cpu, world()),
             Catch::Contains("dp on 2 GPUs needs CUDA devices"));
  CHECK(why_not_runnable(scenario, {1, 32, 32}, cpu, world()).empty());
  scenario.training.strategy = Strategy::ddp;
  CHECK_THAT(why_not_runnable(scenario, {2, 32, 16}, cpu, world()),
             Catch::Contains("mpirun -np 2"));
  // A reducer setting the runtime's reducer does not mirror.
  CHECK(why_not_runnable(scenario, {1, 32, 32}, cpu, world()).empty());
  scenario.training.ddp.find_unused_parameters = true;
  CHECK_THAT(why_not_runnable(scenario, {1, 32, 32}, cpu, world()),
             Catch::Contains("training.ddp.find_unused_parameters"));
}

TEST_CASE("resuming measures only the points without a finished record") {
  std::vector<SweepPoint> sweep = {{1, 16, 16}, {1, 64, 64}, {2, 64, 32}};
  std::vector<MeasuredPoint> existing(2);
  existing[0].gpus = 1;
  existing[0].global_batch = 16;
  existing[0].status = PointStatus::oom;  // finished: OOM is a result
  existing[1].gpus = 1;
  existing[1].global_batch = 64;
  existing[1].status = PointStatus::failed;  // measured again
  auto todo = points_to_measure(sweep, existing);
  REQUIRE(todo.size() == 2);
  CHECK(todo[0].global_batch == 64);
  CHECK(todo[1].gpus == 2);

  // Asked for more rounds than an ok point combines: measured again; an OOM stays finished.
  existing[1].status = PointStatus::ok;
  existing[1].rounds = 2;
  CHECK(points_to_measure(sweep, existing, 2).size() == 1);
  CHECK(points_to_measure(sweep, existing, 3).size() == 2);
}

TEST_CASE("resuming a file measured with another device, library or thread count is refused") {
  MeasuredEnvironment before;
  before.device_kind = "cpu";
  before.device_name = "AMD EPYC";
  before.device_count = 1;
  before.torch_version = "1.13.0";
  before.cpu_threads = 1;
  before.host_allocator = "glibc, freed memory retained";
  before.started_at = "2026-11-23T15:00:39Z";
  before.device_memory_bytes = 25274793984;
  MeasuredEnvironment now = before;
  // Another start, host and memory figure: the same device, the points compare.
  now.started_at = "2026-11-30T16:01:10Z";
  now.host = "another-vm";
  now.device_memory_bytes = 25276026880;
  CHECK(resume_mismatch(before, now).empty());
  now.cpu_threads = 2;
  CHECK(resume_mismatch(before, now) == "intra-op threads 1, where this run has 2");
  now = before;
  now.torch_version = "2.11.0";
  CHECK_THAT(resume_mismatch(before, now), Catch::Contains("LibTorch 1.13.0"));
  now = before;
  now.cudnn_benchmark = true;
  CHECK_THAT(resume_mismatch(before, now), Catch::Contains("cudnn.benchmark unset"));
  now = before;
  now.nccl_settings = {"NCCL_ALGO=Ring"};
  CHECK_THAT(resume_mismatch(before, now), Catch::Contains("NCCL settings []"));
}

TEST_CASE("parameter hashes differ as soon as one value does") {
  std::vector<torch::Tensor> a = {torch::ones({3}), torch::zeros({2})};
  std::vector<torch::Tensor> b = {torch::ones({3}), torch::zeros({2})};
  CHECK(parameter_hash(a) == parameter_hash(b));
  b[1][0] = 1e-30f;
  CHECK(parameter_hash(a) != parameter_hash(b));
}

TEST_CASE("PyTorch 2's foreach optimizer steps equal torch.optim's per-parameter ones") {
  // Three parameters, one of which gets no gradient on the second step (torch.optim skips it),
  // four steps of deterministic gradients: the multi-tensor kernels must reach the same values
  // as LibTorch's C++ optimizers, step by step.
  for (Optimizer kind : {Optimizer::sgd, Optimizer::momentum, Optimizer::adam, Optimizer::adamw}) {
    INFO(name_of(kind));
    torch::manual_seed(7);
    std::vector<torch::Tensor> shapes = {torch::randn({4, 3}), torch::randn({5}),
                                         torch::randn({2, 2, 2})};
    std::vector<torch::Tensor> loop_params, foreach_params;
    for (const torch::Tensor& t : shapes) {
      loop_params.push_back(t.clone().set_requires_grad(true));
      foreach_params.push_back(t.clone().set_requires_grad(true));
    }
    auto loop = make_step_optimizer(kind, OptimizerImplementation::for_loop, loop_params);
    auto foreach = make_step_optimizer(kind, OptimizerImplementation::foreach, foreach_params);
    for (int step = 0; step < 4; ++step) {
      for (std::size_t i = 0; i < shapes.size(); ++i) {
        const bool none = step == 1 && i == 1;
        const torch::Tensor grad =
            torch::sin(shapes[i] * static_cast<double>(step + 1) + static_cast<double>(i));
        for (auto* params : {&loop_params, &foreach_params}) {
          (*params)[i].mutable_grad() = none ? torch::Tensor() : grad.clone();
        }
      }
      loop->step();
      foreach
        ->step();
      for (std::size_t i = 0; i < shapes.size(); ++i) {
        INFO("step " << step << ", parameter " << i);
        CHECK(torch::allclose(loop_params[i], foreach_params[i], 1e-6, 1e-7));
        CHECK_FALSE(torch::equal(loop_params[i], shapes[i]));
      }
    }
  }
  CHECK_THROWS(make_step_optimizer(Optimizer::adam, OptimizerImplementation::fused, {}));
}

namespace {

// The multi-tensor calls an optimizer step dispatches, counted as ATen records them.
std::vector<std::string>& foreach_calls() {
  static std::vector<std::string> calls;
  return calls;
}
std::unique_ptr<at::ObserverContext> record_foreach(const at::RecordFunction& fn) {
  const std::string name = fn.name();
  if (name.rfind("aten::_foreach_", 0) == 0) foreach_calls().push_back(name);
  return nullptr;
}

}  // namespace

TEST_CASE("a foreach step launches the multi-tensor ops the simulator costs, whatever the count") {
  // sim/strategy/step_builder.cpp: SGD one _foreach_add_; momentum mul_, add_, add_; Adam lerp_,
  // mul_, addcmul_, sqrt, div_, add_, addcdiv_ (7; PyTorch 1.13 has no _foreach_lerp_: mul_ and
  // add_, 8); AdamW one mul_ more. Independent of the number of parameters.
  const int lerp = TORCH_VERSION_MAJOR >= 2 ? 1 : 2;
  const std::pair<Optimizer, int> expected[] = {{Optimizer::sgd, 1},
                                                {Optimizer::momentum, 3},
                                                {Optimizer::adam, 6 + lerp},
                                                {Optimizer::adamw, 7 + lerp}};
  for (const auto& [kind, count] : expected) {
    for (int tensors : {3, 40}) {
      INFO(name_of(kind) << ", " << tensors << " tensors");
      std::vector<torch::Tensor> params;
      for (int i = 0; i < tensors; ++i) {
        params.push_back(torch::ones({i + 1}).set_requires_grad(true));
        params.back().mutable_grad() = torch::ones({i + 1});
      }
      auto optimizer = make_step_optimizer(kind, OptimizerImplementation::foreach, params);
      optimizer->step();  // momentum's first step copies the buffers one by one
      foreach_calls().clear();
      const at::CallbackHandle handle =
          at::addThreadLocalCallback(at::RecordFunctionCallback(record_foreach));
      optimizer->step();
      at::removeCallback(handle);
      CHECK(static_cast<int>(foreach_calls().size()) == count);
    }
  }
}

TEST_CASE("a loader worker's failure reaches the training thread as an error, in batch order") {
  // No classes to draw labels from: making any batch fails inside LibTorch.
  SampleShape broken = mnist_sample();
  broken.classes = 0;
  for (int workers : {0, 2}) {
    INFO(workers << " workers");
    LoaderOptions options;
    options.samples = 64;
    options.batch = 8;
    options.workers = workers;
    SyntheticLoader loader(broken, options, torch::kCPU);
    if (workers == 0) {
      CHECK_THROWS(loader.next());
    } else {
      CHECK_THROWS_WITH(loader.next(), Catch::Contains("a loader worker failed making batch 0"));
    }
  }
}

namespace {

// Every op ATen records on this thread while a callback is installed.
std::vector<std::string>& recorded_ops() {
  static std::vector<std::string> ops;
  return ops;
}
std::unique_ptr<at::ObserverContext> record_op(const at::RecordFunction& fn) {
  recorded_ops().emplace_back(fn.name());
  return nullptr;
}

// How many casts to a 16-bit type the layer profile of mnist-cnn records in `precision`.
std::size_t casts_while_profiling(TrainingPrecision precision) {
  TorchModel model = build_torch_model(load_model(source("scenarios/models/mnist-cnn.yaml")));
  ProfileOptions options;
  options.trials = 1;
  options.precision = precision;
  recorded_ops().clear();
  const at::CallbackHandle handle = at::addThreadLocalCallback(
      at::RecordFunctionCallback(record_op).needsInputs(false).scopes({at::RecordScope::FUNCTION}));
  profile_layers(model, torch::randn({4, 1, 28, 28}), options);
  at::removeCallback(handle);
  return static_cast<std::size_t>(
      std::count_if(recorded_ops().begin(), recorded_ops().end(), [](const std::string& name) {
        return name == "aten::_to_copy" || name == "aten::_autocast_to_reduced_precision";
      }));
}

}  // namespace

TEST_CASE("the layer profile runs each layer under the scenario's autocast, as training does") {
  // A bf16 profile casts the inputs and weights of every convolution and linear layer (autocast
  // on the CPU: bf16), in each call, as the forward pass of a training step does: far more
  // casts than the fp32 profile's few (its own bookkeeping).
  const std::size_t fp32 = casts_while_profiling(TrainingPrecision::fp32);
  const std::size_t bf16 = casts_while_profiling(TrainingPrecision::amp_bf16);
  // mnist-cnn: 4 such layers, each cast at least twice in its warm-up and timed call.
  CHECK(bf16 >= fp32 + 4 * 2 * 2);
}

TEST_CASE("device time per call runs each trial's preparation, then its calls back to back") {
  int prepared = 0;
  std::vector<int> called;
  double per_call = device_seconds_per_call(
      torch::Device(torch::kCPU), 4, 3,
      [&](int k) {
        called.push_back(k);
        torch::mm(torch::ones({64, 64}), torch::ones({64, 64}));
      },
      [&] { ++prepared; });
  CHECK(prepared == 3);
  CHECK(called == std::vector<int>{0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3});
  CHECK(per_call > 0);
  IterationClock clock(torch::Device(torch::kCPU));
  for (int i = 0; i < 3; ++i)
    clock.time([] { torch::mm(torch::ones({64, 64}), torch::ones({64, 64})); });
  std::vector<double> seconds = clock.seconds();
  REQUIRE(seconds.size() == 3);
  CHECK(std::all_of(seconds.begin(), seconds.end(), [](double s) { return s > 0; }));
}

TEST_CASE("fp32 keeps PyTorch's default math, tf32 and fp32_strict change it") {
  // PyTorch >= 1.12: torch.backends.cuda.matmul.allow_tf32 False, torch.backends.cudnn.allow_tf32
  // True (docs: "TensorFloat-32 (TF32) on Ampere (and later) devices").
  TrainingSpec training;
  struct Case {
    TrainingPrecision precision;
    bool cublas, cudnn;
  };
  for (const Case& c :
       {Case{TrainingPrecision::fp32, false, true}, Case{TrainingPrecision::tf32, true, true},
        Case{TrainingPrecision::fp32_strict, false, false},
        Case{TrainingPrecision::amp_bf16, false, true}}) {
    training.precision = c.precision;
    MathFlags flags = math_flags(training);
    INFO(name_of(c.precision));
    CHECK(flags.cublas_allow_tf32 == c.cublas);
    CHECK(flags.cudnn_allow_tf32 == c.cudnn);
  }
  training.convolution.cudnn_benchmark = true;
  CHECK(math_flags(training).cudnn_benchmark);
}

TEST_CASE("the ddp reducer writes each gradient into its bucket with one kernel, as DDP does") {
  // PyTorch's reducer: mul_out(bucket_view, grad, 1 / world size), one kernel a parameter (was
  // copy, add and divide). Counted as the difference to a plain backward of the same model.
  auto ops_in_backward = [](bool with_reducer) {
    torch::manual_seed(3);
    TorchModel model =
        build_torch_model(load_model(source("scenarios/models/spoken-digits-linear.yaml")));
    Group group = Group::first_ranks(world(), 1);
    std::unique_ptr<DdpReducer> reducer;
    if (with_reducer)
      reducer = std::make_unique<DdpReducer>(model->parameters(), group, 1 << 20, 25 << 20);
    torch::Tensor loss = model->forward(torch::randn({4, 1, 12000})).sum();
    if (reducer) reducer->prepare(true);
    recorded_ops().clear();
    const at::CallbackHandle handle =
        at::addThreadLocalCallback(at::RecordFunctionCallback(record_op).needsInputs(false).scopes(
            {at::RecordScope::FUNCTION}));
    loss.backward();
    at::removeCallback(handle);
    if (reducer) reducer->finish();
    std::map<std::string, int> counts;
    for (const std::string& name : recorded_ops())
      ++counts[name];
    return std::make_pair(counts, model->parameters().size());
  };
  auto [plain, parameters] = ops_in_backward(false);
  auto [reduced, same_parameters] = ops_in_backward(true);
  REQUIRE(parameters == same_parameters);
  std::string differences;  // shown with any failure below
  for (const auto& [name, count] : reduced)
    if (count != plain[name])
      differences +=
          name + ": " + std::to_string(plain[name]) + " -> " + std::to_string(count) + "; ";
  INFO("ops that differ: " << differences);
  CHECK(reduced["aten::mul"] - plain["aten::mul"] == static_cast<int>(parameters));
  CHECK(reduced["aten::div_"] == plain["aten::div_"]);
  CHECK(reduced["aten::copy_"] == plain["aten::copy_"]);
  CHECK(reduced["aten::add_"] == plain["aten::add_"]);
}

TEST_CASE("bench records Python's dispatch from the interpreter EPOCHCAST_PYTHON names") {
  // A stand-in interpreter that answers as the Python loop would (5 us an op, 2 us a module
  // call, 90 us an Adam step) when called as `python -c SCRIPT cpu`; one that fails leaves the
  // figures out, with the reason.
  const std::filesystem::path fake = std::filesystem::temp_directory_path() /
                                     ("epochcast-test-fake-python-" + std::to_string(getpid()));
  {
    std::ofstream script(fake);
    script << "#!/bin/sh\n[ \"$1\" = -c ] && [ \"$3\" = cpu ] && echo "
              "'{\"op\": 5e-06, \"module_call\": 2e-06, \"optimizer_step\": 9e-05}'\n";
  }
  std::filesystem::permissions(fake, std::filesystem::perms::owner_all);
  BenchOptions options;
  options.sections = {"dispatch"};
  DevicePlan cpu = plan_devices(DeviceChoice::cpu);
  setenv("EPOCHCAST_PYTHON", fake.c_str(), 1);
  Benchmarks with = run_benchmarks(options, cpu, world());
  setenv("EPOCHCAST_PYTHON", "/nonexistent/python", 1);
  Benchmarks without = run_benchmarks(options, cpu, world());
  unsetenv("EPOCHCAST_PYTHON");
  std::filesystem::remove(fake);
  REQUIRE(with.dispatch);
  CHECK(with.dispatch->python_op_dispatch_s == std::optional<double>(5e-6));
  CHECK(with.dispatch->python_module_call_s == std::optional<double>(2e-6));
  CHECK(with.dispatch->python_optimizer_step_s == std::optional<double>(9e-5));
  // The C++ loop's own figures beside them: a module call, a foreach Adam step of 7 ops.
  CHECK(with.dispatch->module_call_s > 0);
  CHECK(with.dispatch->optimizer_step_s > with.dispatch->op_dispatch_s);
  // 7 ops of foreach Adam in PyTorch 2, 8 in 1.13 (the op-counting test below checks them).
  CHECK(with.dispatch->optimizer_step_ops == (TORCH_VERSION_MAJOR >= 2 ? 7 : 8));
  REQUIRE(without.dispatch);
  CHECK_FALSE(without.dispatch->python_op_dispatch_s);
  CHECK_FALSE(without.dispatch->python_optimizer_step_s);
  REQUIRE(without.skipped.size() == 1);
  CHECK_THAT(without.skipped[0], Catch::Contains("/nonexistent/python with torch was not found"));
}

// --- dp: nn.DataParallel's step, on several "devices" that are all this CPU ---------------------

namespace {

TorchModel small_batchnorm_model() {
  return build_torch_model(load_model_from_string(R"(kind: model
name: dp-test
input: {shape: [3, 8, 8], dtype: float32}
layers:
  - {type: conv2d, out_channels: 4, kernel: 3, padding: 1}
  - {type: batchnorm2d}
  - relu
  - flatten
  - {type: linear, out_features: 10}
)",
                                                  "dp-test"));
}

std::vector<torch::Device> cpu_devices(int n) {
  return std::vector<torch::Device>(n, torch::kCPU);
}

}  // namespace

TEST_CASE(
    "dp's coalesced buffers follow torch's take_tensors: per dtype, in order, up to the cap") {
  auto f = [](std::int64_t n) { return torch::zeros({n}, torch::kFloat); };  // 4n bytes
  auto l = [](std::int64_t n) { return torch::zeros({n}, torch::kLong); };   // 8n bytes
  // cap 100 B: floats 40 + 40 + 40 close a buffer at 120; the 200-byte one is alone; the int64s
  // close at 176; the last float is left open and comes after them.
  std::vector<torch::Tensor> tensors{f(10), l(2), f(10), f(10), f(50), l(20), f(1)};
  auto buffers = plan_coalesced_buffers(tensors, 100);
  std::vector<std::vector<std::size_t>> expected{{0, 2, 3}, {4}, {1, 5}, {6}};
  // Python's _take_tensors (the gradients' reduce) closes a buffer before the tensor that would
  // pass the cap, and leaves the open ones in the order their dtype first appeared.
  std::vector<std::vector<std::size_t>> python{{0, 2}, {3}, {1}, {4}, {6}, {5}};
  CHECK(plan_coalesced_buffers_python(tensors, 100) == python);
  // Left open at the end: int64 before float (torch's dtype order), whatever came first.
  auto mixed = plan_coalesced_buffers({f(1), l(1)}, 100);
  CHECK(mixed == std::vector<std::vector<std::size_t>>{{1}, {0}});
  CHECK(buffers == expected);
  // ResNet-50's parameters (97.5 MiB of float32) make 9 buffers of 10 MiB or a little more, as
  // the simulator's dp plans them (test_strategies).
  TorchModel resnet = build_torch_model(load_model(source("scenarios/models/resnet-50.yaml")));
  auto resnet_buffers = plan_coalesced_buffers(resnet->parameters(), kDataParallelBufferBytes);
  CHECK(resnet_buffers.size() == 9);
}

TEST_CASE("dp on three devices leaves the gradients one module computes on the whole batch") {
  torch::manual_seed(5);
  TorchModel model = build_torch_model(load_model(source("scenarios/models/mnist-cnn.yaml")));
  model->eval();  // dropout off: every pass computes the same function
  torch::Tensor input = torch::randn({7, 1, 28, 28});  // chunks of 3, 3 and 1
  model->forward(input).sum().backward();
  std::vector<torch::Tensor> expected;
  for (const torch::Tensor& p : model->parameters())
    expected.push_back(p.grad().clone());
  model->zero_grad(/*set_to_none=*/true);

  DataParallel dp(model, cpu_devices(3), TrainingPrecision::fp32, /*buffer_bytes=*/64 * 1024);
  CHECK(dp.parameter_buffer_count() > 2);  // several buffers: the unflattening is exercised
  torch::Tensor output = dp.forward(input);
  CHECK(output.sizes() == torch::IntArrayRef({7, 10}));
  output.sum().backward();
  dp.reduce_gradients();
  auto parameters = model->parameters();
  for (std::size_t i = 0; i < parameters.size(); ++i)
    CHECK(torch::allclose(parameters[i].grad(), expected[i], 1e-4, 1e-5));
  // Only the module keeps gradients; the replicas' were summed into it and released.
  for (std::size_t r = 1; r < 3; ++r) {
    for (const torch::Tensor& p : dp.replica(r)->parameters())
      CHECK_FALSE(p.grad().defined());
  }
  // PyTorch 1's zero_grad zeroes the reduced gradients in place (views of the summed buffer),
  // and the next step accumulates into them and reduces again: the same gradients.
  zero_grad(parameters, /*set_to_none=*/false);
  for (const torch::Tensor& p : parameters)
    CHECK(p.grad().abs().sum().item<double>() == 0);
  dp.forward(input).sum().backward();
  dp.reduce_gradients();
  for (std::size_t i = 0; i < parameters.size(); ++i)
    CHECK(torch::allclose(parameters[i].grad(), expected[i], 1e-4, 1e-5));
  // A batch smaller than the device count runs on as many replicas as it has samples.
  dp.forward(torch::randn({2, 1, 28, 28}));
  CHECK(dp.last_forward_threads().size() == 2);
}

TEST_CASE("dp replicas persist, and each forward gives them the module's current values") {
  torch::manual_seed(6);
  TorchModel model = small_batchnorm_model();
  DataParallel dp(model, cpu_devices(2), TrainingPrecision::fp32);
  const TorchModelImpl* replica = dp.replica(1).get();
  dp.forward(torch::randn({4, 3, 8, 8}));
  // The module changes (an optimizer step; its BatchNorm statistics moved in training)...
  {
    torch::NoGradGuard no_grad;
    for (torch::Tensor& p : model->parameters())
      p.add_(0.25);
  }
  dp.forward(torch::randn({4, 3, 8, 8}));
  // ...and the same replica object now holds the module's values, buffers included.
  CHECK(dp.replica(1).get() == replica);
  auto mine = model->parameters();
  auto theirs = dp.replica(1)->parameters();
  for (std::size_t i = 0; i < mine.size(); ++i)
    CHECK(torch::equal(mine[i], theirs[i]));
  // Buffers too: in training each replica then moves its copy of the statistics with its own
  // chunk, so compare after an evaluation forward, which moves none.
  model->eval();
  dp.forward(torch::randn({4, 3, 8, 8}));
  CHECK_FALSE(dp.replica(1)->is_training());
  auto my_buffers = model->buffers();
  auto their_buffers = dp.replica(1)->buffers();
  REQUIRE(my_buffers.size() == 3);  // running mean, running variance, batches tracked
  for (std::size_t i = 0; i < my_buffers.size(); ++i)
    CHECK(torch::equal(my_buffers[i], their_buffers[i]));
}

TEST_CASE("dp runs each replica on a thread of its own, with the caller's grad mode and autocast") {
  TorchModel model = small_batchnorm_model();
  DataParallel dp(model, cpu_devices(3), TrainingPrecision::amp_bf16);
  torch::Tensor output;
  {
    AutocastScope autocast(TrainingPrecision::amp_bf16, torch::kCPU);
    output = dp.forward(torch::randn({6, 3, 8, 8}));
  }
  // Autocast reached the replicas: their linear layers ran in bfloat16.
  CHECK(output.scalar_type() == torch::kBFloat16);
  const auto& threads = dp.last_forward_threads();
  REQUIRE(threads.size() == 3);
  for (std::size_t r = 0; r < threads.size(); ++r) {
    CHECK(threads[r].thread != std::this_thread::get_id());
    for (std::size_t q = 0; q < r; ++q)
      CHECK(threads[r].thread != threads[q].thread);
    CHECK(threads[r].grad_enabled);
    CHECK(threads[r].autocast_enabled);
  }
  {
    torch::NoGradGuard no_grad;  // evaluation: no graph in any replica
    output = dp.forward(torch::randn({6, 3, 8, 8}));
  }
  CHECK_FALSE(output.requires_grad());
  for (const ReplicaThreadState& state : dp.last_forward_threads())
    CHECK_FALSE(state.grad_enabled);
  DataParallel fp32(model, cpu_devices(2), TrainingPrecision::fp32);
  fp32.forward(torch::randn({6, 3, 8, 8}));
  for (const ReplicaThreadState& state : fp32.last_forward_threads())
    CHECK_FALSE(state.autocast_enabled);
}

TEST_CASE("an error in a replica's forward reaches the caller as an exception") {
  TorchModel model = small_batchnorm_model();
  DataParallel dp(model, cpu_devices(2), TrainingPrecision::fp32);
  CHECK_THROWS(dp.forward(torch::randn({4, 5, 8, 8})));  // 5 channels where the model takes 3
  // The replicas are still usable afterwards.
  CHECK(dp.forward(torch::randn({4, 3, 8, 8})).size(0) == 4);
}

// Run by ctest under `mpirun -np 2` (hidden from the single-process run).
TEST_CASE("ddp's buffer sync gives every rank rank 0's batch-norm statistics", "[.][mpi]") {
  World& w = world();
  REQUIRE(w.size() == 2);
  Group group = Group::first_ranks(w, 2);
  torch::manual_seed(11);  // the same weights on both ranks...
  TorchModel model = small_batchnorm_model();
  torch::manual_seed(20 + w.rank());                            // ...and different data
  model->forward(torch::randn({8, 3, 8, 8}) * (1 + w.rank()));  // the statistics move apart
  std::vector<torch::Tensor> buffers = model->buffers();
  const std::uint64_t before = parameter_hash(buffers);
  std::vector<std::uint64_t> hashes = group.all_gather(before);
  REQUIRE(hashes[0] != hashes[1]);
  const std::uint64_t rank0 = hashes[0];

  DdpReducer reducer(model->parameters(), group, 1 << 20, 25 << 20);
  reducer.sync_buffers(buffers);  // float statistics and an int64 count: two buckets
  hashes = group.all_gather(parameter_hash(model->buffers()));
  CHECK(hashes[0] == rank0);
  CHECK(hashes[1] == rank0);
}

TEST_CASE("ddp ranks train DistributedSampler's padded share, the simulator's rule", "[.][mpi]") {
  REQUIRE(world().size() == 2);
  ScenarioSpec scenario = load_scenario(source("tests/runtime/scenarios/mnist-cnn-cpu.yaml"));
  scenario.training.strategy = Strategy::ddp;
  scenario.dataset.train_samples = 201;  // 101 a rank, padded: 3 batches of 32 and one of 5
  scenario.dataset.validation_samples = 41;
  RunOptions options;
  options.warmup_iterations = 1;
  options.timed_iterations = 2;
  options.validation_iterations = 1;
  std::atomic<bool> interrupted{false};
  DevicePlan cpu = plan_devices(DeviceChoice::cpu);
  MeasuredPoint m =
      measure_point(scenario, SweepPoint{2, 64, 32}, options, cpu, world(), interrupted);
  REQUIRE(m.status == PointStatus::ok);
  // DistributedSampler (drop_last=False): ceil(201 / 2) = 101 samples a rank.
  const std::int64_t per_rank = (201 + 2 - 1) / 2;
  CHECK(m.iterations_per_epoch == per_rank / 32);
  CHECK(m.partial_batch == 2 * (per_rank % 32));
  // ceil(41 / 2) = 21 validation samples a rank: one batch.
  CHECK(m.validation_iterations == 1);
  // The same figures as core's rule, which the simulator's phases are made of.
  const RankShare share = rank_share(201, 2, 32, false);
  CHECK(share.full_batches == m.iterations_per_epoch);
  CHECK(share.last_batch * 2 == m.partial_batch);
}

// --- attention: sdpa, the fused kernel (LibTorch 2.0 or later) -----------------------------------

namespace {

ModelSpec attention_model(bool fused, bool causal) {
  return load_model_from_string(fmt::format(R"(kind: model
name: attention-test
input: {{shape: [12, 16], dtype: float32}}
layers:
  - {{type: multihead_attention, heads: 4, dropout: 0.1, causal: {}, attention: {}}}
  - flatten
  - {{type: linear, out_features: 10}}
)",
                                            causal ? "true" : "false", fused ? "sdpa" : "math"),
                                "attention-test");
}

}  // namespace

TEST_CASE("attention: sdpa computes what the math path does, where LibTorch has the kernel") {
  for (bool causal : {false, true}) {
    INFO("causal " << causal);
    torch::manual_seed(9);
    TorchModel math = build_torch_model(attention_model(false, causal));
    if (!unsupported_by_libtorch(math->analysis()).empty()) FAIL("the math path always runs");
    const std::string why = unsupported_by_libtorch(analyze_model(attention_model(true, causal)));
#if TORCH_VERSION_MAJOR >= 2
    CHECK(why.empty());
    torch::manual_seed(9);
    TorchModel sdpa = build_torch_model(attention_model(true, causal));
    math->eval();  // no dropout: both compute the same function
    sdpa->eval();
    torch::Tensor x = torch::randn({3, 12, 16});
    CHECK(torch::allclose(math->forward(x), sdpa->forward(x), 1e-4, 1e-5));
#else
    // Debian's LibTorch 1.13 has no scaled_dot_product_attention: such points are skipped.
    CHECK_THAT(why, Catch::Contains("LibTorch has from 2.0 on"));
    ScenarioSpec scenario = load_scenario(source("tests/runtime/scenarios/mnist-cnn-cpu.yaml"));
    scenario.model = attention_model(true, causal);
    CHECK_THAT(why_not_runnable(scenario, {1, 16, 16}, plan_devices(DeviceChoice::cpu), world()),
               Catch::Contains("attention: sdpa needs scaled_dot_product_attention"));
#endif
  }
}

// --- the collectives' watchdog -------------------------------------------------------------------

namespace {

// Waits (at most a minute: only a broken watchdog takes long) until `done` holds.
template <typename Condition>
bool eventually(Condition done) {
  for (int i = 0; i < 6000 && !done(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return done();
}

}  // namespace

TEST_CASE("the collectives' watchdog aborts once when a collective outlives its timeout") {
  std::atomic<int> aborts{0};
  std::atomic<bool> first_done{false};
  // Half a second: bucket 0 is marked finished long before, even on a busy machine.
  CollectiveWatchdog watchdog(
      0.5, [] { return std::string(); }, [&] { ++aborts; }, 0.01);
  first_done = true;  // before it is watched: no timing decides which bucket times out
  watchdog.watch("the all-reduce of gradient bucket 0", [&] { return first_done.load(); });
  watchdog.watch("the all-reduce of gradient bucket 1", [] { return false; });  // a dead peer
  REQUIRE(eventually([&] { return watchdog.failure().has_value(); }));
  CHECK_THAT(*watchdog.failure(), Catch::Contains("gradient bucket 1 did not finish within"));
  CHECK(eventually([&] { return aborts.load() == 1; }));
  CHECK(watchdog.in_flight() == 0);
}

TEST_CASE("the collectives' watchdog leaves finished collectives alone, and reports a failure") {
  std::atomic<int> aborts{0};
  std::atomic<bool> peer_gone{false};
  {
    // A timeout no test reaches: only the health check can fire.
    CollectiveWatchdog watchdog(
        3600, [&] { return peer_gone ? std::string("NCCL: rank 1 failed asynchronously") : ""; },
        [&] { ++aborts; }, 0.01);
    for (int i = 0; i < 50; ++i)
      watchdog.watch("a broadcast", [] { return true; });
    CHECK(eventually([&] { return watchdog.in_flight() == 0; }));
    CHECK_FALSE(watchdog.failure());
    CHECK(aborts == 0);
    peer_gone = true;
    REQUIRE(eventually([&] { return watchdog.failure().has_value(); }));
    CHECK(*watchdog.failure() == "NCCL: rank 1 failed asynchronously");
    CHECK(eventually([&] { return aborts.load() == 1; }));
  }
  // Destroyed: the thread has stopped, and nothing more was aborted.
  CHECK(aborts == 1);
}

TEST_CASE("the noise estimates recover |G|^2 and tr(Sigma) from micro-batch gradients") {
  // Per-sample gradients G + e, e ~ N(0, sigma^2 I) in d dimensions: tr(Sigma) = d sigma^2.
  torch::manual_seed(3);
  const std::int64_t d = 50, small = 8, parts = 4;
  const double sigma = 0.5;
  torch::Tensor G = torch::randn({d}, torch::kFloat64);
  double gradient = 0, trace = 0;
  const int trials = 4000;
  for (int t = 0; t < trials; ++t) {
    torch::Tensor samples = G + sigma * torch::randn({parts, small, d}, torch::kFloat64);
    torch::Tensor micro = samples.mean(1);  // [parts, d]
    const double small_norms = micro.square().sum(1).mean().item<double>();
    const double big_norm = micro.mean(0).square().sum().item<double>();
    NoiseEstimate e = estimate_noise(small_norms, small, big_norm, small * parts);
    gradient += e.gradient_squared / trials;
    trace += e.trace / trials;
  }
  CHECK(gradient == Approx(G.square().sum().item<double>()).epsilon(0.03));
  CHECK(trace == Approx(d * sigma * sigma).epsilon(0.05));
}

namespace {

// An IDX file: big-endian header 0, 0, 0x08 (unsigned bytes), rank; then one 32-bit size per
// dimension; then the bytes (which may be fewer than the header promises).
void write_idx(const std::filesystem::path& folder, const std::string& name,
               std::vector<std::uint32_t> dims, const std::vector<std::uint8_t>& bytes,
               bool compressed) {
  std::vector<std::uint8_t> file = {0, 0, 0x08, static_cast<std::uint8_t>(dims.size())};
  for (std::uint32_t d : dims) {
    for (int shift : {24, 16, 8, 0})
      file.push_back(static_cast<std::uint8_t>(d >> shift));
  }
  file.insert(file.end(), bytes.begin(), bytes.end());
  const std::string path = (folder / (compressed ? name + ".gz" : name)).string();
  gzFile out = gzopen(path.c_str(), compressed ? "wb" : "wbT");
  REQUIRE(out != nullptr);
  gzwrite(out, file.data(), static_cast<unsigned>(file.size()));
  gzclose(out);
}

// A folder of this process's own (test runs may overlap on one machine).
std::filesystem::path fresh_folder(const std::string& name) {
  const std::filesystem::path folder =
      std::filesystem::temp_directory_path() / fmt::format("{}-{}", name, ::getpid());
  std::filesystem::remove_all(folder);
  std::filesystem::create_directories(folder);
  return folder;
}

}  // namespace

TEST_CASE("IDX files are read gzip-compressed or not, normalised with the training set's figures") {
  const std::filesystem::path folder = fresh_folder("epochcast-idx");
  auto write = [&](const std::string& name, std::vector<std::uint32_t> dims,
                   const std::vector<std::uint8_t>& bytes, bool compressed) {
    write_idx(folder, name, std::move(dims), bytes, compressed);
  };
  write("train-images-idx3-ubyte", {3, 2, 2}, {0, 255, 0, 255, 0, 0, 0, 0, 255, 255, 255, 255},
        true);
  write("train-labels-idx1-ubyte", {3}, {1, 0, 9}, false);
  write("t10k-images-idx3-ubyte", {1, 2, 2}, {0, 0, 255, 255}, true);
  write("t10k-labels-idx1-ubyte", {1}, {4}, true);
  IdxDataset data = load_idx_dataset(folder);
  CHECK(data.train.images.sizes().vec() == std::vector<std::int64_t>{3, 1, 2, 2});
  CHECK(data.train.labels.sizes().vec() == std::vector<std::int64_t>{3});
  CHECK(data.train.labels[2].item<std::int64_t>() == 9);
  CHECK(data.test.labels[0].item<std::int64_t>() == 4);
  CHECK(std::abs(data.train.images.mean().item<double>()) < 1e-6);
  // A missing file is named.
  std::filesystem::remove(folder / "t10k-labels-idx1-ubyte.gz");
  CHECK_THROWS_WITH(load_idx_dataset(folder), Catch::Contains("t10k-labels-idx1-ubyte"));
  std::filesystem::remove_all(folder);
}

TEST_CASE("IDX headers that promise more than their file holds are refused before allocating") {
  const std::filesystem::path folder = fresh_folder("epochcast-idx-lying");
  // 100 bytes of data under a header of 60,000 images of 512 x 512 (15.7 GB): refused at once,
  // with what was promised and what is there, plain or compressed.
  const std::vector<std::uint8_t> hundred(100, 7);
  for (bool compressed : {false, true}) {
    INFO("compressed " << compressed);
    std::filesystem::remove_all(folder);
    std::filesystem::create_directories(folder);
    write_idx(folder, "train-images-idx3-ubyte", {60000, 512, 512}, hundred, compressed);
    write_idx(folder, "train-labels-idx1-ubyte", {60000}, {}, false);
    write_idx(folder, "t10k-images-idx3-ubyte", {1, 2, 2}, {0, 1, 2, 3}, false);
    write_idx(folder, "t10k-labels-idx1-ubyte", {1}, {0}, false);
    CHECK_THROWS_WITH(
        load_idx_dataset(folder),
        Catch::Contains("train-images-idx3-ubyte") &&
            Catch::Contains("promises 15728640000 bytes of data, the file holds 100"));
  }
  std::filesystem::remove_all(folder);
}

TEST_CASE("IDX splits of another geometry, and images of one value, are refused by name") {
  const std::filesystem::path folder = fresh_folder("epochcast-idx-geometry");
  write_idx(folder, "train-images-idx3-ubyte", {2, 2, 2}, {0, 9, 0, 9, 9, 0, 9, 0}, false);
  write_idx(folder, "train-labels-idx1-ubyte", {2}, {0, 1}, false);
  write_idx(folder, "t10k-images-idx3-ubyte", {1, 3, 3}, std::vector<std::uint8_t>(9, 5), false);
  write_idx(folder, "t10k-labels-idx1-ubyte", {1}, {0}, false);
  CHECK_THROWS_WITH(load_idx_dataset(folder),
                    Catch::Contains("t10k-images-idx3-ubyte") &&
                        Catch::Contains("images of 3x3 but the training images are 2x2"));
  // All-zero training images: no spread to normalise by, nothing to learn.
  write_idx(folder, "train-images-idx3-ubyte", {2, 3, 3}, std::vector<std::uint8_t>(18, 0), false);
  CHECK_THROWS_WITH(load_idx_dataset(folder), Catch::Contains("train-images-idx3-ubyte") &&
                                                  Catch::Contains("standard deviation 0"));
  std::filesystem::remove_all(folder);
}

TEST_CASE("a loss that turns NaN stops training to a target with the reason") {
  const std::filesystem::path folder = fresh_folder("epochcast-idx-diverge");
  std::vector<std::uint8_t> pixels;
  for (int i = 0; i < 8 * 4; ++i)
    pixels.push_back(static_cast<std::uint8_t>((i * 37) % 256));
  write_idx(folder, "train-images-idx3-ubyte", {8, 2, 2}, pixels, false);
  write_idx(folder, "train-labels-idx1-ubyte", {8}, {0, 1, 2, 3, 0, 1, 2, 3}, false);
  write_idx(folder, "t10k-images-idx3-ubyte", {2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8}, false);
  write_idx(folder, "t10k-labels-idx1-ubyte", {2}, {0, 1}, false);
  std::ofstream(folder / "tiny.yaml") << "kind: model\nname: tiny\ninput: {shape: [1, 2, 2]}\n"
                                         "layers: [flatten, {type: linear, out_features: 16}, "
                                         "{type: linear, out_features: 16}, "
                                         "{type: linear, out_features: 4}]\n";
  // SGD at the highest rate a scenario takes (100) through three linear layers: each layer's
  // step scales with the others' weights, so they grow geometrically until the logits overflow.
  ScenarioSpec scenario = load_scenario_from_string(
      fmt::format("kind: scenario\nname: diverging\nmodel: {}\nhardware: seed001-box\n"
                  "dataset: {{name: tiny, train_samples: 8, validation_samples: 2, classes: 4, "
                  "files: {}}}\n"
                  "training: {{strategy: single, optimizer: sgd, precision: fp32, "
                  "learning_rate: {{base: 100}}}}\n"
                  "target: {{metric: training_loss, value: 0.01}}\n"
                  "statistical_efficiency: {{noise_scale: {{value: 100, source: assumed}}, "
                  "min_steps: {{value: 10, source: assumed}}}}\n"
                  "sweep: {{gpus: [1], batch: [4], batch_is: global}}\n",
                  (folder / "tiny.yaml").string(), folder.string()),
      "diverging.yaml", source(""));
  ToTargetOptions options;
  options.seeds = 1;
  options.max_epochs = 50;
  options.evaluate_every_samples = 8;
  options.quiet = true;
  std::atomic<bool> stop{false};
  CHECK_THROWS_WITH(run_to_target(
                        scenario, options, [](const TargetRunsFile&) {}, stop),
                    Catch::Contains("diverging.yaml") &&
                        Catch::Contains("training.learning_rate") &&
                        Catch::Contains("the training diverged"));
  std::filesystem::remove_all(folder);
}

TEST_CASE("training to a target on Fashion-MNIST records steps, epochs and the noise scale") {
  if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist")) {
    WARN("dataset-fashion-mnist is not installed: skipped");
    return;
  }
  // A bounded run: a modest target, half an epoch at most.
  ScenarioSpec scenario =
      load_scenario(source("scenarios/seed-003/fashion-mnist-cpu.yaml"),
                    {{"sweep.batch", "[256]", ""}, {"target.value", "0.6", ""}});
  ToTargetOptions options;
  options.seeds = 1;
  options.max_epochs = 0.5;
  options.evaluate_every_samples = 2048;
  options.noise_scale = true;
  options.noise_batch = 128;
  options.quiet = true;
  std::atomic<bool> stop{false};
  int saves = 0;
  TargetRunsFile file = run_to_target(
      scenario, options, [&](const TargetRunsFile&) { ++saves; }, stop);
  CHECK(saves >= 2);
  REQUIRE(file.points.size() == 1);
  REQUIRE(file.points[0].runs.size() == 1);
  const TargetRun& run = file.points[0].runs[0];
  CHECK(run.reached);
  CHECK(run.metric >= 0.6);
  CHECK(run.steps * 256 % 2048 == 0);  // met at an evaluation
  CHECK(run.epochs == Approx(static_cast<double>(run.steps) * 256 / 60000.0));
  CHECK(file.train_samples == 60000);
  CHECK(file.test_samples == 10000);
  REQUIRE(file.noise_scale);
  CHECK(file.noise_scale->b_simple > 0);
  CHECK(file.points[0].learning_rate == Approx(1e-3 * std::sqrt(256 / 64.0)));
}

// End-to-end prediction speed for the issues' performance targets (figures go in notes):
//  - seed 001's single-GPU sweep: 2 models x 12 batch sizes (x 20 identical epochs);
//  - an ImageNet-sized epoch (1,281,167 samples) of mobilenet-v2 at batch 16 on one GPU;
//  - seed 001's full sweep (2 models x 4 GPU counts x 12 batch sizes x 20 epochs, dp);
//  - one ddp iteration of resnet-50 on 8 to 1,024 H100s (1 to 128 DGX H100 nodes), with the
//    analytic and the flow-level collective fidelity.
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include "core/spec/scenario_spec.h"
#include "sim/predict/predict.h"
#include "support/paths.h"

using namespace epochcast;

namespace {

std::filesystem::path source(const std::string& relative) {
  return epochcast::test::source_dir() / relative;
}

}  // namespace

static void BM_Seed001SingleGpuSweep(benchmark::State& state) {
  ScenarioSpec linear =
      load_scenario(source("scenarios/seed-001/linear.yaml"), {{"sweep.gpus", "[1]", ""}});
  ScenarioSpec conv =
      load_scenario(source("scenarios/seed-001/conv1d.yaml"), {{"sweep.gpus", "[1]", ""}});
  for (auto _ : state) {
    benchmark::DoNotOptimize(sim::predict(linear));
    benchmark::DoNotOptimize(sim::predict(conv));
  }
}
BENCHMARK(BM_Seed001SingleGpuSweep)->Unit(benchmark::kMillisecond);

static void BM_ImagenetEpochMobilenetBatch16(benchmark::State& state) {
  ScenarioSpec s = load_scenario_from_string(R"(kind: scenario
name: imagenet-mobilenet
model: mobilenet-v2
hardware: seed003-hpc-node
dataset: {name: imagenet, train_samples: 1281167, classes: 1000}
loader: {workers: 8, pin_memory: true, sample_cpu_us: 2500}
training: {strategy: single, optimizer: momentum, precision: fp32}
sweep: {gpus: [1], batch: [16], batch_is: global}
)",
                                             "bench.yaml", epochcast::test::source_dir());
  for (auto _ : state)
    benchmark::DoNotOptimize(sim::predict(s));
}
BENCHMARK(BM_ImagenetEpochMobilenetBatch16)->Unit(benchmark::kMillisecond);

static void BM_Seed001FullSweep(benchmark::State& state) {
  ScenarioSpec linear = load_scenario(source("scenarios/seed-001/linear.yaml"));
  ScenarioSpec conv = load_scenario(source("scenarios/seed-001/conv1d.yaml"));
  for (auto _ : state) {
    benchmark::DoNotOptimize(sim::predict(linear));
    benchmark::DoNotOptimize(sim::predict(conv));
  }
}
BENCHMARK(BM_Seed001FullSweep)->Unit(benchmark::kMillisecond);

// One training iteration: the data set holds exactly one global batch of 64 images per GPU.
static void ddp_resnet50_iteration(benchmark::State& state, const std::string& fidelity,
                                   bool every_rank = false) {
  const int gpus = static_cast<int>(state.range(0));
  const int nodes = (gpus + 7) / 8;
  ScenarioSpec s = load_scenario_from_string(fmt::format(R"(kind: scenario
name: ddp-resnet50-cluster
model: resnet-50
hardware: {{base: dgx-h100-cluster, nodes: {}}}
dataset: {{name: imagenet, train_samples: {}, classes: 1000}}
loader: {{workers: 16, pin_memory: true, sample_cpu_us: 10}}
training: {{strategy: ddp, optimizer: momentum, precision: amp_bf16, collectives: {}}}
sweep: {{gpus: [{}], batch: [64], batch_is: per_gpu}}
)",
                                                         nodes, 64 * gpus, fidelity, gpus),
                                             "bench.yaml", epochcast::test::source_dir());
  sim::PredictOptions options;
  options.symmetric_clusters = !every_rank;
  std::int64_t tasks = 0;
  for (auto _ : state)
    tasks = sim::predict_point(s, expand_sweep(s).front(), options).stats.simulated_tasks;
  state.counters["tasks"] = static_cast<double>(tasks);
}

static void BM_DdpResnet50IterationAnalytic(benchmark::State& state) {
  ddp_resnet50_iteration(state, "analytic");
}
BENCHMARK(BM_DdpResnet50IterationAnalytic)
    ->RangeMultiplier(2)
    ->Range(8, 1024)
    ->Unit(benchmark::kMillisecond);

static void BM_DdpResnet50IterationFlows(benchmark::State& state) {
  ddp_resnet50_iteration(state, "flows");
}
BENCHMARK(BM_DdpResnet50IterationFlows)
    ->RangeMultiplier(2)
    ->Range(8, 1024)
    ->Unit(benchmark::kMillisecond);

// The same without the symmetry shortcut: every node's ranks and flows simulated, for scale.
static void BM_DdpResnet50IterationFlowsEveryRank(benchmark::State& state) {
  ddp_resnet50_iteration(state, "flows", true);
}
BENCHMARK(BM_DdpResnet50IterationFlowsEveryRank)
    ->RangeMultiplier(4)
    ->Range(16, 1024)
    ->Unit(benchmark::kMillisecond);

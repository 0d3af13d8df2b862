// End-to-end prediction speed for the issues' performance targets (figures go in notes):
//  - seed 001's single-GPU sweep: 2 models x 12 batch sizes (x 20 identical epochs);
//  - an ImageNet-sized epoch (1,281,167 samples) of mobilenet-v2 at batch 16 on one GPU.
#include <benchmark/benchmark.h>

#include "core/spec/scenario_spec.h"
#include "sim/predict/predict.h"

using namespace epochcast;

namespace {

std::filesystem::path source(const std::string& relative) {
  return std::filesystem::path(EPOCHCAST_BENCH_SOURCE_DIR) / relative;
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
                                             "bench.yaml", EPOCHCAST_BENCH_SOURCE_DIR);
  for (auto _ : state)
    benchmark::DoNotOptimize(sim::predict(s));
}
BENCHMARK(BM_ImagenetEpochMobilenetBatch16)->Unit(benchmark::kMillisecond);

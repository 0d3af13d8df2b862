// Scale figures of issue 19 (numbers go in notes, not in tests):
//  - a 100 MB flat-ring all-reduce over N ranks (DGX H100 nodes of 8) as flows on the fabric,
//    every transfer simulated (the figure open network simulators publish for their backends);
//  - seed 000's sweep at the default (flows) and the analytic collective fidelity;
//  - a whole ResNet-50 ImageNet epoch of the bundled H100-cluster what-if (64 images per GPU;
//    8 at 131,072 GPUs, where 64 would exceed the data set) with every rank simulated, and with
//    the symmetric-cluster mirror up to 131,072 GPUs (forced rings included).
#include <numeric>

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include "core/spec/hardware_spec.h"
#include "core/spec/profile_spec.h"
#include "core/spec/scenario_spec.h"
#include "sim/collectives/algorithms.h"
#include "sim/collectives/flow_run.h"
#include "sim/predict/predict.h"
#include "support/paths.h"

using namespace epochcast;

namespace {

std::filesystem::path source(const std::string& relative) {
  return epochcast::test::source_dir() / relative;
}

ScenarioSpec h100_cluster_epoch(int gpus, bool every_rank, const std::string& algorithm) {
  const int nodes = (gpus + 7) / 8;
  // 64 images per GPU, fewer where the global batch would exceed ImageNet (8 at 131,072 GPUs).
  int per_gpu = 64;
  while (static_cast<std::int64_t>(per_gpu) * gpus > 1'281'167)
    per_gpu /= 2;
  return load_scenario(source("scenarios/what-if/ddp-resnet50-h100-cluster.yaml"),
                       {{"hardware.nodes", std::to_string(nodes), ""},
                        {"sweep.gpus", fmt::format("[{}]", gpus), ""},
                        {"sweep.batch", fmt::format("[{}]", per_gpu), ""},
                        {"training.every_rank", every_rank ? "true" : "false", ""},
                        {"training.collective_algorithm", algorithm, ""}});
}

}  // namespace

static void BM_FlatRingAllReduce100MB(benchmark::State& state) {
  const int ranks = static_cast<int>(state.range(0));
  MachineSpec machine = load_machine(source("topologies/dgx-h100-cluster.yaml"),
                                     load_gpu_catalogue(source("topologies/gpus.yaml")));
  HardwareProfile profile = load_profile(source("topologies/profiles/default.yaml"));
  sim::Topology topology = sim::Topology::build(machine, (ranks + 7) / 8, true);
  sim::Ring ring;
  ring.order.resize(static_cast<std::size_t>(ranks));
  std::iota(ring.order.begin(), ring.order.end(), 0);
  sim::TransferPlan plan = sim::ring_all_reduce({ring}, Bytes(100'000'000));
  double seconds = 0;
  for (auto _ : state)
    seconds = sim::simulate_plan(plan, topology, profile).value();
  state.counters["simulated_s"] = seconds;
  state.counters["transfers"] = static_cast<double>(plan.transfers.size());
}
BENCHMARK(BM_FlatRingAllReduce100MB)
    ->RangeMultiplier(4)
    ->Range(64, 1024)
    ->Unit(benchmark::kMillisecond);

static void seed000_sweep(benchmark::State& state, const std::string& fidelity) {
  ScenarioSpec s = load_scenario(source("scenarios/seed-000/mobilenet-v2.yaml"),
                                 {{"training.collectives", fidelity, ""}});
  for (auto _ : state)
    benchmark::DoNotOptimize(sim::predict(s));
}
static void BM_Seed000SweepFlows(benchmark::State& state) {
  seed000_sweep(state, "flows");
}
BENCHMARK(BM_Seed000SweepFlows)->Unit(benchmark::kMillisecond);
static void BM_Seed000SweepAnalytic(benchmark::State& state) {
  seed000_sweep(state, "analytic");
}
BENCHMARK(BM_Seed000SweepAnalytic)->Unit(benchmark::kMillisecond);

static void h100_cluster_epoch_bench(benchmark::State& state, bool every_rank,
                                     const std::string& algorithm) {
  ScenarioSpec s = h100_cluster_epoch(static_cast<int>(state.range(0)), every_rank, algorithm);
  double epoch = 0;
  for (auto _ : state)
    epoch = sim::predict_point(s, expand_sweep(s).front()).epoch_seconds;
  state.counters["epoch_s"] = epoch;
}
static void BM_ImagenetEpochEveryRank(benchmark::State& state) {
  h100_cluster_epoch_bench(state, true, "auto");
}
BENCHMARK(BM_ImagenetEpochEveryRank)
    ->RangeMultiplier(4)
    ->Range(64, 16384)
    ->Unit(benchmark::kSecond)
    ->Iterations(1);
static void BM_ImagenetEpochMirror(benchmark::State& state) {
  h100_cluster_epoch_bench(state, false, "auto");
}
BENCHMARK(BM_ImagenetEpochMirror)->Arg(1024)->Arg(131072)->Unit(benchmark::kMillisecond);
static void BM_ImagenetEpochMirrorRings(benchmark::State& state) {
  h100_cluster_epoch_bench(state, false, "ring");
}
BENCHMARK(BM_ImagenetEpochMirrorRings)->Arg(1024)->Arg(131072)->Unit(benchmark::kMillisecond);

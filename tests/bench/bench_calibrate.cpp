// Calibration speed for issue 15's target (6-12 end-to-end points of a two-model scenario in
// under 10 s on the 2-core development machine): seed 001's linear and conv1d models under dp on
// the 4-GPU box, epochs simulated under a known truth (a slow host bridge, low conv efficiency,
// a dearer loader and loop), calibrated from the prior with the whole end-to-end fit
// (screening, multi-start, covariance, leave-one-out, next-point suggestion).
#include <benchmark/benchmark.h>

#include "core/spec/scenario_spec.h"
#include "sim/network/topology.h"
#include "sim/predict/predict.h"
#include "support/paths.h"
#include "validate/calibration.h"
#include "validate/end_to_end_fit.h"

using namespace epochcast;

namespace {

std::filesystem::path source(const std::string& relative) {
  return epochcast::test::source_dir() / relative;
}

std::vector<validate::MeasuredScenario> seed_001_points(std::size_t count) {
  // Points spread over both models, GPU counts and batch sizes.
  const std::vector<std::tuple<std::string, int, std::int64_t>> all = {
      {"linear", 1, 20}, {"linear", 4, 20},  {"linear", 2, 200}, {"conv1d", 1, 50},
      {"conv1d", 4, 10}, {"conv1d", 4, 100}, {"linear", 3, 50},  {"linear", 1, 600},
      {"conv1d", 2, 30}, {"conv1d", 3, 300}, {"linear", 4, 400}, {"conv1d", 1, 150}};
  std::vector<validate::MeasuredScenario> out;
  for (const std::string model : {"linear", "conv1d"}) {
    validate::MeasuredScenario m;
    m.file = model + ".csv";
    m.scenario = load_scenario(source("scenarios/seed-001/" + model + ".yaml"));
    ScenarioSpec truth = m.scenario;
    HardwareProfile t = truth.profile;
    t.links.efficiency[static_cast<std::size_t>(sim::LinkKind::shm)] = 0.10;
    t.gpu.compute[static_cast<std::size_t>(OpClass::conv)] = 0.35;
    t.sample_cpu = Seconds(150e-6);
    t.host.step_overhead = Seconds(400e-6);
    apply_profile(truth, t);
    for (std::size_t i = 0; i < count; ++i) {
      const auto& [name, gpus, batch] = all[i];
      if (name != model) continue;
      MeasuredPoint p;
      p.gpus = gpus;
      p.global_batch = batch;
      p.per_gpu_batch = (batch + gpus - 1) / gpus;
      p.epoch_s_estimated = sim::predict_point(truth, {gpus, batch, p.per_gpu_batch}).epoch_seconds;
      m.measurements.points.push_back(p);
    }
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace

static void BM_CalibrateSeed001EndToEnd(benchmark::State& state) {
  const std::vector<validate::MeasuredScenario> inputs =
      seed_001_points(static_cast<std::size_t>(state.range(0)));
  int simulations = 0;
  for (auto _ : state) {
    validate::Calibration c = validate::calibrate(inputs, {}, {"bench.csv"});
    simulations = c.end_to_end->simulations;
    benchmark::DoNotOptimize(c);
  }
  state.counters["simulations"] = simulations;
}
BENCHMARK(BM_CalibrateSeed001EndToEnd)->Arg(6)->Arg(12)->Unit(benchmark::kSecond)->Iterations(1);

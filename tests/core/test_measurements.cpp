// Measurement files: percentiles, JSON round trip, strict reading of bad files.
#include <algorithm>

#include <catch2/catch.hpp>

#include "core/input_error.h"
#include "core/measure/measurements.h"

using namespace epochcast;

namespace {

MeasurementFile sample_file() {
  MeasurementFile f;
  f.scenario_name = "s";
  f.scenario_file = "s.yaml";
  f.model = "mnist-cnn";
  f.strategy = "ddp";
  f.precision = "fp32";
  f.optimizer = "adam";
  f.arguments = {"--batch 16"};
  f.settings = {3, 10, 600, false, true, 1, 3};
  f.environment.device_kind = "cpu";
  f.environment.device_name = "Some CPU";
  f.environment.ranks = 2;
  f.environment.launcher = "torchrun";
  f.environment.host_allocator = "glibc, freed memory retained";
  f.environment.cublas_allow_tf32 = false;
  f.environment.cudnn_allow_tf32 = true;
  f.environment.cudnn_benchmark = false;
  MeasuredPoint p;
  p.gpus = 2;
  p.global_batch = 32;
  p.per_gpu_batch = 16;
  p.device = "cpu";
  p.ranks = 2;
  p.iteration_samples_s = {0.01, 0.0125, 0.011};
  p.iteration_s = spread_of(p.iteration_samples_s);
  p.iterations_per_epoch = 8;
  p.partial_iteration_s = 0.1 / 3;  // not exactly representable: the round trip must keep it
  p.epoch_s_estimated = 0.123456789012345678;
  p.parameters_identical = true;
  p.layers = {{0, "conv1", "conv2d", 1e-4, 2e-4}};
  p.rounds = 3;
  p.peak_reserved_bytes = 3 << 20;
  p.cuda_context_bytes = 500 << 20;
  p.profile_note = "the layer profile ran out of memory";
  f.points.push_back(p);
  MeasuredPoint oom;
  oom.gpus = 1;
  oom.global_batch = 4096;
  oom.per_gpu_batch = 4096;
  oom.status = PointStatus::oom;
  oom.reason = "out of memory";
  oom.device = "cpu";
  f.points.push_back(oom);
  f.benchmarks.collectives.push_back({"all_reduce", 2, 1024, 1e-5, 0.1024, 0.1024, true});
  f.benchmarks.dispatch = DispatchMeasurement{5e-6, 0, 0, 1.7e-5, 3e-8, 4e-5, 7, 1.1e-6, 9e-5};
  // The host is device -1 (the runtime's copy benchmark writes it so).
  f.benchmarks.copies.push_back({"host_to_device", true, -1, 0, 1 << 20, 2.9e-5, 36.7});
  return f;
}

}  // namespace

TEST_CASE("spreads use linear-interpolated percentiles, as numpy does") {
  // numpy.percentile([1, 2, 3, 4], [10, 50, 90]) = [1.3, 2.5, 3.7]
  Spread s = spread_of({4, 1, 3, 2});
  CHECK(s.p10 == Approx(1.3));
  CHECK(s.median == Approx(2.5));
  CHECK(s.p90 == Approx(3.7));
  CHECK(s.mean == Approx(2.5));
  CHECK(s.min == 1);
  CHECK(s.max == 4);
  CHECK(s.count == 4);
}

TEST_CASE("a measurement file reads back exactly as it was written") {
  MeasurementFile f = sample_file();
  std::string text = to_json(f);
  MeasurementFile back = load_measurements_from_string(text, "m.json");
  CHECK(to_json(back) == text);
  REQUIRE(back.points.size() == 2);
  CHECK(*back.points[0].partial_iteration_s == *f.points[0].partial_iteration_s);
  CHECK(back.points[0].epoch_s_estimated == f.points[0].epoch_s_estimated);
  CHECK(back.points[1].status == PointStatus::oom);
  CHECK(back.benchmarks.collectives.size() == 1);
  CHECK(back.settings.rounds == 3);
  CHECK(back.points[0].rounds == 3);
  CHECK(back.environment.host_allocator == f.environment.host_allocator);
  CHECK(back.environment.launcher == "torchrun");
  CHECK(back.environment.cudnn_allow_tf32 == std::optional<bool>(true));
  CHECK(back.environment.cublas_allow_tf32 == std::optional<bool>(false));
  CHECK(back.points[0].cuda_context_bytes == std::optional<std::int64_t>(500 << 20));
  CHECK(back.points[0].profile_note == f.points[0].profile_note);
  CHECK(back.benchmarks.dispatch->python_op_dispatch_s == std::optional<double>(1.7e-5));
  CHECK(back.benchmarks.dispatch->module_call_s == 3e-8);
  CHECK(back.benchmarks.dispatch->optimizer_step_s == 4e-5);
  CHECK(back.benchmarks.dispatch->optimizer_step_ops == 7);
  CHECK(back.benchmarks.dispatch->python_module_call_s == std::optional<double>(1.1e-6));
  CHECK(back.benchmarks.dispatch->python_optimizer_step_s == std::optional<double>(9e-5));
}

TEST_CASE("the environment's launcher is optional for older files and one of the known names") {
  MeasurementFile f = sample_file();
  f.environment.launcher.clear();  // as written before the launcher was recorded
  const std::string old_file = to_json(f);
  CHECK(old_file.find("\"launcher\"") == std::string::npos);
  CHECK(load_measurements_from_string(old_file, "old.json").environment.launcher.empty());
  f.environment.launcher = "slurm";
  CHECK(load_measurements_from_string(to_json(f), "m.json").environment.launcher == "slurm");
  f.environment.launcher = "pbs";
  CHECK_THROWS_WITH(load_measurements_from_string(to_json(f), "m.json"),
                    Catch::Contains("launcher") && Catch::Contains("torchrun"));
}

TEST_CASE("a point measured in rounds pools its samples and re-estimates its epoch") {
  MeasuredPoint first = sample_file().points[0];
  first.rounds = 1;
  first.iteration_samples_s = {0.010, 0.011};
  first.iteration_s = spread_of(first.iteration_samples_s);
  first.samples_per_s = 32 / first.iteration_s.median;
  first.loader_sample_cpu_s = 1e-4;
  first.peak_memory_bytes = 100;
  first.layers = {{0, "conv1", "conv2d", 1e-4, 2e-4}};
  MeasuredPoint second = first;
  second.iteration_samples_s = {0.020, 0.021};
  second.iteration_s = spread_of(second.iteration_samples_s);
  second.loader_sample_cpu_s = 3e-4;
  second.peak_memory_bytes = 300;
  second.partial_iteration_s = 0.5;
  second.layers = {{0, "conv1", "conv2d", 3e-4, 4e-4}};
  MeasuredPoint third = first;
  third.iteration_samples_s = {0.012, 0.013};
  third.iteration_s = spread_of(third.iteration_samples_s);
  third.layers = {{0, "conv1", "conv2d", 2e-4, 9e-4}};

  MeasuredPoint all = combine_rounds({first, second, third});
  CHECK(all.rounds == 3);
  CHECK(all.iteration_s.count == 6);
  CHECK(all.iteration_s.median == Approx(0.0125));  // of 10, 11, 12, 13, 20, 21 ms
  CHECK(all.samples_per_s == Approx(32 / 0.0125));
  // The partial batch's time is averaged over rounds; the epoch re-estimated from the pooled
  // median: 8 full batches and the partial one.
  const double partial = (2 * (0.1 / 3) + 0.5) / 3;
  CHECK(*all.partial_iteration_s == Approx(partial));
  CHECK(all.epoch_s_estimated == Approx(8 * 0.0125 + partial));
  CHECK(all.loader_sample_cpu_s == Approx((1e-4 + 3e-4 + 1e-4) / 3));
  CHECK(all.peak_memory_bytes == 300);
  REQUIRE(all.layers.size() == 1);
  CHECK(all.layers[0].forward_s == Approx(2e-4));  // the median over rounds, layer by layer
  CHECK(all.layers[0].backward_s == Approx(4e-4));

  // A round that ran out of memory decides the point.
  MeasuredPoint oom = sample_file().points[1];
  oom.global_batch = first.global_batch;
  CHECK(combine_rounds({first, oom}).status == PointStatus::oom);
}

TEST_CASE("bad measurement files are refused with file:line:col and the key") {
  std::string good = to_json(sample_file());
  auto fails_with = [](const std::string& text, const std::string& needle) {
    try {
      load_measurements_from_string(text, "m.json");
    } catch (const InputError& error) {
      INFO(error.what());
      CHECK_THAT(std::string(error.what()), Catch::Contains(needle));
      CHECK_THAT(std::string(error.what()), Catch::Contains("m.json:"));
      return;
    }
    FAIL("no error for: " << needle);
  };
  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string text = good;
    text.replace(text.find(from), from.size(), to);
    return text;
  };
  fails_with(replaced("\"epochcast-measurements\"", "\"something-else\""),
             "not an epochcast measurement file");
  fails_with(replaced("\"version\": 1", "\"version\": 9"),
             "this epochcast reads measurement files of version 1, not 9");
  fails_with(replaced("\"epoch_s_estimated\"", "\"epoch_s_estimate\""),
             "did you mean 'epoch_s_estimated'");
  fails_with(replaced("\"status\": \"ok\"", "\"status\": \"fine\""), "status");
  fails_with(replaced("\"iterations_per_epoch\": 8", "\"iterations_per_epoch\": -8"),
             "iterations_per_epoch");
  fails_with("[1, 2]", "expected a measurement file");
  fails_with(replaced("\"time_s\": 1e-05", "\"time_s\": -1.0"), "time_s");
  // Valid JSON, but no double holds it.
  fails_with(replaced("\"version\": 1", "\"version\": 1e999"), "version: expected an integer");
}

TEST_CASE("measured times that are zero or absurd, and points measured twice, are refused") {
  MeasurementFile file = sample_file();
  auto error_of = [](const MeasurementFile& f) -> std::string {
    try {
      load_measurements_from_string(to_json(f), "m.json");
    } catch (const InputError& error) {
      return error.what();
    }
    return "no error";
  };
  MeasurementFile zero = file;
  zero.points[0].epoch_s_estimated = 0;
  CHECK_THAT(error_of(zero), Catch::Contains("points[0].epoch_s_estimated: expected an epoch "
                                             "time above 0 and at most 1e+09 s"));
  MeasurementFile huge = file;
  huge.points[0].epoch_s_estimated = 1e308;
  CHECK_THAT(error_of(huge), Catch::Contains("got 1e+308"));
  MeasurementFile slow_layer = file;
  slow_layer.points[0].layers[0].forward_s = 1e12;
  CHECK_THAT(error_of(slow_layer), Catch::Contains("points[0].layers[0].forward_s: expected a "
                                                   "number from 0 to 1e+09"));
  MeasurementFile twice = file;
  twice.points.push_back(file.points[0]);
  CHECK_THAT(error_of(twice), Catch::Contains("points[2]: the point 2 GPUs, global batch 32 is "
                                              "already measured in points[0]"));
  // An OOM record keeps no times; a time of 0 there is no measurement at all.
  MeasurementFile oom_only = file;
  oom_only.points.erase(oom_only.points.begin());
  CHECK(error_of(oom_only) == "no error");
}

TEST_CASE("a truncated measurement file is reported as bad JSON where it ends") {
  std::string text = to_json(sample_file());
  std::string cut = text.substr(0, text.find("\"points\"") + 12);
  int lines = static_cast<int>(std::count(cut.begin(), cut.end(), '\n')) + 1;
  try {
    load_measurements_from_string(cut, "m.json");
    FAIL("a truncated file loaded");
  } catch (const InputError& error) {
    INFO(error.what());
    CHECK(error.mark().line == lines);
    CHECK_THAT(error.problem(), Catch::StartsWith("not valid JSON: syntax error"));
    CHECK_THAT(error.problem(), Catch::Contains("unexpected end of input"));
  }
}

TEST_CASE("rounds whose layer profile did not fit leave the layers of the rounds that did") {
  MeasuredPoint first;
  first.global_batch = first.per_gpu_batch = 64;
  first.iteration_samples_s = {0.01, 0.011};
  first.iteration_s = spread_of(first.iteration_samples_s);
  first.samples_per_s = 64 / first.iteration_s.median;
  first.profile_note = "the layer profile ran out of memory";
  first.cuda_context_bytes = 500;
  MeasuredPoint second = first;
  second.profile_note.clear();
  second.layers = {{0, "conv1", "conv2d", 1e-4, 2e-4}};
  second.cuda_context_bytes = 700;
  MeasuredPoint combined = combine_rounds({first, second});
  REQUIRE(combined.layers.size() == 1);
  CHECK(combined.layers[0].forward_s == 1e-4);
  CHECK(combined.profile_note.empty());
  CHECK(combined.cuda_context_bytes == std::optional<std::int64_t>(700));
}

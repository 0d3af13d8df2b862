// Measurement files: percentiles, JSON round trip, strict reading of bad files.
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
  f.settings = {3, 10, 600, false, true, 1};
  f.environment.device_kind = "cpu";
  f.environment.device_name = "Some CPU";
  f.environment.ranks = 2;
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
  f.benchmarks.dispatch = DispatchMeasurement{5e-6, 0, 0};
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
  fails_with(replaced("\"version\": 1", "\"version\": 9"), "version");
  fails_with(replaced("\"epoch_s_estimated\"", "\"epoch_s_estimate\""),
             "did you mean 'epoch_s_estimated'");
  fails_with(replaced("\"status\": \"ok\"", "\"status\": \"fine\""), "status");
  fails_with(replaced("\"iterations_per_epoch\": 8", "\"iterations_per_epoch\": -8"),
             "iterations_per_epoch");
  fails_with("[1, 2]", "expected a measurement file");
  fails_with(replaced("\"time_s\": 1e-05", "\"time_s\": -1.0"), "time_s");
}

// Results tables as calibration and validation input: the same numbers fit the same way whether
// they come from the runtime's files or a CSV, and bad rows are refused where they are.
#include <filesystem>
#include <fstream>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "core/spec/profile_figures.h"
#include "core/spec/scenario_spec.h"
#include "sim/predict/predict.h"
#include "support/paths.h"
#include "validate/calibration.h"
#include "validate/measurement_input.h"
#include "validate/validation.h"

using namespace epochcast;
using namespace epochcast::validate;

namespace {

const std::string kScenario = epochcast::test::source_file("scenarios/seed-001/linear.yaml");
const std::vector<yaml::Override> kSingleGpu = {{"training.strategy", "single", ""},
                                                {"sweep.gpus", "[1]", ""}};
const std::int64_t kBatches[] = {10, 50, 200, 600};

std::string write_table(const std::string& name, const std::string& text) {
  std::filesystem::path path = std::filesystem::temp_directory_path() / ("epochcast-" + name);
  std::ofstream(path) << text;
  return path.string();
}

// The scenario under a known truth: a 700 us step overhead the prior does not have.
ScenarioSpec truth() {
  ScenarioSpec s = load_scenario(kScenario, kSingleGpu);
  s.profile.host.step_overhead = Seconds(700e-6);
  return s;
}

std::string error_of(const std::string& file) {
  try {
    load_measurement_input(file);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// Every figure calibration can move, equal in both profiles (to `tolerance`, relative).
void check_same_figures(const HardwareProfile& a, const HardwareProfile& b, double tolerance = 0) {
  for (const ProfileFigure& f : profile_figures()) {
    INFO(f.key);
    std::optional<double> x = profile_figure_value(a, f.key), y = profile_figure_value(b, f.key);
    REQUIRE(x.has_value() == y.has_value());
    if (x) CHECK(*x == Approx(*y).epsilon(tolerance));
  }
}

// The calibrated profile predicts the true epochs of every kBatches point within 1%: one model's
// epochs fix the time per step, not how the loop's overhead and the optimizer share it.
bool predicts_truth(const HardwareProfile& profile) {
  ScenarioSpec fitted = load_scenario(kScenario, kSingleGpu);
  apply_profile(fitted, profile);
  for (std::int64_t batch : kBatches) {
    const double want = sim::predict_point(truth(), {1, batch, batch}).epoch_seconds;
    const double got = sim::predict_point(fitted, {1, batch, batch}).epoch_seconds;
    if (std::abs(got / want - 1) > 0.01) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("a results table and a measurement file with the same epochs give the same fit") {
  ScenarioSpec true_scenario = truth();
  MeasuredScenario from_runtime;
  from_runtime.file = "runtime.json";
  from_runtime.scenario = load_scenario(kScenario, kSingleGpu);
  from_runtime.measurements.environment.device_name = "a device";
  std::string csv = "scenario,gpus,global_batch,epoch_s,set\n";
  for (std::int64_t batch : kBatches) {
    double epoch = sim::predict_point(true_scenario, {1, batch, batch}).epoch_seconds;
    MeasuredPoint p;
    p.global_batch = p.per_gpu_batch = batch;
    p.epoch_s_estimated = epoch;
    from_runtime.measurements.points.push_back(p);
    csv += fmt::format("{},1,{},{:.17g},training.strategy=single\n", kScenario, batch, epoch);
  }
  std::vector<MeasuredScenario> from_table =
      load_measurement_input(write_table("same-fit.csv", csv));
  REQUIRE(from_table.size() == 1);
  REQUIRE(from_table[0].measurements.points.size() == 4);
  Calibration a = calibrate({from_runtime}, {}, {"runtime.json"});
  Calibration b = calibrate(from_table, {}, {"table.csv"});
  check_same_figures(a.profile, b.profile);
  CHECK(predicts_truth(b.profile));
  CHECK_THAT(b.profile.sources["host.step_overhead_us"],
             Catch::Contains("figures given for NVIDIA GeForce GTX 1080 Ti"));
}

TEST_CASE("iteration times and throughputs are compared as training iterations") {
  ScenarioSpec true_scenario = truth();
  std::string iterations = "gpus,per_gpu_batch,iteration_s\n";
  std::string throughputs = "gpus,global_batch,samples_per_s\n";
  for (std::int64_t batch : kBatches) {
    ScenarioSpec training_only = true_scenario;
    training_only.dataset.validation_samples = 0;
    double iteration = sim::predict_point(training_only, {1, batch, batch}).iteration_seconds;
    iterations += fmt::format("1,{},{:.17g}\n", batch, iteration);
    throughputs += fmt::format("1,{},{:.17g}\n", batch, static_cast<double>(batch) / iteration);
  }
  std::vector<MeasuredScenario> by_iteration =
      load_measurement_input(write_table("iterations.csv", iterations), kScenario, kSingleGpu);
  std::vector<MeasuredScenario> by_throughput =
      load_measurement_input(write_table("throughputs.csv", throughputs), kScenario, kSingleGpu);
  REQUIRE(by_iteration.size() == 1);
  const MeasuredPoint& first = by_iteration[0].measurements.points[0];
  CHECK(measured_figure(first).figure == Figure::iteration);
  CHECK_FALSE(first.epoch_s_measured);
  Calibration a = calibrate(by_iteration, {}, {"iterations.csv"});
  Calibration b = calibrate(by_throughput, {}, {"throughputs.csv"});
  CHECK(predicts_truth(a.profile));
  check_same_figures(a.profile, b.profile, 1e-6);
  // The fitted profile predicts the iterations it was given.
  ScenarioSpec fitted = by_iteration[0].scenario;
  apply_profile(fitted, a.profile);
  ValidationReport report = validate::validate(fitted, by_iteration[0].measurements);
  CHECK(report.all.mape_pct < 1.0);
  CHECK(report.points[0].figure == Figure::iteration);
}

TEST_CASE("rows of one table with other overrides make scenarios of their own") {
  std::string csv = fmt::format(
      "scenario,gpus,global_batch,epoch_s,precision,set\n"
      "{0},1,50,10,,training.strategy=single\n"
      "{0},1,200,5,,training.strategy=single\n"
      "{0},1,50,8,amp_fp16,training.strategy=single\n",
      kScenario);
  std::vector<MeasuredScenario> groups = load_measurement_input(write_table("groups.csv", csv));
  REQUIRE(groups.size() == 2);
  CHECK(groups[0].measurements.points.size() == 2);
  CHECK(groups[1].measurements.points.size() == 1);
  CHECK(groups[1].scenario.training.precision == TrainingPrecision::amp_fp16);
}

TEST_CASE("a results table's bad rows are refused at the row") {
  const std::string header = "scenario,gpus,global_batch,epoch_s,set\n";
  std::string twice =
      write_table("twice.csv", header + fmt::format("{0},1,50,10,training.strategy=single\n"
                                                    "{0},1,50,11,training.strategy=single\n",
                                                    kScenario));
  CHECK_THAT(error_of(twice), Catch::Contains("twice.csv:3:1: error: gpus: the point 1 GPU, "
                                              "global batch 50 is already given on line 2"));
  std::string too_big = write_table(
      "too-big.csv", header + fmt::format("{},1,5000,10,training.strategy=single\n", kScenario));
  CHECK_THAT(error_of(too_big), Catch::Contains("too-big.csv:2:1: error: gpus: the point 1 GPU, "
                                                "global batch 5000 cannot run"));
  std::string bad_set = write_table(
      "bad-set.csv", header + fmt::format("{},1,50,10,training.precision=fp33\n", kScenario));
  CHECK_THAT(error_of(bad_set), Catch::Contains("bad-set.csv:2:") &&
                                    Catch::Contains("training.precision") &&
                                    Catch::Contains("did you mean 'fp32'"));
  std::string no_equals =
      write_table("no-equals.csv", header + fmt::format("{},1,50,10,fp16\n", kScenario));
  CHECK_THAT(error_of(no_equals), Catch::Contains("no-equals.csv:2:") &&
                                      Catch::Contains("(expected key=value;key=value)"));
  std::string missing = write_table("missing.csv", header + "no-such-scenario,1,50,10,\n");
  CHECK_THAT(error_of(missing), Catch::Contains("missing.csv:2:1: error: scenario"));
  std::string nameless = write_table("nameless.csv", "gpus,global_batch,epoch_s\n1,50,10\n");
  CHECK_THAT(error_of(nameless), Catch::Contains("the table names no scenario"));
}

TEST_CASE("a measurement file finds its scenario beside it and re-applies its --set") {
  // The committed CPU measurements record tests/validate/scenarios/cpu-mnist-cnn.yaml, relative
  // to the source tree they ran in; a copy in a folder of its own, with the scenario beside it
  // under that relative path, finds it from anywhere.
  const std::filesystem::path source = epochcast::test::source_dir();
  const std::filesystem::path folder =
      std::filesystem::temp_directory_path() / "epochcast-measured-elsewhere";
  std::filesystem::remove_all(folder);
  std::filesystem::create_directories(folder / "tests/validate/scenarios");
  {
    // Renamed, to tell the copy from the source tree's own.
    std::ifstream in(source / "tests/validate/scenarios/cpu-mnist-cnn.yaml");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string name = "name: cpu-mnist-cnn\n";
    REQUIRE(text.find(name) != std::string::npos);
    text.replace(text.find(name), name.size(), "name: copied-beside\n");
    std::ofstream(folder / "tests/validate/scenarios/cpu-mnist-cnn.yaml") << text;
  }
  std::filesystem::copy_file(source / "validate/data/host-cpu/cpu-mnist-cnn.json",
                             folder / "measured.json");
  const std::filesystem::path here = std::filesystem::current_path();
  std::filesystem::current_path(std::filesystem::temp_directory_path());
  MeasuredScenario m = load_measured_scenario((folder / "measured.json").string(), "",
                                              {{"training.epochs", "3", ""}});
  std::filesystem::current_path(here);
  CHECK(m.scenario.name == "copied-beside");
  CHECK(m.scenario.machine.gpu.id == "host-cpu-1core");  // its recorded --set hardware=host-cpu
  CHECK(m.scenario.training.epochs == 3);  // the command's --set after the recorded ones
}

TEST_CASE("measurements from another device than the scenario's are pointed out") {
  ScenarioSpec h100 =
      load_scenario(kScenario, {{"hardware", "dgx-h100", ""}, {"sweep.gpus", "[1]", ""}});
  MeasuredEnvironment e;
  e.device_kind = "cuda";
  e.device_name = "NVIDIA H100 80GB HBM3";
  CHECK(measured_device_note(h100, e).empty());
  e.device_name = "NVIDIA A100-SXM4-40GB";
  CHECK_THAT(measured_device_note(h100, e),
             Catch::StartsWith("measured on NVIDIA A100-SXM4-40GB (another device), but the "
                               "scenario's machine has NVIDIA H100 SXM5 80GB"));
  e.device_kind = "cpu";
  e.device_name = "AMD EPYC";
  CHECK_THAT(measured_device_note(h100, e), Catch::Contains("(the CPU)"));
  ScenarioSpec gtx = load_scenario(kScenario, kSingleGpu);
  e.device_kind = "cuda";
  e.device_name = "NVIDIA GeForce GTX 1080 Ti";
  CHECK(measured_device_note(gtx, e).empty());
  e.device_name = "NVIDIA GeForce RTX 2080 Ti";
  CHECK_FALSE(measured_device_note(gtx, e).empty());
  e.device_name = "";  // a results table: nothing recorded, nothing to say
  CHECK(measured_device_note(gtx, e).empty());
  // The CPU device is one core: measured on one thread it is the same device, on two another.
  const ScenarioSpec cpu =
      load_scenario(epochcast::test::source_file("tests/validate/scenarios/cpu-mnist-cnn.yaml"));
  e.device_kind = "cpu";
  e.device_name = "AMD EPYC";
  e.cpu_threads = 1;
  CHECK(measured_device_note(cpu, e).empty());
  e.cpu_threads = 2;
  CHECK(measured_device_note(cpu, e) ==
        "measured on 2 threads of AMD EPYC, but the scenario's device, Host CPU (one x86-64 core, "
        "AVX-512), has 1 core: the comparison is across devices");
  e.cpu_threads = 0;  // files that predate the record
  CHECK(measured_device_note(cpu, e).empty());
}

// The loop's committed measurements (validate/data/): calibrating and validating them is
// deterministic, so the figures their README reports hold on any machine, whatever its speed
// today, and the committed reports must be what this build computes.
#include <filesystem>
#include <fstream>
#include <sstream>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "support/paths.h"
#include "support/run_command.h"

using namespace epochcast::test;

namespace {

std::string out_path(const std::string& name) {
  return epochcast::test::output_file(name);
}
std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}
nlohmann::json read_json(const std::filesystem::path& path) {
  return nlohmann::json::parse(read_text(path));
}

}  // namespace

TEST_CASE(
    "the committed CPU measurements: calibrated on half the batch sizes, the rest within "
    "15%, as their reports say") {
  const std::filesystem::path data = source_dir() / "validate/data/host-cpu";
  for (std::string model : {"spoken-digits-linear", "spoken-digits-conv1d", "mnist-cnn"}) {
    const std::string name = "cpu-" + model;
    const std::string report = out_path("reference-" + name + ".json");
    CommandResult validate = run_command(
        epochcast_binary() + " validate " +
        (source_dir() / "tests/validate/scenarios" / (name + ".yaml")).string() + " " +
        (data / (name + ".json")).string() + " --holdout every-other-batch --json " + report);
    INFO(validate.output);
    REQUIRE(validate.exit_code == 0);
    nlohmann::json now = read_json(report);
    double held_out = now["held_out"]["mape_pct"].get<double>();
    double uncalibrated = now["uncalibrated_held_out"]["mape_pct"].get<double>();
    INFO(model << ": held-out MAPE " << held_out << "%, uncalibrated " << uncalibrated << "%");
    CHECK(held_out <= 15.0);
    CHECK(held_out < uncalibrated / 2);
    // After a change to the simulator or the calibration, regenerate the reports without
    // measuring again: tools/calibration_loop.sh --no-measure --device cpu
    // tests/validate/scenarios/cpu-*.yaml (validate/data/README.md).
    nlohmann::json committed = read_json(data / (name + ".holdout.json"));
    CHECK(held_out == Approx(committed["held_out"]["mape_pct"].get<double>()).margin(0.01));
    CHECK(uncalibrated ==
          Approx(committed["uncalibrated_held_out"]["mape_pct"].get<double>()).margin(0.01));
  }
}

TEST_CASE("calibrating the committed CPU measurements gives the committed profile, byte for byte") {
  // Run from the source tree: the files record their scenarios relative to it, and the profile
  // names its measurement files as given.
  const std::string profile = out_path("reference-profile.yaml");
  std::string files;
  // In the order tools/calibration_loop.sh passes them (its glob): the end-to-end fit sums the
  // points in order; floating-point sums differ between orders, and the solver's path with them.
  for (std::string model : {"mnist-cnn", "spoken-digits-conv1d", "spoken-digits-linear"})
    files += " validate/data/host-cpu/cpu-" + model + ".json";
  CommandResult calibrate =
      run_command("cd " + source_dir().string() + " && " + epochcast_binary() + " calibrate" +
                  files + " -o " + profile);
  INFO(calibrate.output);
  REQUIRE(calibrate.exit_code == 0);
  CHECK(read_text(profile) == read_text(source_dir() / "validate/data/host-cpu/profile.yaml"));
}

TEST_CASE(
    "a calibrated profile overrides a machine's the same way from the scenario and --profile") {
  const std::string scenario =
      (source_dir() / "tests/validate/scenarios/cpu-mnist-cnn.yaml").string();
  const std::string profile = (source_dir() / "validate/data/host-cpu/profile.yaml").string();
  const std::string by_option = out_path("profile-by-option.csv");
  const std::string in_scenario = out_path("profile-in-scenario.csv");
  const std::string uncalibrated = out_path("profile-none.csv");
  REQUIRE(run_command(epochcast_binary() + " predict " + scenario + " --profile " + profile +
                      " --csv " + by_option)
              .exit_code == 0);
  REQUIRE(run_command(epochcast_binary() + " predict " + scenario +
                      " --set 'hardware={base: host-cpu, profile: " + profile + "}' --csv " +
                      in_scenario)
              .exit_code == 0);
  REQUIRE(run_command(epochcast_binary() + " predict " + scenario + " --csv " + uncalibrated)
              .exit_code == 0);
  CHECK(read_text(by_option) == read_text(in_scenario));
  CHECK(read_text(by_option) != read_text(uncalibrated));
}

TEST_CASE("predicting a GPU from a profile calibrated on another device says so, table and JSON") {
  const std::string gpu = (source_dir() / "scenarios/calibration/gpu-mnist-cnn.yaml").string();
  const std::string profile = (source_dir() / "validate/data/host-cpu/profile.yaml").string();
  const std::string json = out_path("cross-device.json");
  CommandResult cross = run_command(epochcast_binary() + " predict " + gpu + " --profile " +
                                    profile + " --batch 64 --json " + json);
  INFO(cross.output);
  REQUIRE(cross.exit_code == 0);
  CHECK_THAT(cross.output, Catch::Contains("cross-device prediction: the profile was calibrated "
                                           "on Host CPU"));
  CHECK_THAT(read_json(json)["cross_device"].get<std::string>(),
             Catch::Contains("applied to NVIDIA H100 SXM5 80GB"));
  // Its own device, or the uncalibrated default: no label.
  CommandResult own =
      run_command(epochcast_binary() + " predict " +
                  (source_dir() / "tests/validate/scenarios/cpu-mnist-cnn.yaml").string() +
                  " --profile " + profile + " --batch 64 --json " + json);
  REQUIRE(own.exit_code == 0);
  CHECK_THAT(own.output, !Catch::Contains("cross-device"));
  CHECK(read_json(json)["cross_device"] == "");
}

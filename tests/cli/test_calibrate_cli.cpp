// The measure -> calibrate -> validate loop on the CPU (issue 6's CI test). The fixture
// "calibration loop: tools/calibration_loop.sh ..." (tests/CMakeLists.txt) trains three small
// scenarios for real once, validates each calibrated on every other batch size, and calibrates
// one profile on all three; these checks read what it wrote.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "support/paths.h"
#include "support/run_command.h"
#include "support/text.h"

using namespace epochcast::test;

namespace {

const char* const kModels[] = {"spoken-digits-linear", "spoken-digits-conv1d", "mnist-cnn"};

std::string scenario(const std::string& name) {
  return (source_dir() / "tests/validate/scenarios" / ("cpu-" + name + ".yaml")).string();
}
std::string out_path(const std::string& name) {
  return epochcast::test::output_file(name);
}
// A file the calibration loop wrote.
std::string loop_file(const std::string& name) {
  return output_file("calibration-loop-data/" + name);
}
nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return nlohmann::json::parse(s.str());
}

}  // namespace

TEST_CASE("measuring on the CPU, calibrating on half the batch sizes, validating on the rest") {
  for (std::string model : kModels) {
    const std::string report = loop_file("cpu-" + model + ".holdout.json");
    INFO(report);
    REQUIRE(std::filesystem::exists(report));
    nlohmann::json j = read_json(report);
    double held_out = j["held_out"]["mape_pct"].get<double>();
    double uncalibrated = j["uncalibrated_held_out"]["mape_pct"].get<double>();
    WARN(model << ": held-out MAPE " << held_out << "% calibrated, " << uncalibrated
               << "% uncalibrated; Spearman " << j["held_out"]["spearman"]);
    CHECK(j["held_out"]["points"].get<int>() >= 2);
    // Both figures compare wall-clock measurements of a shared machine with each other, so they
    // are reported above, not asserted: issue 6's goal (<= 15%, better than uncalibrated) came
    // out at 3 to 17% over clean runs, and a default profile that happens to fit can beat the
    // calibrated one by luck. The goal itself is asserted on noisy measurements of a known truth
    // (tests/validate/test_calibration.cpp); here only a broken loop fails: an error of half the
    // epoch or more, which no median over three rounds of a busy machine comes near.
    CHECK(std::isfinite(held_out));
    CHECK(held_out < 50.0);
  }
}

TEST_CASE("the loop's summary names every scenario, and its joint profile predicts each") {
  const std::string summary = read_file(loop_file("summary.txt"));
  INFO(summary);
  CHECK_THAT(summary, Catch::Contains("Held-out MAPE"));
  for (std::string model : kModels) {
    CHECK_THAT(summary, Catch::Contains("cpu-" + model + " "));
    CommandResult predict = run_command(epochcast_binary() + " predict " + scenario(model) +
                                        " --profile " + loop_file("profile.yaml"));
    INFO(predict.output);
    CHECK(predict.exit_code == 0);
  }
}

TEST_CASE("calibrate writes a profile that predict and validate load, labelled on other devices") {
  const std::string measured = loop_file("cpu-mnist-cnn.json");
  const std::string profile = out_path("cpu-profile.yaml");
  // From the source tree, where the loop ran: the file records its scenario relative to it.
  CommandResult calibrate =
      run_command("cd " + source_dir().string() + " && " + epochcast_binary() + " calibrate " +
                  measured + " -o " + profile);
  INFO(calibrate.output);
  REQUIRE(calibrate.exit_code == 0);
  CHECK_THAT(calibrate.output, Catch::Contains("gpu.efficiency.conv"));
  CHECK_THAT(calibrate.output, Catch::Contains("host.step_overhead_us"));
  CommandResult predict = run_command(epochcast_binary() + " predict " + scenario("mnist-cnn") +
                                      " --profile " + profile);
  INFO(predict.output);
  CHECK(predict.exit_code == 0);
  std::string image = out_path("val-plot.png");
  std::filesystem::remove(image);
  CommandResult validate =
      run_command(epochcast_binary() + " validate " + scenario("mnist-cnn") + " " + measured +
                  " --profile " + profile + " --plot " + image);
  INFO(validate.output);
  REQUIRE(validate.exit_code == 0);
  CHECK_THAT(validate.output, Catch::Contains("MAPE"));
  CHECK(std::filesystem::file_size(image) > 1000);
  CHECK(std::filesystem::exists(out_path("val-plot.gp")));
  CHECK(std::filesystem::exists(out_path("val-plot.dat")));
  CHECK_THAT(validate.output, Catch::Contains("Plotted " + image));
  // Measured solid with filled markers, predicted dashed with open ones, in one colour.
  const std::string script = read_file(out_path("val-plot.gp"));
  CHECK_THAT(script, Catch::Contains("lc 1 pt 7 dt 1 title '1 GPU measured'"));
  CHECK_THAT(script, Catch::Contains("lc 1 pt 6 dt 2 title '1 GPU predicted'"));
  CHECK_THAT(script, !Catch::Contains("held out"));  // nothing was held out here
  const std::string held = out_path("held-plot.png");
  CommandResult holdout =
      run_command(epochcast_binary() + " validate " + scenario("mnist-cnn") + " " + measured +
                  " --holdout every-other-batch --plot " + held);
  INFO(holdout.output);
  REQUIRE(holdout.exit_code == 0);
  CHECK_THAT(read_file(out_path("held-plot.gp")), Catch::Contains("title 'held out (measured)'"));
  CHECK_THAT(read_file(out_path("held-plot.dat")),
             Catch::Contains("# held out of the calibration"));

  // The same profile applied to a GPU: a cross-device prediction, labelled as such.
  CommandResult cross =
      run_command(epochcast_binary() + " validate " + scenario("mnist-cnn") + " " + measured +
                  " --profile " + profile + " --set hardware=seed003-desktop");
  INFO(cross.output);
  REQUIRE(cross.exit_code == 0);
  CHECK_THAT(cross.output, Catch::Contains("cross-device prediction"));
}

TEST_CASE("bad measurement files and hold-out rules are refused with exit code 2") {
  std::string bad = out_path("bad-measurements.json");
  std::ofstream(bad) << "{\"format\": \"epochcast-measurements\", \"version\": 1, \"setings\": {}}";
  CommandResult r =
      run_command(epochcast_binary() + " calibrate " + bad + " -o " + out_path("never.yaml"));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("bad-measurements.json:1:"));
  CHECK_THAT(r.output, Catch::Contains("did you mean 'settings'"));
  CHECK_FALSE(std::filesystem::exists(out_path("never.yaml")));
  CommandResult holdout = run_command(epochcast_binary() + " validate " + scenario("mnist-cnn") +
                                      " " + bad + " --holdout half");
  CHECK(holdout.exit_code == 2);
}

// `epochcast kernels` end to end: the report users read, its JSON, a fitted profile that
// predicts, and bad measurement files refused with their position.
#include <fstream>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "support/paths.h"
#include "support/run_command.h"

using namespace epochcast::test;

TEST_CASE("kernels reports each class per GPU, fits, and writes a profile that loads") {
  const std::string profile = output_file("kernels-fit.yaml");
  const std::string json = output_file("kernels-report.json");
  CommandResult r =
      run_command(epochcast_binary() + " kernels " + source_file("tests/validate/kernels/add.csv") +
                  " " + source_file("tests/validate/kernels/linear.csv") +
                  " --fit --leave-one-gpu-out --write-profile " + profile + " --json " + json);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("kernel measurements of 5 GPU(s)"));
  CHECK_THAT(r.output, Catch::Contains("gpu.tile_staging_cycles = "));
  // Every measured GPU's architecture has its own fp32 GEMM efficiency in the default profile.
  CHECK_THAT(r.output, Catch::Contains("gpu.efficiency.gemm: not fitted, each measured GPU's "
                                       "architecture gives its own"));
  CHECK_THAT(r.output, Catch::Contains("Leave one GPU out"));
  CHECK_THAT(r.output, Catch::Contains("elementwise  t4"));
  std::ifstream in(json);
  const nlohmann::json report = nlohmann::json::parse(in);
  CHECK(report["schema"] == "epochcast.kernels/2");
  CHECK(report["accuracy"].size() == 10);  // 2 classes x 5 GPUs
  CHECK(report["leave_one_gpu_out"].size() == 5);
  const double fitted = report["fitted"]["gpu.tile_staging_cycles"];
  CHECK(fitted > 0.3);
  CHECK(fitted < 1.0);
  CHECK(report["held_by_architecture"] == nlohmann::json::array({"gpu.efficiency.gemm"}));
  // A measuring offset per operator, within its bounds: the share of its floor before its launch.
  REQUIRE(report["offset_fractions"].size() == 2);
  for (const char* op : {"add", "linear"}) {
    CHECK(report["offset_fractions"][op].get<double>() >= 0);
    CHECK(report["offset_fractions"][op].get<double>() <= 1);
  }
  CHECK_THAT(r.output, Catch::Contains("the measuring loop's offsets, of each operator's floor: "
                                       "add "));
  // The written profile predicts: its figures reproduce the fit's accuracy on the same rows.
  const std::string again_json = output_file("kernels-again.json");
  CommandResult again =
      run_command(epochcast_binary() + " kernels " + source_file("tests/validate/kernels/add.csv") +
                  " " + source_file("tests/validate/kernels/linear.csv") + " --profile " + profile +
                  " --json " + again_json);
  REQUIRE(again.exit_code == 0);
  CHECK_THAT(again.output, Catch::Contains("profile default-kernel-fit"));
  std::ifstream again_in(again_json);
  const nlohmann::json reread = nlohmann::json::parse(again_in);
  REQUIRE(reread["accuracy"].size() == report["accuracy"].size());
  for (std::size_t i = 0; i < reread["accuracy"].size(); ++i) {
    INFO(report["accuracy"][i]["class"] << " on " << report["accuracy"][i]["gpu"]);
    CHECK(reread["accuracy"][i]["mape"].get<double>() ==
          Approx(report["accuracy"][i]["mape"].get<double>()).margin(0.002));
  }
}

TEST_CASE("kernels refuses a bad measurement file with its position and exit 2") {
  const std::string bad = output_file("kernels-bad-device.csv");
  std::ofstream(bad) << "OPName,Latency,Device,B,H\nadd,0.05,GeForce 9800 GT,4,4\n";
  CommandResult r = run_command(epochcast_binary() + " kernels " + bad);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("kernels-bad-device.csv:2:10: error: Device"));
  CHECK_THAT(r.output, Catch::Contains("--catalogue"));
  r = run_command(epochcast_binary() + " kernels " + output_file("no-such-kernels.csv"));
  CHECK(r.exit_code == 2);
  r = run_command(epochcast_binary() + " kernels " + source_file("tests/validate/kernels/add.csv") +
                  " --write-profile " + output_file("x.yaml"));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("add --fit"));
  // A figure kernel times cannot move is refused, with the ones they can.
  r = run_command(epochcast_binary() + " kernels " + source_file("tests/validate/kernels/add.csv") +
                  " --fit --figures host.forward_op_us");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("--figures: 'host.forward_op_us' is no figure"));
  CHECK_THAT(r.output, Catch::Contains("gpu.memory_efficiency"));
  // One GPU's measurements cannot be left out and fitted on.
  const std::string one = output_file("kernels-one-gpu.csv");
  std::ofstream(one) << "OPName,Latency,Device,B,H\nadd,0.05,t4,4,4\nadd,0.5,t4,4000,4000\n";
  r = run_command(epochcast_binary() + " kernels " + one + " --leave-one-gpu-out");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("two GPUs or more"));
}

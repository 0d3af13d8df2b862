// `epochcast inspect` end to end: the seed's torchsummary figures, JSON, and exit codes.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "support/paths.h"
#include "support/run_command.h"

using namespace epochcast::test;

TEST_CASE("inspect prints seed 001's torchsummary totals for the conv model") {
  CommandResult r = run_command(epochcast_binary() + " inspect spoken-digits-conv1d");
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("Total params: 376,200"));
  CHECK_THAT(r.output, Catch::Contains("Forward/backward pass size (MB): 12.07"));
  CHECK_THAT(r.output, Catch::Contains("Params size (MB): 1.44"));
  CHECK_THAT(r.output, Catch::Contains("Estimated Total Size (MB): 13.55"));
  CHECK_THAT(r.output, Catch::Matches("(.|\n)*Conv1d-1 +0 +\\[-1, 50, 12001\\] +10,050(.|\n)*"));
}

TEST_CASE("inspect accepts a path as well as a zoo name") {
  CommandResult r =
      run_command(epochcast_binary() + " inspect " + zoo_model("spoken-digits-linear").string());
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("Params size (MB): 46.17"));
  CHECK_THAT(r.output, Catch::Contains("Forward/backward pass size (MB): 0.02"));
}

TEST_CASE("inspect --json gives tools the same figures") {
  CommandResult r = run_command(epochcast_binary() + " inspect resnet-50 --json");
  REQUIRE(r.exit_code == 0);
  nlohmann::json j = nlohmann::json::parse(r.output);
  CHECK(j["params"] == 25557032);
  CHECK(j["layers"].size() > 100);
  CHECK(j["layers"][0]["summary_name"] == "Conv2d-1");
}

TEST_CASE("inspect of an unknown model exits 2 with a suggestion") {
  CommandResult r = run_command(epochcast_binary() + " inspect resnet50");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("did you mean 'resnet-50'?"));
}

TEST_CASE("inspect of a broken model file exits 2 with file:line:col") {
  std::string file = std::string(EPOCHCAST_TEST_BINARY_DIR) + "/broken-model.yaml";
  FILE* f = fopen(file.c_str(), "w");
  REQUIRE(f != nullptr);
  fputs(
      "kind: model\nname: m\ninput: {shape: [1, 10]}\nlayers:\n  - {type: conv1d, "
      "out_channels: 2, kernel: 30}\n",
      f);
  fclose(f);
  CommandResult r = run_command(epochcast_binary() + " inspect " + file);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::StartsWith(file + ":5:5: error: layer 1 '0' (conv1d): the kernel"));
}

TEST_CASE("a command-line mistake exits 2") {
  CHECK(run_command(epochcast_binary() + " inspekt resnet-50").exit_code == 2);
  CHECK(run_command(epochcast_binary() + " inspect").exit_code == 2);
  CHECK(run_command(epochcast_binary() + " --help").exit_code == 0);
}

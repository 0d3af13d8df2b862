// `epochcast predict` end to end: the table, CSV/JSON/trace files, overrides and exit codes.
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "support/paths.h"
#include "support/run_command.h"

using namespace epochcast::test;

namespace {

std::string seed(const std::string& name) {
  return (source_dir() / "scenarios/seed-001" / (name + ".yaml")).string();
}
std::string out_path(const std::string& name) {
  return std::string(EPOCHCAST_TEST_BINARY_DIR) + "/" + name;
}
std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("predict prints a row per sweep point with the breakdown and the bottleneck") {
  CommandResult r = run_command(epochcast_binary() + " predict " + seed("linear") + " --gpus 1");
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("epoch (s)"));
  CHECK_THAT(r.output, Catch::Contains("samples/s"));
  CHECK_THAT(r.output, Catch::Contains("max batch"));
  CHECK_THAT(r.output, Catch::Contains("input-bound"));
  // 12 batch sizes, one GPU count: 12 rows starting with "   1  ".
  std::size_t rows = 0;
  for (std::size_t at = r.output.find("\n   1 "); at != std::string::npos;
       at = r.output.find("\n   1 ", at + 1)) {
    ++rows;
  }
  CHECK(rows == 12);
}

TEST_CASE("predict writes CSV, JSON and a Chrome trace with named tracks") {
  std::string csv = out_path("p.csv"), json = out_path("p.json"), trace = out_path("p.trace.json");
  CommandResult r = run_command(epochcast_binary() + " predict " + seed("conv1d") +
                                " --gpus 1 --batch 50,100 --csv " + csv + " --json " + json +
                                " --trace " + trace + " --trace-point 2 --trace-iterations 2");
  REQUIRE(r.exit_code == 0);
  std::string table = read(csv);
  CHECK(std::count(table.begin(), table.end(), '\n') == 3);  // header + 2 points
  nlohmann::json j = nlohmann::json::parse(read(json));
  CHECK(j["schema"] == "epochcast.prediction/1");
  CHECK(j["points"].size() == 2);
  CHECK(j["points"][1]["global_batch"] == 100);
  nlohmann::json t = nlohmann::json::parse(read(trace));
  std::set<std::string> tracks;
  for (const auto& e : t["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") tracks.insert(e["args"]["name"]);
  }
  CHECK(tracks.count("CPU main thread") == 1);
  CHECK(tracks.count("GPU 0 compute stream") == 1);
  CHECK(tracks.count("GPU 0 copy engine") == 1);
  CHECK(t["otherData"]["global_batch"] == 100);
}

TEST_CASE("a multi-GPU trace has a communication track per GPU and link counters") {
  std::string trace = out_path("dp.trace.json"), json = out_path("dp.json");
  CommandResult r = run_command(epochcast_binary() + " predict " + seed("linear") +
                                " --gpus 1,4 --batch 100 --json " + json + " --trace " + trace +
                                " --trace-point 2 --trace-iterations 2");
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("speedup"));
  CHECK_THAT(r.output, Catch::Contains("comm total (s)"));
  nlohmann::json t = nlohmann::json::parse(read(trace));
  std::set<std::string> tracks;
  std::set<std::string> counters;
  for (const auto& e : t["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") tracks.insert(e["args"]["name"]);
    if (e["ph"] == "C") counters.insert(e["name"]);
  }
  for (int gpu = 0; gpu < 4; ++gpu) {
    INFO("GPU " << gpu);
    CHECK(tracks.count("GPU " + std::to_string(gpu) + " communication") == 1);
    CHECK(tracks.count("GPU " + std::to_string(gpu) + " compute stream") == 1);
  }
  CHECK_FALSE(counters.empty());
  nlohmann::json j = nlohmann::json::parse(read(json));
  const auto& four = j["points"][1];
  CHECK(four["gpus"] == 4);
  CHECK(four["communication"]["total_s"].get<double>() > 0);
  CHECK(four["communication"]["bytes"].get<double>() > 0);
  CHECK(four["speedup"].get<double>() > 0);
}

TEST_CASE("an override given with --set changes the scenario before it is checked") {
  std::string fp32 = out_path("fp32.csv"), momentum = out_path("sgd.csv");
  REQUIRE(run_command(epochcast_binary() + " predict " + seed("linear") +
                      " --gpus 1 --batch 100 --csv " + fp32)
              .exit_code == 0);
  REQUIRE(run_command(epochcast_binary() + " predict " + seed("linear") +
                      " --gpus 1 --batch 100 --set training.optimizer=sgd --csv " + momentum)
              .exit_code == 0);
  CHECK(read(fp32) != read(momentum));  // sgd moves far fewer optimizer bytes than adam
}

TEST_CASE("a bad --set exits 2 and names the override") {
  CommandResult r = run_command(epochcast_binary() + " predict " + seed("linear") +
                                " --set training.precison=amp_bf16");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::StartsWith("--set training.precison=amp_bf16: error: "
                                         "training.precison: unknown key (did you mean "
                                         "'precision'?)"));
}

TEST_CASE("asking with --gpus for more GPUs than the machine has exits 2 and names the option") {
  CommandResult r = run_command(epochcast_binary() + " predict " + seed("linear") + " --gpus 1,8");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::StartsWith("--gpus 1,8: error: sweep.gpus[1]: 8 GPUs asked for"));
}

TEST_CASE("an output file that cannot be written exits 2 and leaves nothing behind") {
  CommandResult r = run_command(epochcast_binary() + " predict " + seed("linear") +
                                " --gpus 1 --csv /nonexistent-dir/out.csv");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("/nonexistent-dir/out.csv: error: --csv: cannot write"));
  CHECK_FALSE(std::filesystem::exists("/nonexistent-dir/out.csv"));
}

TEST_CASE("a model file given to predict exits 2 with a clear message") {
  CommandResult r = run_command(epochcast_binary() + " predict " + zoo_model("mnist-cnn").string());
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("this is a model file, but a scenario file is expected"));
}

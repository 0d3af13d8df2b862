// validate and calibrate refuse measurement files they cannot honestly use — nothing to
// compare, a point measured twice, a point its scenario cannot run, broken JSON — with exit 2
// and the file and point named, and write no profile then.
#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>
#include <sstream>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "support/paths.h"
#include "support/run_command.h"
#include "support/text.h"

using namespace epochcast::test;

namespace {

std::string out_path(const std::string& name) {
  return epochcast::test::output_file(name);
}
std::string scenario() {
  return (source_dir() / "tests/validate/scenarios/cpu-mnist-cnn.yaml").string();
}
// The committed CPU measurements of mnist-cnn, changed by `edit` and saved as `name`.
std::string edited_measurements(const std::string& name,
                                const std::function<void(nlohmann::json&)>& edit) {
  std::ifstream in(source_dir() / "validate/data/host-cpu/cpu-mnist-cnn.json");
  nlohmann::json j = nlohmann::json::parse(in);
  edit(j);
  std::string path = out_path(name);
  std::ofstream(path) << j.dump(1);
  return path;
}

}  // namespace

TEST_CASE("validate refuses a file with no point to compare") {
  std::string all_oom = edited_measurements("all-oom.json", [](nlohmann::json& j) {
    for (auto& p : j["points"])
      p["status"] = "oom";
  });
  CommandResult r = run_command(epochcast_binary() + " validate " + scenario() + " " + all_oom);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains(all_oom + ": error: points: no point to compare: the file "
                                                 "holds 7 points, 0 ended ok"));
  CHECK_THAT(r.output, !Catch::Contains("MAPE"));
}

TEST_CASE("validate and calibrate refuse a point measured twice") {
  std::string twice = edited_measurements(
      "twice.json", [](nlohmann::json& j) { j["points"].push_back(j["points"][0]); });
  for (const std::string& command : {" validate " + scenario() + " " + twice,
                                     " calibrate " + twice + " -o " + out_path("never.yaml")}) {
    CommandResult r = run_command(epochcast_binary() + command);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains("points[7]: the point 1 GPU, global batch 2 is already "
                                         "measured in points[0]"));
  }
  CHECK_FALSE(std::filesystem::exists(out_path("never.yaml")));
}

TEST_CASE("validate refuses a measured point that its scenario cannot run") {
  std::string too_many = edited_measurements("too-many-gpus.json",
                                             [](nlohmann::json& j) { j["points"][2]["gpus"] = 3; });
  CommandResult r = run_command(epochcast_binary() + " validate " + scenario() + " " + too_many);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("points[2]: the point 3 GPUs, global batch 8 cannot run in "
                                       "scenario 'cpu-mnist-cnn': 3 GPUs asked for"));
}

TEST_CASE("a truncated measurement file is a JSON error at the place it ends") {
  std::ifstream in(source_dir() / "validate/data/host-cpu/cpu-mnist-cnn.json");
  std::stringstream whole;
  whole << in.rdbuf();
  std::string path = out_path("truncated.json");
  std::ofstream(path) << whole.str().substr(0, 5000);
  CommandResult r = run_command(epochcast_binary() + " validate " + scenario() + " " + path);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains(path + ":"));
  CHECK_THAT(r.output, Catch::Contains("error: not valid JSON: syntax error"));
}

TEST_CASE("a hold-out rule that leaves one side empty is refused") {
  std::string one_batch = edited_measurements("one-batch.json", [](nlohmann::json& j) {
    nlohmann::json first = j["points"][0];
    j["points"] = nlohmann::json::array({first});
  });
  CommandResult r = run_command(epochcast_binary() + " validate " + scenario() + " " + one_batch +
                                " --holdout every-other-batch");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("'every-other-batch' leaves none to hold out of the 1 "
                                       "measured points"));
  CommandResult misspelt = run_command(epochcast_binary() + " validate " + scenario() + " " +
                                       one_batch + " --holdout every-other-bach");
  CHECK_THAT(misspelt.output, Catch::Contains("did you mean 'every-other-batch'?"));
}

TEST_CASE("calibrate writes no profile when nothing determines a figure") {
  std::string nothing = edited_measurements("nothing-to-fit.json", [](nlohmann::json& j) {
    for (auto& p : j["points"])
      p["status"] = "skipped";
    j.erase("benchmarks");
  });
  std::string profile = out_path("nothing-profile.yaml");
  std::filesystem::remove(profile);
  CommandResult r = run_command(epochcast_binary() + " calibrate " + nothing + " --scenario " +
                                scenario() + " -o " + profile);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("nothing to calibrate"));
  CHECK_FALSE(std::filesystem::exists(profile));
}

TEST_CASE("a fit that only chases noise is not kept, and calibrate still writes the profile") {
  // Four epochs the default profile predicts within +-10%, the error alternating from point to
  // point: no figure explains it, so the fit is not kept; but it ran, so exit 0 and a profile.
  std::string linear = (source_dir() / "scenarios/seed-001/linear.yaml").string();
  auto predict = [&](const std::string& json, const std::string& extra) {
    CommandResult r = run_command(epochcast_binary() + " predict " + linear +
                                  " --gpus 1,2 --batch 20,200 --json " + json + extra);
    REQUIRE(r.exit_code == 0);
    return nlohmann::json::parse(std::ifstream(json));
  };
  const nlohmann::json prior = predict(out_path("alternating-prior.json"), "");
  std::string table = out_path("alternating.csv");
  {
    std::ofstream out(table);
    out << "gpus,global_batch,epoch_s\n";
    int i = 0;
    for (const nlohmann::json& p : prior["points"]) {
      const double factor = i++ % 2 == 0 ? 1.10 : 0.90;
      out << p["gpus"].get<int>() << "," << p["global_batch"].get<long>() << ","
          << p["epoch_s"].get<double>() * factor << "\n";
    }
  }
  std::string profile = out_path("alternating-profile.yaml");
  std::filesystem::remove(profile);
  CommandResult r = run_command(epochcast_binary() + " calibrate " + table + " --scenario " +
                                linear + " -o " + profile);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("the fit is not kept"));
  REQUIRE(std::filesystem::exists(profile));
  // The profile keeps the prior's figures: predictions unchanged.
  const nlohmann::json kept = predict(out_path("alternating-kept.json"), " --profile " + profile);
  REQUIRE(kept["points"].size() == prior["points"].size());
  for (std::size_t i = 0; i < kept["points"].size(); ++i)
    CHECK(kept["points"][i]["epoch_s"].get<double>() ==
          Approx(prior["points"][i]["epoch_s"].get<double>()).epsilon(1e-9));
}

TEST_CASE("calibrate fits the kernel model to a profiler trace's kernel times") {
  // GEMMs of a transformer's shapes, each kernel's GPU time that of 60% of the H100's fp32 peak
  // (67 TFLOP/s): a trace as torch.profiler writes it, operator, launch and kernel joined by
  // thread, time and correlation id.
  nlohmann::json events = nlohmann::json::array();
  int correlation = 0;
  double now = 1000;
  for (long tokens : {2048L, 8192L, 32768L}) {
    for (auto [n, k] : {std::pair{768L, 768L}, std::pair{768L, 3072L}, std::pair{3072L, 768L}}) {
      ++correlation;
      const double us = 2.0 * static_cast<double>(tokens * n * k) / (0.6 * 67e12) * 1e6;
      events.push_back({{"ph", "X"},
                        {"cat", "cpu_op"},
                        {"name", "aten::linear"},
                        {"pid", 1},
                        {"tid", 1},
                        {"ts", now},
                        {"dur", 20},
                        {"args",
                         {{"Input Dims", {{tokens, n}, {k, n}, {k}}},
                          {"Input type", {"float", "float", "float"}}}}});
      events.push_back({{"ph", "X"},
                        {"cat", "cuda_runtime"},
                        {"name", "cudaLaunchKernel"},
                        {"pid", 1},
                        {"tid", 1},
                        {"ts", now + 5},
                        {"dur", 3},
                        {"args", {{"correlation", correlation}}}});
      events.push_back(
          {{"ph", "X"},
           {"cat", "kernel"},
           {"name", "sm90_sgemm"},
           {"pid", 0},
           {"tid", 7},
           {"ts", now + 10},
           {"dur", us},
           {"args",
            {{"correlation", correlation}, {"grid", {132, 1, 1}}, {"block", {256, 1, 1}}}}});
      now += 1000;
    }
  }
  const std::string trace = out_path("kernels-trace.json");
  std::ofstream(trace) << nlohmann::json{
      {"schemaVersion", 1},
      {"deviceProperties", {{{"id", 0}, {"name", "NVIDIA H100"}}}},
      {"traceEvents", events}}.dump();
  const std::string scenario =
      (source_dir() / "scenarios/calibration/gpu-spoken-digits-linear.yaml").string();
  const std::string profile = out_path("kernels-trace-profile.yaml");
  std::filesystem::remove(profile);
  CommandResult r = run_command(epochcast_binary() + " calibrate " + trace + " --scenario " +
                                scenario + " -o " + profile);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("9 kernels of NVIDIA H100, 9 attributed to 9 operator "
                                       "shapes the kernel model fits") &&
                           Catch::Contains("kernel times (profiler trace"));
  std::stringstream written;
  written << std::ifstream(profile).rdbuf();
  // Near the truth's 0.6 (the CUDA-core tiles' padding and staging take the rest).
  const std::string text = written.str();
  std::smatch gemm;
  REQUIRE(std::regex_search(text, gemm, std::regex("gemm: ([0-9.]+)")));
  CHECK(std::stod(gemm[1]) > 0.5);
  CHECK(std::stod(gemm[1]) < 0.75);

  // A trace alone does not say which machine it calibrates.
  r = run_command(epochcast_binary() + " calibrate " + trace + " -o " + profile);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("--scenario"));
}

TEST_CASE("the calibration loop's plan takes each point's step from the simulator") {
  // A GPU-bound scenario's dry run on a GPU: the run, the kernel traces and the Python reference
  // each cost steps of the predicted length, and a layer profile about 60 more a point.
  const std::filesystem::path build =
      std::filesystem::path(epochcast_binary()).parent_path().parent_path();
  auto plan = [&](const std::string& extra) {
    CommandResult r = run_command((source_dir() / "tools/calibration_loop.sh").string() +
                                  " --build " + build.string() +
                                  " --dry-run --measure-only --skip-tests --kernel-traces"
                                  " --device cuda --rounds 1"
                                  " --iterations 10 --warmup 2 " +
                                  extra + " scenarios/calibration/gpu-bound/resnet50-fp32.yaml");
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    std::smatch about;
    REQUIRE(std::regex_search(r.output, about,
                              std::regex("with the Python reference and kernel "
                                         "traces, about ([0-9]+) s")));
    return std::stod(about[1]);
  };
  const std::string json = out_path("gpu-bound-resnet50.json");
  REQUIRE(
      run_command(epochcast_binary() + " predict " +
                  (source_dir() / "scenarios/calibration/gpu-bound/resnet50-fp32.yaml").string() +
                  " --json " + json)
          .exit_code == 0);
  const nlohmann::json predicted = nlohmann::json::parse(std::ifstream(json));
  double steps = 0;  // the five points' predicted steps
  for (const nlohmann::json& p : predicted["points"])
    steps += p["iteration_s"].get<double>();
  REQUIRE(steps > 0);
  const double without = plan("--no-layer-profile"), with = plan("");
  CHECK(with - without == Approx(60 * steps).margin(1.5));
  // The fixed costs (the run's start, the Python reference's, 6.5 s a point) and 42 steps a point
  // (12 timed, 3 traced, and the reference's 24 timed and 3 traced).
  CHECK(without == Approx(40 + 8 + 5 * 6.5 + 42 * steps).margin(1.5));
}

TEST_CASE("calibrate refuses to write its profile over a measurement file it reads") {
  std::string measured = edited_measurements("kept.json", [](nlohmann::json&) {});
  std::string before = nlohmann::json::parse(std::ifstream(measured)).dump();
  CommandResult r = run_command(epochcast_binary() + " calibrate " + measured + " -o " + measured);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("is one of the measurement files read"));
  CHECK(nlohmann::json::parse(std::ifstream(measured)).dump() == before);
}

TEST_CASE("validate and calibrate read a results table of published epochs") {
  // Seed 001's linear model on one GPU; the epochs are made up, the route is what is tested.
  std::string linear = (source_dir() / "scenarios/seed-001/linear.yaml").string();
  std::string table = out_path("published.csv");
  std::ofstream(table) << "# epochs as a paper would give them\n"
                          "gpus,global_batch,epoch_s,note\n"
                          "1,10,9.5,Table 2\n1,50,2.4,\n1,200,1.1,\n1,600,0.8,\n";
  CommandResult validate =
      run_command(epochcast_binary() + " validate " + linear + " " + table +
                  " --set training.strategy=single --holdout every-other-batch");
  INFO(validate.output);
  REQUIRE(validate.exit_code == 0);
  CHECK_THAT(validate.output, Catch::Contains("measured on figures of a results table"));
  CHECK_THAT(validate.output, Catch::Contains("   1     50  epoch"));
  CHECK_THAT(validate.output, Catch::Contains("held-out points: 2 points"));

  std::string with_scenario = out_path("published-with-scenario.csv");
  std::ofstream(with_scenario) << "scenario,gpus,global_batch,epoch_s,strategy\n"
                                  "scenarios/seed-001/linear.yaml,1,10,9.5,single\n"
                                  "scenarios/seed-001/linear.yaml,1,600,0.8,single\n";
  std::string profile = out_path("published-profile.yaml");
  std::filesystem::remove(profile);
  CommandResult calibrate =
      run_command(epochcast_binary() + " calibrate " + with_scenario + " -o " + profile);
  INFO(calibrate.output);
  CHECK(calibrate.exit_code == 0);
  CHECK_THAT(calibrate.output, Catch::Contains("host.step_overhead_us"));
  CHECK(std::filesystem::exists(profile));

  std::string bad = out_path("published-bad.csv");
  std::ofstream(bad) << "gpus,global_batch,epoch_s\n1,10,9.5\n1,50,-2\n";
  CommandResult refused = run_command(epochcast_binary() + " validate " + linear + " " + bad +
                                      " --set training.strategy=single");
  CHECK(refused.exit_code == 2);
  CHECK_THAT(refused.output,
             Catch::Contains("published-bad.csv:3:6: error: epoch_s: expected an epoch time in "
                             "seconds above 0"));
}

TEST_CASE("the guide's worked example: six epochs fix four figures, and predict shows intervals") {
  const std::string profile = out_path("six-epochs.yaml");
  CommandResult c = run_command(epochcast_binary() + " calibrate " +
                                (source_dir() / "docs/examples/seed-001-six-epochs.csv").string() +
                                " -o " + profile + " 2>&1");
  INFO(c.output);
  REQUIRE(c.exit_code == 0);
  CHECK_THAT(c.output, Catch::Contains("your 6 points fix gpu.efficiency.conv, "
                                       "gpu.optimizer_memory_efficiency, input.sample_cpu_us, "
                                       "links.efficiency.shm"));
  CHECK_THAT(c.output, Catch::Contains("not seen by these points, kept at their priors: "));
  CHECK_THAT(c.output, Catch::Contains("measure next: "));
  CommandResult p = run_command(epochcast_binary() + " predict " +
                                (source_dir() / "scenarios/seed-001/linear.yaml").string() +
                                " --profile " + profile + " --set sweep.batch=[20,200] 2>&1");
  INFO(p.output);
  REQUIRE(p.exit_code == 0);
  CHECK_THAT(p.output, Catch::Contains("95% interval"));
  // The row docs/guide.md section 1.11 prints: the guide's example must stay true.
  CHECK_THAT(p.output, Catch::Contains("709.7 ms  677.1-743.9 ms"));
}

TEST_CASE("validate compares the committed time-to-target campaign with the noise-scale model") {
  const std::string runs = (source_dir() / "validate/data/fashion-mnist-cpu/runs.json").string();
  const std::string fashion = (source_dir() / "scenarios/seed-003/fashion-mnist-cpu.yaml").string();
  const std::string json = out_path("target-validation.json");
  std::filesystem::remove(json);
  CommandResult r =
      run_command(epochcast_binary() + " validate " + fashion + " " + runs + " --json " + json);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("Epochs to target: MAPE"));
  CHECK_THAT(r.output, Catch::Contains("Measured noise scale: B_simple"));
  std::ifstream in(json);
  nlohmann::json j = nlohmann::json::parse(in);
  CHECK(j["schema"] == "epochcast.target-validation/1");
  CHECK(j["fit"]["noise_scale_source"] == "measured");
  CHECK(j["rows"].size() >= 5);
  // The bar: epochs to target within 20% MAPE of the measured medians from the measured
  // noise scale and one calibration point; the fastest batch found or within the seeds' spread.
  CHECK(j["epochs_mape_pct"].get<double>() < 20.0);
  CHECK((j["measured_fastest"] == j["predicted_fastest"] || j["fastest_within_spread"] == true));
  // Fitting both figures on every batch, and a batch that is not among the runs.
  CommandResult all =
      run_command(epochcast_binary() + " validate " + fashion + " " + runs + " --calibrate-on all");
  CHECK(all.exit_code == 0);
  CHECK_THAT(all.output, Catch::Contains("least squares"));
  CommandResult bad =
      run_command(epochcast_binary() + " validate " + fashion + " " + runs + " --calibrate-on 17");
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.output, Catch::Contains("--calibrate-on: batch 17 is not among"));
  // The epoch measurements' options are refused for runs, and the runs' for epochs.
  for (const std::string option : {"--holdout every-other-batch", "--plot v.png"}) {
    CommandResult refused =
        run_command(epochcast_binary() + " validate " + fashion + " " + runs + " " + option);
    INFO(option);
    CHECK(refused.exit_code == 2);
    CHECK_THAT(refused.output, Catch::Contains(option.substr(0, option.find(' ')) + ":"));
  }
  const std::string epoch_file =
      (source_dir() / "validate/data/host-cpu/cpu-mnist-cnn.json").string();
  CommandResult epochs = run_command(epochcast_binary() + " validate " + scenario() + " " +
                                     epoch_file + " --calibrate-on all");
  CHECK(epochs.exit_code == 2);
  CHECK_THAT(epochs.output, Catch::Contains("--calibrate-on: applies to time-to-target runs"));
  // calibrate writes the figures as the scenario's block, each with its source.
  const std::string block = out_path("statistical-efficiency.yaml");
  std::filesystem::remove(block);
  CommandResult calibrated =
      run_command(epochcast_binary() + " calibrate " + runs + " -o " + block);
  INFO(calibrated.output);
  REQUIRE(calibrated.exit_code == 0);
  std::ifstream written(block);
  std::stringstream text;
  text << written.rdbuf();
  CHECK_THAT(text.str(), Catch::Contains("statistical_efficiency:"));
  CHECK_THAT(text.str(), Catch::Contains("noise_scale: {value: 521"));
  CHECK_THAT(text.str(), Catch::Contains("source: measured"));
  CHECK_THAT(text.str(), Catch::Contains("min_steps: {value: 68.5"));
}

TEST_CASE("README's calibrate line: a bench file alone takes the scenario the measurements ran") {
  // `epochcast bench` records no scenario: the same benchmarks, without the points.
  const std::string bench = edited_measurements("bench-only.json", [](nlohmann::json& j) {
    for (const char* key : {"scenario", "scenario_file", "model", "strategy", "precision",
                            "optimizer", "points", "arguments"})
      j.erase(key);
  });
  const std::string profile = out_path("readme-profile.yaml");
  std::filesystem::remove(profile);
  // Run from the source tree, where the measurement file's scenario path is found.
  CommandResult both = run_command("cd " + source_dir().string() + " && " + epochcast_binary() +
                                   " calibrate validate/data/host-cpu/cpu-mnist-cnn.json " + bench +
                                   " -o " + profile);
  INFO(both.output);
  CHECK(both.exit_code == 0);
  CHECK(std::filesystem::exists(profile));
  CommandResult alone =
      run_command(epochcast_binary() + " calibrate " + bench + " -o " + out_path("alone.yaml"));
  CHECK(alone.exit_code == 2);
  CHECK_THAT(alone.output, Catch::Contains("bench-only.json") &&
                               Catch::Contains("the file records no scenario (benchmarks alone)") &&
                               Catch::Contains("--scenario"));
}

TEST_CASE("a results table names bundled scenarios as the tree does, and validate needs no other") {
  const std::string table = out_path("named-table.csv");
  std::ofstream(table) << "scenario,gpus,global_batch,epoch_s,strategy\n"
                          "seed-001/linear,1,10,9.5,single\n"
                          "seed-001/linear,1,600,0.8,single\n";
  CommandResult validate = run_command(epochcast_binary() + " validate " + table);
  INFO(validate.output);
  CHECK(validate.exit_code == 0);
  CHECK_THAT(validate.output, Catch::Contains("Scenario seed-001-linear"));
  // A name that is not bundled lists those that are, folders and all.
  const std::string wrong = out_path("wrong-table.csv");
  std::ofstream(wrong) << "scenario,gpus,global_batch,epoch_s\nseed-001/linaer,1,10,9.5\n";
  CommandResult refused = run_command(epochcast_binary() + " validate " + wrong);
  CHECK(refused.exit_code == 2);
  CHECK_THAT(refused.output, Catch::Contains("wrong-table.csv:2") &&
                                 Catch::Contains("did you mean 'seed-001/linear'?"));
}

// (collective's table keeps every column when piped, for scripts: test_collective_cli.cpp.)
TEST_CASE("calibrate and validate reports fit the width COLUMNS gives") {
  const std::string table = out_path("published-narrow.csv");
  std::ofstream(table) << "scenario,gpus,global_batch,epoch_s,strategy\n"
                          "seed-001/linear,1,10,9.5,single\nseed-001/linear,1,50,2.4,single\n"
                          "seed-001/linear,1,200,1.1,single\nseed-001/linear,1,600,0.8,single\n";
  for (const std::string& command :
       {epochcast_binary() + " calibrate " +
            (source_dir() / "docs/examples/seed-001-six-epochs.csv").string() + " -o " +
            out_path("narrow-profile.yaml"),
        epochcast_binary() + " validate " + table + " --holdout every-other-batch"}) {
    INFO(command);
    CommandResult r = run_command("COLUMNS=80 " + command);
    INFO(r.output);
    CHECK(r.exit_code == 0);
    CHECK(widest_line(r.output) <= 80);
  }
}

TEST_CASE("validate says how steady the machine was over a campaign's rounds") {
  // The committed CPU campaign: nine rounds on a quiet machine, nothing flagged.
  const std::string json = out_path("steady.json");
  CommandResult steady = run_command(
      epochcast_binary() + " validate " + scenario() + " " +
      (source_dir() / "validate/data/host-cpu/cpu-mnist-cnn.json").string() + " --json " + json);
  INFO(steady.output);
  REQUIRE(steady.exit_code == 0);
  CHECK_THAT(steady.output, Catch::Contains("the machine over 9 interleaved rounds of 7 points"));
  CHECK_THAT(steady.output, !Catch::Contains("measure again"));
  nlohmann::json report = nlohmann::json::parse(std::ifstream(json));
  CHECK(report["round_drift"]["rounds"] == 9);
  CHECK(report["round_drift"]["point_scatter"].get<double>() < 0.05);

  // The same campaign with its third round run 30% slower at every point (a round's samples are
  // its timed iterations, the rounds in the order they ran).
  const std::string slow_round = edited_measurements("slow-round.json", [](nlohmann::json& j) {
    const auto per_round = j["settings"]["timed_iterations"].get<std::size_t>();
    for (nlohmann::json& p : j["points"]) {
      nlohmann::json& samples = p["iteration_samples_s"];
      for (std::size_t i = 2 * per_round; i < 3 * per_round; ++i)
        samples[i] = samples[i].get<double>() * 1.3;
    }
  });
  CommandResult drifting = run_command(epochcast_binary() + " validate " + scenario() + " " +
                                       slow_round + " --json " + json);
  INFO(drifting.output);
  REQUIRE(drifting.exit_code == 0);
  CHECK_THAT(drifting.output, Catch::Contains("mean a changing load") &&
                                  Catch::Contains("measure again when it is quiet"));
  report = nlohmann::json::parse(std::ifstream(json));
  CHECK(report["round_drift"]["slowest_round"].get<double>() == Approx(1.3).epsilon(0.05));

  // One round: nothing to table.
  const std::string one_round = edited_measurements("one-round.json", [](nlohmann::json& j) {
    j["settings"]["rounds"] = 1;
    for (nlohmann::json& p : j["points"])
      p.erase("rounds");
  });
  CommandResult single = run_command(epochcast_binary() + " validate " + scenario() + " " +
                                     one_round + " --json " + json);
  INFO(single.output);
  REQUIRE(single.exit_code == 0);
  CHECK_THAT(single.output, !Catch::Contains("interleaved rounds"));
  report = nlohmann::json::parse(std::ifstream(json));
  CHECK_FALSE(report.contains("round_drift"));
}

TEST_CASE("the calibration loop reports a file of one batch size without holding any out") {
  // A single-point scenario (the GPU campaign's DDP point) or a campaign cut short after its
  // first point: nothing to hold out, so the loop validates the file as it is and its summary
  // line has no held-out figures, where `validate --holdout` alone would refuse it (exit 2).
  const std::filesystem::path data = out_path("one-batch-loop");
  std::filesystem::remove_all(data);
  std::filesystem::create_directories(data);
  const std::string one_point = edited_measurements("one-batch.json", [](nlohmann::json& j) {
    nlohmann::json kept = nlohmann::json::array();
    for (const nlohmann::json& p : j["points"])
      if (p["global_batch"] == 8) kept.push_back(p);
    j["points"] = kept;
  });
  std::filesystem::copy_file(one_point, data / "cpu-mnist-cnn.json");
  const std::filesystem::path build =
      std::filesystem::path(epochcast_binary()).parent_path().parent_path();
  CommandResult r = run_command("cd " + source_dir().string() +
                                " && tools/calibration_loop.sh --no-measure --device cpu --build " +
                                build.string() + " --data " + data.string() + " " + scenario());
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("cpu-mnist-cnn: 1 batch size(s) measured ok, none to "
                                       "hold out: validated uncalibrated"));
  std::ifstream in(data / "summary.txt");
  std::stringstream summary;
  summary << in.rdbuf();
  CHECK(std::regex_search(summary.str(), std::regex("\ncpu-mnist-cnn +- +[0-9.]+% +- +- +- ")));
}

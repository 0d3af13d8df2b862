// `epochcast compare` and `epochcast predict --plot` end to end.
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

std::string scenario(const std::string& relative) {
  return (source_dir() / "scenarios" / relative).string();
}
std::string out_path(const std::string& name) {
  return epochcast::test::output_file(name);
}
}  // namespace

TEST_CASE("compare runs the sweep on each machine and recommends by time and by cost") {
  std::string json = out_path("compare.json"), csv = out_path("compare.csv");
  CommandResult r = run_command(
      epochcast_binary() + " compare " + scenario("what-if/resnet50-rtx4090-or-h100.yaml") +
      " --hardware rtx4090-8x-pcie hgx-h100-4gpu --batch 128 --json " + json + " --csv " + csv);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("rtx4090-8x-pcie"));
  CHECK_THAT(r.output, Catch::Contains("hgx-h100-4gpu"));
  CHECK_THAT(r.output, Catch::Contains("$/epoch"));
  // Faster on the H100s, cheaper on the 4090s: the sentence names both.
  CHECK_THAT(r.output, Catch::Contains("Recommendation: hgx-h100-4gpu when time matters most"));
  CHECK_THAT(r.output, Catch::Contains("rtx4090-8x-pcie when cost does"));
  nlohmann::json j = nlohmann::json::parse(read_file(json));
  CHECK(j["schema"] == "epochcast.comparison/1");
  REQUIRE(j["machines"].size() == 2);
  // The 4-GPU machine runs the sweep's counts it has (1, 2, 4), not 8.
  CHECK(j["machines"][1]["points"].size() == 3);
  CHECK(j["machines"][1]["fastest"]["gpus"] == 4);
  double price = j["machines"][1]["price_per_gpu_hour"].get<double>();
  double epoch = j["machines"][1]["fastest"]["epoch_s"].get<double>();
  CHECK(j["machines"][1]["fastest"]["cost_per_epoch"].get<double>() ==
        Approx(price * 4 * epoch / 3600));
  std::string table = read_file(csv);
  CHECK(std::count(table.begin(), table.end(), '\n') == 1 + 4 + 3);
}

TEST_CASE("compare without prices recommends by time and says how to add them") {
  CommandResult r = run_command(epochcast_binary() + " compare " +
                                scenario("what-if/seed001-linear-nvlink.yaml") +
                                " --hardware rtx2080ti-4x-hostbridge rtx2080ti-4x-nvlink-pairs "
                                "--batch 100,600 --details");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("give the machine files a price"));
  // --details prints each machine's predict table first.
  CHECK_THAT(r.output, Catch::Contains("Fastest point that fits"));
}

TEST_CASE("compare marks a machine that cannot run the sweep's GPU counts") {
  CommandResult r = run_command(epochcast_binary() + " compare " +
                                scenario("what-if/bert-base-8-to-64-gpus-ib.yaml") +
                                " --hardware seed003-desktop dgx-h100 --gpus 8");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("none of the sweep's GPU counts runs on its 1 GPUs"));
  CHECK_THAT(r.output, Catch::Contains("only machine here"));
}

TEST_CASE("compare refuses unknown machines and missing --hardware with exit code 2") {
  CommandResult misspelt = run_command(epochcast_binary() + " compare " +
                                       scenario("seed-001/linear.yaml") + " --hardware dgx-h10");
  CHECK(misspelt.exit_code == 2);
  CHECK_THAT(misspelt.output, Catch::Contains("--hardware"));
  CHECK_THAT(misspelt.output, Catch::Contains("did you mean"));
  CommandResult missing =
      run_command(epochcast_binary() + " compare " + scenario("seed-001/linear.yaml"));
  CHECK(missing.exit_code == 2);
  CommandResult not_machine =
      run_command(epochcast_binary() + " compare " + scenario("seed-001/linear.yaml") +
                  " --hardware " + scenario("seed-001/conv1d.yaml"));
  CHECK(not_machine.exit_code == 2);
}

TEST_CASE("a machine's price needs a figure and its source") {
  std::string file = out_path("priced.yaml");
  std::ofstream(file) << "kind: machine\nname: priced\ngpu: l4\ngpus_per_node: 1\n"
                         "host: {cpu: x, cores: 4}\nprice: {per_gpu_hour: 0.8}\n";
  CommandResult r = run_command(epochcast_binary() + " compare " +
                                scenario("seed-003/desktop.yaml") + " --hardware " + file);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("priced.yaml:6"));
  CHECK_THAT(r.output, Catch::Contains("source"));
}

TEST_CASE("predict --plot draws epoch time, breakdown and scaling with data and scripts beside") {
  std::filesystem::path dir = out_path("plots");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::string image = (dir / "conv1d.png").string();
  CommandResult r =
      run_command(epochcast_binary() + " predict " + scenario("seed-001/conv1d.yaml") +
                  " --gpus 1,2,4 --batch 20,100,600 --plot " + image);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  for (const char* stem : {"conv1d", "conv1d-breakdown", "conv1d-scaling"}) {
    INFO(stem);
    std::string png = read_file((dir / (std::string(stem) + ".png")).string());
    REQUIRE(png.size() > 1000);
    CHECK(png.substr(1, 3) == "PNG");
    CHECK(std::filesystem::exists(dir / (std::string(stem) + ".dat")));
    CHECK_THAT(read_file((dir / (std::string(stem) + ".gp")).string()),
               Catch::Contains("data = \"" + std::string(stem) + ".dat\""));
  }
  // The script redraws the image as it is, run by hand in its directory.
  std::filesystem::remove(dir / "conv1d.png");
  CommandResult again = run_command("cd '" + dir.string() + "' && gnuplot conv1d.gp");
  INFO(again.output);
  CHECK(again.exit_code == 0);
  CHECK(read_file((dir / "conv1d.png").string()).substr(1, 3) == "PNG");
  // The epoch-time data: a block per GPU count, a row per batch.
  std::string data = read_file((dir / "conv1d.dat").string());
  CHECK(std::count(data.begin(), data.end(), '\n') == 1 + 3 * 3 + 2 * 2);
  // Nothing half-written is left behind.
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    CHECK(entry.path().extension() != ".partial");
}

TEST_CASE("the epoch plot is zoomed to its points, each GPU count styled apart, OOM marked") {
  std::filesystem::path dir = out_path("plots-oom");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string image = (dir / "oom.png").string();
  // ResNet-50 on 24 GB RTX 4090s: 512 images per GPU do not fit.
  CommandResult r = run_command(epochcast_binary() + " predict " +
                                scenario("what-if/resnet50-rtx4090-or-h100.yaml") +
                                " --gpus 1,2 --batch 128,256,512 --plot " + image + " 2>&1");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("Plotted " + image + " (gnuplot data and script: "));
  const std::string script = read_file((dir / "oom.gp").string());
  // A line per GPU count, each its own point type and dash.
  CHECK_THAT(script, Catch::Contains("lc 1 pt 7 dt 1 title '1 GPU'"));
  CHECK_THAT(script, Catch::Contains("lc 2 pt 5 dt 2 title '2 GPUs'"));
  // Axes zoomed to the data (no whole decades), the sweep's batches labelled.
  CHECK_THAT(script, Catch::Contains("set xtics (\"128\" 128, \"256\" 256, \"512\" 512"));
  CHECK_THAT(script, Catch::Contains("set yrange ["));
  // The points that do not fit: a cross per GPU count in its colour, and the word OOM.
  CHECK_THAT(script, Catch::Contains("with points pt 2"));
  CHECK_THAT(script, Catch::Contains("title 'x: out of memory'"));
  CHECK_THAT(script, Catch::Contains("(\"OOM\") with labels"));
  const std::string data = read_file((dir / "oom.dat").string());
  CHECK_THAT(data, Catch::Contains("# 1 GPU: out of memory"));
  CHECK_THAT(data, Catch::Contains("# 2 GPUs: out of memory"));
}

TEST_CASE("predict --plot of one GPU count draws no scaling figure, SVG works too") {
  std::filesystem::path dir = out_path("plots-svg");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  CommandResult r =
      run_command(epochcast_binary() + " predict " + scenario("seed-003/desktop.yaml") +
                  " --batch 16,256 --plot " + (dir / "mnist.svg").string());
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(read_file((dir / "mnist.svg").string()), Catch::Contains("<svg"));
  CHECK(std::filesystem::exists(dir / "mnist-breakdown.svg"));
  CHECK_FALSE(std::filesystem::exists(dir / "mnist-scaling.svg"));
}

TEST_CASE("predict --plot refuses other image types before predicting") {
  CommandResult r = run_command(epochcast_binary() + " predict " +
                                scenario("seed-003/desktop.yaml") + " --plot out.jpg");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("--plot"));
  CHECK_THAT(r.output, Catch::Contains(".png or .svg"));
}

TEST_CASE("compare marks a machine that lacks a straggler's rank or a faulty link") {
  CommandResult r = run_command(epochcast_binary() + " compare " +
                                scenario("what-if/stragglers-and-faults-h100.yaml") +
                                " --hardware dgx-h100-cluster dgx-h100 --gpus 8");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("its stragglers.gpus[0].gpu does not exist there "
                                       "(expected an integer from 0 to 7, got 11)"));
  CHECK_THAT(r.output, Catch::Contains("its faults.links[0].node does not exist there"));
}

TEST_CASE("a name with a shell command in it is drawn as text, never run, also when rerun") {
  std::filesystem::path dir = out_path("plots-hostile-name");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "work");
  // Seed 003's scenario under a name that gnuplot would run inside double quotes.
  std::string text = read_file(scenario("seed-003/desktop.yaml"));
  const std::string hostile = "x `touch pwned` $(touch pwned2) @title it's";
  text.replace(text.find("name: seed-003-desktop"), 22, "name: \"" + hostile + "\"");
  const std::string yaml = (dir / "hostile.yaml").string();
  std::ofstream(yaml) << text;
  const std::string work = (dir / "work").string();
  CommandResult predicted = run_command("cd '" + work + "' && " + epochcast_binary() + " predict " +
                                        yaml + " --batch 16,256 --plot p.png");
  INFO(predicted.output);
  REQUIRE(predicted.exit_code == 0);
  // A results table of that scenario, validated with a plot.
  std::ofstream(dir / "work" / "measured.csv") << "gpus,global_batch,epoch_s\n1,16,30\n1,256,3\n";
  CommandResult validated = run_command("cd '" + work + "' && " + epochcast_binary() +
                                        " validate " + yaml + " measured.csv --plot v.png");
  INFO(validated.output);
  REQUIRE(validated.exit_code == 0);
  // The scripts hold the name with its backquotes escaped; rerunning them runs nothing either.
  CHECK_THAT(
      read_file(dir / "work" / "p.gp"),
      Catch::Contains("\"x \\140touch pwned\\140 $(touch pwned2) @title it's: predicted epoch "
                      "time"));
  for (const char* script : {"p.gp", "p-breakdown.gp", "v.gp"}) {
    CommandResult rerun = run_command("cd '" + work + "' && gnuplot " + script);
    INFO(script << ": " << rerun.output);
    CHECK(rerun.exit_code == 0);
  }
  CHECK(std::filesystem::exists(dir / "work" / "v.png"));
  for (const char* planted : {"pwned", "pwned2"}) {
    CHECK_FALSE(std::filesystem::exists(dir / "work" / planted));
    CHECK_FALSE(std::filesystem::exists(dir / planted));
  }
}

TEST_CASE("compare prices small jobs to two significant digits, and weighs cost among the priced") {
  // ResNet-50 on 2,000 images: an epoch costs a fraction of a cent; the A100 box has no price.
  CommandResult r =
      run_command("env -u COLUMNS " + epochcast_binary() + " compare " +
                  scenario("what-if/resnet50-rtx4090-or-h100.yaml") +
                  " --hardware rtx4090-8x-pcie hgx-h100-4gpu dgx-a100 --batch 128 --set "
                  "dataset.train_samples=2000");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, !Catch::Contains("$0.000 "));
  CHECK_THAT(r.output, Catch::Matches("[\\s\\S]*\\$0\\.00[1-9][0-9][\\s\\S]*"));
  CHECK_THAT(r.output, Catch::Contains("rtx4090-8x-pcie when cost does"));
  CHECK_THAT(r.output, Catch::Contains("dgx-a100 has no price (price: {per_gpu_hour, source}), "
                                       "so cost is weighed among the others"));
}

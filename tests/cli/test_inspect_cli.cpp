// `epochcast inspect` end to end: the seed's torchsummary figures, JSON, and exit codes.
#include <algorithm>
#include <fstream>
#include <iterator>
#include <string>

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
  std::string file = epochcast::test::output_file("broken-model.yaml");
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

TEST_CASE("inspect --hardware says which kernels a power-limited board runs below boost") {
  // A T4 (the catalogue's power rule: 70 W for 8.14 fp32 TFLOP/s against the V100 PCIe's 250 W
  // for 14.0, so 0.486 of 1590 MHz = 773 MHz with every SM busy) in a copy of the
  // single-GPU machine. At batch 1 the large layers' kernels run at the sustained clock and
  // the smallest (few tiles, few SMs busy) at boost.
  std::ifstream in(source_file("topologies/h100-sxm-1gpu.yaml"));
  std::string machine((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::size_t at = machine.find("gpu: h100-sxm");
  REQUIRE(at != std::string::npos);
  machine.replace(at, 13, "gpu: t4");
  const std::string file = output_file("inspect-t4-1gpu.yaml");
  std::ofstream(file) << machine;
  const double held = (70 / 8.14) / (250 / 14.0);
  CommandResult r = run_command(epochcast_binary() + " inspect resnet-50 --hardware " + file +
                                " --batch 1 --json");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  nlohmann::json out = nlohmann::json::parse(r.output);
  CHECK(out["clocks"]["sustained_from_power_rule"] == true);
  CHECK(out["clocks"]["peak_fraction"].get<double>() == Approx(held).epsilon(0.01));
  double lowest = 1, highest = 0;
  for (const auto& k : out["kernels"]) {
    if (k["bound"] != "compute") continue;
    lowest = std::min(lowest, k["clock_fraction"].get<double>());
    highest = std::max(highest, k["clock_fraction"].get<double>());
  }
  CHECK(lowest == Approx(held).epsilon(0.02));
  CHECK(highest == 1.0);
  CommandResult text =
      run_command(epochcast_binary() + " inspect resnet-50 --hardware " + file + " --batch 64");
  REQUIRE(text.exit_code == 0);
  CHECK_THAT(text.output, Catch::Contains("% of boost (power limit)"));
  CHECK_THAT(text.output, Catch::Contains("773 MHz sustained (power rule) of 1590 MHz boost"));
}

TEST_CASE("a command-line mistake exits 2") {
  CHECK(run_command(epochcast_binary() + " inspekt resnet-50").exit_code == 2);
  CHECK(run_command(epochcast_binary() + " inspect").exit_code == 2);
  CHECK(run_command(epochcast_binary() + " --help").exit_code == 0);
}

TEST_CASE("inspect --hardware explains each kernel: time, bound, algorithm, efficiency, source") {
  CommandResult r = run_command(epochcast_binary() +
                                " inspect spoken-digits-conv1d --hardware seed001-box --batch 50");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains(
                           "on NVIDIA GeForce GTX 1080 Ti (pascal, fp32; 1582 MHz boost clock, no "
                           "sustained clock known)"));
  // The first convolution: 50 filters of width 200 over 12,000 samples, as an implicit GEMM
  // bound by its arithmetic at the profile's conv efficiency of the fp32 peak. Pascal's
  // 128-row tiles take the 50 filters as 64 columns: 50/64 = 78% of the tiles' work is useful.
  auto line_of = [&](const std::string& output, const std::string& start) {
    const std::size_t row = output.find(start);
    REQUIRE(row != std::string::npos);
    return output.substr(row, output.find('\n', row) - row);
  };
  const std::string line = line_of(r.output, "Conv1d-1     forward      conv_forward");
  for (const char* part : {"implicit GEMM 600050x50x200, tiles 128x64", " 12.001 ", " compute ",
                           " 78% ", "conv 0.65 of 11.34 TFLOPS"}) {
    CHECK_THAT(line, Catch::Contains(part));
  }
  CHECK_THAT(r.output, Catch::Contains("cudnn.benchmark off, channels_first"));
  // Element-wise kernels stream at the board's streaming figure (the catalogue's 387 of 484
  // GB/s); reductions (the bias gradient's sum) at 1.06 times that, read-only.
  CHECK_THAT(r.output, Catch::Contains("memory 0.8: 387 GB/s"));
  CHECK_THAT(r.output, Catch::Contains("memory 0.8 x reduction 1.06: 410.2 GB/s"));
  CHECK_THAT(r.output, Catch::Contains("gpu.memory_efficiency: the NVIDIA GeForce GTX 1080 Ti's "
                                       "streaming bandwidth"));
  CHECK_THAT(r.output, Catch::Contains("gpu.bandwidth_relative: reduction: "));
  CHECK_THAT(r.output, Catch::Contains("gpu.efficiency: "));
  CHECK_THAT(r.output, Catch::Contains("for pascal at fp32"));

  // With cudnn.benchmark the fastest algorithm runs: a 3x3 stride-1 convolution of ResNet-50
  // takes Winograd in strict fp32; in PyTorch's default fp32 (cuDNN on TF32) and under mixed
  // precision on an A100 the tensor cores' implicit GEMM wins, with the NCHW transposes unless
  // the activations are channels-last.
  CommandResult winograd = run_command(epochcast_binary() +
                                       " inspect resnet-50 --hardware dgx-a100 --batch 64 "
                                       "--precision fp32_strict --cudnn-benchmark");
  REQUIRE(winograd.exit_code == 0);
  CHECK_THAT(winograd.output, Catch::Contains("Winograd F(4x4,3x3) (4 kernels)"));
  CommandResult tf32_convolutions = run_command(epochcast_binary() +
                                                " inspect resnet-50 --hardware dgx-a100 "
                                                "--batch 64 --cudnn-benchmark");
  REQUIRE(tf32_convolutions.exit_code == 0);
  CHECK_THAT(tf32_convolutions.output, !Catch::Contains("Winograd"));
  CHECK_THAT(tf32_convolutions.output, Catch::Contains("+ NCHW<->NHWC transposes"));
  CommandResult amp = run_command(epochcast_binary() +
                                  " inspect resnet-50 --hardware dgx-a100 --batch 64 "
                                  "--precision amp_fp16 --cudnn-benchmark");
  REQUIRE(amp.exit_code == 0);
  CHECK_THAT(amp.output, Catch::Contains("+ NCHW<->NHWC transposes"));
  CHECK_THAT(amp.output, !Catch::Contains("Winograd"));
  CommandResult nhwc = run_command(epochcast_binary() +
                                   " inspect resnet-50 --hardware dgx-a100 --batch 64 "
                                   "--precision amp_fp16 --channels-last");
  REQUIRE(nhwc.exit_code == 0);
  CHECK_THAT(nhwc.output, !Catch::Contains("transposes"));

  CommandResult j = run_command(epochcast_binary() +
                                " inspect resnet-50 --hardware dgx-a100 --batch 256 "
                                "--precision amp_bf16 --json");
  REQUIRE(j.exit_code == 0);
  nlohmann::json out = nlohmann::json::parse(j.output);
  CHECK(out["architecture"] == "ampere");
  // The clock the peaks are taken at: the A100's boost, no sustained clock known.
  CHECK(out["clocks"]["boost_mhz"] == 1410);
  CHECK(out["clocks"]["sustained_mhz"].is_null());
  CHECK(out["clocks"]["peak_fraction"] == 1.0);
  CHECK(out["kernels"].size() > 300);
  for (const auto& k : out["kernels"]) {
    if (k["op_class"] == "gemm" && k["bound"] == "compute") {
      CHECK(k["efficiency"] == 0.87);  // Ampere bf16 GEMMs (MAMF)
      CHECK(k["peak_flops"] == 312e12);
    }
  }
}

TEST_CASE("inspect --hardware refuses a bad machine, precision or batch") {
  CommandResult machine = run_command(epochcast_binary() + " inspect mnist-cnn --hardware dgx-a10");
  CHECK(machine.exit_code == 2);
  CHECK_THAT(machine.output, Catch::Contains("did you mean"));
  CommandResult precision =
      run_command(epochcast_binary() + " inspect mnist-cnn --hardware dgx-a100 --precision fp16");
  CHECK(precision.exit_code == 2);
  CHECK_THAT(precision.output, Catch::Contains("amp_fp16"));
  CommandResult batch =
      run_command(epochcast_binary() + " inspect mnist-cnn --hardware dgx-a100 --batch 0");
  CHECK(batch.exit_code == 2);
}

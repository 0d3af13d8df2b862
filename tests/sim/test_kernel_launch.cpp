// Kernels are cut into blocks as ATen launches them, and the occupancy follows from those
// blocks: each expectation below is written from the launch code the rule cites, in the test,
// and the row-wise rules are checked against 3,150 launches recorded on an A100.
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include <catch2/catch.hpp>

#include "core/model/analysis.h"
#include "core/model/model_spec.h"
#include "core/spec/hardware_spec.h"
#include "core/spec/profile_spec.h"
#include "sim/compute/device_model.h"
#include "sim/compute/kernel_launch.h"
#include "support/paths.h"

using namespace epochcast;
using namespace epochcast::sim;

namespace {

const GpuSpec& gpu(const std::string& id) {
  return *bundled_gpu_catalogue().find(id);
}

DeviceModel device(const std::string& id, TrainingPrecision precision = TrainingPrecision::fp32,
                   bool channels_last = false) {
  ConvolutionSettings convolution;
  convolution.channels_last = channels_last;
  return DeviceModel(gpu(id), load_profile(test::source_dir() / "topologies/profiles/default.yaml"),
                     precision, convolution);
}

ModelAnalysis analyze(const std::string& layers, const std::string& input,
                      TrainingPrecision precision = TrainingPrecision::fp32) {
  return analyze_model(
      load_model_from_string(
          "kind: model\nname: m\ninput: {shape: " + input + "}\nlayers:\n" + layers, "m.yaml"),
      cost_options(precision));
}

const KernelWork& named(const std::vector<KernelWork>& kernels, std::string_view name) {
  for (const KernelWork& k : kernels) {
    if (k.name == name) return k;
  }
  FAIL("no kernel " << name);
  return kernels.front();
}

double ceil_div(double a, double b) {
  return std::ceil(a / b);
}

// The occupancy every test checks: blocks over SMs, at most 1.
double utilisation(double blocks, const GpuSpec& g) {
  return std::min(1.0, blocks / g.sm_count);
}

}  // namespace

TEST_CASE("LayerNorm and softmax launch the grids PyTorch 2.1 recorded on an A100 (3,150)") {
  std::ifstream in(test::source_dir() / "tests/sim/data/aten-launches-a100.csv");
  REQUIRE(in);
  const DeviceModel a100 = device("a100-sxm4-40gb");
  std::map<std::pair<std::string, std::int64_t>, ModelAnalysis> models;
  int checked = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#' || line.rfind("op,", 0) == 0) continue;
    std::istringstream fields(line);
    std::string op, cell;
    std::getline(fields, op, ',');
    std::int64_t values[5];
    for (std::int64_t& v : values) {
      std::getline(fields, cell, ',');
      v = std::stoll(cell);
    }
    const auto [rows, length, grid_x, block_x, block_y] =
        std::tuple{values[0], values[1], values[2], values[3], values[4]};
    // One row per sample: the batch is the number of rows.
    auto key = std::pair{op, length};
    if (!models.contains(key)) {
      models.emplace(key, analyze(op == "ln" ? "  - layernorm\n" : "  - softmax\n",
                                  "[" + std::to_string(length) + "]"));
    }
    const KernelWork& kernel = models.at(key).layers[0].forward[0];
    const LaunchGrid grid = a100.launch(kernel, rows);
    INFO(op << " rows " << rows << " length " << length << ": " << grid.rule);
    CHECK(grid.blocks == static_cast<double>(grid_x));
    CHECK(grid.threads == block_x * block_y);
    ++checked;
  }
  CHECK(checked == 3150);
}

TEST_CASE("LayerNorm: a block per row forward and back, gamma/beta a block per 32 columns") {
  // BERT-base's LayerNorm at batch 8: 8 x 128 rows of 768 on an A100 (108 SMs).
  const ModelAnalysis a = analyze("  - layernorm\n", "[128, 768]", TrainingPrecision::amp_bf16);
  const DeviceModel a100 = device("a100-sxm4-40gb", TrainingPrecision::amp_bf16);
  const GpuSpec& g = gpu("a100-sxm4-40gb");
  const LayerCosts& ln = a.layers[0];
  for (std::int64_t batch : {1, 8, 64}) {
    INFO("batch " << batch);
    const double rows = 128.0 * static_cast<double>(batch);
    // vectorized_layer_norm_kernel and layer_norm_grad_input_kernel: <<<M, 128>>>.
    CHECK(a100.memory_utilisation(named(ln.forward, "layer_norm"), batch) ==
          Approx(utilisation(rows, g)));
    CHECK(a100.memory_utilisation(named(ln.backward_weight, "layer_norm_backward_gamma_beta"),
                                  batch) ==
          Approx(utilisation(rows < 128 ? ceil_div(768, 256) : ceil_div(768, 32), g)));
  }
  // At batch 8 the forward fills the GPU: 1,024 rows, 1,024 blocks.
  CHECK(a100.memory_utilisation(named(ln.forward, "layer_norm"), 8) == 1.0);
  // gamma/beta: 768 / 32 = 24 blocks of 32 x 32 threads, whatever the batch.
  const LaunchGrid gamma =
      a100.launch(named(ln.backward_weight, "layer_norm_backward_gamma_beta"), 8);
  CHECK(gamma.blocks == 24);
  CHECK(gamma.threads == 1024);
}

TEST_CASE("softmax and log_softmax: a warp per short row, a block per long one") {
  const DeviceModel a100 = device("a100-sxm4-40gb");
  const GpuSpec& g = gpu("a100-sxm4-40gb");
  // Attention scores of 12 heads over 128 tokens: rows of 128 (next power of two 128: a warp
  // holds two rows, four warps a block: 8 rows a block).
  const ModelAnalysis attention =
      analyze("  - {type: multihead_attention, heads: 12, dropout: 0}\n", "[128, 768]");
  for (std::int64_t batch : {1, 2, 16}) {
    INFO("batch " << batch);
    const double rows = 12.0 * 128 * static_cast<double>(batch);
    CHECK(a100.memory_utilisation(named(attention.layers[0].forward, "softmax"), batch) ==
          Approx(utilisation(ceil_div(rows, 8), g)));
  }
  // The loss over ImageNet's 1,000 classes: rows of 1,000 float32 (4,000 bytes) still fit the
  // warp path, one row a warp (next power of two 1,024 > 128), four rows a block.
  LayerCosts imagenet = cross_entropy_costs(TensorShape{{1000}}, CostOptions{});
  const KernelWork& log_softmax = named(imagenet.forward, "log_softmax");
  for (std::int64_t batch : {32, 256, 1024}) {
    CHECK(a100.memory_utilisation(log_softmax, batch) ==
          Approx(utilisation(ceil_div(static_cast<double>(batch), 4), g)));
  }
  CHECK(a100.launch(named(imagenet.backward_input, "log_softmax_backward"), 256).blocks == 64);
  // A language model's 30,522-word vocabulary: a block per row (512 threads: 16-byte loads of
  // four floats, at most half the row's 7,630 vectors, rounded up to a power of two).
  LayerCosts words = cross_entropy_costs(TensorShape{{128, 30522}}, CostOptions{});
  const LaunchGrid vocabulary = a100.launch(named(words.forward, "log_softmax"), 8);
  CHECK(vocabulary.blocks == 8 * 128);
  CHECK(vocabulary.threads == 512);
}

TEST_CASE("NLL loss: one block of 32 threads, whatever the batch") {
  const DeviceModel h100 = device("h100-sxm");
  LayerCosts loss = cross_entropy_costs(TensorShape{{1000}}, CostOptions{});
  for (const KernelWork* k :
       {&named(loss.forward, "nll_loss"), &named(loss.backward_input, "nll_loss_backward")}) {
    for (std::int64_t batch : {1, 256, 65536}) {
      const LaunchGrid grid = h100.launch(*k, batch);
      CHECK(grid.blocks == 1);
      CHECK(grid.threads == 32);
      CHECK(h100.memory_utilisation(*k, batch) == Approx(1.0 / gpu("h100-sxm").sm_count));
    }
  }
  // Its backward zeroes the whole input gradient first, an element-wise kernel.
  CHECK(loss.backward_input[0].name == "zero_");
  CHECK(h100.launch(loss.backward_input[0], 256).blocks == ceil_div(256.0 * 1000, 512));
}

TEST_CASE("BatchNorm's statistics: a block per channel, or the channels-last grid") {
  // ResNet-50's first bottleneck BatchNorm: 64 channels of 56 x 56 on an H100 (132 SMs).
  const ModelAnalysis a = analyze("  - batchnorm2d\n", "[64, 56, 56]", TrainingPrecision::amp_bf16);
  const GpuSpec& g = gpu("h100-sxm");
  const DeviceModel first = device("h100-sxm", TrainingPrecision::amp_bf16);
  const LayerCosts& bn = a.layers[0];
  // bfloat16 runs ATen's kernels: statistics <<<C, 512>>>, the normalisation a row of
  // min(max(1, min(256 x 1,024 / C, ceil(N / tb))), 65,535) blocks per channel, where
  // tf = max(getNumThreads(HW / 4), min(getNumThreads(HW), 64)) = 512 and tb = max(64 / tf, 1).
  const KernelWork& statistics = named(bn.forward, "batch_norm_collect_statistics");
  const KernelWork& transform = named(bn.forward, "batch_norm_transform_input");
  for (std::int64_t batch : {16, 256}) {
    INFO("batch " << batch);
    CHECK(first.launch(statistics, batch).blocks == 64);
    CHECK(first.memory_utilisation(statistics, batch) == Approx(utilisation(64, g)));
    const double per_channel =
        std::min(std::max(1.0, std::min(256.0 * 1024 / 64, static_cast<double>(batch))), 65535.0);
    CHECK(first.launch(transform, batch).blocks == 64 * per_channel);
    // The model's first layer: its input needs no gradient, the kernel still computes dgamma.
    CHECK(first.memory_utilisation(named(bn.backward_weight, "batch_norm_backward"), batch) ==
          Approx(utilisation(64, g)));
  }
  // float32 and float16 go to cuDNN: one forward kernel, taken to cut per channel too.
  const ModelAnalysis fp32 = analyze("  - batchnorm2d\n", "[64, 56, 56]");
  CHECK(fp32.layers[0].forward[0].name == "batch_norm_forward");
  CHECK(device("h100-sxm").launch(fp32.layers[0].forward[0], 256).blocks == 64);
  // channels_last: flexible_launch_configs over C = 64 channels and N x H x W = 802,816
  // positions: x = min(lastPow2(64), 32) = 32, y = min(lastPow2(802,816 / 16), 512 / 32) = 16;
  // grid (ceil(64 / 32), min(ceil(802,816 / (16 x 16)), 128)) = (2, 128).
  const DeviceModel nhwc = device("h100-sxm", TrainingPrecision::amp_bf16, true);
  const LaunchGrid last = nhwc.launch(statistics, 256);
  CHECK(last.blocks == 2 * 128);
  CHECK(last.threads == 512);
  CHECK(nhwc.memory_utilisation(statistics, 256) == 1.0);
}

TEST_CASE("reductions split as Reduce.cuh does: bias gradients of linear and conv layers") {
  const GpuSpec& g = gpu("a100-sxm4-40gb");
  const DeviceModel a100 = device("a100-sxm4-40gb");
  // A linear bias gradient: [rows, 768].sum(0), the outputs adjacent. Four outputs a thread
  // (768 divides by 4): dim0 = 192, dim1 = rows, at most 512 / 4 = 128 threads; block
  // 32 x min(lastPow2(rows), 128 / 32) = 32 x 4. Lanes take outputs; warps split the rows once
  // a thread would sum 4 x 16 or more, else take outputs too: grid ceil(192 / 32) = 6 or
  // ceil(192 / 128) = 2. Once a thread still sums 256 or more, each output's rows are split
  // across max(min(ceil(target / 6), ceil(vpt / 16)), ceil(vpt / 256)) blocks, where
  // target = 108 SMs x 2,048 / 128 threads.
  const ModelAnalysis linear = analyze("  - {type: linear, out_features: 768}\n", "[768]");
  const KernelWork& bias = named(linear.layers[0].backward_weight, "sum");
  for (std::int64_t rows : {16, 512, 1024, 16384}) {
    INFO("rows " << rows);
    const bool split = rows >= 4 * 16;
    double blocks = split ? 6 : 2;
    const double per_thread = ceil_div(static_cast<double>(rows), 4);
    if (split && per_thread >= 256) {
      blocks *= std::max(std::min(ceil_div(108.0 * 2048 / 128, 6), ceil_div(per_thread, 16)),
                         ceil_div(per_thread, 256));
    }
    CHECK(a100.launch(bias, rows).blocks == blocks);
    CHECK(a100.memory_utilisation(bias, rows) == Approx(utilisation(blocks, g)));
  }
  CHECK(a100.launch(bias, 1024).blocks == 6 * 16);
  // A conv bias gradient in NCHW: [N, 32, 24, 24].sum(0, 2, 3), each channel's positions
  // adjacent: dim0 = N x 576 inputs, dim1 = 32 outputs; block 32 x 16, lanes over inputs, warps
  // over outputs (a thread sums ceil(N x 576 / 32), under 16 x 16 and 256 for N = 8): two blocks.
  const ModelAnalysis conv =
      analyze("  - {type: conv2d, out_channels: 32, kernel: 5}\n", "[1, 28, 28]");
  const KernelWork& conv_bias = named(conv.layers[0].backward_weight, "sum");
  CHECK(a100.launch(conv_bias, 8).blocks == 2);
  CHECK(a100.launch(conv_bias, 8).threads == 512);
  // In channels-last memory the channels are adjacent instead: four outputs a thread, dim0 = 8,
  // dim1 = 4,608, block 8 x 16, one block of outputs; a thread sums 4,608 / 16 = 288, so the
  // inputs split over max(min(1,728, ceil(288 / 16)), ceil(288 / 256)) = 18 blocks.
  const LaunchGrid nhwc =
      device("a100-sxm4-40gb", TrainingPrecision::fp32, true).launch(conv_bias, 8);
  CHECK(nhwc.blocks == 18);
  CHECK(nhwc.threads == 128);
}

TEST_CASE("element-wise kernels take 512 elements a block, as every add, relu and gelu measured") {
  const DeviceModel a100 = device("a100-sxm4-40gb");
  const ModelAnalysis a = analyze("  - relu\n", "[1000]");
  for (std::int64_t batch : {1, 37, 200}) {
    CHECK(a100.launch(a.layers[0].forward[0], batch).blocks ==
          ceil_div(1000.0 * static_cast<double>(batch), 512));
    CHECK(a100.launch(a.layers[0].forward[0], batch).threads == 128);
  }
}

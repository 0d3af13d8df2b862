// Convolution algorithms: the kernels each one launches, checked analytically (Winograd's and
// FFT's arithmetic, the implicit GEMM's shape, tensor-core padding), and the choice cuDNN makes
// with and without cudnn.benchmark.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "core/model/analysis.h"
#include "core/spec/hardware_spec.h"
#include "core/spec/profile_spec.h"
#include "sim/compute/conv_algorithms.h"
#include "sim/compute/device_model.h"
#include "support/paths.h"

using namespace epochcast;
using namespace epochcast::sim;

namespace {

// The forward, data-gradient and weight-gradient kernels of a model's first convolution.
struct ConvKernels {
  ModelAnalysis analysis;  // owns the kernels
  const KernelWork* forward = nullptr;
  const KernelWork* data = nullptr;
  const KernelWork* weight = nullptr;
};

// `before` (the same convolution unless given) comes first, so that the convolution's input
// needs a gradient (dgrad is launched).
ConvKernels first_conv(const std::string& input, const std::string& conv,
                       const std::string& before = "") {
  ConvKernels c;
  c.analysis = analyze_model(
      load_model_from_string("kind: model\nname: m\ninput: {shape: " + input + "}\nlayers:\n  - " +
                                 (before.empty() ? conv : before) + "\n  - " + conv + "\n",
                             "m.yaml"));
  const LayerCosts& layer = c.analysis.layers[1];  // the second: its input needs a gradient
  c.forward = &layer.forward[0];
  c.data = &layer.backward_input[0];
  c.weight = &layer.backward_weight[0];
  return c;
}

const KernelPart& gemm_of(const ConvPlan& plan) {
  for (const KernelPart& part : plan.parts) {
    if (part.work.has_gemm_shape) return part;
  }
  FAIL("the plan has no GEMM");
  return plan.parts.front();
}

const GpuSpec& gpu(const std::string& id) {
  return *bundled_gpu_catalogue().find(id);
}
HardwareProfile default_profile() {
  return load_profile(test::source_dir() / "topologies/profiles/default.yaml");
}

}  // namespace

TEST_CASE("implicit GEMM: output positions x filters, reducing over channels x window") {
  ConvKernels c =
      first_conv("[64, 56, 56]", "{type: conv2d, out_channels: 64, kernel: 3, padding: 1}");
  ConvContext fp32;
  ConvPlan forward = conv_plans(*c.forward, fp32).front();
  REQUIRE(forward.algorithm == ConvAlgorithm::implicit_gemm);
  REQUIRE(forward.parts.size() == 1);
  const GemmShape& f = forward.parts[0].work.gemm;
  CHECK(f.m.per_sample == 56 * 56);
  CHECK(f.n.fixed == 64);
  CHECK(f.k.fixed == 64 * 9);
  const GemmShape& w = conv_plans(*c.weight, fp32).front().parts[0].work.gemm;
  CHECK(w.m.fixed == 64);
  CHECK(w.n.fixed == 64 * 9);
  CHECK(w.k.per_sample == 56 * 56);
}

TEST_CASE("tensor cores pad channels to 16 bytes, NCHW adds cuDNN's transposes") {
  // ResNet-50's stem: 3 input channels, 7x7. fp16 pads the channels to 8, tf32 to 4.
  ConvKernels c = first_conv("[3, 224, 224]",
                             "{type: conv2d, out_channels: 3, kernel: 7, stride: 2, padding: 3}");
  ConvContext fp16;
  fp16.tensor_cores = true;
  fp16.channel_multiple = 8;
  fp16.activation_bytes = 2;
  ConvPlan plan = conv_plans(*c.forward, fp16).front();
  CHECK(plan.parts[0].work.gemm.k.fixed == 8 * 49);
  CHECK(plan.parts[0].work.gemm.n.fixed == 8);
  CHECK(plan.parts[0].tensor_cores);
  REQUIRE(plan.parts.size() == 2);  // NCHW: transposed in and out
  CHECK(plan.parts[1].what == "NCHW<->NHWC transposes");
  fp16.channels_last = true;
  CHECK(conv_plans(*c.forward, fp16).front().parts.size() == 1);
  ConvContext tf32 = fp16;
  tf32.channel_multiple = 4;
  CHECK(conv_plans(*c.forward, tf32).front().parts[0].work.gemm.k.fixed == 4 * 49);
}

TEST_CASE("Winograd F(4x4,3x3) does a quarter of the direct convolution's multiply-adds") {
  // Lavin & Gray: 36 products per 4x4 output tile against 16 x 9 = 144 multiply-adds.
  ConvKernels c =
      first_conv("[64, 56, 56]", "{type: conv2d, out_channels: 64, kernel: 3, padding: 1}");
  std::vector<ConvPlan> plans = conv_plans(*c.forward, ConvContext{});
  REQUIRE(plans.size() == 3);  // implicit GEMM, Winograd, FFT
  REQUIRE(plans[1].algorithm == ConvAlgorithm::winograd);
  const KernelPart& gemm = gemm_of(plans[1]);
  const double direct = static_cast<double>(c.forward->flops.per_sample.value());
  CHECK(static_cast<double>(gemm.work.flops.per_sample.value()) == Approx(direct / 4));
  CHECK(gemm.work.gemm.batches.fixed == 36);
  CHECK(gemm.work.gemm.m.per_sample == 14 * 14);  // 4x4 tiles over 56x56
  // The transformed input is 36/16 times the input, written once and read by the GEMM.
  CHECK(plans[1].parts.size() == 4);
  // Not for strided, 5x5 or 1-D convolutions.
  for (const char* conv : {"{type: conv2d, out_channels: 64, kernel: 3, stride: 2, padding: 1}",
                           "{type: conv2d, out_channels: 64, kernel: 5, padding: 2}"}) {
    ConvKernels other = first_conv("[64, 56, 56]", conv);
    for (const ConvPlan& plan : conv_plans(*other.forward, ConvContext{}))
      CHECK(plan.algorithm != ConvAlgorithm::winograd);
  }
}

TEST_CASE("FFT over 32-point tiles: for stride-1 windows that fit a tile, not for long ones") {
  // A 5x5 window on 28x28: one 32x32 tile (28 = 32 - 5 + 1 outputs) with 32 x 17 frequency bins
  // replaces 784 x 25 multiply-adds per channel pair by 544 complex ones.
  ConvKernels c =
      first_conv("[192, 28, 28]", "{type: conv2d, out_channels: 192, kernel: 5, padding: 2}");
  std::vector<ConvPlan> plans = conv_plans(*c.forward, ConvContext{});
  REQUIRE(plans.back().algorithm == ConvAlgorithm::fft_tiling);
  const KernelPart& products = gemm_of(plans.back());
  CHECK(products.work.gemm.batches.fixed == 32 * 17);
  CHECK(products.work.gemm.m.per_sample == 1);
  CHECK(static_cast<double>(products.work.flops.per_sample.value()) ==
        Approx(8.0 * 544 * 192 * 192));
  // Seed 001's 200-tap Conv1d does not fit a tile: implicit GEMM only, even with benchmark on.
  ConvKernels long_kernel =
      first_conv("[1, 12000]", "{type: conv1d, out_channels: 1, kernel: 200, padding: 100}");
  CHECK(conv_plans(*long_kernel.forward, ConvContext{}).size() == 1);
}

TEST_CASE("cudnn.benchmark takes the fastest algorithm, without it the heuristic's implicit GEMM") {
  ConvKernels c =
      first_conv("[64, 56, 56]", "{type: conv2d, out_channels: 64, kernel: 3, padding: 1}");
  const GpuSpec& a100 = gpu("a100-sxm4-80gb");
  // fp32_strict: true float32 arithmetic (PyTorch's default fp32 runs convolutions on TF32).
  DeviceModel heuristic(a100, default_profile(), TrainingPrecision::fp32_strict);
  DeviceModel benchmark(a100, default_profile(), TrainingPrecision::fp32_strict, {true, false});
  for (const KernelWork* k : {c.forward, c.data, c.weight}) {
    KernelExplanation chosen = benchmark.explain(*k, 64);
    KernelExplanation implicit = heuristic.explain(*k, 64);
    CHECK_THAT(implicit.algorithm, Catch::StartsWith("implicit GEMM"));
    CHECK(chosen.seconds <= implicit.seconds);
  }
  // fp32 3x3 at batch 64: a quarter of the arithmetic outweighs the transforms' traffic.
  CHECK_THAT(benchmark.explain(*c.forward, 64).algorithm, Catch::StartsWith("Winograd"));
  // On tensor cores (mixed precision, or TF32 as fp32 runs convolutions) implicit GEMM is
  // faster than Winograd in float32.
  DeviceModel amp(a100, default_profile(), TrainingPrecision::amp_fp16, {true, true});
  CHECK_THAT(amp.explain(*c.forward, 64).algorithm, Catch::StartsWith("implicit GEMM"));
  DeviceModel tf32(a100, default_profile(), TrainingPrecision::fp32, {true, false});
  CHECK_THAT(tf32.explain(*c.forward, 64).algorithm, Catch::StartsWith("implicit GEMM"));
}

TEST_CASE("DeepBench's V100 fp32 convolutions lie between the heuristic's and the fastest plan") {
  // baidu-research/DeepBench README (commit a5a2b60f), training convolutions on a Tesla V100,
  // fp32, forward + both gradients: 54x54x64, N=8, 3x3 to 64 filters: 0.55 ms; 28x28x192, N=16,
  // 5x5 to 32 filters: 0.93 ms. DeepBench times cudnnFind's fastest algorithm, so the plain
  // implicit GEMM (no benchmark) must be slower and our fastest plan no slower; both bound the
  // published figure (the fastest plans are 32-49% optimistic against 2017's cuDNN 7).
  const GpuSpec& v100 = gpu("v100-sxm2-16gb");
  DeviceModel heuristic(v100, default_profile(), TrainingPrecision::fp32);
  DeviceModel fastest(v100, default_profile(), TrainingPrecision::fp32, {true, false});
  struct Row {
    const char* input;
    const char* conv;
    const char* before;  // gives the convolution its input channels
    std::int64_t batch;
    double published_s;
  };
  for (const Row& row :
       {Row{"[64, 54, 54]", "{type: conv2d, out_channels: 64, kernel: 3, padding: 1, bias: false}",
            "", 8, 0.55e-3},
        Row{"[192, 28, 28]", "{type: conv2d, out_channels: 32, kernel: 5, padding: 2, bias: false}",
            "{type: conv2d, out_channels: 192, kernel: 1, bias: false}", 16, 0.93e-3}}) {
    ConvKernels c = first_conv(row.input, row.conv, row.before);
    double slow = 0, fast = 0;
    for (const KernelWork* k : {c.forward, c.data, c.weight}) {
      slow += heuristic.explain(*k, row.batch).seconds;
      fast += fastest.explain(*k, row.batch).seconds;
    }
    INFO(row.conv << ": implicit GEMM " << slow << " s, fastest plan " << fast << " s");
    CHECK(fast < row.published_s);
    CHECK(slow > row.published_s);
  }
}

TEST_CASE("implicit GEMM: only the weight gradient splits its reduction across blocks") {
  // cuDNN's forward (and data-gradient) implicit GEMMs reduce a tile's whole window of channels
  // in one block: every scudnn forward kernel of the public kernel data launches a grid of
  // depth 1 (shared/data/kernels/conv, five GPUs). A small image with many channels makes few
  // output tiles and a long reduction: the forward waits out its reduction on a few SMs, where
  // the weight gradient (its reduction over positions and samples) splits it.
  ConvKernels c =
      first_conv("[256, 7, 7]", "{type: conv2d, out_channels: 256, kernel: 3, padding: 1}");
  ConvContext fp32;
  CHECK_FALSE(gemm_of(conv_plans(*c.forward, fp32).front()).work.gemm.split_reduction);
  CHECK_FALSE(gemm_of(conv_plans(*c.data, fp32).front()).work.gemm.split_reduction);
  CHECK(gemm_of(conv_plans(*c.weight, fp32).front()).work.gemm.split_reduction);
  ConvolutionSettings heuristic;  // no cudnn.benchmark: the implicit GEMM runs
  DeviceModel v100(gpu("v100-pcie-32gb"), default_profile(), TrainingPrecision::fp32_strict,
                   heuristic);
  // Batch 2: 98 output positions x 256 filters, 8 tiles of 64x64 on 80 SMs, each reducing
  // 2,304 (256 channels x 9 taps) alone.
  const KernelExplanation forward = v100.explain(*c.forward, 2);
  CHECK_THAT(forward.algorithm, !Catch::Contains("split-K"));
  CHECK(forward.compute_utilisation < 0.05);
  // Batch 32: 256 x 2,304 weights in 36 tiles of 128x128, their 1,568 positions split 4 ways.
  CHECK_THAT(v100.explain(*c.weight, 32).algorithm, Catch::Contains("split-K 4"));
}

TEST_CASE(
    "on a CPU oneDNN computes narrow windows directly and wide or far-padded ones by im2col") {
  // What oneDNN 2.6 ran for each pass on the CI machine (ONEDNN_VERBOSE, 50 input channels
  // unless said; docs/evidence/onednn-cpu-convolutions.md): direct, direct, direct for a
  // 13-wide window padded 6; im2col for all three at 20 padded 10; direct forward only at 30
  // unpadded; a 200-wide first layer direct forward padded 28 but not padded 100.
  ConvContext cpu;
  cpu.onednn = true;
  auto directs = [&](const std::string& input, const std::string& conv) {
    ConvKernels c = first_conv(input, conv);
    std::vector<bool> out;
    for (const KernelWork* k : {c.forward, c.data, c.weight}) {
      const std::vector<ConvPlan> plans = conv_plans(*k, cpu);
      REQUIRE(plans.size() == 1);  // one library choice, no cudnn.benchmark
      out.push_back(plans.front().algorithm == ConvAlgorithm::implicit_gemm);
      CHECK(out.back() == onednn_direct_applies(k->conv));
    }
    return out;
  };
  const std::string wave = "[50, 3000]";
  CHECK(directs(wave, "{type: conv1d, out_channels: 50, kernel: 13, padding: 6}") ==
        std::vector<bool>{true, true, true});
  CHECK(directs(wave, "{type: conv1d, out_channels: 50, kernel: 20, padding: 10}") ==
        std::vector<bool>{false, false, false});
  CHECK(directs(wave, "{type: conv1d, out_channels: 50, kernel: 30}") ==
        std::vector<bool>{true, false, false});
  // seed 001's conv1d layers and mnist-cnn's 4x4 ones, as measured.
  CHECK(directs("[50, 3000]", "{type: conv1d, out_channels: 50, kernel: 100, padding: 50}") ==
        std::vector<bool>{false, false, false});
  CHECK(directs("[32, 12, 12]", "{type: conv2d, out_channels: 32, kernel: 4}") ==
        std::vector<bool>{true, true, true});
  // A first layer's block is its few channels: 200 wide fits the code padded 28, not past the
  // unrolled block padded 100 (the forward alone: layer 1's input needs no gradient).
  ConvKernels first =
      first_conv("[1, 12001]", "{type: conv1d, out_channels: 1, kernel: 200, padding: 28}");
  ConvGeometry g = first.forward->conv;
  CHECK(onednn_direct_applies(g));
  g.padding[0] = 100;
  g.out_size[0] = g.in_size[0] + 2 * 100 - 200 + 1;
  CHECK_FALSE(onednn_direct_applies(g));
}

TEST_CASE("im2col + GEMM writes and reads the column matrix once a pass, col2im adds it back") {
  // Seed 001's second convolution: 50 channels x 100 taps x 3,001 positions, 60 MB a sample.
  ConvKernels c =
      first_conv("[50, 3000]", "{type: conv1d, out_channels: 30, kernel: 100, padding: 50}",
                 "{type: conv1d, out_channels: 50, kernel: 1}");
  ConvContext cpu;
  cpu.onednn = true;
  const double columns = 50.0 * 100 * 3001, inputs = 50.0 * 3000, outputs = 30.0 * 3001;
  const ConvPlan forward = conv_plans(*c.forward, cpu).front();
  REQUIRE(forward.algorithm == ConvAlgorithm::im2col_gemm);
  REQUIRE(forward.parts.size() == 2);
  CHECK(forward.parts[0].what == "im2col");
  CHECK(static_cast<double>(forward.parts[0].work.bytes.per_sample.value()) ==
        4 * (inputs + columns));
  const GemmShape& f = gemm_of(forward).work.gemm;
  CHECK(f.m.per_sample == 3001);
  CHECK(f.n.fixed == 30);
  CHECK(f.k.fixed == 50 * 100);
  CHECK(gemm_of(forward).work.flops.per_sample == c.forward->flops.per_sample);
  CHECK(static_cast<double>(gemm_of(forward).work.bytes.per_sample.value()) ==
        4 * (columns + outputs));
  const ConvPlan data = conv_plans(*c.data, cpu).front();
  REQUIRE(data.parts.size() == 2);
  CHECK(gemm_of(data).work.gemm.n.fixed == 50 * 100);  // the columns come out of the GEMM
  CHECK(gemm_of(data).work.gemm.k.fixed == 30);
  CHECK(data.parts[1].what == "col2im");
  CHECK(static_cast<double>(data.parts[1].work.bytes.per_sample.value()) ==
        4 * (columns + 2 * inputs));
  const ConvPlan weight = conv_plans(*c.weight, cpu).front();
  REQUIRE(weight.parts.size() == 2);
  CHECK(weight.parts[0].what == "im2col");
  const GemmShape& w = gemm_of(weight).work.gemm;
  CHECK(w.m.fixed == 30);
  CHECK(w.n.fixed == 50 * 100);
  CHECK(w.k.per_sample == 3001);  // reduced over every sample's positions
  // A CPU device takes it: the column traffic makes the pass slower than the direct kernel's.
  const DeviceModel device(gpu("host-cpu-1core"), default_profile(), TrainingPrecision::fp32);
  const KernelExplanation e = device.explain(*c.data, 4);
  CHECK(e.parts == 2);
  CHECK_THAT(e.algorithm, Catch::Contains("im2col + GEMM"));
}

TEST_CASE(
    "oneDNN lays a backward pass's whole column matrix out only when its scratchpad holds it") {
  // Where the column buffer of oneDNN 2.6's backward passes took the whole matrix a sample (the
  // process's memory grew by it during backward, on the CI machine's CPU, one thread unless
  // said), against the batch: seed 001's second convolution (50 -> 30 channels, 100 taps padded
  // 50 over 3,000 positions) from 4 samples; 50 taps from 2, 70 from 3, 200 from 8; 10 filters
  // from 6, 80 from 2; two threads from 2. Over 1,500 positions at 3 samples, the data gradient
  // took it and the weight gradient, which books its reduction buffer first, did not.
  const auto first_full = [](int filters, int window, std::int64_t positions, int threads,
                             bool weight_gradient) {
    ConvKernels c =
        first_conv("[50, " + std::to_string(positions) + "]",
                   fmt::format("{{type: conv1d, out_channels: {}, kernel: {}, padding: {}}}",
                               filters, window, window / 2),
                   "{type: conv1d, out_channels: 50, kernel: 1}");
    ConvContext cpu;
    cpu.onednn = true;
    cpu.threads = threads;
    for (std::int64_t batch = 1; batch <= 64; ++batch) {
      cpu.batch = batch;
      if (onednn_full_columns(weight_gradient ? c.weight->conv : c.data->conv, cpu)) return batch;
    }
    return std::int64_t{0};
  };
  CHECK(first_full(30, 100, 3000, 1, true) == 4);
  CHECK(first_full(30, 100, 3000, 1, false) == 4);
  CHECK(first_full(30, 50, 3000, 1, true) == 2);
  CHECK(first_full(30, 70, 3000, 1, true) == 3);
  CHECK(first_full(30, 200, 3000, 1, true) == 8);
  CHECK(first_full(10, 100, 3000, 1, true) == 6);
  CHECK(first_full(80, 100, 3000, 1, true) == 2);
  CHECK(first_full(30, 100, 3000, 2, true) == 2);
  CHECK(first_full(30, 100, 1500, 1, true) == 4);
  CHECK(first_full(30, 100, 1500, 1, false) == 3);

  // Laid out whole, the weight gradient's GEMM packs the matrix from memory: one more pass over
  // it, read and written, that the blocked layout does not pay (the GEMM's kernel measured twice
  // as long per sample from 4 samples, the im2col the same).
  ConvKernels c =
      first_conv("[50, 3000]", "{type: conv1d, out_channels: 30, kernel: 100, padding: 50}",
                 "{type: conv1d, out_channels: 50, kernel: 1}");
  ConvContext cpu;
  cpu.onednn = true;
  cpu.batch = 3;
  CHECK(conv_plans(*c.weight, cpu).front().parts.size() == 2);
  cpu.batch = 4;
  const ConvPlan whole = conv_plans(*c.weight, cpu).front();
  REQUIRE(whole.parts.size() == 3);
  CHECK(whole.parts[1].what == "GEMM packs the column matrix");
  CHECK(static_cast<double>(whole.parts[1].work.bytes.per_sample.value()) ==
        2 * 4 * 50.0 * 100 * 3001);
  // The data gradient costs the same either way (measured flat per sample), as the forward.
  CHECK(conv_plans(*c.data, cpu).front().parts.size() == 2);
  CHECK(conv_plans(*c.forward, cpu).front().parts.size() == 2);
  // Per sample the device's weight gradient steps up where the layout changes, by the pack's
  // time a sample (the other parts' fixed costs, the weights' traffic, shift it by well under 1%).
  const DeviceModel device(gpu("host-cpu-1core"), default_profile(), TrainingPrecision::fp32);
  const double three = device.explain(*c.weight, 3).seconds / 3;
  const double four = device.explain(*c.weight, 4).seconds / 4;
  const double pack = device.explain(whole.parts[1].work, 4).seconds / 4;
  INFO("per sample at 3: " << three << " s, at 4: " << four << " s, the pack: " << pack << " s");
  CHECK(pack > 0);
  CHECK(four - three == Approx(pack).epsilon(0.01));
}

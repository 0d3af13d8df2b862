// The roofline with utilisation, checked against its formula on hand-made kernels.
#include <cmath>

#include <catch2/catch.hpp>

#include "core/input_error.h"
#include "core/model/kernel_launches.h"
#include "core/spec/hardware_spec.h"
#include "core/spec/profile_spec.h"
#include "sim/compute/device_model.h"
#include "support/paths.h"

using namespace epochcast;
using namespace epochcast::sim;

namespace {

const GpuSpec& gpu(const std::string& id) {
  return *bundled_gpu_catalogue().find(id);
}
HardwareProfile default_profile() {
  return load_profile(test::source_dir() / "topologies/profiles/default.yaml");
}

KernelWork elementwise(std::int64_t elements_per_sample) {
  KernelWork k;
  k.name = "relu";
  k.op_class = OpClass::elementwise;
  k.flops = {Flops(elements_per_sample), Flops(0)};
  k.bytes = {Bytes(8 * elements_per_sample), Bytes(0)};
  k.launch = launch::elementwise({elements_per_sample, 0});
  return k;
}

KernelWork square_gemm(std::int64_t n) {
  KernelWork k;
  k.name = "mm";
  k.op_class = OpClass::gemm;
  k.has_gemm_shape = true;
  k.gemm.m = {n, 0};  // n rows per sample, batch 1
  k.gemm.n = {0, n};
  k.gemm.k = {0, n};
  k.flops = {Flops(2 * n * n * n), Flops(0)};
  k.bytes = {Bytes(3 * 4 * n * n), Bytes(0)};
  return k;
}

}  // namespace

TEST_CASE("a large streaming kernel runs at the effective memory bandwidth") {
  HardwareProfile profile = default_profile();
  DeviceModel device(gpu("a100-sxm4-80gb"), profile, TrainingPrecision::fp32);
  KernelWork k = elementwise(1 << 26);
  // The board's own streaming bandwidth (the catalogue's): the default profile gives none.
  double bandwidth = gpu("a100-sxm4-80gb").streaming_bandwidth->value();
  double expected = 8.0 * (1 << 26) / bandwidth;
  CHECK(device.memory_utilisation(k, 1) == 1.0);
  CHECK(device.kernel_time(k, 1) == SimTime::from_seconds(Seconds(expected)));
}

TEST_CASE("a large GEMM runs at peak x efficiency, on tensor cores under mixed precision") {
  HardwareProfile profile = default_profile();
  const GpuSpec& h100 = gpu("h100-sxm");
  KernelWork k = square_gemm(8192);
  double flops = 2.0 * 8192.0 * 8192.0 * 8192.0;
  // Each precision at its own figure for Hopper (default.yaml's efficiency_by_architecture).
  auto gemm_efficiency_at = [&](const char* precision) {
    HardwareProfile resolved = profile;
    resolve_for_device(resolved, h100, precision);
    return resolved.gpu.compute[static_cast<std::size_t>(OpClass::gemm)];
  };
  DeviceModel fp32(h100, profile, TrainingPrecision::fp32);
  DeviceModel bf16(h100, profile, TrainingPrecision::amp_bf16);
  // 128x128 tiles: (8192/128)^2 = 4096 of them, in waves of 132 SMs x 2 tiles.
  const double tiles = 64.0 * 64.0, slots = 132.0 * 2.0;
  const double utilisation = tiles / (std::ceil(tiles / slots) * slots);
  CHECK(fp32.compute_utilisation(k, 1) == Approx(utilisation));
  auto expected = [&](Precision p) {
    const double gemm_efficiency = gemm_efficiency_at(p == Precision::fp32 ? "fp32" : "bf16");
    return SimTime::from_seconds(
        Seconds(flops / (h100.peak_for(p)->value() * gemm_efficiency * utilisation)));
  };
  CHECK(fp32.kernel_time(k, 1).ns() == Approx(expected(Precision::fp32).ns()).margin(1));
  CHECK(bf16.kernel_time(k, 1).ns() == Approx(expected(Precision::bf16).ns()).margin(1));
}

TEST_CASE("fp32 is PyTorch's: convolutions on TF32 tensor cores, GEMMs in fp32, fp32_strict none") {
  // torch.backends.cudnn.allow_tf32 defaults to True, torch.backends.cuda.matmul.allow_tf32 to
  // False. Measured on an H100 (validate/data/h100-sxm-1gpu/precision/): every convolution
  // layer as fast under fp32 as under tf32 and up to 7x slower under fp32_strict; every linear
  // layer as fast under fp32 as under fp32_strict and up to 4x slower than under tf32.
  const GpuSpec& h100 = gpu("h100-sxm");
  const double fp32_peak = h100.peak_for(Precision::fp32)->value();
  const double tf32_peak = h100.peak_for(Precision::tf32)->value();
  DeviceModel fp32(h100, default_profile(), TrainingPrecision::fp32);
  DeviceModel strict(h100, default_profile(), TrainingPrecision::fp32_strict);
  DeviceModel tf32(h100, default_profile(), TrainingPrecision::tf32);
  CHECK(fp32.peak(OpClass::conv).value() == tf32_peak);
  CHECK(fp32.peak(OpClass::gemm).value() == fp32_peak);
  CHECK(fp32.peak(OpClass::depthwise_conv).value() == fp32_peak);
  CHECK(fp32.conv_tensor_cores());
  CHECK_FALSE(fp32.tensor_cores());
  CHECK(strict.peak(OpClass::conv).value() == fp32_peak);
  CHECK_FALSE(strict.conv_tensor_cores());
  CHECK(tf32.peak(OpClass::gemm).value() == tf32_peak);
  // Without TF32 units (Volta) fp32 is fp32 everywhere.
  DeviceModel v100(gpu("v100-sxm2-16gb"), default_profile(), TrainingPrecision::fp32);
  CHECK_FALSE(v100.conv_tensor_cores());
  CHECK(v100.peak(OpClass::conv).value() ==
        gpu("v100-sxm2-16gb").peak_for(Precision::fp32)->value());
}

TEST_CASE("without a faster unit, mixed precision computes at the fp32 rate") {
  const GpuSpec& pascal = gpu("gtx-1080-ti");  // fp16 is 1/64 rate there
  DeviceModel fp32(pascal, default_profile(), TrainingPrecision::fp32);
  DeviceModel amp(pascal, default_profile(), TrainingPrecision::amp_fp16);
  CHECK(amp.peak(OpClass::gemm).value() == fp32.peak(OpClass::gemm).value());
}

TEST_CASE("a GEMM one tile past a full wave takes smaller tiles to fill its second wave") {
  // Tensor-core tiles (TF32): 108 SMs x 2 resident tiles = 216 a wave. A 128 x (128 x 217)
  // output is 217 tiles of 128x128, two waves of which the second is nearly empty: 64x64 tiles
  // (868 of them) waste less, five waves of 216 with 212 slots idle.
  const GpuSpec& a100 = gpu("a100-sxm4-40gb");
  DeviceModel device(a100, default_profile(), TrainingPrecision::tf32);
  KernelWork k;
  k.op_class = OpClass::gemm;
  k.has_gemm_shape = true;
  k.gemm.m = {128, 0};
  k.gemm.n = {0, 128 * 217};
  k.gemm.k = {0, 4096};
  k.flops = {Flops(2 * 128 * 128 * 217 * std::int64_t{4096}), Flops(0)};
  CHECK(device.compute_utilisation(k, 1) == Approx(868.0 / (5.0 * 216)));
  CHECK_THAT(device.explain(k, 1).algorithm, Catch::Contains("tiles 64x64"));
  k.gemm.n = {0, 128 * 216};  // exactly one wave of the largest tile
  CHECK(device.compute_utilisation(k, 1) == Approx(1.0));
  CHECK_THAT(device.explain(k, 1).algorithm, Catch::Contains("tiles 128x128"));
}

TEST_CASE("tile choice: larger tiles unless a smaller one saves a clear share of the slots") {
  // 80 SMs, 4096^3: 128x128 tiles (1024, 7 waves of 160) would cost 7.7% more slots than
  // 128x64 (2048, 13 waves) or 64x64 (4096, 26 waves): the larger of the two cheapest is kept.
  TileChoice large = choose_tiles(1, 4096, 4096, 4096, 80, TileFamily::mixed);
  CHECK(large.tile_m == 128);
  CHECK(large.tile_n == 64);
  CHECK(large.waves == 13);
  // 132 SMs, 8192^3: 64x64 would save 1.6% of 128x128's slots, too little to give up reuse.
  TileChoice hopper = choose_tiles(1, 8192, 8192, 8192, 132, TileFamily::mixed);
  CHECK(hopper.tile_m == 128);
  CHECK(hopper.tile_n == 128);
  // Too few tiles for one wave: the reduction is split, into one wave.
  TileChoice small = choose_tiles(1, 512, 512, 512, 80, TileFamily::mixed);
  CHECK(small.split_k > 1);
  CHECK(small.waves == 1);
  // A CPU has no tile padding (the runtime's host device).
  CHECK(choose_tiles(1, 20, 100, 2000, 2, TileFamily::unpadded).utilisation == Approx(1.0));
  CHECK(tile_family("pascal") == TileFamily::rows_of_128);
  CHECK(tile_family("hopper") == TileFamily::mixed);
  CHECK(tile_family("x86-64") == TileFamily::unpadded);
}

TEST_CASE("cuBLAS's CUDA-core batched SGEMM: the library's tiles, one tile per SM, staging") {
  // 48 heads of 100 x 100 outputs over k = 64: one padded 128x128 tile each, never a split (the
  // batch fills the grid's third dimension).
  TileCosts alone;
  alone.tiles_per_sm = 1;
  TileChoice heads = choose_tiles(48, 100, 100, 64, 108, TileFamily::sgemm_batched_ampere, alone);
  CHECK(heads.tile_m == 128);
  CHECK(heads.split_k == 1);
  CHECK(heads.waves == 1);
  CHECK(heads.utilisation == Approx(48.0 * 100 * 100 / (108.0 * 128 * 128)));
  // One tile per SM: 1,024 tiles of 128x128 on 80 SMs are 13 waves (7 with two per SM).
  TileChoice large = choose_tiles(4, 2048, 2048, 512, 80, TileFamily::sgemm_batched_ampere, alone);
  CHECK(large.waves == 13);
  CHECK(large.utilisation == Approx(1024.0 / (13 * 80)));
  // Staging overlaps the multiply-adds: at 48 multiply-adds per element a 128x128 step's 256
  // elements (12,288) hide behind its 16,384 multiply-adds, while a 64x64 step's 128 (6,144)
  // take half as long again as its 4,096.
  alone.staging = 48;
  CHECK(choose_tiles(4, 2048, 2048, 512, 80, TileFamily::sgemm_batched_ampere, alone).utilisation ==
        Approx(1024.0 / (13 * 80)));
  TileChoice small = choose_tiles(80, 64, 64, 64, 80, TileFamily::sgemm_batched_volta, alone);
  CHECK(small.tile_m == 64);
  CHECK(small.tile_n == 64);
  CHECK(small.utilisation == Approx(4096.0 / (48 * 128)));
}

TEST_CASE("Pascal cuBLAS pads a small minibatch to 128-row tiles (openai-gemm, DGX-1 P100)") {
  // openai/openai-gemm README, DGX-1 table, cuBLAS_32 column, N = K = 4096 (GFLOP/s):
  // M = 32: 2045, 64: 4059, 128: 8039, 7000: 9519. A P100 SXM2: 56 SMs, 10.6 TFLOPS fp32
  // (NVIDIA Tesla P100 datasheet). Each within 5%, from the tile model and Pascal's GEMM prior.
  GpuSpec p100 = gpu("gtx-1080-ti");
  p100.id = "p100-sxm2";
  p100.sm_count = 56;
  p100.peak = {{Precision::fp32, FlopsPerSecond(10.6e12)}};
  DeviceModel device(p100, default_profile(), TrainingPrecision::fp32);
  for (auto [m, published_gflops] :
       {std::pair{32, 2045.0}, {64, 4059.0}, {128, 8039.0}, {7000, 9519.0}}) {
    KernelWork k;
    k.op_class = OpClass::gemm;
    k.has_gemm_shape = true;
    k.gemm.m = {0, m};
    k.gemm.n = {0, 4096};
    k.gemm.k = {0, 4096};
    k.flops = {Flops(0), Flops(2 * std::int64_t{m} * 4096 * 4096)};
    k.bytes = {Bytes(0), Bytes(4 * (std::int64_t{m} * 4096 * 2 + 4096 * 4096))};
    const double predicted_gflops =
        2.0 * m * 4096 * 4096 / device.kernel_time(k, 1).seconds() / 1e9;
    INFO("M = " << m << ": " << predicted_gflops << " GFLOP/s predicted");
    CHECK(predicted_gflops == Approx(published_gflops).epsilon(0.05));
  }
}

TEST_CASE("a CPU BLAS packs a GEMM's operands before it computes: the two times add") {
  // Goto and van de Geijn's GEMM (OpenBLAS, BLIS, MKL) copies each operand panel into a
  // cache-sized buffer in a pass of its own: on a CPU the streaming and the arithmetic add; a
  // GPU's tiles load while they compute, so there the larger alone sets the time.
  HardwareProfile profile = default_profile();
  profile.gpu.min_kernel = Seconds(0);
  // A thin product, batch 4 over a 12,000 x 1,000 weight: far more bytes than arithmetic.
  KernelWork k = square_gemm(1);
  k.gemm.m = {4, 0};
  k.gemm.n = {1000, 0};
  k.gemm.k = {12000, 0};
  k.flops = {Flops(2LL * 4 * 1000 * 12000), Flops(0)};
  k.bytes = {Bytes(4LL * (4 * 12000 + 12000 * 1000 + 4 * 1000)), Bytes(0)};
  const KernelExplanation cpu =
      DeviceModel(gpu("host-cpu-1core"), profile, TrainingPrecision::fp32).explain(k, 1);
  CHECK(cpu.packed);
  CHECK(cpu.compute_s > 0);
  CHECK(cpu.memory_s > cpu.compute_s);
  CHECK(cpu.seconds == Approx(cpu.compute_s + cpu.memory_s));
  CHECK(cpu.bound == KernelBound::memory);
  CHECK_THAT(cpu.algorithm, Catch::Contains("packed"));
  const KernelExplanation a100 =
      DeviceModel(gpu("a100-sxm4-80gb"), profile, TrainingPrecision::fp32).explain(k, 1);
  CHECK_FALSE(a100.packed);
  CHECK(a100.seconds == Approx(std::max(a100.compute_s, a100.memory_s)));
  // A CPU's element-wise kernels stream while they compute, as a GPU's do.
  const KernelExplanation relu =
      DeviceModel(gpu("host-cpu-1core"), profile, TrainingPrecision::fp32)
          .explain(elementwise(1 << 20), 1);
  CHECK_FALSE(relu.packed);
  CHECK(relu.seconds == Approx(std::max(relu.compute_s, relu.memory_s)));
}

TEST_CASE("a CPU draws a dropout mask one element after another, a GPU inside its kernel") {
  // PyTorch's CPU bernoulli_ is a serial loop (GpuEfficiency::cpu_bernoulli_ns an element) on
  // top of the element-wise bounds; a GPU's Philox draws are in the kernel's FLOPs.
  HardwareProfile profile = default_profile();
  KernelWork dropout = elementwise(1 << 20);
  dropout.bernoulli_draws = {1 << 20, 0};
  const DeviceModel cpu(gpu("host-cpu-1core"), profile, TrainingPrecision::fp32);
  const KernelExplanation drawn = cpu.explain(dropout, 2);
  const KernelExplanation plain = cpu.explain(elementwise(1 << 20), 2);
  const double draws_s = 2.0 * (1 << 20) * GpuEfficiency::kDefaultCpuBernoulliNs * 1e-9;
  CHECK(drawn.serial_draws_s == Approx(draws_s));
  CHECK(drawn.seconds == Approx(plain.seconds + draws_s));
  CHECK(drawn.bound == KernelBound::serial);
  CHECK_THAT(drawn.algorithm, Catch::Contains("mask drawn serially"));
  // The figure sets it: twice the time a draw, twice the draws' share.
  profile.gpu.cpu_bernoulli_ns = 2 * GpuEfficiency::kDefaultCpuBernoulliNs;
  CHECK(DeviceModel(gpu("host-cpu-1core"), profile, TrainingPrecision::fp32)
            .explain(dropout, 2)
            .serial_draws_s == Approx(2 * draws_s));
  const KernelExplanation a100 =
      DeviceModel(gpu("a100-sxm4-80gb"), profile, TrainingPrecision::fp32).explain(dropout, 2);
  CHECK(a100.serial_draws_s == 0);
  CHECK(a100.seconds == DeviceModel(gpu("a100-sxm4-80gb"), profile, TrainingPrecision::fp32)
                            .explain(elementwise(1 << 20), 2)
                            .seconds);
}

TEST_CASE("a tiny kernel takes the minimum kernel time") {
  HardwareProfile profile = default_profile();
  DeviceModel device(gpu("rtx-4090"), profile, TrainingPrecision::fp32);
  CHECK(device.kernel_time(elementwise(16), 1) == SimTime::from_seconds(profile.gpu.min_kernel));
}

TEST_CASE("a batch too small to give every SM work under-uses the GPU") {
  DeviceModel device(gpu("h100-sxm"), default_profile(), TrainingPrecision::fp32);
  KernelWork k = elementwise(512);  // one block of 512 elements per sample
  CHECK(device.memory_utilisation(k, 13) == Approx(13.0 / 132.0));
  CHECK(device.memory_utilisation(k, 1000) == 1.0);
}

TEST_CASE("pinned copies reach the PCIe link's efficiency, pageable ones the staged rate") {
  HardwareProfile profile = default_profile();
  const GpuSpec& v100 = gpu("v100-pcie-16gb");
  DeviceModel device(v100, profile, TrainingPrecision::fp32);
  Bytes bytes(256 * kMiB);
  double link = v100.pcie_bandwidth().value();
  CHECK(link == Approx(0.985e9 * 16));  // PCIe 3.0 x16, 128b/130b
  CHECK(device.host_to_device_time(bytes, true).seconds() ==
        Approx(static_cast<double>(bytes.value()) / (link * profile.transfer.pcie_efficiency) +
               profile.transfer.copy_latency.value()));
  CHECK(device.host_to_device_time(bytes, false) > device.host_to_device_time(bytes, true));
}

namespace {

// `batches` products of (m x k) by (k x n), none growing with the batch.
KernelWork gemm(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batches = 1) {
  KernelWork w;
  w.name = batches > 1 ? "bmm" : "mm";
  w.op_class = OpClass::gemm;
  w.has_gemm_shape = true;
  w.gemm.batches = {0, batches};
  w.gemm.m = {0, m};
  w.gemm.n = {0, n};
  w.gemm.k = {0, k};
  w.flops = {Flops(0), Flops(2 * batches * m * n * k)};
  w.bytes = {Bytes(0), Bytes(2 * batches * (m * k + k * n + m * n))};
  return w;
}

double tflops(const KernelWork& w, const std::string& id, TrainingPrecision precision) {
  DeviceModel device(gpu(id), default_profile(), precision);
  return static_cast<double>(w.flops.fixed.value()) / device.kernel_time(w, 1).seconds() / 1e12;
}

double stream_gb_per_s(const std::string& id) {
  DeviceModel device(gpu(id), default_profile(), TrainingPrecision::fp32);
  KernelWork copy = elementwise(1 << 28);  // 2 GiB read and written: far beyond any L2
  return 8.0 * (1 << 28) / device.kernel_time(copy, 1).seconds() / 1e9;
}

}  // namespace

TEST_CASE("large GEMMs reach the published kernel-level throughput of each architecture") {
  // Each figure is a measured kernel, not a training run (topologies/profiles/default.yaml,
  // sources.gpu.efficiency_by_architecture); the uncalibrated prediction must reproduce it.
  struct Case {
    const char* gpu;
    TrainingPrecision precision;
    std::int64_t m, n, k;
    double measured_tflops;
    const char* source;
  };
  const Case cases[] = {
      {"gtx-1080-ti", TrainingPrecision::fp32, 10240, 10240, 10240, 10.09,
       "zzc0721/torch-performance-test-data issue 60, torch.mm fp32 10240^3"},
      {"v100-sxm2-16gb", TrainingPrecision::fp32, 10240, 10240, 10240, 14.51,
       "zzc0721/torch-performance-test-data issue 140, fp32 10240^3"},
      {"rtx-2080-ti", TrainingPrecision::fp32, 8192, 8192, 8192, 11.52,
       "zzc0721/torch-performance-test-data issue 181, fp32 8192^3"},
      {"a100-sxm4-80gb", TrainingPrecision::amp_bf16, 1024, 10240, 5120, 271.2,
       "stas00/ml-engineering compute/accelerator/README.md, MAMF table, A100 SXM bf16"},
      // MAMF is the best shape of a search: here one whose 128x128 tiles fill whole waves of
      // 132 SMs x 2 (132 x 64 tiles), so wave quantisation costs nothing, as at the best shape.
      {"h100-sxm", TrainingPrecision::amp_bf16, 16896, 8192, 8192, 794.5,
       "stas00/ml-engineering compute/accelerator/README.md, MAMF table, H100 SXM bf16"},
  };
  for (const Case& c : cases) {
    INFO(c.gpu << ": " << c.source);
    CHECK(tflops(gemm(c.m, c.n, c.k), c.gpu, c.precision) ==
          Approx(c.measured_tflops).epsilon(0.03));
  }
}

TEST_CASE("streaming kernels reach what a second public benchmark measures on each board") {
  // The catalogue's figure is one public benchmark's; each case is another's, on the same board
  // (docs/evidence/streaming-bandwidth.md), measured with a kernel like an element-wise add.
  struct Case {
    const char* gpu;
    double measured_gb_per_s;
    const char* source;
  };
  const Case cases[] = {
      {"v100-pcie-16gb", 829, "te42kyfo/gpu-benches README, cuda-stream triad"},
      {"a100-sxm4-40gb", 1375, "te42kyfo/gpu-benches gpu-stream/a100_40.txt, triad"},
      {"a100-sxm4-80gb", 1700, "Azure/AI-benchmarking-guide ND_A100_v4 results, BabelStream Add"},
      {"t4", 239.6, "router-gao/cuda-demo cuda-samples/02-cuda-bandwidth.md, bandwidthTest D2D"},
  };
  for (const Case& c : cases) {
    INFO(c.gpu << ": " << c.source);
    CHECK(stream_gb_per_s(c.gpu) == Approx(c.measured_gb_per_s).epsilon(0.03));
  }
}

TEST_CASE("a profile's per-architecture figures apply to that architecture and precision only") {
  HardwareProfile p = default_profile();
  const auto gemm_class = static_cast<std::size_t>(OpClass::gemm);
  const double fallback = p.gpu.compute[gemm_class];
  const GpuSpec& v100 = gpu("v100-sxm2-32gb");
  HardwareProfile volta_fp16 = p;
  resolve_for_device(volta_fp16, v100, "fp16");
  CHECK(volta_fp16.gpu.compute[gemm_class] == 0.68);
  CHECK(volta_fp16.gpu.by_architecture.empty());
  CHECK_THAT(volta_fp16.sources["gpu.efficiency"], Catch::Contains("for volta at fp16 (gemm"));
  HardwareProfile volta_bf16 = p;  // no bf16 figures for Volta: the defaults
  resolve_for_device(volta_bf16, v100, "bf16");
  CHECK(volta_bf16.gpu.compute[gemm_class] == fallback);
  HardwareProfile blackwell = p;  // an architecture the table does not name
  resolve_for_device(blackwell, gpu("b200"), "fp32");
  CHECK(blackwell.gpu.compute == p.gpu.compute);
  // A CPU device has its own: one core's GEMMs and convolutions (default.yaml's x86-64 row).
  HardwareProfile cpu = p;
  resolve_for_device(cpu, gpu("host-cpu-1core"), "fp32");
  CHECK(cpu.gpu.compute[gemm_class] == 0.57);
  CHECK(cpu.gpu.compute[static_cast<std::size_t>(OpClass::conv)] == 0.37);
  // Written and read back, the table survives; resolving twice changes nothing.
  HardwareProfile again = load_profile_from_string(profile_yaml(p, "t"), "t.yaml");
  CHECK(again.gpu.by_architecture.size() == p.gpu.by_architecture.size());
  resolve_for_device(again, v100, "fp16");
  resolve_for_device(again, v100, "fp16");
  CHECK(again.gpu.compute == volta_fp16.gpu.compute);
}

TEST_CASE("streaming kernels reach the board's streaming bandwidth unless the profile says") {
  HardwareProfile p = default_profile();
  REQUIRE_FALSE(p.gpu.memory);
  // The board's catalogue figure over its datasheet rate, with the catalogue's source.
  const GpuSpec& v100 = gpu("v100-pcie-32gb");
  HardwareProfile board = p;
  resolve_for_device(board, v100, "fp32");
  CHECK(board.gpu.memory == 846.0 / 900.0);
  CHECK_THAT(board.sources["gpu.memory_efficiency"], Catch::Contains("BabelStream"));
  // A GPU described without a streaming figure: the default.
  GpuSpec bare = gpu("h100-sxm");
  bare.streaming_bandwidth.reset();
  HardwareProfile unknown = p;
  resolve_for_device(unknown, bare, "fp32");
  CHECK(unknown.gpu.memory == GpuEfficiency::kDefaultMemory);
  // A profile's own figure (a calibrated one) wins, and an architecture's over the profile's.
  HardwareProfile calibrated = p;
  calibrated.gpu.memory = 0.5;
  resolve_for_device(calibrated, v100, "fp32");
  CHECK(calibrated.gpu.memory == 0.5);
  HardwareProfile by_architecture = p;
  by_architecture.gpu.by_architecture["volta"].memory = 0.6;
  resolve_for_device(by_architecture, v100, "fp32");
  CHECK(by_architecture.gpu.memory == 0.6);
  // Written resolved and read back, the figure stays, and so does its source.
  HardwareProfile again = load_profile_from_string(profile_yaml(board, "t"), "t.yaml");
  CHECK(again.gpu.memory == board.gpu.memory);
  CHECK(again.sources["gpu.memory_efficiency"] == board.sources["gpu.memory_efficiency"]);
}

namespace {

// What loading the default profile, written out with `from` replaced by `to`, says ("" when it
// loads).
std::string edited_default_profile_error(const std::string& from, const std::string& to) {
  std::string text = profile_yaml(default_profile(), "t");
  const std::size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  text.replace(at, from.size(), to);
  try {
    load_profile_from_string(text, "p.yaml");
  } catch (const InputError& e) {
    return std::string(e.what());
  }
  return std::string();
}

}  // namespace

TEST_CASE("the SGEMM tiles' staging figure: optional, bounded, sourced, round-tripped") {
  const HardwareProfile p = default_profile();
  REQUIRE(p.gpu.tile_staging_cycles);
  const std::string base = profile_yaml(p, "t");
  CHECK(load_profile_from_string(base, "t.yaml").gpu.tile_staging_cycles ==
        p.gpu.tile_staging_cycles);
  auto error = edited_default_profile_error;
  CHECK_THAT(error("  tile_staging_cycles: ", "  tile_staging_cycles: -1 #"),
             Catch::Contains("p.yaml:") && Catch::Contains("gpu.tile_staging_cycles") &&
                 Catch::Contains("expected a number from"));
  CHECK_THAT(error("  gpu.tile_staging_cycles:", "  gpu.tile_staging_cyclesx:"),
             Catch::Contains("gpu.tile_staging_cycles"));
  // 80 products of 64 x 64 x 64 on a V100 (80 SMs of 64 lanes): one 64x64 tile each, one wave.
  // Left out, staging costs nothing; at the default's 0.68 cycles per element a step's 128
  // elements (0.68 x 64 x 128 = 5,571 multiply-adds' time) outlast its 4,096 multiply-adds.
  HardwareProfile none = p;
  none.gpu.tile_staging_cycles.reset();
  const KernelWork k = gemm(64, 64, 64, 80);
  const GpuSpec& v100 = gpu("v100-sxm2-16gb");
  CHECK(DeviceModel(v100, none, TrainingPrecision::fp32).compute_utilisation(k, 1) == Approx(1.0));
  CHECK(DeviceModel(v100, p, TrainingPrecision::fp32).compute_utilisation(k, 1) ==
        Approx(4096.0 / (*p.gpu.tile_staging_cycles * 64 * 128)));
}

TEST_CASE("SGEMM staging is counted in SM cycles, relative to a 128x128 tile") {
  // 128 lanes at 0.75 cycles per element: 96 multiply-adds' time per element. A 128x128 step
  // (256 elements, 24,576) outlasts its 16,384 multiply-adds by 1.5, which the architecture's
  // large-GEMM efficiency already holds: that tile keeps utilisation 1, and a 64x64 step
  // (12,288 / 1.5 = 8,192 for 4,096 multiply-adds) runs at half of it.
  TileCosts wide;
  wide.tiles_per_sm = 1;
  wide.staging = 0.75 * 128;
  TileChoice large = choose_tiles(1, 128 * 8, 128 * 16, 1024, 128, TileFamily::sgemm_volta, wide);
  CHECK(large.tile_m == 128);
  CHECK(large.tile_n == 128);
  CHECK(large.utilisation == Approx(1.0));
  TileChoice small = choose_tiles(128, 64, 64, 1024, 128, TileFamily::sgemm_batched_volta, wide);
  CHECK(small.tile_m == 64);
  CHECK(small.utilisation == Approx(0.5));
  // 64 lanes at the same cycles: 48 per element, the 128x128 step is not bounded (12,288 of
  // 16,384) and the 64x64 step's 6,144 outlast its 4,096 multiply-adds by 1.5.
  TileCosts narrow = wide;
  narrow.staging = 0.75 * 64;
  CHECK(choose_tiles(128, 64, 64, 1024, 128, TileFamily::sgemm_batched_volta, narrow).utilisation ==
        Approx(4096.0 / 6144));
  // A device counts its lanes from the fp32 peak: a V100 SXM2's 80 SMs at 1,530 MHz and 15.67
  // TFLOPS have 64, so the same 0.75 cycles cost 48 multiply-adds per element there.
  HardwareProfile profile = default_profile();
  profile.gpu.tile_staging_cycles = 0.75;
  DeviceModel v100(gpu("v100-sxm2-16gb"), profile, TrainingPrecision::fp32);
  // 128 tiles of 64x64 on 80 SMs: two waves.
  CHECK(v100.compute_utilisation(gemm(64, 64, 1024, 128), 1) ==
        Approx(128.0 * 4096 / (160 * 6144.0)));
}

TEST_CASE("a fused attention kernel's products keep the architecture's tiles, not cuBLAS's") {
  // 48 heads of 128 queries by 64 features over 256 keys on an A100 in fp32: as torch.bmm,
  // cuBLAS's batched SGEMM pads each head to a 128x128 tile; inside PyTorch's fused attention
  // kernel the product takes the architecture's family (here 64x64 tiles, the reduction split
  // in two to fill one wave).
  KernelWork products = gemm(128, 64, 256, 48);
  DeviceModel a100(gpu("a100-sxm4-40gb"), default_profile(), TrainingPrecision::fp32);
  CHECK_THAT(a100.explain(products, 1).algorithm, Catch::Contains("tiles 128x128"));
  products.gemm.blas = false;
  CHECK_THAT(a100.explain(products, 1).algorithm, Catch::Contains("tiles 64x64, split-K 2"));
}

TEST_CASE("cuBLAS's SGEMM tiles follow the generation, the batching and the operands' layout") {
  // The kernels CUPTI names in the public kernel data. Batched products run 128x128 alone on
  // Ampere (ampere_sgemm_128x128) and 128x64 on Pascal (maxwell_sgemm_128x64). Pascal runs
  // maxwell_sgemm 128x32, 32x128 and 64x64 for nn.Linear's forward ("tn"); its other layouts
  // keep the 128-row tiles of openai-gemm's cuBLAS table.
  struct Case {
    const char* architecture;
    bool batched;
    GemmLayout layout;
    TileFamily family;
  };
  const Case cases[] = {
      {"ampere", true, GemmLayout::nn, TileFamily::sgemm_batched_ampere},
      {"hopper", true, GemmLayout::nn, TileFamily::sgemm_batched_ampere},
      {"turing", true, GemmLayout::nn, TileFamily::sgemm_batched_volta},
      {"pascal", true, GemmLayout::nn, TileFamily::sgemm_batched_pascal},
      {"x86-64", true, GemmLayout::nn, TileFamily::unpadded},
      {"pascal", false, GemmLayout::tn, TileFamily::sgemm_pascal_tn},
      {"pascal", false, GemmLayout::nn, TileFamily::rows_of_128},
      {"pascal", false, GemmLayout::nt, TileFamily::rows_of_128},
      {"volta", false, GemmLayout::tn, TileFamily::sgemm_volta},
      {"hopper", false, GemmLayout::nt, TileFamily::sgemm_volta},
  };
  for (const Case& c : cases) {
    INFO(c.architecture << (c.batched ? " batched" : " single"));
    CHECK(sgemm_family(c.architecture, c.batched, c.layout) == c.family);
  }
  // 4,096 output features of 32 rows on 56 SMs: "tn" takes 32-row tiles (32 of 32x128, the
  // reduction split in three), "nn" 128-row tiles padding the rows fourfold.
  TileChoice tn = choose_tiles(1, 32, 4096, 1024, 56, TileFamily::sgemm_pascal_tn);
  CHECK(tn.tile_m == 32);
  CHECK(tn.split_k == 3);
  TileChoice nn = choose_tiles(1, 32, 4096, 1024, 56, TileFamily::rows_of_128);
  CHECK(nn.tile_m == 128);
}

TEST_CASE("bad per-architecture tables are refused with the key and a suggestion") {
  auto with = edited_default_profile_error;
  CHECK_THAT(with("    ampere:\n", "    amprere:\n"),
             Catch::Contains("gpu.efficiency_by_architecture.amprere") &&
                 Catch::Contains("did you mean 'ampere'"));
  CHECK_THAT(with("      tf32: {gemm: 0.65}", "      tf33: {gemm: 0.65}"),
             Catch::Contains("did you mean 'tf32'"));
  CHECK_THAT(with("      tf32: {gemm: 0.65}", "      tf32: {gemmm: 0.65}"),
             Catch::Contains("did you mean 'gemm'"));
  CHECK_THAT(with("      tf32: {gemm: 0.65}", "      tf32: {gemm: 1.65}"),
             Catch::Contains("expected a number from"));
  CHECK_THAT(with("  gpu.efficiency_by_architecture:", "  gpu.efficiency_by_architecturex:"),
             Catch::Contains("gpu.efficiency_by_architecture"));
  CHECK_THAT(with("    pascal:\n", "    pascal:\n      memory: 0.5\n    pascal:\n"),
             Catch::Contains("'pascal' is given twice"));
  // A name no GPU of a catalogue can have would never apply: refused with the names it can.
  CHECK_THAT(with("    ampere:\n", "    rubin:\n"),
             Catch::Contains("gpu.efficiency_by_architecture.rubin") &&
                 Catch::Contains("'rubin' is not an architecture a GPU can have: expected one "
                                 "of maxwell, pascal"));
  // Relative bandwidths: only the kinds that have one, within 0.001 to 4.
  CHECK_THAT(with("  bandwidth_relative: {normalization:", "  bandwidth_relative: {normalisation:"),
             Catch::Contains("gpu.bandwidth_relative.normalisation") &&
                 Catch::Contains("did you mean 'normalization'"));
  CHECK_THAT(with("  bandwidth_relative: {normalization:",
                  "  bandwidth_relative: {gemm: 1, normalization:"),
             Catch::Contains("gpu.bandwidth_relative.gemm"));
  CHECK_THAT(with("reduction: 1.06", "reduction: 4.5"),
             Catch::Contains("gpu.bandwidth_relative.reduction") &&
                 Catch::Contains("expected a number from 0.001 to 4"));
  CHECK_THAT(with("    ampere:\n", "    ampere:\n      bandwidth_relative: {pooling: 0}\n"),
             Catch::Contains("gpu.efficiency_by_architecture.ampere.bandwidth_relative.pooling"));
}

TEST_CASE("each kind's memory-bound kernels stream at its own bandwidth, per architecture too") {
  HardwareProfile p = default_profile();
  p.gpu.by_architecture["hopper"].bandwidth_relative[static_cast<std::size_t>(OpClass::pooling)] =
      1.5;
  p.sources["gpu.efficiency_by_architecture"] = "test figures";
  const GpuSpec& h100 = gpu("h100-sxm");
  DeviceModel device(h100, p, TrainingPrecision::fp32);
  const double copy = h100.memory_bandwidth.value() * device.profile().gpu.memory_or_default();
  // The defaults: a reduction reads 1.06 times as fast as a copy streams; a normalisation
  // 0.91 times; element-wise kernels are the streaming reference; Hopper's own pooling figure.
  CHECK(device.effective_bandwidth(OpClass::elementwise).value() == Approx(copy));
  CHECK(device.effective_bandwidth(OpClass::reduction).value() == Approx(1.06 * copy));
  CHECK(device.effective_bandwidth(OpClass::normalization).value() == Approx(0.91 * copy));
  CHECK(device.effective_bandwidth(OpClass::pooling).value() == Approx(1.5 * copy));
  CHECK(device.effective_bandwidth(OpClass::conv).value() == Approx(copy));
  CHECK_THAT(device.profile().sources.at("gpu.bandwidth_relative"),
             Catch::Contains("for hopper (pooling): test figures"));
  // A large memory-bound kernel takes its bytes over that bandwidth.
  KernelWork norm;
  norm.op_class = OpClass::normalization;
  norm.bytes = {Bytes(0), Bytes(std::int64_t{1} << 30)};
  norm.launch = launch::elementwise({0, std::int64_t{1} << 28});
  CHECK(device.explain(norm, 1).seconds == Approx(double(std::int64_t{1} << 30) / (0.91 * copy)));
}

TEST_CASE("every bundled GPU says its memory type, L2, clocks and board power, each sourced") {
  // The catalogue covers what buyers compare, 2016 to today (issue 44's list).
  for (const char* id : {"p100-pcie-16gb",
                         "p100-sxm2-16gb",
                         "p4",
                         "v100-pcie-16gb",
                         "v100-pcie-32gb",
                         "v100-sxm2-16gb",
                         "v100-sxm2-32gb",
                         "t4",
                         "a10",
                         "a30",
                         "a40",
                         "a100-pcie-40gb",
                         "a100-pcie-80gb",
                         "a100-sxm4-40gb",
                         "a100-sxm4-80gb",
                         "l4",
                         "l40s",
                         "h100-pcie",
                         "h100-sxm",
                         "h100-nvl",
                         "h200-sxm",
                         "h200-nvl",
                         "gh200",
                         "b200",
                         "gb200",
                         "rtx-2080-ti",
                         "titan-rtx",
                         "quadro-rtx-8000",
                         "rtx-3080",
                         "rtx-3090",
                         "rtx-a6000",
                         "rtx-4080",
                         "rtx-4090",
                         "rtx-6000-ada",
                         "rtx-5090",
                         "gtx-1080-ti"}) {
    INFO(id);
    REQUIRE(bundled_gpu_catalogue().find(id) != nullptr);
  }
  for (const GpuSpec& g : bundled_gpu_catalogue().gpus) {
    if (is_cpu_architecture(g.architecture)) continue;
    INFO(g.id);
    CHECK(!g.memory_type.empty());
    CHECK(g.l2_cache.has_value());
    REQUIRE(g.clocks.has_value());
    CHECK(g.clocks->boost_mhz > 0);
    CHECK(g.board_power_w.has_value());
    for (const char* key : {"memory_type", "l2_mib", "clocks_mhz", "board_power_w"})
      CHECK(g.sources.contains(key));
    // The fp32 peak is the CUDA cores at the boost clock: 2 FLOPs a core a clock, 64 or 128
    // cores an SM, so between 128 and 256 FLOPs per SM per clock.
    const double per_sm_clock =
        g.peak.at(Precision::fp32).value() / (g.sm_count * g.clocks->boost_mhz * 1e6);
    CHECK(per_sm_clock > 120);
    CHECK(per_sm_clock < 270);
  }
}

TEST_CASE("a power-limited board computes at its sustained clock once every SM is busy") {
  GpuSpec held = gpu("t4");
  REQUIRE(held.clocks.has_value());
  held.clocks->sustained_mhz.reset();
  const GpuSpec at_boost_gpu = held;
  const HardwareProfile profile = default_profile();
  const KernelWork big = square_gemm(8192);
  const DeviceModel boost_model(at_boost_gpu, profile, TrainingPrecision::fp32);
  const double at_boost = boost_model.kernel_time(big, 1).seconds();
  held.clocks->sustained_mhz = held.clocks->boost_mhz * 0.6;
  CHECK(held.sustained_clock_fraction() == Approx(0.6));
  const DeviceModel held_model(held, profile, TrainingPrecision::fp32);
  // At boost the tiles' padding and last wave cost (utilisation u < 1); held, the useful work
  // at 0.6 of the peak does: u / 0.6 times as long.
  const double u = boost_model.compute_utilisation(big, 1);
  CHECK(u > 0.6);
  CHECK(held_model.kernel_time(big, 1).seconds() == Approx(at_boost * u / 0.6).epsilon(1e-6));
  // A GEMM of one tile keeps one of the 80 tile slots busy: far below the power limit, it runs
  // at boost.
  const KernelWork one_tile = square_gemm(64);
  CHECK(held_model.kernel_time(one_tile, 1) ==
        DeviceModel(at_boost_gpu, profile, TrainingPrecision::fp32).kernel_time(one_tile, 1));
  // Memory-bound kernels do not follow the SM clock.
  const KernelWork stream = elementwise(1 << 26);
  CHECK(held_model.kernel_time(stream, 1) ==
        DeviceModel(at_boost_gpu, profile, TrainingPrecision::fp32).kernel_time(stream, 1));
}

TEST_CASE("the catalogue's power rule holds a T4 to half its boost clock, not a V100 or 2080 Ti") {
  // 70 W for 8.14 fp32 TFLOP/s against the V100 PCIe's 250 W for 14.0 (its reference for Volta
  // and Turing): 0.486 of 1590 MHz.
  const GpuSpec& t4 = gpu("t4");
  REQUIRE(t4.clocks->sustained_mhz.has_value());
  CHECK(t4.clocks->sustained_from_power_rule);
  CHECK(*t4.clocks->sustained_mhz == Approx(1590 * (70 / 8.14) / (250 / 14.0)).epsilon(0.01));
  CHECK(t4.sources.at("clocks_mhz.sustained").find("V100 PCIe") != std::string::npos);
  // The reference itself, and a board with more power per TFLOP/s, hold boost.
  CHECK_FALSE(gpu("v100-pcie-32gb").clocks->sustained_mhz.has_value());
  CHECK_FALSE(gpu("rtx-2080-ti").clocks->sustained_mhz.has_value());
  // No reference for the architecture: no rule.
  CHECK_FALSE(gpu("a100-pcie-40gb").clocks->sustained_mhz.has_value());
}

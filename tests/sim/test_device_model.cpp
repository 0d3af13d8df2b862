// The roofline with utilisation, checked against its formula on hand-made kernels.
#include <cmath>

#include <catch2/catch.hpp>

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
  k.parallelism = {elements_per_sample, 0};
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
  k.parallelism = {n * n, 0};
  return k;
}

}  // namespace

TEST_CASE("a large streaming kernel runs at the effective memory bandwidth") {
  HardwareProfile profile = default_profile();
  DeviceModel device(gpu("a100-sxm4-80gb"), profile, TrainingPrecision::fp32);
  KernelWork k = elementwise(1 << 26);
  double bandwidth = gpu("a100-sxm4-80gb").memory_bandwidth.value() * profile.gpu.memory;
  double expected = 8.0 * (1 << 26) / bandwidth;
  CHECK(device.memory_utilisation(k, 1) == 1.0);
  CHECK(device.kernel_time(k, 1) == SimTime::from_seconds(Seconds(expected)));
}

TEST_CASE("a large GEMM runs at peak x efficiency, on tensor cores under mixed precision") {
  HardwareProfile profile = default_profile();
  const GpuSpec& h100 = gpu("h100-sxm");
  KernelWork k = square_gemm(8192);
  double flops = 2.0 * 8192.0 * 8192.0 * 8192.0;
  double gemm_efficiency = profile.gpu.compute[static_cast<std::size_t>(OpClass::gemm)];
  DeviceModel fp32(h100, profile, TrainingPrecision::fp32);
  DeviceModel bf16(h100, profile, TrainingPrecision::amp_bf16);
  // 128x128 tiles: (8192/128)^2 = 4096 of them, in waves of 132 SMs x 2 tiles.
  const double tiles = 64.0 * 64.0, slots = 132.0 * 2.0;
  const double utilisation = tiles / (std::ceil(tiles / slots) * slots);
  CHECK(fp32.compute_utilisation(k, 1) == Approx(utilisation));
  auto expected = [&](Precision p) {
    return SimTime::from_seconds(
        Seconds(flops / (h100.peak_for(p)->value() * gemm_efficiency * utilisation)));
  };
  CHECK(fp32.kernel_time(k, 1).ns() == Approx(expected(Precision::fp32).ns()).margin(1));
  CHECK(bf16.kernel_time(k, 1).ns() == Approx(expected(Precision::bf16).ns()).margin(1));
}

TEST_CASE("without a faster unit, mixed precision computes at the fp32 rate") {
  const GpuSpec& pascal = gpu("gtx-1080-ti");  // fp16 is 1/64 rate there
  DeviceModel fp32(pascal, default_profile(), TrainingPrecision::fp32);
  DeviceModel amp(pascal, default_profile(), TrainingPrecision::amp_fp16);
  CHECK(amp.peak(OpClass::gemm).value() == fp32.peak(OpClass::gemm).value());
}

TEST_CASE("a GEMM one tile past a full wave needs a second wave") {
  // 108 SMs x 2 resident tiles = 216 tiles a wave; 217 tiles of 128x128 take two waves.
  const GpuSpec& a100 = gpu("a100-sxm4-40gb");
  DeviceModel device(a100, default_profile(), TrainingPrecision::fp32);
  KernelWork k;
  k.op_class = OpClass::gemm;
  k.has_gemm_shape = true;
  k.gemm.m = {128, 0};
  k.gemm.n = {0, 128 * 217};
  k.gemm.k = {0, 4096};
  const std::int64_t capacity = 108 * 2;
  CHECK(device.compute_utilisation(k, 1) == Approx(217.0 / (2.0 * capacity)));
  k.gemm.n = {0, 128 * 216};
  CHECK(device.compute_utilisation(k, 1) == Approx(1.0));
}

TEST_CASE("a tiny kernel takes the minimum kernel time") {
  HardwareProfile profile = default_profile();
  DeviceModel device(gpu("rtx-4090"), profile, TrainingPrecision::fp32);
  CHECK(device.kernel_time(elementwise(16), 1) == SimTime::from_seconds(profile.gpu.min_kernel));
}

TEST_CASE("a batch too small to give every SM work under-uses the GPU") {
  DeviceModel device(gpu("h100-sxm"), default_profile(), TrainingPrecision::fp32);
  KernelWork k = elementwise(1024);  // one block per sample
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

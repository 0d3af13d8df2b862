// The what-if scenarios (scenarios/what-if/): each header says what the study shows; these
// tests hold the predictions to it.
#include <algorithm>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "core/spec/scenario_spec.h"
#include "sim/predict/predict.h"
#include "sim/report/report.h"
#include "support/paths.h"
#include "support/sweep_points.h"

using namespace epochcast;
using namespace epochcast::sim;

namespace {

ScenarioSpec what_if(const std::string& name, const std::vector<std::string>& sets = {}) {
  return test::load_with(std::filesystem::path("scenarios") / "what-if" / (name + ".yaml"), sets);
}

const PointResult& at(const std::vector<PointResult>& results, int gpus, std::int64_t batch) {
  return test::point_at(results, gpus, batch);
}

}  // namespace

TEST_CASE(
    "what-if NVLink: a bridged pair cuts DataParallel's traffic, the host bridge still chokes 4") {
  const std::string name = "seed001-linear-nvlink";
  std::vector<PointResult> nvlink = predict(what_if(name));
  std::vector<PointResult> bridge = predict(what_if(name, {"hardware=rtx2080ti-4x-hostbridge"}));
  for (std::int64_t batch : {10, 100, 600}) {
    INFO("batch " << batch);
    // Two GPUs on one NVLink bridge: the broadcast and reduce get well over twice as fast.
    CHECK(at(bridge, 2, batch).communication_seconds >
          2.0 * at(nvlink, 2, batch).communication_seconds);
    CHECK(at(nvlink, 2, batch).epoch_seconds < at(bridge, 2, batch).epoch_seconds);
    // Four GPUs still cross the host bridge between the pairs.
    CHECK(at(nvlink, 4, batch).communication_seconds >
          0.8 * at(bridge, 4, batch).communication_seconds);
    // And one GPU still wins, as in seed 001.
    for (int gpus : {2, 3, 4})
      CHECK(at(nvlink, 1, batch).epoch_seconds < at(nvlink, gpus, batch).epoch_seconds);
  }
}

TEST_CASE("what-if dp against ddp: on the same box ddp is faster at every multi-GPU point") {
  std::vector<PointResult> dp = predict(what_if("dp-vs-ddp-seed001-box"));
  std::vector<PointResult> ddp =
      predict(what_if("dp-vs-ddp-seed001-box", {"training.strategy=ddp"}));
  REQUIRE(dp.size() == ddp.size());
  for (std::size_t i = 0; i < dp.size(); ++i) {
    if (dp[i].point.gpus == 1) continue;
    INFO(dp[i].point.gpus << " GPUs, batch " << dp[i].point.global_batch);
    CHECK(ddp[i].epoch_seconds < dp[i].epoch_seconds);
  }
}

TEST_CASE("what-if 8x RTX 4090 or 4x H100: the H100s are faster per epoch") {
  std::vector<PointResult> rtx = predict(what_if("resnet50-rtx4090-or-h100"));
  std::vector<PointResult> h100 = predict(
      what_if("resnet50-rtx4090-or-h100", {"hardware=hgx-h100-4gpu", "sweep.gpus=[1,2,4]"}));
  const PointResult* fastest_rtx = fastest_point(rtx);
  const PointResult* fastest_h100 = fastest_point(h100);
  REQUIRE(fastest_rtx);
  REQUIRE(fastest_h100);
  CHECK(fastest_rtx->point.gpus == 8);
  CHECK(fastest_h100->point.gpus == 4);
  CHECK(fastest_h100->epoch_seconds < fastest_rtx->epoch_seconds);
  // ...while one GPU-hour of an RTX 4090 buys more epochs at the files' prices.
  ScenarioSpec rtx_spec = what_if("resnet50-rtx4090-or-h100");
  ScenarioSpec h100_spec =
      what_if("resnet50-rtx4090-or-h100", {"hardware=hgx-h100-4gpu", "sweep.gpus=[4]"});
  REQUIRE(rtx_spec.machine.price);
  REQUIRE(h100_spec.machine.price);
  double rtx_cost = rtx_spec.machine.price->per_gpu_hour * 8 * fastest_rtx->epoch_seconds;
  double h100_cost = h100_spec.machine.price->per_gpu_hour * 4 * fastest_h100->epoch_seconds;
  CHECK(rtx_cost < h100_cost);
}

TEST_CASE("what-if bert-base 8 to 64 GPUs: the epoch keeps shrinking as efficiency falls") {
  std::vector<PointResult> r = predict(what_if("bert-base-8-to-64-gpus-ib"));
  const std::vector<int> gpus = {8, 16, 32, 64};
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    const PointResult& p = at(r, gpus[i], 32 * gpus[i]);
    INFO(gpus[i] << " GPUs");
    CHECK(p.scaling_efficiency > 0.8);
    CHECK(p.scaling_efficiency < 1.0);
    if (i == 0) continue;
    const PointResult& before = at(r, gpus[i - 1], 32 * gpus[i - 1]);
    CHECK(p.epoch_seconds < before.epoch_seconds);
    CHECK(p.scaling_efficiency < before.scaling_efficiency);
    CHECK(p.communication_seconds > 0);
  }
}

TEST_CASE("what-if fastest batch within memory: the fastest point fits, the largest do not") {
  std::vector<PointResult> r = predict(what_if("fastest-batch-within-memory"));
  const PointResult* best = fastest_point(r);
  REQUIRE(best);
  CHECK(best->memory.fits);
  CHECK_FALSE(at(r, 1, 512).memory.fits);
  std::int64_t largest = at(r, 1, 512).memory.largest_batch;
  CHECK(best->point.global_batch <= largest);
  // The largest fitting batch of the sweep is within a few percent of the fastest.
  const PointResult* largest_in_sweep = nullptr;
  for (const PointResult& p : r) {
    if (p.simulated) largest_in_sweep = &p;
  }
  REQUIRE(largest_in_sweep);
  CHECK(largest_in_sweep->epoch_seconds < 1.05 * best->epoch_seconds);
  CHECK(at(r, 1, 16).epoch_seconds > 1.05 * best->epoch_seconds);
}

TEST_CASE(
    "what-if U-Net segmentation: activations bound the batch, 8 A100s scale nearly linearly") {
  std::vector<PointResult> r = predict(what_if("unet-segmentation-dgx-a100"));
  const std::int64_t largest = at(r, 1, 16).memory.largest_batch;
  CHECK(largest >= 16);
  CHECK(largest < 24);
  CHECK(at(r, 1, 16).memory.fits);
  CHECK_FALSE(at(r, 1, 24).memory.fits);
  CHECK_FALSE(at(r, 8, 8 * 32).memory.fits);
  // Memory grows with the images, not the 31 M parameters: more than 1 GiB per image.
  const double per_image_gib =
      static_cast<double>(at(r, 1, 16).memory.peak.value() - at(r, 1, 8).memory.peak.value()) /
      8.0 / (1 << 30);
  CHECK(per_image_gib > 1.0);
  for (std::int64_t per_gpu : {1, 4, 16}) {
    INFO("per-GPU batch " << per_gpu);
    CHECK(at(r, 8, 8 * per_gpu).speedup > 7.0);
  }
  const PointResult* best = fastest_point(r);
  REQUIRE(best);
  CHECK(best->point.gpus == 8);
}

TEST_CASE("what-if OPT-6.7B on 8 GPUs: only sharded parameters fit, and PCIe pays for them") {
  const std::string name = "opt-6.7b-fsdp-8gpu-boxes";
  const std::vector<PointResult> fsdp = predict(what_if(name));
  // 16 bytes a parameter on every GPU (about 99 GiB) do not fit 80 GB, with or without the
  // optimizer state sharded.
  for (const char* strategy : {"ddp", "zero1"}) {
    INFO(strategy);
    const std::vector<PointResult> r =
        predict(what_if(name, {fmt::format("training.strategy={}", strategy)}));
    CHECK_FALSE(at(r, 8, 8).memory.fits);
    CHECK(at(r, 8, 8).memory.largest_batch == 0);
  }
  // FSDP fits every batch of the sweep; SHARD_GRAD_OP, holding every gathered unit through
  // backward, a smaller largest batch.
  const std::vector<PointResult> zero2 = predict(what_if(name, {"training.strategy=zero2"}));
  CHECK(at(fsdp, 8, 64).memory.fits);
  CHECK_FALSE(at(zero2, 8, 64).memory.fits);
  CHECK(at(zero2, 8, 64).memory.largest_batch < at(fsdp, 8, 64).memory.largest_batch);
  // Over NVSwitch the gathers hide behind compute: compute-bound at every batch.
  for (std::int64_t batch : {8, 16, 32, 64}) {
    INFO("global batch " << batch);
    CHECK(at(fsdp, 8, batch).bottleneck == "compute");
  }
  // On 24 GB boards only one sequence a GPU fits, and the step waits for host memory.
  const std::vector<PointResult> consumer = predict(what_if(name, {"hardware=rtx4090-8x-pcie"}));
  CHECK(at(consumer, 8, 8).memory.fits);
  CHECK(at(consumer, 8, 8).memory.largest_batch == 1);
  CHECK(at(consumer, 8, 8).bottleneck == "communication");
  CHECK(at(consumer, 8, 8).epoch_seconds > 20 * at(fsdp, 8, 8).epoch_seconds);
  // Checkpointing each block fits eight, and the larger batch shares each step's gathers.
  const std::vector<PointResult> checkpointed = predict(
      what_if(name, {"hardware=rtx4090-8x-pcie", "training.activation_checkpointing=blocks"}));
  CHECK(at(checkpointed, 8, 64).memory.fits);
  CHECK(at(checkpointed, 8, 64).epoch_seconds < 0.2 * at(consumer, 8, 8).epoch_seconds);
  // CPU offload takes the model states off the GPU, and the DGX then waits for its host: AdamW
  // on the CPU moves 88 bytes a parameter a step through host memory, over a second a step.
  const std::vector<PointResult> offloaded =
      predict(what_if(name, {"training.fsdp.cpu_offload=true"}));
  CHECK(at(offloaded, 8, 8).memory.peak < at(fsdp, 8, 8).memory.peak);
  CHECK(at(offloaded, 8, 8).memory.optimizer_state.value() == 0);
  CHECK(at(offloaded, 8, 64).bottleneck == "host");
  CHECK(at(offloaded, 8, 64).epoch_seconds > 2 * at(fsdp, 8, 64).epoch_seconds);
}

// Sharded data parallelism (zero1, zero2, fsdp) and activation checkpointing: memory per rank
// against the ZeRO paper's accounting, communication per step against the closed forms, FSDP's
// units, recomputation, and the steady-state shortcut against full simulation.
#include <algorithm>
#include <numeric>
#include <string>

#include <catch2/catch.hpp>

#include "core/model/analysis.h"
#include "core/spec/scenario_spec.h"
#include "core/spec/sharding.h"
#include "sim/compute/device_model.h"
#include "sim/compute/memory_model.h"
#include "sim/predict/predict.h"
#include "sim/strategy/strategy.h"
#include "support/paths.h"

using namespace epochcast;
using namespace epochcast::sim;

namespace {

ScenarioSpec scenario(const std::string& body, const std::vector<yaml::Override>& overrides = {}) {
  return load_scenario_from_string("kind: scenario\nname: test\n" + body, "test.yaml",
                                   test::source_dir(), overrides);
}

// GPT-2 small on a DGX H100, fp32 so that gathered and master parameters are the same size.
const char* kGpt2 = R"(model: gpt2-small
hardware: dgx-h100
dataset: {name: text, train_samples: 512, classes: 50257}
loader: {source: synthetic_gpu}
training: {strategy: fsdp, optimizer: adamw, precision: fp32, fsdp: {wrap: layer}}
sweep: {gpus: [8], batch: [4], batch_is: per_gpu}
)";

// GPT-2 small's parameters (scenarios/models/gpt2-small.yaml; Hugging Face's count).
constexpr std::int64_t kGpt2Params = 124'439'808;

}  // namespace

TEST_CASE("model states per rank: the ZeRO paper's Figure 1 from its accounting") {
  // Rajbhandari et al. 2020, Figure 1: a 7.5B-parameter model on 64 GPUs under mixed-precision
  // Adam (2 bytes of fp16 parameters, 2 of fp16 gradients, K = 12 of fp32 master weights,
  // momentum and variance per parameter): 120 GB without sharding, 31.4 GB partitioning the
  // optimizer state, 16.6 GB with the gradients, 1.9 GB with the parameters.
  const double psi = 7.5e9;
  StateSharding none;
  none.ranks = 64;
  StateSharding os = none;
  os.optimizer = true;
  StateSharding os_g = os;
  os_g.gradients = true;
  StateSharding os_g_p = os_g;
  os_g_p.weights = true;
  CHECK(model_state_bytes(psi, 2, 2, 12, none) / 1e9 == Approx(120.0));
  CHECK(model_state_bytes(psi, 2, 2, 12, os) / 1e9 == Approx(31.4).epsilon(0.002));
  CHECK(model_state_bytes(psi, 2, 2, 12, os_g) / 1e9 == Approx(16.6).epsilon(0.003));
  CHECK(model_state_bytes(psi, 2, 2, 12, os_g_p) / 1e9 == Approx(1.9).epsilon(0.02));
}

TEST_CASE("each strategy keeps the model states the ZeRO stages say, in PyTorch's dtypes") {
  // Under PyTorch's mixed precision the master parameters are the model's fp32 ones: 4 bytes of
  // parameters, 4 of gradients and 8 of Adam's moments per parameter, 16 in all as the paper's
  // 2 + 2 + 12; each stage partitions its share of them over the 8 ranks.
  const double psi = kGpt2Params;
  const SweepPoint point{8, 32, 4};
  for (const char* precision : {"fp32", "amp_bf16"}) {
    INFO(precision);
    std::map<std::string, MemoryEstimate> memory;
    for (const char* strategy : {"ddp", "zero1", "zero2", "fsdp"}) {
      memory[strategy] = predict_point(scenario(kGpt2, {{"training.strategy", strategy, ""},
                                                        {"training.precision", precision, ""}}),
                                       point)
                             .memory;
    }
    auto states = [](const MemoryEstimate& m) {
      return static_cast<double>(m.weights.value() + m.gradients.value() +
                                 m.optimizer_state.value());
    };
    CHECK(states(memory["ddp"]) == Approx(16 * psi));
    CHECK(states(memory["zero1"]) == Approx(4 * psi + 4 * psi + 8 * psi / 8));
    CHECK(states(memory["zero2"]) == Approx(16 * psi / 8).epsilon(1e-6));
    CHECK(states(memory["fsdp"]) == Approx(16 * psi / 8).epsilon(1e-6));
    // What zero2 holds beyond: every unit gathered from its forward to its backward; fsdp only
    // two units in flight (limit_all_gathers), and each the largest unit's gradients.
    CHECK(memory["fsdp"].strategy_buffers < memory["zero2"].strategy_buffers);
    CHECK(memory["fsdp"].peak < memory["zero2"].peak);
    CHECK(memory["zero2"].peak < memory["zero1"].peak);
    CHECK(memory["zero1"].peak < memory["ddp"].peak);
  }
}

TEST_CASE("communication per step: all-reduce for ddp, all-gathers and reduce-scatters for fsdp") {
  // A ring all-reduce of X bytes is a reduce-scatter and an all-gather of X each: DDP moves 2
  // psi a step, ZeRO-3 3 psi (an all-gather for forward, another for backward, a
  // reduce-scatter), zero2 2 psi (gathered once). Counted in the collectives' buffers: DDP's
  // all-reduces hold psi; each all-gather or reduce-scatter psi. FSDP's root unit (here the
  // token embedding the head is tied to) is gathered once for forward and backward: ZeRO-3
  // moves 3 psi less its size.
  const std::int64_t bytes = kGpt2Params * 4;
  const SweepPoint point{8, 32, 4};
  auto per_step = [&](const char* strategy) {
    const PointResult r =
        predict_point(scenario(kGpt2, {{"training.strategy", strategy, ""},
                                       {"training.ddp.broadcast_buffers", "false", ""}}),
                      point);
    REQUIRE(r.simulated);
    REQUIRE(r.validation_iterations == 0);
    return std::pair{r.stats.collective_bytes / r.train_iterations,
                     r.stats.collectives / r.train_iterations};
  };
  const ModelAnalysis analysis = analyze_model(scenario(kGpt2).model);
  const std::vector<FsdpUnit> layer_units = fsdp_units(analysis, FsdpWrap::layer);
  const auto units = static_cast<std::int64_t>(layer_units.size());
  REQUIRE(layer_units.front().root);
  const std::int64_t root = layer_units.front().params * 4;
  CHECK(per_step("ddp").first == bytes);
  CHECK(per_step("fsdp") == std::pair{3 * bytes - root, 3 * units - 1});
  CHECK(per_step("zero2") == std::pair{2 * bytes, 2 * units});
  // Without a root (BERT-base by layer: no weight shared between layers), exactly 3 psi.
  const ScenarioSpec bert = scenario(R"(model: bert-base
hardware: dgx-h100
dataset: {name: text, train_samples: 256, classes: 2}
loader: {source: synthetic_gpu}
training: {strategy: fsdp, optimizer: adamw, precision: fp32, fsdp: {wrap: layer}}
sweep: {gpus: [8], batch: [4], batch_is: per_gpu}
)");
  REQUIRE_FALSE(fsdp_units(bert.analysis, FsdpWrap::layer).front().root);
  const PointResult r = predict_point(bert, point);
  CHECK(r.stats.collective_bytes / r.train_iterations == 3 * bert.analysis.params * 4);
  // zero1: DDP's all-reduces, then every parameter tensor broadcast from its owner.
  CHECK(per_step("zero1").first == 2 * bytes);
}

TEST_CASE("FSDP's units: a unit a transformer block, the embeddings and head in the root") {
  const ModelAnalysis analysis = analyze_model(scenario(kGpt2).model);
  const std::vector<FsdpUnit> blocks = fsdp_units(analysis, FsdpWrap::block);
  REQUIRE(blocks.size() == 13);
  CHECK(blocks.front().root);
  // wte (50,257 x 768), wpe (1,024 x 768) and ln_f (768 weights, 768 biases); lm_head is tied
  // to wte.
  CHECK(blocks.front().params == 50'257 * 768 + 1'024 * 768 + 2 * 768);
  for (std::size_t u = 1; u < blocks.size(); ++u) {
    CHECK_FALSE(blocks[u].root);
    // Attention 4 d^2 + 4 d, feed-forward 8 d^2 + 5 d (4d wide), two LayerNorms 4 d: d = 768.
    CHECK(blocks[u].params == 12 * 768 * 768 + 13 * 768);
  }
  for (FsdpWrap wrap : {FsdpWrap::block, FsdpWrap::layer, FsdpWrap::model}) {
    const std::vector<FsdpUnit> units = fsdp_units(analysis, wrap);
    std::int64_t total = 0;
    std::vector<int> covered(analysis.layers.size(), 0);
    for (const FsdpUnit& u : units) {
      total += u.params;
      for (std::size_t l : u.layers)
        ++covered[l];
    }
    CHECK(total == kGpt2Params);
    CHECK(*std::max_element(covered.begin(), covered.end()) == 1);
  }
  CHECK(fsdp_units(analysis, FsdpWrap::model).size() == 1);
  // Wrapped by layer, the token embedding lm_head is tied to stays in the root (two units must
  // not share a weight); every other layer with weights is a unit of its own.
  const std::vector<FsdpUnit> layers = fsdp_units(analysis, FsdpWrap::layer);
  REQUIRE(layers.front().root);
  CHECK(layers.front().params == 50'257 * 768);
  CHECK(analysis.layers[layers.front().layers.front()].layer.name == "wte");
  for (std::size_t u = 1; u < layers.size(); ++u)
    CHECK(layers[u].layers.size() == 1);
}

TEST_CASE("ZeroRedundancyOptimizer's partition: every tensor owned once, the ranks balanced") {
  const ModelAnalysis analysis = analyze_model(scenario(kGpt2).model);
  for (int ranks : {1, 2, 8, 64}) {
    const std::vector<int> owner = zero_partition(analysis, ranks);
    std::vector<std::int64_t> held(static_cast<std::size_t>(ranks), 0);
    std::int64_t largest = 0;
    for (std::size_t t = 0; t < owner.size(); ++t) {
      REQUIRE(owner[t] >= 0);
      REQUIRE(owner[t] < ranks);
      held[static_cast<std::size_t>(owner[t])] += analysis.param_tensors[t].elements;
      largest = std::max(largest, analysis.param_tensors[t].elements);
    }
    CHECK(std::accumulate(held.begin(), held.end(), std::int64_t{0}) == kGpt2Params);
    // Greedy largest-first: no rank holds more than the least loaded plus one tensor.
    CHECK(*std::max_element(held.begin(), held.end()) -
              *std::min_element(held.begin(), held.end()) <=
          largest);
  }
}

TEST_CASE("the steady-state shortcut is exact for the sharded strategies") {
  PredictOptions full;
  full.steady_state_shortcut = false;
  for (const char* strategy : {"zero1", "zero2", "fsdp"}) {
    INFO(strategy);
    const ScenarioSpec s = scenario(kGpt2, {{"training.strategy", strategy, ""},
                                            {"training.fsdp.wrap", "block", ""},
                                            {"dataset.train_samples", "1024", ""}});
    const PointResult quick = predict_point(s, SweepPoint{8, 32, 4});
    const PointResult exact = predict_point(s, SweepPoint{8, 32, 4}, full);
    CHECK(quick.stats.simulated_iterations < exact.stats.simulated_iterations);
    CHECK(quick.epoch_seconds == exact.epoch_seconds);
    CHECK(quick.communication_seconds == exact.communication_seconds);
    CHECK(quick.stats.collective_bytes == exact.stats.collective_bytes);
  }
}

TEST_CASE("every strategy's model and the scenario rules agree on who runs a process per GPU") {
  // core decides which points a strategy can run (whole nodes across nodes for a process per
  // GPU, one node for DataParallel); the simulator's model of each must say the same.
  for (std::size_t i = 0; i < std::size(kStrategyNames); ++i) {
    const auto strategy = static_cast<Strategy>(i);
    INFO(kStrategyNames[i]);
    CHECK(strategy_model(strategy).process_per_gpu() == process_per_gpu(strategy));
  }
}

TEST_CASE("activation checkpointing: each block keeps its input and runs its forward again") {
  const std::string body = R"(model: gpt2-small
hardware: dgx-h100
dataset: {name: text, train_samples: 64, classes: 50257}
loader: {source: synthetic_gpu}
training: {strategy: single, optimizer: adamw, precision: fp32}
sweep: {gpus: [1], batch: [4], batch_is: per_gpu}
)";
  const ScenarioSpec plain = scenario(body);
  const ScenarioSpec checkpointed =
      scenario(body, {{"training.activation_checkpointing", "blocks", ""}});
  const ModelAnalysis& analysis = plain.analysis;
  // Memory: the twelve blocks' inputs (1,024 x 768 fp32 each) and one block's own tensors stand
  // in for every block's; the embeddings' and the head's are kept as they are.
  std::int64_t outside = 0, one_block = 0;
  for (const LayerCosts& layer : analysis.layers) {
    if (layer.layer.block.empty())
      outside += layer.saved.per_sample.value();
    else if (layer.layer.block == "h.0")
      one_block += layer.saved.per_sample.value();
  }
  const PerBatch<Bytes> held = held_activations(analysis, ActivationCheckpointing::blocks);
  CHECK(held.per_sample.value() == outside + 12 * 1024 * 768 * 4 + one_block);
  CHECK(held.per_sample.value() < analysis.saved_activations.per_sample.value() / 5);
  const SweepPoint point{1, 4, 4};
  const PointResult a = predict_point(plain, point);
  const PointResult b = predict_point(checkpointed, point);
  CHECK(b.memory.activations < a.memory.activations);
  CHECK(b.memory.largest_batch > 4 * a.memory.largest_batch);
  // Time: backward runs every block's forward kernels again; the forward itself is unchanged.
  std::int64_t block_kernels = 0;
  for (const LayerCosts& layer : analysis.layers) {
    if (!layer.layer.block.empty())
      block_kernels += static_cast<std::int64_t>(layer.forward.size());
  }
  const std::int64_t steps = a.train_iterations;
  CHECK(b.stats.kernels - a.stats.kernels == block_kernels * steps);
  CHECK(b.breakdown.forward == Approx(a.breakdown.forward).epsilon(1e-9));
  // Backward grows by the blocks' forward kernels, once a step.
  const DeviceModel device(checkpointed.machine.gpu, checkpointed.profile,
                           checkpointed.training.precision, checkpointed.training.convolution);
  double recompute = 0;
  for (const LayerCosts& layer : analysis.layers) {
    if (layer.layer.block.empty()) continue;
    for (const KernelWork& k : layer.forward)
      recompute += device.kernel_time(k, 4).seconds();
  }
  CHECK(b.breakdown.backward - a.breakdown.backward ==
        Approx(recompute * static_cast<double>(steps)).epsilon(0.01));
}

TEST_CASE("fsdp accumulating gradients gathers every micro-batch, reduce-scatters once a cycle") {
  // FSDP's no_sync(): the micro-batches before a cycle's last keep their gradients whole (every
  // unit's, in memory) and reduce nothing; the parameters are still gathered for every forward
  // and again for every backward.
  const std::int64_t bytes = kGpt2Params * 4;
  const SweepPoint point{8, 32, 4};
  const ModelAnalysis analysis = analyze_model(scenario(kGpt2).model);
  const std::vector<FsdpUnit> layer_units = fsdp_units(analysis, FsdpWrap::layer);
  const auto units = static_cast<std::int64_t>(layer_units.size());
  REQUIRE(layer_units.front().root);  // gathered once a micro-batch, for forward and backward
  const std::int64_t root = layer_units.front().params * 4;
  const PointResult once = predict_point(scenario(kGpt2), point);
  const PointResult four =
      predict_point(scenario(kGpt2, {{"training.gradient_accumulation", "4", ""}}), point);
  REQUIRE(four.train_iterations == 16);
  CHECK(four.stats.collectives == 4 * (4 * (2 * units - 1) + units));
  CHECK(four.stats.collective_bytes == 4 * (4 * (2 * bytes - root) + bytes));
  CHECK(four.breakdown.optimizer == Approx(once.breakdown.optimizer / 4).epsilon(0.05));
  // Every unit's gradients whole, where one unit's (the largest, the root's embedding) were.
  std::int64_t largest = 0;
  for (const FsdpUnit& u : fsdp_units(analysis, FsdpWrap::layer))
    largest = std::max(largest, u.params);
  CHECK(four.memory.strategy_buffers.value() - once.memory.strategy_buffers.value() ==
        bytes - largest * 4);
}

TEST_CASE("fsdp under bf16 gathers in 16 bits and reduces in its reduce dtype") {
  // MixedPrecision's param_dtype is the autocast dtype: 2 bytes a parameter each way; with
  // reduce_dtype fp32 (as torchtitan runs it) the reduce-scatter carries 4. The root (the tied
  // embedding) is gathered once.
  const SweepPoint point{8, 32, 4};
  const std::int64_t root =
      fsdp_units(analyze_model(scenario(kGpt2).model), FsdpWrap::layer).front().params;
  auto per_step = [&](const char* reduce) {
    const PointResult r =
        predict_point(scenario(kGpt2, {{"training.precision", "amp_bf16", ""},
                                       {"training.fsdp.reduce_dtype", reduce, ""}}),
                      point);
    return r.stats.collective_bytes / r.train_iterations;
  };
  CHECK(per_step("param") == (3 * kGpt2Params - root) * 2);
  CHECK(per_step("fp32") == (2 * kGpt2Params - root) * 2 + kGpt2Params * 4);
}

TEST_CASE("fsdp with CPU offload keeps no model states on the GPU and steps on the host") {
  // FSDP's CPUOffload(offload_params=True): shards and optimizer state in host memory. The GPU
  // holds only gathered units and a unit's gradients; the collectives are the same; the
  // optimizer is torch.optim's per-tensor loop over each unit's shard on the CPU, each op at the
  // node's sustained memory bandwidth (dgx-h100: 461 GB/s) shared by its 8 ranks.
  const SweepPoint point{8, 32, 4};
  const PointResult on_gpu = predict_point(scenario(kGpt2), point);
  const PointResult offloaded =
      predict_point(scenario(kGpt2, {{"training.fsdp.cpu_offload", "true", ""}}), point);
  CHECK(offloaded.memory.weights.value() == 0);
  CHECK(offloaded.memory.gradients.value() == 0);
  CHECK(offloaded.memory.optimizer_state.value() == 0);
  CHECK(on_gpu.memory.optimizer_state.value() > 0);
  CHECK(offloaded.memory.strategy_buffers == on_gpu.memory.strategy_buffers);
  CHECK(offloaded.stats.collective_bytes == on_gpu.stats.collective_bytes);

  const ScenarioSpec spec = scenario(kGpt2);
  const ModelAnalysis analysis = analyze_model(spec.model);
  const double bandwidth = 461e9 / 8;
  const double op = spec.profile.host.optimizer_op.value();
  // Beside it on the host, zero_grad(set_to_none): one call, 0.1 us a parameter tensor.
  double expected = op + 1e-7 * static_cast<double>(analysis.param_tensors.size());
  for (const FsdpUnit& u : fsdp_units(analysis, FsdpWrap::layer)) {
    const std::int64_t shard = (u.params + 7) / 8;
    // AdamW's for-loop: 9 ops moving 8+8+12+8+12+8+8+8+16 = 88 bytes an element.
    expected += 9 * op + 88.0 * static_cast<double>(shard) / bandwidth;
  }
  const auto per_step = [](const PointResult& r) {
    return r.stats.cpu_busy[static_cast<std::size_t>(Category::optimizer)].seconds() /
           static_cast<double>(r.train_iterations);
  };
  CHECK(per_step(offloaded) == Approx(expected).epsilon(1e-6));
  // 124M parameters' Adam on an eighth of the host's memory bandwidth: tens of milliseconds a
  // step, where the GPU's foreach kernels take well under one.
  CHECK(per_step(offloaded) > 0.02);
  CHECK(offloaded.epoch_seconds > on_gpu.epoch_seconds);
}

TEST_CASE("CPU offload needs the host's memory bandwidth, and says where to add it") {
  try {
    scenario(R"(model: gpt2-small
hardware: seed001-box
dataset: {name: text, train_samples: 512, classes: 50257}
training: {strategy: fsdp, optimizer: adamw, precision: fp32, fsdp: {cpu_offload: true}}
sweep: {gpus: [4], batch: [4], batch_is: per_gpu}
)");
    FAIL("a machine without host.memory_bandwidth_gbps was accepted");
  } catch (const InputError& e) {
    const std::string what = e.what();
    CHECK_THAT(what, Catch::Contains("cpu_offload"));
    CHECK_THAT(what, Catch::Contains("host.memory_bandwidth_gbps"));
    CHECK_THAT(what, Catch::Contains("seed001-box"));
  }
}

// Memory accounting per GPU.
#include "sim/compute/memory_model.h"

#include <algorithm>
#include <cmath>

#include "core/spec/limits.h"
#include "sim/engine/sim_time.h"

namespace epochcast::sim {

std::int64_t optimizer_state_per_param(Optimizer optimizer) {
  switch (optimizer) {
    case Optimizer::sgd:
      return 0;
    case Optimizer::momentum:
      return 4;  // momentum buffer
    case Optimizer::adam:
    case Optimizer::adamw:
      return 8;  // first and second moments
  }
  return 0;
}

double model_state_bytes(double params, double weight, double gradient, double optimizer,
                         const StateSharding& sharding) {
  if (sharding.offloaded) return 0;
  const double n = std::max(1, sharding.ranks);
  auto share = [&](double bytes, bool partitioned) { return partitioned ? bytes / n : bytes; };
  return params * (share(weight, sharding.weights) + share(gradient, sharding.gradients) +
                   share(optimizer, sharding.optimizer));
}

PerBatch<Bytes> held_activations(const ModelAnalysis& analysis,
                                 ActivationCheckpointing checkpointing) {
  if (checkpointing == ActivationCheckpointing::none) return analysis.saved_activations;
  const std::int64_t element = element_bytes(analysis.options.activation_dtype);
  PerBatch<Bytes> held, block, largest;
  const std::vector<LayerCosts>& layers = analysis.layers;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const std::string& name = layers[i].layer.block;
    if (name.empty()) {
      held += layers[i].saved;
      continue;
    }
    if (i == 0 || layers[i - 1].layer.block != name) {
      // torch.utils.checkpoint keeps the block's input.
      held.per_sample += Bytes(checked_product(layers[i].input_shape.elements(), element));
      block = PerBatch<Bytes>{};
    }
    block += layers[i].saved;
    if (block.per_sample > largest.per_sample) largest = block;
  }
  held += largest;
  return held;
}

namespace {

// Weights that autocast casts to 16 bits: those of matrix (GEMM/convolution) layers.
std::int64_t matrix_params(const ModelAnalysis& analysis) {
  std::int64_t count = 0;
  for (const LayerCosts& layer : analysis.layers) {
    for (const KernelWork& k : layer.forward) {
      if (k.has_gemm_shape) {
        count += layer.params;
        break;
      }
    }
  }
  return count;
}

}  // namespace

MemoryEstimate estimate_memory(const ModelAnalysis& analysis, std::int64_t batch,
                               Optimizer optimizer, TrainingPrecision precision,
                               const HardwareProfile& profile, Bytes capacity,
                               Bytes strategy_buffers, const StateSharding& sharding,
                               ActivationCheckpointing checkpointing) {
  const PerBatch<Bytes> saved = held_activations(analysis, checkpointing);
  const std::int64_t param_bytes = element_bytes(analysis.options.parameter_dtype);
  const std::int64_t activation_bytes = element_bytes(analysis.options.activation_dtype);
  // Reported sizes are clamped far above any GPU, so absurd models and batches cannot overflow;
  // sums are formed in doubles for the same reason.
  auto bytes = [](double value) {
    return Bytes(static_cast<std::int64_t>(std::min(std::ceil(value), 0x1p62)));
  };
  const double params = static_cast<double>(analysis.params);
  MemoryEstimate m;
  m.capacity = capacity;
  m.context = profile.memory.context;
  // Each state alone through the formula, so that the parts add up to it.
  const auto element = static_cast<double>(param_bytes);
  m.weights = bytes(model_state_bytes(params, element, 0, 0, sharding));
  m.gradients = bytes(model_state_bytes(params, 0, element, 0, sharding));
  m.optimizer_state = bytes(model_state_bytes(
      params, 0, 0, static_cast<double>(optimizer_state_per_param(optimizer)), sharding));
  const bool mixed = mixed_precision(precision);
  m.weight_copies = bytes(mixed && !sharding.copies_made_by_gather
                              ? static_cast<double>(matrix_params(analysis)) * 2
                              : 0);
  m.workspace = profile.memory.workspace;
  m.strategy_buffers = strategy_buffers;

  // During backward, a layer's output gradient and input gradient are alive together.
  double transient_per_sample = 0;
  for (const LayerCosts& layer : analysis.layers) {
    transient_per_sample =
        std::max(transient_per_sample, static_cast<double>(layer.input_shape.elements()) *
                                               static_cast<double>(activation_bytes) +
                                           static_cast<double>(layer.output_shape.elements()) *
                                               static_cast<double>(activation_bytes));
  }
  const double overhead = 1.0 + profile.memory.allocator_overhead;
  double held = 0;
  for (Bytes part : {m.weights, m.gradients, m.optimizer_state, m.weight_copies, m.workspace,
                     m.strategy_buffers, saved.fixed}) {
    held += static_cast<double>(part.value());
  }
  const double fixed = static_cast<double>(m.context.value()) + overhead * held;
  const double per_sample =
      overhead * (static_cast<double>(saved.per_sample.value()) + transient_per_sample);

  double b = static_cast<double>(batch);
  m.activations = bytes(scaled(saved, batch));
  m.transient = bytes(transient_per_sample * b);
  double peak = fixed + per_sample * b;
  m.peak = bytes(peak);
  m.fits = peak <= static_cast<double>(capacity.value());
  double room = static_cast<double>(capacity.value()) - fixed;
  // A model with nothing per sample fits any batch: the largest is then the largest accepted.
  m.largest_batch =
      room <= 0 ? 0
                : static_cast<std::int64_t>(std::min(std::floor(room / per_sample),
                                                     static_cast<double>(limits::kMaxSamples)));
  return m;
}

}  // namespace epochcast::sim

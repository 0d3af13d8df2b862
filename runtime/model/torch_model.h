// A LibTorch module built from a model spec: the same layers, parameters and shapes that core's
// analysis counts, so a measured step and a predicted step describe the same network.
//
// The model is kept as a tape of primitive layers in the analysis' execution order (residual
// blocks fork a value and join it with an `add`), so the profiling pass can time every layer the
// simulator costs, one by one, forward and backward.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "core/model/analysis.h"
#include "core/model/model_spec.h"

namespace epochcast::runtime {

class TorchModelImpl : public torch::nn::Cloneable<TorchModelImpl> {
 public:
  // `analysis` must be analyze_model(spec): it supplies resolved widths and shapes.
  TorchModelImpl(std::shared_ptr<const ModelSpec> spec,
                 std::shared_ptr<const ModelAnalysis> analysis);

  // [batch, input...] (float, or int64 token ids) -> [batch, output...].
  torch::Tensor forward(torch::Tensor input);

  // (Re)builds every submodule from the spec; Cloneable::clone() calls it on the copy, which is
  // what nn::parallel::replicate relies on.
  void reset() override;

  // The primitive layers, in analysis order (analysis().layers[i] describes layer i).
  std::size_t layer_count() const;
  const LayerCosts& layer_costs(std::size_t i) const;
  // Runs layer i alone on its inputs (one tensor; two for a residual `add`).
  torch::Tensor run_layer(std::size_t i, const std::vector<torch::Tensor>& inputs);
  // A full forward pass that also returns, for every layer, the inputs it received (detached),
  // so a profiler can replay each layer in isolation.
  torch::Tensor forward_recording(torch::Tensor input,
                                  std::vector<std::vector<torch::Tensor>>& layer_inputs);

  const ModelAnalysis& analysis() const { return *analysis_; }

  // The parameters layer i registered, in the order parameters() lists them (none for a layer
  // without weights, or a tied linear layer without bias: its weight is its embedding's).
  std::vector<torch::Tensor> layer_parameters(std::size_t i);

  // Called around every layer of forward(): a sharded strategy gathers a unit's parameters
  // before its first layer and frees them after its last. Unset functions are skipped; reset()
  // clears both (a clone does not call into its original's strategy).
  struct LayerHooks {
    std::function<void(std::size_t layer)> before;
    std::function<void(std::size_t layer, const torch::Tensor& output)> after;
  };
  void set_layer_hooks(LayerHooks hooks) { hooks_ = std::move(hooks); }

 private:
  struct Step;  // one primitive: which values it reads, which it writes, how it computes
  using LayerFunction = std::function<torch::Tensor(const std::vector<torch::Tensor>&)>;

  std::shared_ptr<const ModelSpec> spec_;
  std::shared_ptr<const ModelAnalysis> analysis_;
  std::vector<std::shared_ptr<Step>> steps_;  // steps_[i] computes analysis layer i
  std::size_t value_count_ = 0;               // slots of the tape (fork points keep theirs)
  std::size_t output_value_ = 0;              // the slot holding the model's output
  LayerHooks hooks_;

  // Building state, meaningful only inside reset().
  TensorShape shape_;                                       // per-sample shape of the current value
  std::map<std::size_t, int> pins_;                         // slots residual forks still need
  std::map<std::string, torch::nn::Embedding> embeddings_;  // for tied linear layers
  std::map<std::string, int> references_;                   // per node name: its named readers
  struct NamedSlot {
    std::size_t slot = 0;
    TensorShape shape;
  };
  std::map<std::string, NamedSlot> named_slots_;  // outputs some later node names

  void build_sequence(const std::vector<ModelNode>& nodes, std::size_t& value, std::size_t& cursor);
  void build_primitive(const Layer& layer, std::size_t& value, std::size_t& cursor);
  void build_residual(const ModelNode& node, std::size_t& value, std::size_t& cursor);
  // A node that reads named outputs (`input:`, a concat's `inputs:`) instead of the previous.
  void build_named_reader(const ModelNode& node, std::size_t& value, std::size_t& cursor);
  // Records where a node's output lives when later nodes name it.
  void name_output(const std::string& name, std::size_t slot, const TensorShape& shape);
  const LayerCosts& analysed_layer(std::size_t cursor, const std::string& name,
                                   LayerType type) const;
  bool pinned(std::size_t value) const;
  // Registers the layer's submodule (if it has one) and returns what computes it.
  LayerFunction make_layer(const LayerCosts& costs);
  torch::Tensor run(torch::Tensor input, std::vector<std::vector<torch::Tensor>>* layer_inputs);
};
TORCH_MODULE(TorchModel);

// Why this LibTorch cannot build the model ("" when it can): attention: sdpa before 2.0.
std::string unsupported_by_libtorch(const ModelAnalysis& analysis);

// Builds the module for a model (analysing it in fp32 first).
TorchModel build_torch_model(const ModelSpec& spec);

// Random inputs of the model's per-sample shape for `batch` samples: normal floats, or token ids
// below the first embedding's vocabulary for int64 inputs.
torch::Tensor random_model_input(const ModelAnalysis& analysis, std::int64_t batch,
                                 torch::Generator generator = {});

// The vocabulary for int64 inputs (the first embedding's rows), or 0 for float inputs.
std::int64_t input_vocabulary(const ModelAnalysis& analysis);

}  // namespace epochcast::runtime

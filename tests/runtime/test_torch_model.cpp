// The LibTorch module against core's analysis: the same parameters, shapes and layers, a tape
// that replays layer by layer, gradients that reach every parameter, and clones that own theirs.
// clang-format off
// LibTorch before Catch2: c10 defines a glog-style CHECK(condition) that would otherwise replace
// Catch's CHECK (silently: failures would abort instead of being reported).
#include <torch/torch.h>
#include <catch2/catch.hpp>
// clang-format on

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/model/analysis.h"
#include "core/model/model_spec.h"
#include "runtime/model/torch_model.h"
#include "support/paths.h"

using namespace epochcast;
using runtime::TorchModel;
using runtime::TorchModelImpl;

namespace {

using NamedSizes = std::vector<std::pair<std::string, std::int64_t>>;

TorchModel zoo_module(const std::string& name) {
  return runtime::build_torch_model(load_model(test::zoo_model(name)));
}

// A transformer over a shorter sequence than its file gives: its parameters do not depend on the
// length, and Debian's LibTorch (reference BLAS, one thread: about 3 GFLOP/s) needs some 100 s
// for GPT-2's 1024 tokens.
TorchModel zoo_module_over(const std::string& name, std::int64_t tokens) {
  ModelSpec spec = load_model(test::zoo_model(name));
  spec.input_shape.dims = {tokens};
  return runtime::build_torch_model(spec);
}

TorchModel inline_module(const std::string& yaml, const std::string& name) {
  return runtime::build_torch_model(load_model_from_string(yaml, name));
}

std::vector<std::int64_t> batched(std::int64_t batch, const TensorShape& shape) {
  std::vector<std::int64_t> dims{batch};
  dims.insert(dims.end(), shape.dims.begin(), shape.dims.end());
  return dims;
}

std::int64_t parameter_elements(TorchModel& module) {
  std::int64_t total = 0;
  for (const torch::Tensor& parameter : module->parameters())
    total += parameter.numel();
  return total;
}

std::int64_t buffer_elements(TorchModel& module) {
  std::int64_t total = 0;
  for (const torch::Tensor& buffer : module->buffers())
    total += buffer.numel();
  return total;
}

// Core's parameter tensors ("layer1.0.conv1.weight") as the module registers them: the layer's
// dotted name with '_' for '.', then the tensor's own path inside the layer.
NamedSizes expected_parameters(const ModelAnalysis& analysis) {
  NamedSizes expected;
  for (const LayerCosts& layer : analysis.layers) {
    std::string prefix = layer.layer.name;
    for (char& c : prefix) {
      if (c == '.') c = '_';
    }
    for (const ParamTensor& tensor : layer.param_tensors) {
      expected.emplace_back(prefix + tensor.name.substr(layer.layer.name.size()), tensor.elements);
    }
  }
  return expected;
}

NamedSizes registered_parameters(TorchModel& module) {
  NamedSizes registered;
  for (const auto& parameter : module->named_parameters())
    registered.emplace_back(parameter.key(), parameter.value().numel());
  return registered;
}

// What every model must satisfy: core's parameters (count, names, registration order), its
// buffers, one step per analysed layer, and a forward pass of core's output shape.
void check_against_analysis(TorchModel& module, std::int64_t batch) {
  const ModelAnalysis& analysis = module->analysis();
  CHECK(parameter_elements(module) == analysis.params);
  CHECK(registered_parameters(module) == expected_parameters(analysis));
  CHECK(buffer_elements(module) == analysis.buffers);
  CHECK(module->layer_count() == analysis.layers.size());

  torch::NoGradGuard no_grad;
  module->eval();
  torch::Tensor output = module->forward(runtime::random_model_input(analysis, batch));
  CHECK(output.sizes().vec() == batched(batch, analysis.output_shape));
  CHECK(torch::isfinite(output).all().item<bool>());
}

// A training step's backward: every parameter must receive a gradient.
void check_gradients_reach_every_parameter(TorchModel& module, std::int64_t batch) {
  module->train();
  module->zero_grad();
  torch::Tensor output = module->forward(runtime::random_model_input(module->analysis(), batch));
  output.square().mean().backward();
  for (const auto& parameter : module->named_parameters()) {
    INFO(parameter.key());
    CHECK(parameter.value().grad().defined());
  }
}

// Replays every layer alone on the inputs the full pass recorded: the output has core's shape,
// and a gradient flows back to each float input, as the per-layer profiler needs.
void check_layers_replay_alone(TorchModel& module, std::int64_t batch) {
  module->eval();
  std::vector<std::vector<torch::Tensor>> layer_inputs;
  {
    torch::NoGradGuard no_grad;
    module->forward_recording(runtime::random_model_input(module->analysis(), batch), layer_inputs);
  }
  REQUIRE(layer_inputs.size() == module->layer_count());
  for (std::size_t i = 0; i < module->layer_count(); ++i) {
    const LayerCosts& costs = module->layer_costs(i);
    INFO("layer " << i << " '" << costs.layer.name << "'");
    const bool joins = costs.layer.type == LayerType::add || costs.layer.type == LayerType::mul;
    if (costs.layer.type == LayerType::concat) {
      CHECK(layer_inputs[i].size() >= 2u);
    } else {
      CHECK(layer_inputs[i].size() == (joins ? 2u : 1u));
    }
    std::vector<torch::Tensor> inputs;
    for (const torch::Tensor& recorded : layer_inputs[i]) {
      // The first input has the recorded shape; a concat's others differ along its dim, and a
      // join's second may be broadcast.
      if (inputs.empty()) {
        CHECK(recorded.sizes().vec() == batched(batch, costs.input_shape));
      }
      inputs.push_back(recorded.is_floating_point() ? recorded.clone().requires_grad_(true)
                                                    : recorded);
    }
    torch::Tensor output = module->run_layer(i, inputs);
    CHECK(output.sizes().vec() == batched(batch, costs.output_shape));
    output.sum().backward();
    for (const torch::Tensor& input : inputs) {
      if (input.is_floating_point()) CHECK(input.grad().defined());
    }
  }
}

std::shared_ptr<TorchModelImpl> clone_of(TorchModel& module) {
  return std::dynamic_pointer_cast<TorchModelImpl>(module->clone());
}

// The clone matches the original, then keeps its values when the original's change.
void check_clone_is_independent(TorchModel& module, std::int64_t batch) {
  torch::NoGradGuard no_grad;
  module->eval();
  std::shared_ptr<TorchModelImpl> copy = clone_of(module);
  REQUIRE(copy);
  CHECK(copy->layer_count() == module->layer_count());
  auto original_parameters = module->named_parameters();
  auto copied_parameters = copy->named_parameters();
  REQUIRE(copied_parameters.size() == original_parameters.size());
  for (const auto& parameter : original_parameters) {
    INFO(parameter.key());
    const torch::Tensor* copied = copied_parameters.find(parameter.key());
    REQUIRE(copied != nullptr);
    CHECK(torch::equal(*copied, parameter.value()));
    CHECK(copied->data_ptr() != parameter.value().data_ptr());
  }

  torch::Tensor input = runtime::random_model_input(module->analysis(), batch);
  torch::Tensor expected = module->forward(input);
  CHECK(torch::equal(copy->forward(input), expected));

  for (torch::Tensor& parameter : module->parameters())
    parameter.add_(1.0);
  CHECK_FALSE(torch::equal(module->forward(input), expected));
  CHECK(torch::equal(copy->forward(input), expected));
}

// A ResNet bottleneck stage (projection shortcut, then identity) and MobileNetV2 inverted
// residuals: with stride 2 (no residual add), expanded, and with expand ratio 1.
const char* const kTinyResidual = R"(
kind: model
name: tiny-residual
input: {shape: [8, 8, 8], dtype: float32}
layers:
  - {type: bottleneck, name: layer1, width: 4, repeat: 2, stride: 2}
  - {type: inverted_residual, name: ir, expand_ratio: 2, out_channels: 16, repeat: 2, stride: 2}
  - {type: inverted_residual, name: flat, expand_ratio: 1, out_channels: 16, stride: 1}
  - {type: adaptive_avgpool2d, name: pool, output_size: 1}
  - flatten
  - {type: linear, name: fc, out_features: 5}
)";

// The layer types no zoo model uses, and a residual block with an explicit shortcut.
const char* const kOddLayers = R"(
kind: model
name: odd-layers
input: {shape: [3, 8, 8], dtype: float32}
layers:
  - {type: conv2d, name: grouped, out_channels: 6, kernel: 3, padding: 2, dilation: 2, groups: 3}
  - relu6
  - {type: avgpool2d, kernel: 2}
  - {type: reshape, shape: [6, -1]}
  - batchnorm1d
  - {type: maxpool1d, kernel: 2}
  - flatten
  - {type: linear, out_features: 10}
  - batchnorm1d
  - sigmoid
  - type: residual
    name: block
    body: [{type: linear, out_features: 12}, tanh]
    shortcut: [{type: linear, out_features: 12, bias: false}]
  - softmax
)";

// GPT-2's structure in miniature, plus a token-type table and a tied head that has a bias.
const char* const kTinyDecoder = R"(
kind: model
name: tiny-decoder
input: {shape: [6], dtype: int64}
layers:
  - {type: embedding, name: wte, num_embeddings: 20, embedding_dim: 8}
  - {type: position_embedding, name: wpe, max_positions: 10}
  - {type: token_type_embedding, name: tte, types: 2}
  - {type: dropout, name: drop, p: 0.1}
  - {type: transformer_encoder, name: h, repeat: 2, d_model: 8, heads: 2, ffn_dim: 16,
     dropout: 0.1, norm_first: true, causal: true}
  - {type: layernorm, name: ln_f}
  - {type: linear, name: lm_head, out_features: 20, tied_to: wte}
)";

// BERT's structure in miniature (post-norm, [CLS] pooling), plus attention without biases.
const char* const kTinyEncoder = R"(
kind: model
name: tiny-encoder
input: {shape: [6], dtype: int64}
layers:
  - {type: embedding, name: words, num_embeddings: 20, embedding_dim: 8}
  - {type: token_type_embedding, name: types, types: 2}
  - {type: layernorm, name: norm, eps: 1.0e-12}
  - {type: transformer_encoder, name: layer, d_model: 8, heads: 2, ffn_dim: 16, activation: relu}
  - {type: multihead_attention, name: extra, heads: 4, bias: false}
  - {type: token_select, name: cls, index: 0}
  - {type: linear, name: pooler, out_features: 8}
  - tanh
  - {type: linear, name: classifier, out_features: 2}
)";

// The graph layers: named inputs, a concat of three (a skip read twice), both upsamplings, a
// transposed convolution, a residual block that names its input, and the ViT pieces (tokens
// from a feature map, a class token, positions sized from the input, permutations).
// Today's decoders in miniature: RMSNorm, grouped-query attention with rotary embeddings on
// Hugging Face's eager path (and nn.MultiheadAttention's math path with a packed GQA
// projection), gated MLPs, the GELU forms.
const char* const kTinyLlama = R"(
kind: model
name: tiny-llama
input: {shape: [6], dtype: int64}
layers:
  - {type: embedding, name: embed_tokens, num_embeddings: 20, embedding_dim: 8}
  - {type: decoder_layer, name: layers, repeat: 2, d_model: 8, heads: 4, kv_heads: 2,
     ffn_dim: 12, attention: eager, attention_bias: true, output_bias: false}
  - {type: decoder_layer, name: plain, d_model: 8, heads: 2, ffn_dim: 12, attention: math,
     gated: false, activation: gelu_new, norm: layernorm, rotary: false, mlp_bias: true}
  - {type: multihead_attention, name: packed, heads: 4, kv_heads: 1, attention: math,
     causal: true}
  - {type: gelu, name: tanh_gelu, approximate: tanh}
  - {type: rmsnorm, name: norm}
  - {type: linear, name: lm_head, out_features: 20, bias: false}
)";

// What imported vision models use: squeeze-and-excitation (a broadcast mul of written inputs),
// hardswish, hardsigmoid, SiLU, a learned scale, stochastic depth and a written residual add.
const char* const kTinyImported = R"(
kind: model
name: tiny-imported
input: {shape: [3, 8, 8], dtype: float32}
layers:
  - {type: conv2d, name: stem, out_channels: 4, kernel: 3, padding: 1}
  - {type: hardswish, name: stem_act}
  - {type: conv2d, name: conv, out_channels: 4, kernel: 3, padding: 1}
  - {type: silu, name: act}
  - {type: adaptive_avgpool2d, name: squeeze}
  - {type: conv2d, name: reduce, out_channels: 2, kernel: 1}
  - {type: conv2d, name: expand, out_channels: 4, kernel: 1}
  - {type: hardsigmoid, name: gate}
  - {type: mul, name: excite, inputs: [act, gate]}
  - {type: scale, name: layer_scale, shape: [4, 1, 1]}
  - {type: stochastic_depth, name: drop_path, p: 0.2}
  - {type: add, name: skip, inputs: [drop_path, stem_act]}
  - {type: flatten, name: flat}
  - {type: linear, name: fc, out_features: 5}
)";

const char* const kTinyGraph = R"(
kind: model
name: tiny-graph
input: {shape: [2, 8, 8], dtype: float32}
layers:
  - {type: conv2d, name: enc, out_channels: 4, kernel: 3, padding: 1}
  - {type: relu, name: enc_act, inplace: true}
  - {type: maxpool2d, name: pool, kernel: 2}
  - {type: upsample, name: up_nearest, scale_factor: 2}
  - {type: upsample, name: up_bilinear, input: pool, size: [8, 8], mode: bilinear,
     align_corners: true}
  - {type: concat, name: join, inputs: [enc_act, up_nearest, up_bilinear]}
  - {type: conv_transpose2d, name: deconv, out_channels: 3, kernel: 3, stride: 2, padding: 1,
     output_padding: 1}
  - {type: conv2d, name: side, out_channels: 3, kernel: 1, input: join}
  - type: residual
    name: block
    input: deconv
    body: [{type: conv2d, name: block.conv, out_channels: 3, kernel: 1}]
  - {type: maxpool2d, name: block_pool, kernel: 2}
  - {type: concat, name: with_side, inputs: [block_pool, side], dim: -3}
  - {type: reshape, name: tokens, shape: [6, -1]}
  - {type: transpose, name: tokens_first, dims: [0, 1]}
  - {type: class_token, name: cls}
  - {type: position_embedding, name: pos}
  - {type: permute, name: swap, dims: [1, 0]}
  - {type: permute, name: back, dims: [1, 0]}
  - {type: token_select, name: pick, index: 0}
  - {type: linear, name: head, out_features: 5}
)";

// One self-attention layer over 5 tokens of 8 features, 2 heads.
std::string attention_model(bool causal, bool bias) {
  return std::string(R"(
kind: model
name: attention
input: {shape: [5, 8], dtype: float32}
layers:
  - {type: multihead_attention, name: attention, heads: 2, causal: )") +
         (causal ? "true" : "false") + ", bias: " + (bias ? "true" : "false") + "}\n";
}

}  // namespace

TEST_CASE("spoken-digits-linear has core's parameters and output shape") {
  torch::manual_seed(0);
  TorchModel module = zoo_module("spoken-digits-linear");
  check_against_analysis(module, 2);
}

TEST_CASE("spoken-digits-conv1d has core's parameters and output shape") {
  torch::manual_seed(0);
  TorchModel module = zoo_module("spoken-digits-conv1d");
  check_against_analysis(module, 2);
}

TEST_CASE("mnist-cnn has core's parameters and output shape") {
  torch::manual_seed(0);
  TorchModel module = zoo_module("mnist-cnn");
  check_against_analysis(module, 2);
}

TEST_CASE("mobilenet-v2 has core's parameters and output shape") {
  torch::manual_seed(0);
  TorchModel module = zoo_module("mobilenet-v2");
  check_against_analysis(module, 2);
}

TEST_CASE("resnet-50 has core's parameters and output shape") {
  torch::manual_seed(0);
  TorchModel module = zoo_module("resnet-50");
  check_against_analysis(module, 2);
}

TEST_CASE("bert-base over 32 tokens has core's parameters and output shape") {
  torch::manual_seed(0);
  TorchModel module = zoo_module_over("bert-base", 32);
  check_against_analysis(module, 1);
}

TEST_CASE("gpt2-small over 32 tokens has core's parameters, a tied head and output shape") {
  torch::manual_seed(0);
  TorchModel module = zoo_module_over("gpt2-small", 32);
  check_against_analysis(module, 1);
  // The head has no weight of its own: it multiplies by the token table itself.
  torch::NoGradGuard no_grad;
  auto parameters = module->named_parameters();
  CHECK(parameters.find("lm_head.weight") == nullptr);
  torch::Tensor hidden = torch::randn({1, 2, 768});
  CHECK(torch::allclose(module->run_layer(module->layer_count() - 1, {hidden}),
                        torch::matmul(hidden, parameters["wte.weight"].t()), 1e-4, 1e-5));
}

TEST_CASE("small models with every layer type have core's parameters and output shapes") {
  torch::manual_seed(0);
  for (auto [yaml, name] :
       {std::pair{kTinyResidual, "tiny-residual"}, std::pair{kOddLayers, "odd-layers"},
        std::pair{kTinyDecoder, "tiny-decoder"}, std::pair{kTinyEncoder, "tiny-encoder"},
        std::pair{kTinyGraph, "tiny-graph"}, std::pair{kTinyLlama, "tiny-llama"},
        std::pair{kTinyImported, "tiny-imported"}}) {
    INFO(name);
    TorchModel module = inline_module(yaml, name);
    check_against_analysis(module, 3);
  }
}

// ViT-B/16 and U-Net keep their parameters at a smaller input (the positions follow the tokens):
// Debian's LibTorch computes about 3 GFLOP/s, and U-Net at 960x640 takes 0.9 TFLOP an image.
TEST_CASE("vit-b-16 over 32x32 images has core's parameters and output shape") {
  torch::manual_seed(0);
  ModelSpec spec = load_model(test::zoo_model("vit-b-16"));
  spec.input_shape.dims = {3, 32, 32};  // 2x2 patches
  if (!runtime::unsupported_by_libtorch(analyze_model(spec)).empty()) {
    // LibTorch before 2.0 has no fused attention: the math path has the same parameters.
    for (ModelNode& node : spec.layers) {
      for (ModelNode& part : node.body)
        part.layer.attention = AttentionKernels::math;
    }
  }
  TorchModel module = runtime::build_torch_model(spec);
  check_against_analysis(module, 2);
  CHECK(module->analysis().params == 86'567'656 - (197 - 5) * 768);
}

TEST_CASE("unet over 32x48 images has core's parameters and per-pixel output") {
  torch::manual_seed(0);
  ModelSpec spec = load_model(test::zoo_model("unet"));
  spec.input_shape.dims = {3, 32, 48};
  TorchModel module = runtime::build_torch_model(spec);
  check_against_analysis(module, 2);
  CHECK(module->analysis().params == 31'037'698);
  check_gradients_reach_every_parameter(module, 2);
}

TEST_CASE("outputs named inside a residual block outlive the block's add") {
  // The add must neither free nor overwrite a value a later layer reads by name.
  for (const char* inputs : {"[blk, inner]", "[blk, inner, a]"}) {
    INFO(inputs);
    torch::manual_seed(0);
    TorchModel module = inline_module(std::string(R"(
kind: model
name: named-inside
input: {shape: [8]}
layers:
  - {type: linear, name: a, out_features: 8}
  - {type: residual, name: blk, body: [{type: linear, name: inner, out_features: 8}]}
  - {type: concat, name: c, inputs: )") + inputs +
                                          "}\n",
                                      "named-inside");
    check_against_analysis(module, 2);
    torch::NoGradGuard no_grad;
    torch::Tensor x = torch::randn({2, 8});
    torch::Tensor a = module->run_layer(0, {x});
    torch::Tensor inner = module->run_layer(1, {a});
    torch::Tensor blk = module->run_layer(2, {inner, a});
    std::vector<torch::Tensor> parts{blk, inner};
    if (std::string(inputs).find(", a]") != std::string::npos) parts.push_back(a);
    CHECK(torch::allclose(module->forward(x), torch::cat(parts, 1)));
  }
}

TEST_CASE("a skip joins the encoder's output with the decoder's, along the channels") {
  torch::manual_seed(0);
  TorchModel module = inline_module(R"(
kind: model
name: skip
input: {shape: [2, 4, 4], dtype: float32}
layers:
  - {type: conv2d, name: enc, out_channels: 3, kernel: 1}
  - {type: maxpool2d, name: pool, kernel: 2}
  - {type: upsample, name: up, scale_factor: 2}
  - {type: concat, name: join, inputs: [enc, up]}
)",
                                    "skip");
  REQUIRE(module->layer_count() == 4);
  torch::NoGradGuard no_grad;
  torch::Tensor x = torch::randn({2, 2, 4, 4});
  torch::Tensor enc = module->run_layer(0, {x});
  torch::Tensor up = torch::upsample_nearest2d(torch::max_pool2d(enc, 2), {4, 4});
  CHECK(torch::allclose(module->forward(x), torch::cat({enc, up}, 1)));
}

TEST_CASE("replaying mnist-cnn layer by layer reproduces the recorded values") {
  torch::manual_seed(0);
  TorchModel module = zoo_module("mnist-cnn");
  module->eval();
  torch::NoGradGuard no_grad;
  std::vector<std::vector<torch::Tensor>> layer_inputs;
  torch::Tensor output =
      module->forward_recording(runtime::random_model_input(module->analysis(), 2), layer_inputs);
  REQUIRE(layer_inputs.size() == module->layer_count());
  // A plain sequence: each layer's output is the next layer's input.
  for (std::size_t i = 0; i < module->layer_count(); ++i) {
    INFO("layer " << i);
    REQUIRE(layer_inputs[i].size() == 1);
    torch::Tensor replayed = module->run_layer(i, layer_inputs[i]);
    const torch::Tensor& recorded = i + 1 < module->layer_count() ? layer_inputs[i + 1][0] : output;
    CHECK(torch::equal(replayed, recorded));
  }
}

TEST_CASE("every layer replayed alone has core's shapes and passes gradients back") {
  torch::manual_seed(0);
  TorchModel mnist = zoo_module("mnist-cnn");
  check_layers_replay_alone(mnist, 2);
  for (auto [yaml, name] :
       {std::pair{kTinyResidual, "tiny-residual"}, std::pair{kOddLayers, "odd-layers"},
        std::pair{kTinyDecoder, "tiny-decoder"}, std::pair{kTinyEncoder, "tiny-encoder"},
        std::pair{kTinyGraph, "tiny-graph"}, std::pair{kTinyLlama, "tiny-llama"},
        std::pair{kTinyImported, "tiny-imported"}}) {
    INFO(name);
    TorchModel module = inline_module(yaml, name);
    check_layers_replay_alone(module, 3);
  }
}

TEST_CASE("nested residual blocks add each block's own input") {
  torch::manual_seed(0);
  TorchModel module = inline_module(R"(
kind: model
name: nested
input: {shape: [4, 5, 5], dtype: float32}
layers:
  - type: residual
    name: outer
    body:
      - type: residual
        name: inner
        body: [{type: conv2d, name: conv, out_channels: 4, kernel: 3, padding: 1}, tanh]
      - {type: relu, name: relu}
)",
                                    "nested");
  // conv, tanh, inner.add, relu, outer.add
  REQUIRE(module->layer_count() == 5);
  CHECK(module->layer_costs(2).layer.name == "inner.add");
  CHECK(module->layer_costs(4).layer.name == "outer.add");
  torch::NoGradGuard no_grad;
  torch::Tensor x = torch::randn({2, 4, 5, 5});
  torch::Tensor inner = module->run_layer(1, {module->run_layer(0, {x})});
  inner = module->run_layer(2, {inner, x});
  torch::Tensor outer = module->run_layer(4, {module->run_layer(3, {inner}), x});
  CHECK(torch::allclose(module->forward(x), outer));
  CHECK(torch::allclose(outer, torch::relu(inner) + x));
}

TEST_CASE("gradients reach every parameter of mnist-cnn and of residual models") {
  torch::manual_seed(0);
  TorchModel mnist = zoo_module("mnist-cnn");
  check_gradients_reach_every_parameter(mnist, 4);
  for (auto [yaml, name] :
       {std::pair{kTinyResidual, "tiny-residual"}, std::pair{kOddLayers, "odd-layers"},
        std::pair{kTinyDecoder, "tiny-decoder"}, std::pair{kTinyEncoder, "tiny-encoder"},
        std::pair{kTinyGraph, "tiny-graph"}, std::pair{kTinyLlama, "tiny-llama"},
        std::pair{kTinyImported, "tiny-imported"}}) {
    INFO(name);
    TorchModel module = inline_module(yaml, name);
    check_gradients_reach_every_parameter(module, 4);
  }
}

TEST_CASE("self-attention matches torch::nn::MultiheadAttention with the same weights") {
  torch::manual_seed(0);
  for (bool causal : {false, true}) {
    for (bool bias : {false, true}) {
      INFO("causal " << causal << ", bias " << bias);
      TorchModel module = inline_module(attention_model(causal, bias), "attention");
      torch::nn::MultiheadAttention reference(
          torch::nn::MultiheadAttentionOptions(8, 2).bias(bias));
      torch::NoGradGuard no_grad;
      auto ours = module->named_parameters();
      REQUIRE(ours.size() == (bias ? 4u : 2u));
      reference->in_proj_weight.copy_(ours["attention.in_proj_weight"]);
      reference->out_proj->weight.copy_(ours["attention.out_proj.weight"]);
      if (bias) {
        reference->in_proj_bias.copy_(ours["attention.in_proj_bias"]);
        reference->out_proj->bias.copy_(ours["attention.out_proj.bias"]);
      }
      module->eval();
      reference->eval();

      torch::Tensor x = torch::randn({3, 5, 8});
      torch::Tensor future_mask;  // PyTorch's additive form: -inf above the diagonal
      if (causal)
        future_mask = torch::full({5, 5}, -std::numeric_limits<double>::infinity()).triu(1);
      torch::Tensor sequence_first = x.transpose(0, 1);  // [tokens, batch, features]
      torch::Tensor expected =
          std::get<0>(reference->forward(sequence_first, sequence_first, sequence_first, {}, false,
                                         future_mask))
              .transpose(0, 1);
      CHECK(torch::allclose(module->forward(x), expected, 1e-5, 1e-6));
    }
  }
}

TEST_CASE("a clone has equal parameters, the same output, and parameters of its own") {
  torch::manual_seed(0);
  TorchModel mnist = zoo_module("mnist-cnn");
  check_clone_is_independent(mnist, 2);
  for (auto [yaml, name] :
       {std::pair{kTinyResidual, "tiny-residual"}, std::pair{kTinyDecoder, "tiny-decoder"},
        std::pair{kTinyEncoder, "tiny-encoder"}}) {
    INFO(name);
    TorchModel module = inline_module(yaml, name);
    check_clone_is_independent(module, 3);
  }
}

TEST_CASE("each layer's parameters, layer by layer, are the module's, and hooks see every layer") {
  torch::manual_seed(0);
  for (auto [yaml, name] :
       {std::pair{kTinyResidual, "tiny-residual"}, std::pair{kTinyDecoder, "tiny-decoder"}}) {
    INFO(name);
    TorchModel module = inline_module(yaml, name);
    std::vector<torch::Tensor> by_layer;
    for (std::size_t l = 0; l < module->layer_count(); ++l) {
      for (const torch::Tensor& p : module->layer_parameters(l))
        by_layer.push_back(p);
    }
    const std::vector<torch::Tensor> all = module->parameters();
    REQUIRE(by_layer.size() == all.size());
    for (std::size_t i = 0; i < all.size(); ++i)
      CHECK(by_layer[i].is_same(all[i]));

    std::vector<std::size_t> before, after;
    TorchModelImpl::LayerHooks hooks;
    hooks.before = [&](std::size_t layer) { before.push_back(layer); };
    hooks.after = [&](std::size_t layer, const torch::Tensor& output) {
      after.push_back(layer);
      CHECK(output.size(0) == 2);  // the batch
    };
    module->set_layer_hooks(hooks);
    module->forward(runtime::random_model_input(module->analysis(), 2));
    REQUIRE(before.size() == module->layer_count());
    for (std::size_t l = 0; l < before.size(); ++l)
      CHECK(before[l] == l);
    CHECK(after == before);
    module->set_layer_hooks({});
    module->forward(runtime::random_model_input(module->analysis(), 2));
    CHECK(before.size() == module->layer_count());
  }
  // A tied head registers nothing: its weight is the embedding's, listed with the embedding.
  TorchModel gpt2 = zoo_module_over("gpt2-small", 32);
  CHECK(gpt2->layer_parameters(gpt2->layer_count() - 1).empty());
  CHECK(gpt2->layer_parameters(0).front().is_same(gpt2->named_parameters()["wte.weight"]));
}

TEST_CASE("random inputs are normal floats, or token ids below the first embedding's rows") {
  torch::manual_seed(0);
  ModelAnalysis mnist = analyze_model(load_model(test::zoo_model("mnist-cnn")));
  CHECK(runtime::input_vocabulary(mnist) == 0);
  torch::Tensor images = runtime::random_model_input(mnist, 3);
  CHECK(images.sizes().vec() == std::vector<std::int64_t>{3, 1, 28, 28});
  CHECK(images.scalar_type() == torch::kFloat);

  ModelAnalysis gpt2 = analyze_model(load_model(test::zoo_model("gpt2-small")));
  CHECK(runtime::input_vocabulary(gpt2) == 50257);
  torch::Tensor ids = runtime::random_model_input(gpt2, 2);
  CHECK(ids.sizes().vec() == std::vector<std::int64_t>{2, 1024});
  CHECK(ids.scalar_type() == torch::kLong);
  CHECK(ids.min().item<std::int64_t>() >= 0);
  CHECK(ids.max().item<std::int64_t>() < 50257);

  // The same generator state gives the same input.
  auto seeded = [](std::uint64_t seed) {
    torch::Generator generator = at::globalContext().defaultGenerator(torch::kCPU).clone();
    generator.set_current_seed(seed);
    return generator;
  };
  torch::Generator first = seeded(7), second = seeded(7);
  CHECK(torch::equal(runtime::random_model_input(mnist, 2, first),
                     runtime::random_model_input(mnist, 2, second)));
}

TEST_CASE("the decoders' layers compute what their Hugging Face counterparts do") {
  // One layer models over [tokens, 8] inputs: a layer's output from its step alone.
  auto single = [](const std::string& layer, std::int64_t tokens) {
    torch::manual_seed(0);
    return inline_module(fmt::format("kind: model\nname: one\ninput: {{shape: [{}, 8]}}\n"
                                     "layers:\n  - {}\n",
                                     tokens, layer),
                         "one");
  };
  torch::NoGradGuard no_grad;
  torch::Tensor x = torch::randn({2, 5, 8});
  // gelu_new is the tanh approximation written out.
  TorchModel gelu_new = single("{type: gelu_new}", 5);
  CHECK(torch::allclose(gelu_new->run_layer(0, {x}), torch::gelu(x, "tanh"), 1e-5, 1e-6));
  // RMSNorm: x / sqrt(mean(x²) + eps), times a weight of ones at initialisation.
  TorchModel rms = single("{type: rmsnorm, eps: 1.0e-6}", 5);
  torch::Tensor expected = x * torch::rsqrt(x.pow(2).mean(-1, true) + 1e-6);
  CHECK(torch::allclose(rms->run_layer(0, {x}), expected, 1e-5, 1e-6));
  // The same weights (the same seed, the same packed layout) on the eager and math paths, and
  // with kv_heads equal to heads, give the same attention.
  const std::string base = "{type: multihead_attention, heads: 2, causal: true";
  TorchModel math = single(base + ", attention: math}", 5);
  TorchModel eager = single(base + ", attention: eager}", 5);
  TorchModel grouped = single(base + ", attention: eager, kv_heads: 2}", 5);
  math->eval();
  eager->eval();
  grouped->eval();
  torch::Tensor reference = math->run_layer(0, {x});
  CHECK(torch::allclose(eager->run_layer(0, {x}), reference, 1e-5, 1e-6));
  CHECK(torch::allclose(grouped->run_layer(0, {x}), reference, 1e-5, 1e-6));
  // Rotary embeddings leave the first position alone (cos 0 = 1, sin 0 = 0): one token in, the
  // same as without them.
  TorchModel rotary = single(base + ", rotary: true}", 1);
  TorchModel plain = single(base + "}", 1);
  rotary->eval();
  plain->eval();
  torch::Tensor first = x.slice(1, 0, 1);
  CHECK(torch::allclose(rotary->run_layer(0, {first}), plain->run_layer(0, {first}), 1e-5, 1e-6));
  // Grouped-query attention with one key/value head shares it across the query heads: fewer
  // parameters than full attention.
  TorchModel one_kv = single(base + ", kv_heads: 1, projections: separate}", 5);
  CHECK(parameter_elements(one_kv) == 8 * 8 + 2 * (8 * 4 + 4) + 8 * 8 + 8 + 8);
  CHECK(one_kv->run_layer(0, {x}).sizes() == x.sizes());
}

// Today's decoders in the model format: RMSNorm, SiLU and the GELU forms, gated MLPs, grouped-
// query attention with rotary embeddings and Hugging Face's eager score kernels, written joins
// of two outputs; and Hugging Face config.json files read into models with the parameter counts
// transformers gives them.
#include <algorithm>
#include <filesystem>
#include <fstream>

#include <catch2/catch.hpp>

#include "core/input_error.h"
#include "core/model/analysis.h"
#include "core/model/huggingface_config.h"
#include "support/paths.h"

using namespace epochcast;

namespace {

ModelAnalysis analyze_text(const std::string& layers, const std::string& shape = "[16, 64]",
                           const CostOptions& options = {}) {
  std::string text =
      "kind: model\nname: t\ninput: {shape: " + shape + ", dtype: float32}\nlayers:\n" + layers;
  return analyze_model(load_model_from_string(text, "test.yaml"), options);
}

std::vector<std::string_view> names(const std::vector<KernelWork>& kernels) {
  std::vector<std::string_view> out;
  for (const KernelWork& k : kernels)
    out.push_back(k.name);
  return out;
}

const LayerCosts& layer_named(const ModelAnalysis& a, const std::string& name) {
  auto found = std::find_if(a.layers.begin(), a.layers.end(),
                            [&](const LayerCosts& l) { return l.layer.name == name; });
  REQUIRE(found != a.layers.end());
  return *found;
}

std::filesystem::path fixture(const std::string& name) {
  return test::source_dir() / "scenarios" / "models" / "huggingface" / name;
}

}  // namespace

TEST_CASE("RMSNorm runs Hugging Face's eager chain with casts only for 16-bit activations") {
  // The first linear makes the norm's input need a gradient.
  const std::string layers =
      "  - {type: linear, out_features: 64}\n"
      "  - {type: rmsnorm, name: norm, eps: 1.0e-5}\n";
  ModelAnalysis fp32 = analyze_text(layers);
  const LayerCosts& norm = layer_named(fp32, "norm");
  CHECK(norm.params == 64);
  CHECK(names(norm.forward) ==
        std::vector<std::string_view>{"pow", "mean", "add", "rsqrt", "mul", "mul"});
  CHECK(names(norm.backward_weight) == std::vector<std::string_view>{"mul", "sum"});
  CHECK(norm.backward_input.size() == 12);
  CostOptions bf16;
  bf16.activation_dtype = DType::bfloat16;
  ModelAnalysis half = analyze_text(layers, "[16, 64]", bf16);
  const LayerCosts& cast = layer_named(half, "norm");
  CHECK(names(cast.forward) ==
        std::vector<std::string_view>{"copy", "pow", "mean", "add", "rsqrt", "mul", "copy", "mul"});
  CHECK(cast.backward_input.size() == 14);
  // Held: x in float32 (16 x 64 x 4 bytes), rstd per row, the normalised rows in bf16.
  CHECK(cast.saved.per_sample.value() == 16 * 64 * 4 + 16 * 4 + 16 * 64 * 2);
}

TEST_CASE("gelu_new is NewGELUActivation's eight kernels where gelu approximate tanh is one") {
  ModelAnalysis a = analyze_text(
      "  - {type: linear, out_features: 64}\n"
      "  - {type: gelu_new, name: new}\n"
      "  - {type: gelu, name: tanh, approximate: tanh}\n"
      "  - {type: silu, name: silu}\n");
  CHECK(layer_named(a, "new").forward.size() == 8);
  CHECK(layer_named(a, "new").backward_input.size() == 11);
  CHECK(layer_named(a, "tanh").forward.size() == 1);
  CHECK(layer_named(a, "tanh").layer.tanh_approximation);
  CHECK(names(layer_named(a, "silu").backward_input) ==
        std::vector<std::string_view>{"silu_backward"});
}

TEST_CASE("a gated MLP multiplies its branches (gate and activation by up) then projects down") {
  ModelAnalysis a = analyze_text(
      "  - {type: linear, out_features: 64}\n"
      "  - {type: gated_mlp, name: mlp, hidden: 256, out_features: 64}\n");
  CHECK(a.params == 64 * 64 + 64 + 3 * 64 * 256);
  const LayerCosts& join = layer_named(a, "mlp.mul");
  CHECK(join.layer.type == LayerType::mul);
  CHECK(join.output_shape.dims == std::vector<std::int64_t>{16, 256});
  // Each factor's gradient, then the two gradients at the fork summed.
  CHECK(names(join.backward_input) == std::vector<std::string_view>{"mul", "mul", "add"});
  // Both factors are held for backward.
  CHECK(join.saved.per_sample.value() >= 2 * 16 * 256 * 4);
  CHECK(a.layers.back().layer.name == "mlp.down_proj");
}

TEST_CASE("grouped-query attention shrinks k and v and repeats them to every query head") {
  const std::string common = "heads: 8, projections: separate, bias: false, causal: true, ";
  ModelAnalysis full =
      analyze_text("  - {type: multihead_attention, name: a, " + common + "attention: eager}\n");
  ModelAnalysis grouped = analyze_text("  - {type: multihead_attention, name: a, " + common +
                                       "kv_heads: 2, attention: eager}\n");
  // q and o: 64 x 64 each; k and v: 64 x (2 heads x 8) each.
  CHECK(full.params == 4 * 64 * 64);
  CHECK(grouped.params == 2 * 64 * 64 + 2 * 64 * 16);
  const auto kernels = names(grouped.layers[0].forward);
  CHECK(std::count(kernels.begin(), kernels.end(), "copy") == 3);  // two repeats, the merge
  CHECK(std::count(kernels.begin(), kernels.end(), "mm") == 4);    // q, k, v, o
  // Eager: the scores scaled and the causal mask added, softmax, then nothing cast in fp32.
  CHECK(kernels == std::vector<std::string_view>{"mm", "mm", "mm", "copy", "copy", "bmm", "mul",
                                                 "add", "softmax", "bmm", "copy", "mm"});
}

TEST_CASE("rotary embeddings cost five kernels on q and on k and nine each back") {
  ModelAnalysis a = analyze_text(
      "  - {type: linear, out_features: 64}\n"
      "  - {type: multihead_attention, name: a, heads: 4, rotary: true, rotary_theta: 500000}\n");
  ModelAnalysis plain = analyze_text(
      "  - {type: linear, out_features: 64}\n"
      "  - {type: multihead_attention, name: a, heads: 4}\n");
  const LayerCosts& r = layer_named(a, "a");
  const LayerCosts& p = layer_named(plain, "a");
  CHECK(r.forward.size() == p.forward.size() + 10);
  CHECK(r.backward_input.size() == p.backward_input.size() + 18);
  CHECK(r.params == p.params);
  CHECK_THROWS_AS(
      analyze_text("  - {type: multihead_attention, heads: 64, rotary: true}\n", "[16, 64]"),
      InputError);  // one feature a head: nothing to rotate in pairs
}

TEST_CASE("eager attention in bf16 runs its softmax in float32 and casts the result back") {
  CostOptions bf16;
  bf16.activation_dtype = DType::bfloat16;
  ModelAnalysis a = analyze_text("  - {type: multihead_attention, heads: 4, attention: eager}\n",
                                 "[16, 64]", bf16);
  CHECK(names(a.layers[0].forward) == std::vector<std::string_view>{"addmm", "bmm", "mul",
                                                                    "softmax", "copy", "bmm",
                                                                    "copy", "addmm"});
}

TEST_CASE("written add and mul join two named outputs and broadcast as PyTorch does") {
  ModelAnalysis a = analyze_text(
      "  - {type: conv2d, name: body, out_channels: 8, kernel: 3, padding: 1}\n"
      "  - {type: adaptive_avgpool2d, name: squeeze, input: body}\n"
      "  - {type: sigmoid, name: gate}\n"
      "  - {type: mul, name: excite, inputs: [body, gate]}\n"
      "  - {type: add, name: skip, inputs: [excite, body]}\n",
      "[3, 8, 8]");
  const LayerCosts& excite = layer_named(a, "excite");
  CHECK(excite.output_shape.dims == std::vector<std::int64_t>{8, 8, 8});
  // The gate's gradient is summed back over the 8 x 8 positions it was stretched across; the
  // body, read here a second time, gets its two gradients added.
  CHECK(names(excite.backward_input) == std::vector<std::string_view>{"mul", "mul", "sum", "add"});
  const LayerCosts& skip = layer_named(a, "skip");
  CHECK(names(skip.forward) == std::vector<std::string_view>{"add"});
  CHECK_THROWS_WITH(analyze_text("  - {type: linear, name: a, out_features: 4}\n"
                                 "  - {type: linear, name: b, input: input, out_features: 5}\n"
                                 "  - {type: add, inputs: [a, b]}\n"),
                    Catch::Contains("PyTorch's broadcasting"));
  CHECK_THROWS_WITH(analyze_text("  - add\n"), Catch::Contains("inputs"));
  CHECK_THROWS_WITH(analyze_text("  - {type: linear, name: a, out_features: 4}\n"
                                 "  - {type: mul, inputs: [a]}\n"),
                    Catch::Contains("at least 2"));
}

TEST_CASE("a learned scale multiplies in a broadcast tensor and sums its gradient back") {
  ModelAnalysis a = analyze_text(
      "  - {type: conv2d, out_channels: 8, kernel: 1}\n"
      "  - {type: scale, name: layer_scale, shape: [8, 1, 1]}\n",
      "[3, 4, 4]");
  const LayerCosts& scale = layer_named(a, "layer_scale");
  CHECK(scale.params == 8);
  CHECK(names(scale.backward_weight) == std::vector<std::string_view>{"mul", "sum"});
  CHECK_THROWS_WITH(analyze_text("  - {type: scale, shape: [3]}\n", "[16, 64]"),
                    Catch::Contains("does not broadcast"));
}

TEST_CASE("decoder_layer builds LlamaDecoderLayer: exact parameters of one Llama-3-8B layer") {
  ModelAnalysis a = analyze_text(
      "  - {type: decoder_layer, name: layer, d_model: 4096, heads: 32, kv_heads: 8, "
      "ffn_dim: 14336, attention: eager}\n",
      "[8, 4096]");
  // q and o: 4096²; k and v: 4096 x (8 heads x 128); the gated MLP: 3 x 4096 x 14336; two
  // RMSNorm weights. 218,112,000, as Llama-3-8B's 8,030,261,248 less its tables and final norm
  // (2 x 128256 x 4096 + 4096), over 32 layers.
  const std::int64_t d = 4096, kv = 8 * 128, ffn = 14336;
  CHECK(a.params == 2 * d * d + 2 * d * kv + 3 * d * ffn + 2 * d);
  CHECK(a.params == (8'030'261'248 - 2 * 128'256 * d - d) / 32);
  CHECK(layer_named(a, "layer.self_attn").layer.rotary);
  CHECK(layer_named(a, "layer.input_layernorm").layer.type == LayerType::rmsnorm);
  CHECK_THROWS_WITH(analyze_text("  - {type: decoder_layer, d_model: 64, heads: 8, kv_heads: 3, "
                                 "ffn_dim: 128}\n"),
                    Catch::Contains("multiple of kv_heads"));
}

// transformers' own counts (model.num_parameters(), the figures its model cards and the
// safetensors index give) for the published config.json files committed as fixtures.
TEST_CASE("Hugging Face configs give transformers' exact parameter counts") {
  struct Case {
    const char* file;
    std::int64_t params;
  };
  const Case cases[] = {
      {"bert-base-uncased.json", 109'514'298},  // BertForMaskedLM
      {"roberta-base.json", 124'697'433},       // RobertaForMaskedLM
      {"gpt2.json", 124'439'808},               // GPT2LMHeadModel, head tied
      {"gpt2-medium.json", 354'823'168},
      {"meta-llama-3-8b.json", 8'030'261'248},          // LlamaForCausalLM
      {"mistral-7b-v0.1.json", 7'241'732'096},          // MistralForCausalLM
      {"qwen2-7b.json", 7'615'616'512},                 // Qwen2ForCausalLM: q/k/v biases
      {"vit-base-patch16-224-in21k.json", 85'800'194},  // ViTForImageClassification, 2 labels
  };
  for (const Case& c : cases) {
    INFO(c.file);
    CHECK(analyze_model(load_model(fixture(c.file))).params == c.params);
  }
  // With ImageNet's 1,000 classes, ViT-B/16 is torchvision's 86,567,656.
  HuggingFaceOptions labels;
  labels.labels = 1000;
  CHECK(analyze_model(load_huggingface_model(fixture("vit-base-patch16-224-in21k.json"), labels))
            .params == 86'567'656);
}

TEST_CASE("a Hugging Face import states its assumptions and honours the options") {
  HuggingFaceOptions options;
  options.tokens = 512;
  options.attention = AttentionKernels::eager;
  const std::string yaml = huggingface_model_yaml(fixture("meta-llama-3-8b.json"), options);
  CHECK_THAT(yaml, Catch::Contains("shape: [512]"));
  CHECK_THAT(yaml, Catch::Contains("attention: eager"));
  CHECK_THAT(yaml, Catch::Contains("Assumed: 512 tokens"));
  CHECK_THAT(yaml, Catch::Contains("rotary_theta: 500000"));
  const std::string defaults = huggingface_model_yaml(fixture("meta-llama-3-8b.json"));
  CHECK_THAT(defaults, Catch::Contains("shape: [2048]"));  // 8,192 capped
  // The default is capped, not the context: any length up to the model's 8,192 positions.
  options.tokens = 8192;
  CHECK_THAT(huggingface_model_yaml(fixture("meta-llama-3-8b.json"), options),
             Catch::Contains("shape: [8192]"));
  options.tokens = 8193;
  CHECK_THROWS_WITH(huggingface_model_yaml(fixture("meta-llama-3-8b.json"), options),
                    Catch::Contains("at most 8192 tokens"));
  CHECK_THAT(defaults, Catch::Contains("attention: sdpa"));
  ModelSpec gpt2 = load_model(fixture("gpt2.json"));
  ModelAnalysis analysis = analyze_model(gpt2);
  CHECK(analysis.input_shape.dims == std::vector<std::int64_t>{1024});
  const LayerCosts& activation = layer_named(analysis, "transformer.h.0.activation");
  CHECK(activation.layer.type == LayerType::gelu_new);
  options.tokens = 4096;
  CHECK_THROWS_WITH(huggingface_model_yaml(fixture("gpt2.json"), options),
                    Catch::Contains("at most 1024 tokens"));
}

TEST_CASE("bad Hugging Face configs are located errors") {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "epochcast-hf-test";
  std::filesystem::create_directories(dir);
  auto config = [&](const std::string& text) {
    const std::filesystem::path file = dir / "config.json";
    std::ofstream(file) << text;
    return file;
  };
  try {
    huggingface_model_yaml(config("{\n  \"model_type\": \"t5\",\n  \"d_model\": 512\n}\n"));
    FAIL("t5 was accepted");
  } catch (const InputError& error) {
    CHECK(error.mark().line == 2);
    CHECK_THAT(error.problem(), Catch::Contains("bert"));
  }
  CHECK_THROWS_WITH(
      huggingface_model_yaml(config("{\"model_type\": \"llama\", \"hidden_size\": 64, "
                                    "\"num_attention_heads\": 4, \"head_dim\": 32, "
                                    "\"num_hidden_layers\": 1, \"intermediate_size\": 8, "
                                    "\"vocab_size\": 10}")),
      Catch::Contains("head size"));
  CHECK_THROWS_WITH(huggingface_model_yaml(config("{\"model_type\": \"gpt2\", \"n_embd\": 64}")),
                    Catch::Contains("n_head"));
  std::filesystem::remove_all(dir);
}

// Builds model YAML from Hugging Face config.json files, field by field as transformers'
// modeling code builds each architecture (modeling_bert.py, modeling_roberta.py,
// modeling_gpt2.py, modeling_llama.py, modeling_mistral.py, modeling_qwen2.py, modeling_vit.py).
// JSON is read through the strict YAML reader (JSON is YAML), so every error has its position.
#include "core/model/huggingface_config.h"

#include <array>
#include <functional>
#include <vector>

#include <fmt/format.h>

#include "core/yaml/strict_yaml.h"

namespace epochcast {

namespace {

constexpr std::array<std::string_view, 7> kModelTypes = {"bert",    "roberta", "gpt2", "llama",
                                                         "mistral", "qwen2",   "vit"};

// A config's fields: any key is allowed (configs carry many that do not shape the model); a
// null value reads as absent.
class Config {
 public:
  explicit Config(const yaml::Node& root) : root_(root) {
    if (!root.is_map()) root.fail("expected a Hugging Face config (a JSON object)");
    // Any scalar key is allowed; a key that is not a scalar is then refused, located, as unknown.
    for (const auto& entry : root.raw()) {
      if (entry.first.IsScalar()) keys_.push_back(entry.first.Scalar());
    }
    allowed_.assign(keys_.begin(), keys_.end());
    map_.emplace(root_, std::span<const std::string_view>(allowed_));
  }

  std::optional<yaml::Node> optional(std::string_view key) const {
    std::optional<yaml::Node> node = map_->optional(key);
    if (node && node->is_null()) return std::nullopt;
    return node;
  }
  yaml::Node required(std::string_view key) const {
    yaml::Node node = map_->required(key);  // raises when missing
    if (node.is_null()) node.fail("is null; the model needs its value");
    return node;
  }
  std::int64_t size(std::string_view key) const { return required(key).as_int_at_least(1); }
  std::int64_t size_or(std::string_view key, std::int64_t fallback) const {
    std::optional<yaml::Node> node = optional(key);
    return node ? node->as_int_at_least(1) : fallback;
  }
  double fraction_or(std::string_view key, double fallback) const {
    std::optional<yaml::Node> node = optional(key);
    double value = node ? node->as_fraction() : fallback;
    if (value >= 1) node->fail("a dropout probability must be below 1");
    return value;
  }
  double positive_or(std::string_view key, double fallback) const {
    std::optional<yaml::Node> node = optional(key);
    return node ? node->as_positive_number() : fallback;
  }
  bool flag_or(std::string_view key, bool fallback) const {
    std::optional<yaml::Node> node = optional(key);
    return node ? node->as_bool() : fallback;
  }
  const yaml::Node& root() const { return root_; }

 private:
  yaml::Node root_;
  std::vector<std::string> keys_;
  std::vector<std::string_view> allowed_;
  std::optional<yaml::MapReader> map_;
};

// transformers' ACT2FN names, as the activations the model YAML has.
std::string activation(const Config& config, std::string_view key, std::string_view fallback) {
  std::optional<yaml::Node> node = config.optional(key);
  static constexpr std::array<std::string_view, 8> kNames = {
      "gelu", "relu", "silu", "swish", "gelu_new", "gelu_pytorch_tanh", "gelu_fast", "quick_gelu"};
  static constexpr std::array<std::string_view, 8> kLayers = {
      "gelu", "relu", "silu", "silu", "gelu_new", "gelu_tanh", "gelu_new", ""};
  if (!node) return std::string(fallback);
  const std::size_t choice = node->as_choice(kNames);
  if (kLayers[choice].empty()) {
    node->fail(
        fmt::format("the activation '{}' has no layer in the model format yet", kNames[choice]));
  }
  return std::string(kLayers[choice]);
}

// YAML's spelling of a number: the shortest that reads back exactly.
std::string number(double value) {
  return fmt::format("{}", value);
}

std::string_view attention_name(AttentionKernels kernels) {
  switch (kernels) {
    case AttentionKernels::math:
      return "math";
    case AttentionKernels::eager:
      return "eager";
    case AttentionKernels::sdpa:
      break;
  }
  return "sdpa";
}

// The attention implementation the import assumes: the option, else transformers' default.
std::string_view chosen_attention(const HuggingFaceOptions& options) {
  return attention_name(options.attention.value_or(AttentionKernels::sdpa));
}

struct Yaml {
  std::string header;
  std::int64_t tokens = 0;
  std::vector<std::string> layers;
};

// The head size the layers imply; a config that sets another (Gemma, Mistral NeMo) is refused.
void check_head_size(const Config& config, std::int64_t hidden, std::int64_t heads) {
  if (hidden % heads != 0) {
    config.required("num_attention_heads")
        .fail(fmt::format("hidden_size ({}) is not divisible by the heads ({})", hidden, heads));
  }
  if (std::optional<yaml::Node> head_dim = config.optional("head_dim")) {
    if (head_dim->as_int_at_least(1) != hidden / heads) {
      head_dim->fail(
          fmt::format("a head size other than hidden_size / heads ({}) is not in the "
                      "model format yet",
                      hidden / heads));
    }
  }
}

// The tokens per sample: those asked for, at most the model's `context` (its positions, read
// from `context_key`), or `default_tokens` when none are asked for.
std::int64_t sequence(const Config& config, const HuggingFaceOptions& options, std::int64_t context,
                      std::int64_t default_tokens, std::string_view context_key) {
  if (options.tokens == 0) return std::min(context, default_tokens);
  if (options.tokens > context) {
    config.required(context_key)
        .fail(fmt::format("the model takes at most {} tokens ({}); {} were asked for", context,
                          context_key, options.tokens));
  }
  return options.tokens;
}

// BERT and RoBERTa as *ForMaskedLM: embeddings (word, position, token type, LayerNorm,
// dropout), post-norm encoder layers with separate query/key/value projections, and the masked
// language-model head (dense, activation, LayerNorm, decoder tied to the word embeddings, with
// its own bias). RoBERTa's positions start after its padding index.
Yaml bert(const Config& config, const HuggingFaceOptions& options, bool roberta) {
  const std::string prefix = roberta ? "roberta" : "bert";
  const std::int64_t hidden = config.size("hidden_size"),
                     heads = config.size("num_attention_heads");
  check_head_size(config, hidden, heads);
  if (std::optional<yaml::Node> kind = config.optional("position_embedding_type")) {
    if (kind->as_string() != "absolute") {
      kind->fail("only absolute position embeddings are in the model format");
    }
  }
  const std::int64_t positions = config.size_or("max_position_embeddings", 512);
  // RoBERTa numbers positions from padding_idx + 1 (create_position_ids_from_input_ids).
  const std::int64_t offset = roberta ? config.size_or("pad_token_id", 1) + 1 : 0;
  if (positions <= offset) {
    config.required("max_position_embeddings")
        .fail(fmt::format("leaves no position after the padding offset ({})", offset));
  }
  Yaml y;
  y.tokens = sequence(config, options, positions - offset, 512, "max_position_embeddings");
  const double eps = config.positive_or("layer_norm_eps", 1e-12);
  const double dropout = config.fraction_or("hidden_dropout_prob", 0.1);
  const std::string act = activation(config, "hidden_act", "gelu");
  const std::string words = prefix + ".embeddings.word_embeddings";
  const std::int64_t vocabulary = config.size("vocab_size");
  y.layers = {
      fmt::format("{{type: embedding, name: {}, num_embeddings: {}, embedding_dim: {}}}", words,
                  vocabulary, hidden),
      fmt::format("{{type: position_embedding, name: {}.embeddings.position_embeddings, "
                  "max_positions: {}}}",
                  prefix, positions),
      fmt::format("{{type: token_type_embedding, name: {}.embeddings.token_type_embeddings, "
                  "types: {}}}",
                  prefix, config.size_or("type_vocab_size", 2)),
      fmt::format("{{type: layernorm, name: {}.embeddings.LayerNorm, eps: {}}}", prefix,
                  number(eps)),
      fmt::format("{{type: dropout, name: {}.embeddings.dropout, p: {}}}", prefix, number(dropout)),
      fmt::format("{{type: transformer_encoder, name: {}.encoder.layer, repeat: {}, d_model: {}, "
                  "heads: {}, ffn_dim: {}, dropout: {}, attention_dropout: {}, activation: {}, "
                  "eps: {}, attention: {}, projections: separate}}",
                  prefix, config.size("num_hidden_layers"), hidden, heads,
                  config.size("intermediate_size"), number(dropout),
                  number(config.fraction_or("attention_probs_dropout_prob", 0.1)), act, number(eps),
                  chosen_attention(options)),
  };
  const std::string head = roberta ? "lm_head" : "cls.predictions.transform";
  y.layers.push_back(
      fmt::format("{{type: linear, name: {}.dense, out_features: {}}}", head, hidden));
  y.layers.push_back(act == "gelu_tanh"
                         ? fmt::format("{{type: gelu, name: {}.act, approximate: tanh}}", head)
                         : fmt::format("{{type: {}, name: {}.act}}", act, head));
  y.layers.push_back(fmt::format("{{type: layernorm, name: {}.{}, eps: {}}}", head,
                                 roberta ? "layer_norm" : "LayerNorm", number(eps)));
  y.layers.push_back(
      fmt::format("{{type: linear, name: {}.decoder, out_features: {}, tied_to: {}}}",
                  roberta ? "lm_head" : "cls.predictions", vocabulary, words));
  y.header = fmt::format("{} as {}ForMaskedLM", roberta ? "RoBERTa" : "BERT",
                         roberta ? "Roberta" : "Bert");
  return y;
}

// GPT-2 as GPT2LMHeadModel: token and position embeddings, dropout, pre-norm causal blocks
// with the packed c_attn projection, the final LayerNorm and the head tied to the tokens' table.
Yaml gpt2(const Config& config, const HuggingFaceOptions& options) {
  const std::int64_t hidden = config.size("n_embd"), heads = config.size("n_head");
  if (hidden % heads != 0) {
    config.required("n_head").fail(
        fmt::format("n_embd ({}) is not divisible by n_head ({})", hidden, heads));
  }
  const std::int64_t positions = config.size_or("n_positions", 1024);
  Yaml y;
  y.tokens = sequence(config, options, positions, positions, "n_positions");
  const double eps = config.positive_or("layer_norm_epsilon", 1e-5);
  const std::int64_t vocabulary = config.size("vocab_size");
  y.layers = {
      fmt::format("{{type: embedding, name: transformer.wte, num_embeddings: {}, "
                  "embedding_dim: {}}}",
                  vocabulary, hidden),
      fmt::format("{{type: position_embedding, name: transformer.wpe, max_positions: {}}}",
                  positions),
      fmt::format("{{type: dropout, name: transformer.drop, p: {}}}",
                  number(config.fraction_or("embd_pdrop", 0.1))),
      fmt::format("{{type: transformer_encoder, name: transformer.h, repeat: {}, d_model: {}, "
                  "heads: {}, ffn_dim: {}, dropout: {}, attention_dropout: {}, activation: {}, "
                  "norm_first: true, causal: true, eps: {}, attention: {}}}",
                  config.size("n_layer"), hidden, heads, config.size_or("n_inner", 4 * hidden),
                  number(config.fraction_or("resid_pdrop", 0.1)),
                  number(config.fraction_or("attn_pdrop", 0.1)),
                  activation(config, "activation_function", "gelu_new"), number(eps),
                  chosen_attention(options)),
      fmt::format("{{type: layernorm, name: transformer.ln_f, eps: {}}}", number(eps)),
  };
  const bool tied = config.flag_or("tie_word_embeddings", true);
  y.layers.push_back(fmt::format("{{type: linear, name: lm_head, out_features: {}, bias: false{}}}",
                                 vocabulary, tied ? ", tied_to: transformer.wte" : ""));
  y.header = "GPT-2 as GPT2LMHeadModel";
  return y;
}

// Llama, Mistral and Qwen2 as *ForCausalLM: the token embedding, decoder layers (RMSNorm,
// grouped-query attention with rotary embeddings and separate projections, gated MLP), the
// final RMSNorm and the head (untied unless tie_word_embeddings). The projections' biases:
// attention_bias on all four in Llama, none in Mistral, q/k/v only in Qwen2.
Yaml decoder(const Config& config, const HuggingFaceOptions& options, std::string_view type) {
  const std::int64_t hidden = config.size("hidden_size"),
                     heads = config.size("num_attention_heads");
  check_head_size(config, hidden, heads);
  const std::int64_t kv_heads = config.size_or("num_key_value_heads", heads);
  if (heads % kv_heads != 0) {
    config.required("num_key_value_heads")
        .fail(fmt::format("num_attention_heads ({}) is not a multiple of num_key_value_heads ({})",
                          heads, kv_heads));
  }
  const std::int64_t positions = config.size_or("max_position_embeddings", 2048);
  Yaml y;
  y.tokens =
      sequence(config, options, positions, kDefaultHuggingFaceTokens, "max_position_embeddings");
  bool attention_bias = false, output_bias = false, mlp_bias = false;
  if (type == "llama") {
    attention_bias = output_bias = config.flag_or("attention_bias", false);
    mlp_bias = config.flag_or("mlp_bias", false);
  } else if (type == "qwen2") {
    attention_bias = true;  // Qwen2Attention: q/k/v with bias, o_proj without
  }
  const double eps = config.positive_or("rms_norm_eps", 1e-6);
  const std::int64_t vocabulary = config.size("vocab_size");
  y.layers = {
      fmt::format("{{type: embedding, name: model.embed_tokens, num_embeddings: {}, "
                  "embedding_dim: {}}}",
                  vocabulary, hidden),
      fmt::format("{{type: decoder_layer, name: model.layers, repeat: {}, d_model: {}, heads: {}, "
                  "kv_heads: {}, ffn_dim: {}, eps: {}, activation: {}, attention: {}, "
                  "attention_bias: {}, output_bias: {}, mlp_bias: {}, rotary_theta: {}, "
                  "attention_dropout: {}}}",
                  config.size("num_hidden_layers"), hidden, heads, kv_heads,
                  config.size("intermediate_size"), number(eps),
                  activation(config, "hidden_act", "silu"), chosen_attention(options),
                  attention_bias, output_bias, mlp_bias,
                  number(config.positive_or("rope_theta", 10000)),
                  number(config.fraction_or("attention_dropout", 0))),
      fmt::format("{{type: rmsnorm, name: model.norm, eps: {}}}", number(eps)),
  };
  const bool tied = config.flag_or("tie_word_embeddings", false);
  y.layers.push_back(fmt::format("{{type: linear, name: lm_head, out_features: {}, bias: false{}}}",
                                 vocabulary, tied ? ", tied_to: model.embed_tokens" : ""));
  y.header = type == "llama"     ? "Llama as LlamaForCausalLM"
             : type == "mistral" ? "Mistral as MistralForCausalLM"
                                 : "Qwen2 as Qwen2ForCausalLM";
  return y;
}

// ViT as ViTForImageClassification: a stride-patch convolution, the patches as tokens, the
// class token, learned positions, pre-norm encoder layers with separate query/key/value
// projections, the final LayerNorm and a linear classifier on the class token.
Yaml vit(const Config& config, const HuggingFaceOptions& options,
         std::vector<std::int64_t>& image) {
  const std::int64_t hidden = config.size("hidden_size"),
                     heads = config.size("num_attention_heads");
  check_head_size(config, hidden, heads);
  const std::int64_t size = config.size_or("image_size", 224),
                     patch = config.size_or("patch_size", 16);
  if (size % patch != 0) {
    config.required("patch_size")
        .fail(fmt::format("image_size ({}) is not a multiple of patch_size ({})", size, patch));
  }
  if (std::optional<yaml::Node> bias = config.optional("qkv_bias"); bias && !bias->as_bool()) {
    bias->fail("projections without bias are not in the encoder block's options");
  }
  std::int64_t labels = options.labels;
  if (labels == 0) {
    if (std::optional<yaml::Node> names = config.optional("id2label")) {
      if (!names->is_map()) names->fail("expected a mapping from class index to name");
      labels = static_cast<std::int64_t>(names->raw().size());
    } else {
      labels = config.size_or("num_labels", 2);  // PretrainedConfig's default
    }
  }
  image = {config.size_or("num_channels", 3), size, size};
  const double eps = config.positive_or("layer_norm_eps", 1e-12);
  const double dropout = config.fraction_or("hidden_dropout_prob", 0);
  Yaml y;
  y.layers = {
      fmt::format("{{type: conv2d, name: vit.embeddings.patch_embeddings.projection, "
                  "out_channels: {}, kernel: {}, stride: {}}}",
                  hidden, patch, patch),
      fmt::format("{{type: reshape, name: vit.embeddings.patches, shape: [{}, -1]}}", hidden),
      "{type: transpose, name: vit.embeddings.patches_as_tokens, dims: [0, 1]}",
      "{type: class_token, name: vit.embeddings.cls_token}",
      "{type: position_embedding, name: vit.embeddings.position_embeddings}",
      fmt::format("{{type: dropout, name: vit.embeddings.dropout, p: {}}}", number(dropout)),
      fmt::format("{{type: transformer_encoder, name: vit.encoder.layer, repeat: {}, d_model: {}, "
                  "heads: {}, ffn_dim: {}, dropout: {}, attention_dropout: {}, activation: {}, "
                  "norm_first: true, eps: {}, attention: {}, projections: separate}}",
                  config.size("num_hidden_layers"), hidden, heads, config.size("intermediate_size"),
                  number(dropout), number(config.fraction_or("attention_probs_dropout_prob", 0)),
                  activation(config, "hidden_act", "gelu"), number(eps), chosen_attention(options)),
      fmt::format("{{type: layernorm, name: vit.layernorm, eps: {}}}", number(eps)),
      "{type: token_select, name: vit.class_token_out, index: 0}",
      fmt::format("{{type: linear, name: classifier, out_features: {}}}", labels),
  };
  y.header = fmt::format("ViT as ViTForImageClassification ({} classes)", labels);
  return y;
}

}  // namespace

bool is_huggingface_config(const std::filesystem::path& file) {
  return file.extension() == ".json";
}

std::string huggingface_model_yaml(const std::filesystem::path& file,
                                   const HuggingFaceOptions& options) {
  const yaml::Document document = yaml::Document::load_file(file);
  const Config config(document.root());
  const std::string type(kModelTypes[config.required("model_type").as_choice(kModelTypes)]);
  std::vector<std::int64_t> image;
  Yaml y = type == "bert"      ? bert(config, options, false)
           : type == "roberta" ? bert(config, options, true)
           : type == "gpt2"    ? gpt2(config, options)
           : type == "vit"     ? vit(config, options, image)
                               : decoder(config, options, type);
  // The file's name goes into the YAML quoted, never as YAML of its own.
  const std::string config_name = yaml::quoted(file.filename().string());
  std::string text = fmt::format(
      "# Built by epochcast from the Hugging Face config {}: {}, the architecture transformers "
      "builds from the config's fields.\n",
      config_name, y.header);
  if (image.empty()) {
    text += fmt::format(
        "# Assumed: {} tokens a sample{} and {} attention (transformers' attn_implementation).\n",
        y.tokens,
        options.tokens == 0 ? " (the config's context, capped; import --tokens sets another)" : "",
        chosen_attention(options));
  }
  text += fmt::format("kind: model\nname: {}\n", yaml::quoted(file.stem().string()));
  text += fmt::format(
      "description: {}\n",
      yaml::quoted(fmt::format("{} from {}{}.", y.header, file.filename().string(),
                               image.empty() ? fmt::format(", {} tokens", y.tokens) : "")));
  text += fmt::format("source: {}\n",
                      yaml::quoted(fmt::format("Hugging Face config.json ({}), model_type {}",
                                               file.filename().string(), type)));
  if (image.empty()) {
    text += fmt::format("input:\n  shape: [{}]\n  dtype: int64\n", y.tokens);
  } else {
    text += fmt::format("input:\n  shape: [{}, {}, {}]\n  dtype: float32\n", image[0], image[1],
                        image[2]);
  }
  text += "layers:\n";
  for (const std::string& layer : y.layers)
    text += "  - " + layer + "\n";
  return text;
}

ModelSpec load_huggingface_model(const std::filesystem::path& config,
                                 const HuggingFaceOptions& options) {
  // Positions in the generated YAML are not the config's: the name says so.
  ModelSpec spec = load_model_from_string(huggingface_model_yaml(config, options),
                                          config.string() + " (as model YAML)");
  spec.source_file = config.string();
  return spec;
}

}  // namespace epochcast

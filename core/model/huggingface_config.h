// Hugging Face `config.json` files as models, without Python: the architecture that the
// `transformers` implementation builds from the config's fields, written as this project's model
// YAML (which the reader and the analysis then check like any model file). Supported
// `model_type`s: bert and roberta (as *ForMaskedLM), gpt2 (GPT2LMHeadModel), llama, mistral
// and qwen2 (*ForCausalLM), vit (ViTForImageClassification).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "core/model/model_spec.h"

namespace epochcast {

struct HuggingFaceOptions {
  // Tokens per sample; 0: the config's context (max_position_embeddings, n_positions), at most
  // kDefaultHuggingFaceTokens for decoders.
  std::int64_t tokens = 0;
  // Classes of an image classifier; 0: as transformers counts them (id2label's entries, else
  // num_labels, else 2).
  std::int64_t labels = 0;
  // The attention implementation (transformers' attn_implementation); empty: sdpa, its default
  // wherever PyTorch has scaled_dot_product_attention.
  std::optional<AttentionKernels> attention;
};
inline constexpr std::int64_t kDefaultHuggingFaceTokens = 2048;

// Whether `file` is read as a Hugging Face config (a .json file) rather than model YAML.
bool is_huggingface_config(const std::filesystem::path& file);

// The model YAML of a config.json. Unsupported model types and fields that change the
// architecture beyond what the YAML says (a head size other than hidden_size / heads, relative
// position embeddings) are InputErrors at the field.
std::string huggingface_model_yaml(const std::filesystem::path& config,
                                   const HuggingFaceOptions& options = {});

// The model itself (huggingface_model_yaml, loaded).
ModelSpec load_huggingface_model(const std::filesystem::path& config,
                                 const HuggingFaceOptions& options = {});

}  // namespace epochcast

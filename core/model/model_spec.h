// A model as its YAML file describes it: an input and a sequence of layers, where residual
// structure is explicit and any entry may read earlier named outputs instead of the previous one
// (`input:`, or `inputs:` for a concat), which makes the sequence a graph (U-Net's skips). Named
// blocks (bottleneck, inverted residual, transformer encoder) are expanded into these primitives
// while loading, so everything downstream — cost analysis, the simulator, the LibTorch runtime —
// sees one small vocabulary.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "core/input_error.h"
#include "core/model/tensor_shape.h"

namespace epochcast {

enum class LayerType {
  linear,
  conv1d,
  conv2d,
  batchnorm1d,
  batchnorm2d,
  layernorm,
  relu,
  relu6,
  sigmoid,
  tanh,
  gelu,
  softmax,
  maxpool1d,
  maxpool2d,
  avgpool2d,
  adaptive_avgpool2d,
  flatten,
  reshape,
  dropout,
  embedding,
  position_embedding,
  token_type_embedding,
  token_select,
  multihead_attention,
  concat,
  upsample,
  conv_transpose2d,
  permute,
  transpose,
  class_token,
  add,  // a residual block's join, or written with `inputs:` to sum two named outputs
  rmsnorm,
  silu,
  gelu_new,
  mul,  // a gated block's join, or written with `inputs:` to multiply two named outputs
  hardswish,
  hardsigmoid,
  stochastic_depth,  // torchvision's: each sample's whole input dropped with probability p
  scale,             // a learned tensor multiplied in, broadcast (ConvNeXt's layer_scale)
};

// How a multihead_attention layer computes its scores (`attention:`).
enum class AttentionKernels {
  // nn.MultiheadAttention's unfused path: scale q, q·kᵀ, mask, softmax, dropout, ·v.
  math,
  // Hugging Face's eager_attention_forward: q·kᵀ, scale the scores, add the mask, softmax in
  // float32 (cast back when activations are 16-bit), dropout, ·v.
  eager,
  // F.scaled_dot_product_attention's fused kernel (FlashAttention or memory-efficient).
  sdpa,
};

// The YAML spelling of each type, indexed by LayerType.
std::string_view name_of(LayerType type);
// The PyTorch module class name (torchsummary's "Layer (type)" column), e.g. "Conv1d".
std::string_view torch_class_name(LayerType type);
// Whether the layer is an nn.Module in PyTorch (and so a row in torchsummary's table);
// `reshape`, `token_select`, `concat`, `permute` and `transpose` are tensor operations taken
// inside forward().
bool is_torch_module(LayerType type);

// One primitive layer with its hyper-parameters. Only the fields that `type` uses are set;
// input sizes (in_features, in_channels, ...) are not stored but inferred from shapes.
struct Layer {
  LayerType type = LayerType::relu;
  std::string name;  // unique dotted path, e.g. "layer1.0.conv1" or "3"
  SourceMark mark;   // where it was written (for a block's parts: where the block was)
  // The block it is a part of ("layer1.0" for a bottleneck's parts, "h.3" for a transformer
  // block's); empty for a layer written on its own.
  std::string block;

  std::int64_t out_features = 0;  // linear out_features, conv out_channels
  std::vector<std::int64_t> kernel, stride, padding, dilation;  // one entry per spatial dim
  std::int64_t groups = 1;
  bool bias = true;
  double eps = 1e-5;
  double dropout = 0;  // dropout probability (dropout layer, attention dropout)
  std::int64_t heads = 0;
  bool causal = false;
  // Embedding rows, max positions, token types. A position_embedding written without
  // max_positions is sized from its input (ViT's learned positions, one per token).
  std::int64_t num_embeddings = 0;
  bool positions_from_input = false;  // position_embedding without max_positions
  std::int64_t embedding_dim = 0;
  std::vector<std::int64_t> target_shape;    // reshape (per sample, one -1 allowed); scale's
  std::vector<std::int64_t> output_size;     // adaptive pooling; upsample's `size`
  std::vector<std::int64_t> output_padding;  // conv_transpose2d
  std::vector<std::int64_t> scale_factor;    // upsample (integer factors; empty with `size`)
  bool bilinear = false;                     // upsample: bilinear rather than nearest
  bool align_corners = false;                // upsample, bilinear
  // permute: the per-sample dimensions in their new order; transpose: the two it swaps (the
  // analysis resolves both into a full permutation).
  std::vector<std::int64_t> permutation;
  std::int64_t dim = 0;     // concat: the per-sample dimension joined along
  std::int64_t index = 0;   // token_select
  std::int64_t tokens = 1;  // class_token: learned tokens prepended
  std::string tied_to;      // linear sharing its weight with an embedding
  bool inplace = false;
  bool ceil_mode = false;  // pooling: a last, partial window where the floor rule drops it
  // Widths that follow the input, for blocks whose channel counts depend on what precedes them
  // (MobileNetV2's expansion): when > 0, out_features = input channels x channel_multiplier.
  std::int64_t channel_multiplier = 0;
  bool depthwise = false;  // conv with groups = input channels
  // multihead_attention: how the scores are computed, and what Hugging Face's decoders add to
  // nn.MultiheadAttention: fewer key/value heads than query heads (grouped-query attention),
  // separate q/k/v projections instead of one packed one, an output projection without the
  // input projections' bias (Qwen2), rotary position embeddings applied to q and k.
  AttentionKernels attention = AttentionKernels::math;
  std::int64_t kv_heads = 0;  // 0: as many as `heads`
  bool separate_projections = false;
  bool output_bias = true;
  bool rotary = false;
  double rotary_theta = 10000;  // the runtime's rotation base (costs do not depend on it)
  // gelu: the tanh approximation (F.gelu(approximate='tanh')), one kernel as the exact form.
  bool tanh_approximation = false;

  // Attention through scaled_dot_product_attention's fused kernel (which LibTorch has from 2.0).
  bool fused_attention() const { return attention == AttentionKernels::sdpa; }
};

// An element of a layer sequence: a primitive layer, or a residual block computing
// body(x) + shortcut(x) (an empty shortcut is the identity).
struct ModelNode {
  enum class Kind { layer, residual };
  // Named blocks decide their residual path from the input shape, known only at analysis.
  enum class ResidualRule {
    always,                    // `residual` as written
    project_if_shape_changes,  // ResNet: the shortcut is used only when body changes the shape
    add_if_shape_kept,         // MobileNetV2: no residual connection when the shape changes
  };
  Kind kind = Kind::layer;
  ResidualRule rule = ResidualRule::always;
  // How a residual node joins its branches: body + shortcut, or body * shortcut (a gated MLP's
  // activation(gate(x)) * up(x)).
  LayerType join = LayerType::add;
  // The outputs this node reads instead of the previous node's: names of earlier nodes (a
  // primitive's layer name, a residual's name), or kModelInput. Empty: the previous output.
  // Only a concat (two or more) and a written add or mul (two) read more than one.
  std::vector<std::string> inputs;
  Layer layer;                  // kind == layer
  std::string name;             // kind == residual: the block's dotted path
  SourceMark mark;              // kind == residual
  std::vector<ModelNode> body;  // kind == residual
  std::vector<ModelNode> shortcut;
};

// The name an entry's `input:` gives to read the model's own input.
inline constexpr std::string_view kModelInput = "input";

struct ModelSpec {
  std::string name;
  std::string description;
  std::string source_file;
  TensorShape input_shape;  // per sample
  DType input_dtype = DType::float32;
  SourceMark input_mark;
  std::vector<ModelNode> layers;
};

// Loads and validates a model file (kind: model), or a Hugging Face config.json (a .json file:
// core/model/huggingface_config.h). Hyper-parameters are checked here; shapes are
// checked by analyze_model(), which also reports errors at the offending layer's position.
ModelSpec load_model(const std::filesystem::path& file);
ModelSpec load_model_from_string(const std::string& text, const std::string& name);

// Loading guards against alias bombs and absurd repeat counts: more primitive layers than this
// is refused as bad input.
inline constexpr std::int64_t kMaxModelLayers = 20'000;
// Per-sample tensors larger than this are refused (2^40 elements).
inline constexpr std::int64_t kMaxTensorElements = std::int64_t{1} << 40;

}  // namespace epochcast

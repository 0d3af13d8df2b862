// Reads model files: the layer vocabulary, its keys and their checks, and block expansion.
#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/model/huggingface_config.h"
#include "core/model/model_spec.h"
#include "core/spec/file_kind.h"
#include "core/yaml/strict_yaml.h"

namespace epochcast {

namespace {

// Marks every layer of `node` (and of its residual branches) as a part of `block`.
void mark_block(ModelNode& node, const std::string& block) {
  node.layer.block = block;
  for (ModelNode& part : node.body)
    mark_block(part, block);
  for (ModelNode& part : node.shortcut)
    mark_block(part, block);
}

// `attention: math | eager | sdpa`: PyTorch's unfused path (nn.MultiheadAttention with
// need_weights, the default), Hugging Face's eager attention ("eager"), or
// F.scaled_dot_product_attention's fused kernel (Hugging Face's "sdpa").
AttentionKernels read_attention(const yaml::Node& node) {
  static constexpr std::array<std::string_view, 3> kAttention = {"math", "eager", "sdpa"};
  return static_cast<AttentionKernels>(node.as_choice(kAttention));
}

// The activations a block may name: the layer each becomes (gelu_tanh is F.gelu's tanh form).
struct Activation {
  LayerType type = LayerType::gelu;
  bool tanh_approximation = false;
};
Activation read_activation(const yaml::Node& node) {
  static constexpr std::array<std::string_view, 5> kActivations = {"gelu", "relu", "silu",
                                                                   "gelu_new", "gelu_tanh"};
  switch (node.as_choice(kActivations)) {
    case 1:
      return {LayerType::relu, false};
    case 2:
      return {LayerType::silu, false};
    case 3:
      return {LayerType::gelu_new, false};
    case 4:
      return {LayerType::gelu, true};
    default:
      return {LayerType::gelu, false};
  }
}

// The decoders' variations of self-attention: multihead_attention's keys beyond
// nn.MultiheadAttention's (read after `heads` and `bias`).
void read_attention_variant(const yaml::MapReader& map, Layer& layer) {
  layer.output_bias = layer.bias;
  if (auto o = map.optional("output_bias")) layer.output_bias = o->as_bool();
  if (auto k = map.optional("kv_heads")) {
    layer.kv_heads = k->as_int_at_least(1);
    if (layer.heads % layer.kv_heads != 0) {
      k->fail(
          fmt::format("heads ({}) must be a multiple of kv_heads ({}): each key/value head "
                      "serves the same number of query heads",
                      layer.heads, layer.kv_heads));
    }
  }
  static constexpr std::array<std::string_view, 2> kProjections = {"packed", "separate"};
  if (auto p = map.optional("projections")) {
    layer.separate_projections = p->as_choice(kProjections) == 1;
  }
  if (auto r = map.optional("rotary")) layer.rotary = r->as_bool();
  if (auto t = map.optional("rotary_theta")) {
    if (!layer.rotary) t->fail("rotary_theta applies with rotary: true");
    layer.rotary_theta = t->as_positive_number();
  }
}

struct TypeInfo {
  LayerType type;
  std::string_view yaml_name;
  std::string_view torch_name;
  bool torch_module;
};

constexpr std::array kTypes = {
    TypeInfo{LayerType::linear, "linear", "Linear", true},
    TypeInfo{LayerType::conv1d, "conv1d", "Conv1d", true},
    TypeInfo{LayerType::conv2d, "conv2d", "Conv2d", true},
    TypeInfo{LayerType::batchnorm1d, "batchnorm1d", "BatchNorm1d", true},
    TypeInfo{LayerType::batchnorm2d, "batchnorm2d", "BatchNorm2d", true},
    TypeInfo{LayerType::layernorm, "layernorm", "LayerNorm", true},
    TypeInfo{LayerType::relu, "relu", "ReLU", true},
    TypeInfo{LayerType::relu6, "relu6", "ReLU6", true},
    TypeInfo{LayerType::sigmoid, "sigmoid", "Sigmoid", true},
    TypeInfo{LayerType::tanh, "tanh", "Tanh", true},
    TypeInfo{LayerType::gelu, "gelu", "GELU", true},
    TypeInfo{LayerType::softmax, "softmax", "Softmax", true},
    TypeInfo{LayerType::maxpool1d, "maxpool1d", "MaxPool1d", true},
    TypeInfo{LayerType::maxpool2d, "maxpool2d", "MaxPool2d", true},
    TypeInfo{LayerType::avgpool2d, "avgpool2d", "AvgPool2d", true},
    TypeInfo{LayerType::adaptive_avgpool2d, "adaptive_avgpool2d", "AdaptiveAvgPool2d", true},
    TypeInfo{LayerType::flatten, "flatten", "Flatten", true},
    TypeInfo{LayerType::reshape, "reshape", "reshape", false},
    TypeInfo{LayerType::dropout, "dropout", "Dropout", true},
    TypeInfo{LayerType::embedding, "embedding", "Embedding", true},
    TypeInfo{LayerType::position_embedding, "position_embedding", "PositionEmbedding", true},
    TypeInfo{LayerType::token_type_embedding, "token_type_embedding", "TokenTypeEmbedding", true},
    TypeInfo{LayerType::token_select, "token_select", "select", false},
    TypeInfo{LayerType::multihead_attention, "multihead_attention", "MultiheadAttention", true},
    TypeInfo{LayerType::concat, "concat", "cat", false},
    TypeInfo{LayerType::upsample, "upsample", "Upsample", true},
    TypeInfo{LayerType::conv_transpose2d, "conv_transpose2d", "ConvTranspose2d", true},
    TypeInfo{LayerType::permute, "permute", "permute", false},
    TypeInfo{LayerType::transpose, "transpose", "transpose", false},
    TypeInfo{LayerType::class_token, "class_token", "ClassToken", true},
    TypeInfo{LayerType::add, "add", "add", false},
    TypeInfo{LayerType::rmsnorm, "rmsnorm", "RMSNorm", true},
    TypeInfo{LayerType::silu, "silu", "SiLU", true},
    TypeInfo{LayerType::gelu_new, "gelu_new", "NewGELUActivation", true},
    TypeInfo{LayerType::mul, "mul", "mul", false},
    TypeInfo{LayerType::hardswish, "hardswish", "Hardswish", true},
    TypeInfo{LayerType::hardsigmoid, "hardsigmoid", "Hardsigmoid", true},
    TypeInfo{LayerType::stochastic_depth, "stochastic_depth", "StochasticDepth", true},
    TypeInfo{LayerType::scale, "scale", "Scale", true},
};

const TypeInfo& info(LayerType type) {
  return kTypes[static_cast<std::size_t>(type)];
}

// What a user may write as `type:`: the primitive layers and the blocks.
constexpr std::array<std::string_view, 46> kWritableTypes = {"linear",
                                                             "conv1d",
                                                             "conv2d",
                                                             "batchnorm1d",
                                                             "batchnorm2d",
                                                             "layernorm",
                                                             "relu",
                                                             "relu6",
                                                             "sigmoid",
                                                             "tanh",
                                                             "gelu",
                                                             "softmax",
                                                             "maxpool1d",
                                                             "maxpool2d",
                                                             "avgpool2d",
                                                             "adaptive_avgpool2d",
                                                             "flatten",
                                                             "reshape",
                                                             "dropout",
                                                             "embedding",
                                                             "position_embedding",
                                                             "token_type_embedding",
                                                             "token_select",
                                                             "multihead_attention",
                                                             "concat",
                                                             "upsample",
                                                             "conv_transpose2d",
                                                             "permute",
                                                             "transpose",
                                                             "class_token",
                                                             "add",
                                                             "mul",
                                                             "rmsnorm",
                                                             "silu",
                                                             "gelu_new",
                                                             "hardswish",
                                                             "hardsigmoid",
                                                             "stochastic_depth",
                                                             "scale",
                                                             "residual",
                                                             "bottleneck",
                                                             "inverted_residual",
                                                             "transformer_encoder",
                                                             "basic_block",
                                                             "gated_mlp",
                                                             "decoder_layer"};

// Keys every layer entry may carry, besides its type's own.
constexpr std::array<std::string_view, 4> kCommonKeys = {"type", "name", "repeat", "input"};

std::vector<std::string_view> keys_for(std::string_view type) {
  static const std::map<std::string_view, std::vector<std::string_view>> kKeys = {
      {"linear", {"out_features", "bias", "tied_to"}},
      {"conv1d", {"out_channels", "kernel", "stride", "padding", "dilation", "groups", "bias"}},
      {"conv2d", {"out_channels", "kernel", "stride", "padding", "dilation", "groups", "bias"}},
      {"batchnorm1d", {"eps"}},
      {"batchnorm2d", {"eps"}},
      {"layernorm", {"eps"}},
      {"relu", {"inplace"}},
      {"relu6", {"inplace"}},
      {"sigmoid", {}},
      {"tanh", {}},
      {"gelu", {"approximate"}},
      {"gelu_new", {}},
      {"silu", {}},
      {"rmsnorm", {"eps"}},
      {"hardswish", {}},
      {"hardsigmoid", {}},
      {"stochastic_depth", {"p"}},
      {"scale", {"shape"}},
      {"add", {"inputs"}},
      {"mul", {"inputs"}},
      {"softmax", {}},
      {"maxpool1d", {"kernel", "stride", "padding", "ceil_mode"}},
      {"maxpool2d", {"kernel", "stride", "padding", "ceil_mode"}},
      {"avgpool2d", {"kernel", "stride", "padding", "ceil_mode"}},
      {"adaptive_avgpool2d", {"output_size"}},
      {"flatten", {}},
      {"reshape", {"shape"}},
      {"dropout", {"p"}},
      {"embedding", {"num_embeddings", "embedding_dim"}},
      {"position_embedding", {"max_positions"}},
      {"token_type_embedding", {"types"}},
      {"token_select", {"index"}},
      {"multihead_attention",
       {"heads", "dropout", "causal", "bias", "attention", "kv_heads", "projections", "output_bias",
        "rotary", "rotary_theta"}},
      {"concat", {"inputs", "dim"}},
      {"upsample", {"scale_factor", "size", "mode", "align_corners"}},
      {"conv_transpose2d",
       {"out_channels", "kernel", "stride", "padding", "output_padding", "dilation", "groups",
        "bias"}},
      {"permute", {"dims"}},
      {"transpose", {"dims"}},
      {"class_token", {"tokens"}},
      {"residual", {"body", "shortcut"}},
      {"bottleneck", {"width", "stride", "expansion"}},
      {"basic_block", {"out_channels", "stride"}},
      {"inverted_residual", {"out_channels", "expand_ratio", "stride"}},
      {"transformer_encoder",
       {"d_model", "heads", "ffn_dim", "dropout", "attention_dropout", "activation", "norm_first",
        "causal", "eps", "attention", "projections"}},
      {"gated_mlp", {"hidden", "out_features", "activation", "bias"}},
      {"decoder_layer",
       {"d_model", "heads", "kv_heads", "ffn_dim", "eps", "norm", "activation", "gated",
        "attention", "attention_bias", "output_bias", "mlp_bias", "rotary", "rotary_theta",
        "attention_dropout", "causal"}},
  };
  std::vector<std::string_view> keys(kCommonKeys.begin(), kCommonKeys.end());
  auto found = kKeys.find(type);
  if (found != kKeys.end()) keys.insert(keys.end(), found->second.begin(), found->second.end());
  return keys;
}

std::optional<LayerType> primitive_type(std::string_view name) {
  for (const TypeInfo& t : kTypes) {
    if (t.yaml_name == name) return t.type;
  }
  return std::nullopt;
}

// A size given either as one integer (applied to every spatial dim) or as a list of `dims`.
std::vector<std::int64_t> read_sizes(const yaml::Node& node, std::size_t dims,
                                     std::int64_t minimum) {
  if (node.is_sequence()) {
    std::vector<std::int64_t> values = node.as_int_list(minimum);
    if (values.size() != dims) {
      node.fail(fmt::format("expected {} values (one per spatial dimension), got {}", dims,
                            values.size()));
    }
    return values;
  }
  return std::vector<std::int64_t>(dims, node.as_int_at_least(minimum));
}

std::vector<std::int64_t> optional_sizes(const yaml::MapReader& map, std::string_view key,
                                         std::size_t dims, std::int64_t minimum,
                                         std::vector<std::int64_t> fallback) {
  std::optional<yaml::Node> node = map.optional(key);
  return node ? read_sizes(*node, dims, minimum) : fallback;
}

class ModelReader {
 public:
  explicit ModelReader(std::string file) : file_(std::move(file)) {}

  std::vector<ModelNode> read_sequence(const yaml::Node& list, const std::string& prefix);
  std::int64_t primitive_count() const { return primitive_count_; }
  // Refuses an output that nothing reads: a node whose successor reads named outputs instead,
  // and which no `input:` names (its layers would get no gradient, and DDP would stall).
  void check_every_output_is_read() const;

 private:
  // The outputs an entry's `input:` (or a concat's `inputs:`) names, resolved to node names.
  std::vector<std::string> read_inputs(const yaml::MapReader& map, std::string_view type,
                                       std::int64_t repeat);
  std::string resolve_input(const yaml::Node& reference);
  void read_entry(const yaml::Node& entry, const std::string& default_name,
                  std::vector<ModelNode>& out);
  Layer read_primitive(LayerType type, const yaml::MapReader& map, const std::string& name,
                       const SourceMark& mark);
  void expand_block(std::string_view type, const yaml::MapReader& map, const std::string& name,
                    const SourceMark& mark, std::int64_t instance, std::vector<ModelNode>& out);
  void gated_mlp(const std::string& name, const SourceMark& mark, std::int64_t hidden,
                 std::int64_t width, Activation activation, bool bias, std::vector<ModelNode>& out);
  void expand_decoder_layer(const yaml::MapReader& map, const std::string& name,
                            const SourceMark& mark, std::vector<ModelNode>& out);
  ModelNode primitive(Layer layer);
  void claim_name(const std::string& name, const yaml::Node& where);

  std::string file_;
  std::int64_t primitive_count_ = 0;
  std::set<std::string> names_;
  // Every entry read so far (an instance of a repeated one too): the node holding its output.
  std::map<std::string, std::string, std::less<>> outputs_;
  std::set<std::string, std::less<>> referenced_;  // nodes some `input:` reads
  struct Unread {
    std::string node;
    SourceMark mark;
    std::string entry;
  };
  std::vector<Unread> maybe_unread_;  // nodes whose successor reads something else
};

std::string ModelReader::resolve_input(const yaml::Node& reference) {
  std::string name = reference.as_string();
  if (name == kModelInput) return name;
  auto found = outputs_.find(name);
  if (found == outputs_.end()) {
    std::vector<std::string_view> known{kModelInput};
    for (const auto& [entry, node] : outputs_)
      known.push_back(entry);
    reference.fail(fmt::format(
        "'{}' names no earlier layer; an input must be an entry written above this one (by its "
        "name; an entry without one by its position path, such as '3' or 'block.body.0'), or "
        "'{}' for the model's input{}",
        name, kModelInput, did_you_mean(name, known)));
  }
  referenced_.insert(found->second);
  return found->second;
}

std::vector<std::string> ModelReader::read_inputs(const yaml::MapReader& map, std::string_view type,
                                                  std::int64_t repeat) {
  std::vector<std::string> inputs;
  std::optional<yaml::Node> single = map.optional("input");
  const bool joins = type == "add" || type == "mul";
  if (type == "concat" || joins) {
    if (single) {
      single->fail(fmt::format("{} {} reads several outputs: list them under 'inputs'",
                               type == "add" ? "an" : "a", type));
    }
    const yaml::Node list = map.required("inputs");
    for (const yaml::Node& item : list.items(2))
      inputs.push_back(resolve_input(item));
    if (joins && inputs.size() != 2) {
      list.fail(fmt::format("{} {} joins exactly two outputs, got {}", type == "add" ? "an" : "a",
                            type, inputs.size()));
    }
  } else if (single) {
    inputs.push_back(resolve_input(*single));
  }
  if (!inputs.empty() && repeat > 1) {
    map.required(type == "concat" || joins ? "inputs" : "input")
        .fail("an entry that reads named outputs cannot repeat; write the copies out");
  }
  return inputs;
}

void ModelReader::check_every_output_is_read() const {
  for (const Unread& candidate : maybe_unread_) {
    if (referenced_.count(candidate.node) != 0) continue;
    throw InputError(candidate.mark, "layers",
                     fmt::format("the output of '{}' is never read: the next entry reads named "
                                 "outputs instead, and no 'input:' names '{}'",
                                 candidate.entry, candidate.entry));
  }
}

ModelNode ModelReader::primitive(Layer layer) {
  if (++primitive_count_ > kMaxModelLayers) {
    throw InputError(layer.mark, "layers",
                     fmt::format("the model expands to more than {} layers", kMaxModelLayers));
  }
  ModelNode node;
  node.kind = ModelNode::Kind::layer;
  node.layer = std::move(layer);
  return node;
}

void ModelReader::claim_name(const std::string& name, const yaml::Node& where) {
  if (name == kModelInput) {
    where.fail(
        fmt::format("'{}' is the model's input (what an 'input:' reads); name the layer "
                    "otherwise",
                    kModelInput));
  }
  if (!names_.insert(name).second) {
    where.fail(fmt::format("the layer name '{}' is used twice; names must be unique", name));
  }
}

std::vector<ModelNode> ModelReader::read_sequence(const yaml::Node& list,
                                                  const std::string& prefix) {
  std::vector<ModelNode> out;
  std::size_t index = 0;
  for (const yaml::Node& entry : list.items(1)) {
    std::string default_name =
        prefix.empty() ? std::to_string(index) : prefix + "." + std::to_string(index);
    const std::size_t before = out.size();
    read_entry(entry, default_name, out);
    // The previous node's output goes unread by this entry when it reads named ones (a residual
    // block whose body and shortcut both do, too).
    const ModelNode& first = out[before];
    const bool reads_elsewhere =
        !first.inputs.empty() || (first.kind == ModelNode::Kind::residual && !first.body.empty() &&
                                  !first.body.front().inputs.empty() && !first.shortcut.empty() &&
                                  !first.shortcut.front().inputs.empty());
    if (before > 0 && reads_elsewhere) {
      const ModelNode& previous = out[before - 1];
      bool residual = previous.kind == ModelNode::Kind::residual;
      maybe_unread_.push_back({residual ? previous.name : previous.layer.name,
                               residual ? previous.mark : previous.layer.mark,
                               residual ? previous.name : previous.layer.name});
    }
    ++index;
  }
  return out;
}

void ModelReader::read_entry(const yaml::Node& entry, const std::string& default_name,
                             std::vector<ModelNode>& out) {
  // `- relu` is shorthand for `- {type: relu}`.
  if (entry.is_scalar()) {
    std::optional<LayerType> type = primitive_type(entry.raw().Scalar());
    if (!type || type == LayerType::add || type == LayerType::mul) {
      entry.as_choice(kWritableTypes);  // raises with a suggestion for misspellings
      entry.fail(type ? "an add or mul joins two outputs: write it as a mapping with 'inputs'"
                      : "this block needs its parameters; write it as a mapping with 'type'");
    }
    YAML::Node as_map;
    as_map["type"] = entry.raw().Scalar();
    yaml::Node map_node(as_map, entry.file(), entry.path());
    yaml::MapReader map(map_node.at(entry.mark()), keys_for(entry.raw().Scalar()));
    claim_name(default_name, entry);
    out.push_back(primitive(read_primitive(*type, map, default_name, entry.mark())));
    outputs_[default_name] = default_name;
    return;
  }
  if (!entry.is_map()) {
    entry.fail(fmt::format("expected a layer (a type name or a mapping with 'type'), got {}",
                           entry.describe()));
  }
  // Validate the type first, so the key check below can list that type's keys.
  YAML::Node raw_type = entry.raw()["type"];
  if (!raw_type) throw InputError(entry.mark(), entry.path() + ".type", "missing required key");
  yaml::Node type_node(raw_type, entry.file(), entry.path() + ".type");
  std::string type_name(kWritableTypes[type_node.as_choice(kWritableTypes)]);
  std::vector<std::string_view> keys = keys_for(type_name);
  yaml::MapReader map(entry, keys);

  std::string name = default_name;
  if (std::optional<yaml::Node> given = map.optional("name")) {
    name = given->as_string();
    if (name.find_first_of(" \t") != std::string::npos) given->fail("a layer name has no spaces");
  }
  std::int64_t repeat = 1;
  if (std::optional<yaml::Node> r = map.optional("repeat")) {
    repeat = r->as_int_at_least(1);
    if (repeat > kMaxModelLayers) r->fail(fmt::format("repeat is limited to {}", kMaxModelLayers));
  }
  std::vector<std::string> inputs = read_inputs(map, type_name, repeat);
  for (std::int64_t i = 0; i < repeat; ++i) {
    std::string instance_name = repeat == 1 ? name : fmt::format("{}.{}", name, i);
    claim_name(instance_name, entry);
    const std::size_t first = out.size();
    if (std::optional<LayerType> type = primitive_type(type_name)) {
      out.push_back(primitive(read_primitive(*type, map, instance_name, entry.mark())));
    } else {
      expand_block(type_name, map, instance_name, entry.mark(), i, out);
      for (std::size_t n = first; n < out.size(); ++n)
        mark_block(out[n], instance_name);
    }
    out[first].inputs = inputs;
    // A block's output is its last node's (a bottleneck's final relu, say).
    const ModelNode& last = out.back();
    outputs_[instance_name] = last.kind == ModelNode::Kind::residual ? last.name : last.layer.name;
  }
  if (repeat > 1) outputs_[name] = outputs_[fmt::format("{}.{}", name, repeat - 1)];
}

Layer ModelReader::read_primitive(LayerType type, const yaml::MapReader& map,
                                  const std::string& name, const SourceMark& mark) {
  Layer layer;
  layer.type = type;
  layer.name = name;
  layer.mark = mark;
  auto dims = [&]() -> std::size_t {
    switch (type) {
      case LayerType::conv1d:
      case LayerType::maxpool1d:
        return 1;
      default:
        return 2;
    }
  };
  switch (type) {
    case LayerType::linear:
      layer.out_features = map.required("out_features").as_int_at_least(1);
      if (auto b = map.optional("bias")) layer.bias = b->as_bool();
      if (auto t = map.optional("tied_to")) layer.tied_to = t->as_string();
      break;
    case LayerType::conv1d:
    case LayerType::conv2d:
    case LayerType::conv_transpose2d: {
      layer.out_features = map.required("out_channels").as_int_at_least(1);
      layer.kernel = read_sizes(map.required("kernel"), dims(), 1);
      layer.stride = optional_sizes(map, "stride", dims(), 1, std::vector<std::int64_t>(dims(), 1));
      layer.padding =
          optional_sizes(map, "padding", dims(), 0, std::vector<std::int64_t>(dims(), 0));
      layer.dilation =
          optional_sizes(map, "dilation", dims(), 1, std::vector<std::int64_t>(dims(), 1));
      if (auto g = map.optional("groups")) layer.groups = g->as_int_at_least(1);
      if (layer.out_features % layer.groups != 0) {
        map.required("groups").fail(fmt::format("out_channels ({}) is not divisible by groups ({})",
                                                layer.out_features, layer.groups));
      }
      if (auto b = map.optional("bias")) layer.bias = b->as_bool();
      if (type == LayerType::conv_transpose2d) {
        layer.output_padding =
            optional_sizes(map, "output_padding", dims(), 0, std::vector<std::int64_t>(dims(), 0));
        // PyTorch's rule: the extra rows must fall inside one stride (or dilation) step.
        for (std::size_t d = 0; d < layer.output_padding.size(); ++d) {
          if (layer.output_padding[d] >= std::max(layer.stride[d], layer.dilation[d])) {
            map.required("output_padding")
                .fail(fmt::format("output_padding ({}) must be smaller than the stride ({}) or "
                                  "the dilation ({})",
                                  layer.output_padding[d], layer.stride[d], layer.dilation[d]));
          }
        }
      }
      break;
    }
    case LayerType::concat:
      if (auto d = map.optional("dim")) layer.dim = d->as_int_in(-4, 3);
      break;
    case LayerType::upsample: {
      std::optional<yaml::Node> scale = map.optional("scale_factor");
      std::optional<yaml::Node> size = map.optional("size");
      if (scale.has_value() == size.has_value()) {
        map.node().fail("an upsample takes either scale_factor or size (one of them)");
      }
      if (scale) layer.scale_factor = read_sizes(*scale, 2, 1);
      if (size) layer.output_size = read_sizes(*size, 2, 1);
      static constexpr std::array<std::string_view, 2> kModes = {"nearest", "bilinear"};
      if (auto m = map.optional("mode")) layer.bilinear = m->as_choice(kModes) == 1;
      if (auto a = map.optional("align_corners")) {
        if (!layer.bilinear) a->fail("align_corners applies to mode: bilinear only");
        layer.align_corners = a->as_bool();
      }
      break;
    }
    case LayerType::permute: {
      yaml::Node dims_node = map.required("dims");
      layer.permutation = dims_node.as_int_list(0);
      const auto rank = static_cast<std::int64_t>(layer.permutation.size());
      std::vector<bool> seen(layer.permutation.size(), false);
      for (std::int64_t d : layer.permutation) {
        if (d >= rank || seen[static_cast<std::size_t>(d)]) {
          dims_node.fail(fmt::format(
              "expected each per-sample dimension from 0 to {} once (a permutation), got [{}]",
              rank - 1, fmt::join(layer.permutation, ", ")));
        }
        seen[static_cast<std::size_t>(d)] = true;
      }
      break;
    }
    case LayerType::transpose: {
      yaml::Node dims_node = map.required("dims");
      for (const yaml::Node& item : dims_node.items(2)) {
        layer.permutation.push_back(item.as_int_in(-4, 3));
      }
      if (layer.permutation.size() != 2) {
        dims_node.fail(fmt::format("expected the two dimensions to swap, got {} values",
                                   layer.permutation.size()));
      }
      break;
    }
    case LayerType::class_token:
      if (auto t = map.optional("tokens")) layer.tokens = t->as_int_in(1, 1024);
      break;
    case LayerType::batchnorm1d:
    case LayerType::batchnorm2d:
    case LayerType::layernorm:
      if (auto e = map.optional("eps")) layer.eps = e->as_positive_number();
      break;
    case LayerType::rmsnorm:
      layer.eps = 1e-6;  // Hugging Face's LlamaRMSNorm default
      if (auto e = map.optional("eps")) layer.eps = e->as_positive_number();
      break;
    case LayerType::gelu: {
      static constexpr std::array<std::string_view, 2> kForms = {"none", "tanh"};
      if (auto f = map.optional("approximate"))
        layer.tanh_approximation = f->as_choice(kForms) == 1;
      break;
    }
    case LayerType::relu:
    case LayerType::relu6:
      if (auto i = map.optional("inplace")) layer.inplace = i->as_bool();
      break;
    case LayerType::maxpool1d:
    case LayerType::maxpool2d:
    case LayerType::avgpool2d: {
      layer.kernel = read_sizes(map.required("kernel"), dims(), 1);
      layer.stride = optional_sizes(map, "stride", dims(), 1, layer.kernel);  // PyTorch's default
      layer.padding =
          optional_sizes(map, "padding", dims(), 0, std::vector<std::int64_t>(dims(), 0));
      for (std::size_t d = 0; d < layer.kernel.size(); ++d) {
        if (layer.padding[d] * 2 > layer.kernel[d]) {
          map.required("padding").fail(
              fmt::format("padding ({}) must be at most half the kernel ({})", layer.padding[d],
                          layer.kernel[d]));
        }
      }
      layer.dilation = std::vector<std::int64_t>(dims(), 1);
      if (auto c = map.optional("ceil_mode")) layer.ceil_mode = c->as_bool();
      break;
    }
    case LayerType::adaptive_avgpool2d:
      layer.output_size = optional_sizes(map, "output_size", 2, 1, {1, 1});
      break;
    case LayerType::reshape: {
      yaml::Node shape = map.required("shape");
      int unknown = 0;
      for (const yaml::Node& item : shape.items(1)) {
        std::int64_t d = item.as_int();
        if (d == -1) {
          if (++unknown > 1) item.fail("at most one dimension may be -1");
        } else if (d < 1) {
          item.fail(fmt::format("expected a positive size or -1, got {}", d));
        }
        layer.target_shape.push_back(d);
      }
      break;
    }
    case LayerType::scale:
      layer.target_shape = map.required("shape").as_int_list(1);
      if (layer.target_shape.size() > 4) {
        map.required("shape").fail("at most 4 dimensions per sample");
      }
      break;
    case LayerType::stochastic_depth:
      layer.dropout = map.required("p").as_fraction();
      if (layer.dropout >= 1)
        map.required("p").fail("p must be below 1 (p = 1 drops every sample)");
      break;
    case LayerType::dropout:
      if (auto p = map.optional("p"))
        layer.dropout = p->as_fraction();
      else
        layer.dropout = 0.5;  // PyTorch's default
      if (layer.dropout >= 1) map.required("p").fail("p must be below 1 (p = 1 drops everything)");
      break;
    case LayerType::embedding:
      layer.num_embeddings = map.required("num_embeddings").as_int_at_least(1);
      layer.embedding_dim = map.required("embedding_dim").as_int_at_least(1);
      break;
    case LayerType::position_embedding:
      // Without max_positions: one learned vector per input token (ViT), sized at analysis.
      if (auto m = map.optional("max_positions")) {
        layer.num_embeddings = m->as_int_at_least(1);
      } else {
        layer.positions_from_input = true;
      }
      break;
    case LayerType::token_type_embedding:
      layer.num_embeddings = map.required("types").as_int_at_least(1);
      break;
    case LayerType::token_select:
      if (auto i = map.optional("index")) layer.index = i->as_int_at_least(0);
      break;
    case LayerType::multihead_attention:
      layer.heads = map.required("heads").as_int_at_least(1);
      if (auto p = map.optional("dropout")) layer.dropout = p->as_fraction();
      if (layer.dropout >= 1) map.required("dropout").fail("dropout must be below 1");
      if (auto c = map.optional("causal")) layer.causal = c->as_bool();
      if (auto b = map.optional("bias")) layer.bias = b->as_bool();
      if (auto a = map.optional("attention")) layer.attention = read_attention(*a);
      read_attention_variant(map, layer);
      break;
    case LayerType::sigmoid:
    case LayerType::tanh:
    case LayerType::softmax:
    case LayerType::flatten:
    case LayerType::add:
    case LayerType::mul:
    case LayerType::silu:
    case LayerType::gelu_new:
    case LayerType::hardswish:
    case LayerType::hardsigmoid:
      break;
  }
  return layer;
}

// Small builders for block expansion: each part is a primitive named "<block>.<part>".
Layer make_layer(LayerType type, std::string name, const SourceMark& mark) {
  Layer layer;
  layer.type = type;
  layer.name = std::move(name);
  layer.mark = mark;
  return layer;
}

Layer make_conv2d(std::string name, const SourceMark& mark, std::int64_t out, std::int64_t kernel,
                  std::int64_t stride, std::int64_t groups) {
  Layer layer = make_layer(LayerType::conv2d, std::move(name), mark);
  layer.out_features = out;
  layer.kernel = {kernel, kernel};
  layer.stride = {stride, stride};
  layer.padding = {kernel / 2, kernel / 2};
  layer.dilation = {1, 1};
  layer.groups = groups;
  layer.bias = false;  // followed by batch norm, as in torchvision
  return layer;
}

Layer make_linear(std::string name, const SourceMark& mark, std::int64_t out) {
  Layer layer = make_layer(LayerType::linear, std::move(name), mark);
  layer.out_features = out;
  return layer;
}

Layer make_dropout(std::string name, const SourceMark& mark, double p) {
  Layer layer = make_layer(LayerType::dropout, std::move(name), mark);
  layer.dropout = p;
  return layer;
}

void ModelReader::expand_block(std::string_view type, const yaml::MapReader& map,
                               const std::string& name, const SourceMark& mark,
                               std::int64_t instance, std::vector<ModelNode>& out) {
  auto part = [&](Layer layer) { return primitive(std::move(layer)); };
  auto sub = [&](std::string_view what) { return fmt::format("{}.{}", name, what); };
  auto residual = [&](std::vector<ModelNode> body, std::vector<ModelNode> shortcut) {
    ModelNode node;
    node.kind = ModelNode::Kind::residual;
    node.name = name;
    node.mark = mark;
    node.body = std::move(body);
    node.shortcut = std::move(shortcut);
    return node;
  };
  // Blocks given `repeat` apply their stride to the first instance only, as ResNet's and
  // MobileNetV2's stage tables do.
  auto stride_of = [&]() -> std::int64_t {
    std::optional<yaml::Node> s = map.optional("stride");
    std::int64_t stride = s ? s->as_int_at_least(1) : 1;
    return instance == 0 ? stride : 1;
  };

  if (type == "residual") {
    std::vector<ModelNode> body = read_sequence(map.required("body"), name + ".body");
    std::vector<ModelNode> shortcut;
    if (std::optional<yaml::Node> s = map.optional("shortcut")) {
      shortcut = read_sequence(*s, name + ".shortcut");
    }
    out.push_back(residual(std::move(body), std::move(shortcut)));
  } else if (type == "bottleneck" || type == "basic_block") {
    // torchvision ResNet v1.5: the stride sits on the 3x3 convolution; a 1x1 projection
    // shortcut (the "downsample") is added when the shape changes. Its need depends on the
    // input channels, known only at analysis, so the block records a "projection if needed".
    std::int64_t stride = stride_of();
    std::vector<ModelNode> body;
    std::int64_t out_channels = 0;
    if (type == "bottleneck") {
      std::int64_t width = map.required("width").as_int_at_least(1);
      std::int64_t expansion = 4;
      if (auto e = map.optional("expansion")) expansion = e->as_int_at_least(1);
      out_channels = width * expansion;
      body.push_back(part(make_conv2d(sub("conv1"), mark, width, 1, 1, 1)));
      body.push_back(part(make_layer(LayerType::batchnorm2d, sub("bn1"), mark)));
      body.push_back(part(make_layer(LayerType::relu, sub("relu1"), mark)));
      body.push_back(part(make_conv2d(sub("conv2"), mark, width, 3, stride, 1)));
      body.push_back(part(make_layer(LayerType::batchnorm2d, sub("bn2"), mark)));
      body.push_back(part(make_layer(LayerType::relu, sub("relu2"), mark)));
      body.push_back(part(make_conv2d(sub("conv3"), mark, out_channels, 1, 1, 1)));
      body.push_back(part(make_layer(LayerType::batchnorm2d, sub("bn3"), mark)));
    } else {
      out_channels = map.required("out_channels").as_int_at_least(1);
      body.push_back(part(make_conv2d(sub("conv1"), mark, out_channels, 3, stride, 1)));
      body.push_back(part(make_layer(LayerType::batchnorm2d, sub("bn1"), mark)));
      body.push_back(part(make_layer(LayerType::relu, sub("relu1"), mark)));
      body.push_back(part(make_conv2d(sub("conv2"), mark, out_channels, 3, 1, 1)));
      body.push_back(part(make_layer(LayerType::batchnorm2d, sub("bn2"), mark)));
    }
    std::vector<ModelNode> shortcut;
    shortcut.push_back(part(make_conv2d(sub("downsample.0"), mark, out_channels, 1, stride, 1)));
    shortcut.push_back(part(make_layer(LayerType::batchnorm2d, sub("downsample.1"), mark)));
    ModelNode block = residual(std::move(body), std::move(shortcut));
    block.rule = ModelNode::ResidualRule::project_if_shape_changes;
    out.push_back(std::move(block));
    out.push_back(part(make_layer(LayerType::relu, sub("relu"), mark)));
  } else if (type == "inverted_residual") {
    // MobileNetV2: 1x1 expansion (skipped when the ratio is 1), 3x3 depthwise, 1x1 linear
    // projection; the residual connection exists only when stride is 1 and channels match,
    // which analysis decides once the input channels are known.
    std::int64_t out_channels = map.required("out_channels").as_int_at_least(1);
    std::int64_t ratio = map.required("expand_ratio").as_int_at_least(1);
    std::int64_t stride = stride_of();
    if (stride > 2) map.required("stride").fail("MobileNetV2 blocks use stride 1 or 2");
    ModelNode block = residual({}, {});
    block.rule = ModelNode::ResidualRule::add_if_shape_kept;
    if (ratio != 1) {
      Layer expand = make_conv2d(sub("conv.0"), mark, 0, 1, 1, 1);
      expand.channel_multiplier = ratio;
      block.body.push_back(part(expand));
      block.body.push_back(part(make_layer(LayerType::batchnorm2d, sub("conv.1"), mark)));
      block.body.push_back(part(make_layer(LayerType::relu6, sub("conv.2"), mark)));
    }
    Layer depthwise = make_conv2d(sub("dw.0"), mark, 0, 3, stride, 1);
    depthwise.channel_multiplier = 1;
    depthwise.depthwise = true;
    block.body.push_back(part(depthwise));
    block.body.push_back(part(make_layer(LayerType::batchnorm2d, sub("dw.1"), mark)));
    block.body.push_back(part(make_layer(LayerType::relu6, sub("dw.2"), mark)));
    block.body.push_back(part(make_conv2d(sub("project.0"), mark, out_channels, 1, 1, 1)));
    block.body.push_back(part(make_layer(LayerType::batchnorm2d, sub("project.1"), mark)));
    out.push_back(std::move(block));
  } else if (type == "transformer_encoder") {
    std::int64_t d_model = map.required("d_model").as_int_at_least(1);
    std::int64_t heads = map.required("heads").as_int_at_least(1);
    std::int64_t ffn = map.required("ffn_dim").as_int_at_least(1);
    if (d_model % heads != 0) {
      map.required("heads").fail(
          fmt::format("d_model ({}) is not divisible by heads ({})", d_model, heads));
    }
    double dropout = 0.1;  // the default of nn.TransformerEncoderLayer and BERT
    if (auto d = map.optional("dropout")) dropout = d->as_fraction();
    double attention_dropout = dropout;
    if (auto d = map.optional("attention_dropout")) attention_dropout = d->as_fraction();
    if (dropout >= 1 || attention_dropout >= 1) map.node().fail("dropout must be below 1");
    Activation activation;
    if (auto a = map.optional("activation")) activation = read_activation(*a);
    bool norm_first = false;
    if (auto n = map.optional("norm_first")) norm_first = n->as_bool();
    bool causal = false;
    if (auto c = map.optional("causal")) causal = c->as_bool();
    double eps = 1e-5;
    if (auto e = map.optional("eps")) eps = e->as_positive_number();

    auto norm = [&](std::string_view what) {
      Layer layer = make_layer(LayerType::layernorm, sub(what), mark);
      layer.eps = eps;
      return part(layer);
    };
    Layer attention = make_layer(LayerType::multihead_attention, sub("attention"), mark);
    attention.heads = heads;
    attention.dropout = attention_dropout;
    attention.causal = causal;
    if (auto a = map.optional("attention")) attention.attention = read_attention(*a);
    read_attention_variant(map, attention);

    std::vector<ModelNode> attention_body;
    std::vector<ModelNode> ffn_body;
    if (norm_first) attention_body.push_back(norm("norm1"));
    attention_body.push_back(part(attention));
    if (dropout > 0) attention_body.push_back(part(make_dropout(sub("dropout1"), mark, dropout)));
    if (norm_first) ffn_body.push_back(norm("norm2"));
    ffn_body.push_back(part(make_linear(sub("linear1"), mark, ffn)));
    // No dropout between the activation and linear2: BERT and GPT-2 have none there
    // (PyTorch's nn.TransformerEncoderLayer adds one).
    Layer activation_layer = make_layer(activation.type, sub("activation"), mark);
    activation_layer.tanh_approximation = activation.tanh_approximation;
    ffn_body.push_back(part(activation_layer));
    ffn_body.push_back(part(make_linear(sub("linear2"), mark, d_model)));
    if (dropout > 0) ffn_body.push_back(part(make_dropout(sub("dropout2"), mark, dropout)));

    ModelNode first = residual(std::move(attention_body), {});
    first.name = sub("self_attention_block");
    out.push_back(std::move(first));
    if (!norm_first) out.push_back(norm("norm1"));
    ModelNode second = residual(std::move(ffn_body), {});
    second.name = sub("feed_forward_block");
    out.push_back(std::move(second));
    if (!norm_first) out.push_back(norm("norm2"));
  } else if (type == "gated_mlp") {
    const std::int64_t hidden = map.required("hidden").as_int_at_least(1);
    const std::int64_t width = map.required("out_features").as_int_at_least(1);
    Activation activation{LayerType::silu, false};
    if (auto a = map.optional("activation")) activation = read_activation(*a);
    bool bias = false;
    if (auto b = map.optional("bias")) bias = b->as_bool();
    gated_mlp(name, mark, hidden, width, activation, bias, out);
  } else if (type == "decoder_layer") {
    expand_decoder_layer(map, name, mark, out);
  }
}

// Hugging Face's gated MLP (LlamaMLP): down_proj(act_fn(gate_proj(x)) * up_proj(x)), the product
// a two-branch node joined by `mul` (the gate's branch first, as the expression evaluates).
void ModelReader::gated_mlp(const std::string& name, const SourceMark& mark, std::int64_t hidden,
                            std::int64_t width, Activation activation, bool bias,
                            std::vector<ModelNode>& out) {
  auto sub = [&](std::string_view what) { return fmt::format("{}.{}", name, what); };
  auto linear = [&](std::string_view what, std::int64_t features) {
    Layer layer = make_linear(sub(what), mark, features);
    layer.bias = bias;
    return primitive(std::move(layer));
  };
  ModelNode gate;
  gate.kind = ModelNode::Kind::residual;
  gate.join = LayerType::mul;
  gate.name = name;
  gate.mark = mark;
  gate.body.push_back(linear("gate_proj", hidden));
  Layer act = make_layer(activation.type, sub("act_fn"), mark);
  act.tanh_approximation = activation.tanh_approximation;
  gate.body.push_back(primitive(std::move(act)));
  gate.shortcut.push_back(linear("up_proj", hidden));
  out.push_back(std::move(gate));
  out.push_back(linear("down_proj", width));
}

// A decoder-only transformer layer as Hugging Face's Llama, Mistral and Qwen2 build it
// (LlamaDecoderLayer): x + self_attn(input_layernorm(x)), then
// h + mlp(post_attention_layernorm(h)), with RMSNorm, separate q/k/v projections, rotary
// embeddings, grouped-query attention and a gated MLP by default; each can be switched to what
// other decoders use.
void ModelReader::expand_decoder_layer(const yaml::MapReader& map, const std::string& name,
                                       const SourceMark& mark, std::vector<ModelNode>& out) {
  auto sub = [&](std::string_view what) { return fmt::format("{}.{}", name, what); };
  const std::int64_t d_model = map.required("d_model").as_int_at_least(1);
  Layer attention = make_layer(LayerType::multihead_attention, sub("self_attn"), mark);
  attention.heads = map.required("heads").as_int_at_least(1);
  if (d_model % attention.heads != 0) {
    map.required("heads").fail(
        fmt::format("d_model ({}) is not divisible by heads ({})", d_model, attention.heads));
  }
  const std::int64_t ffn = map.required("ffn_dim").as_int_at_least(1);
  attention.attention = AttentionKernels::sdpa;  // transformers' default where PyTorch has it
  if (auto a = map.optional("attention")) attention.attention = read_attention(*a);
  attention.bias = false;
  if (auto b = map.optional("attention_bias")) attention.bias = b->as_bool();
  attention.separate_projections = true;
  attention.rotary = true;
  attention.causal = true;
  if (auto c = map.optional("causal")) attention.causal = c->as_bool();
  if (auto d = map.optional("attention_dropout")) {
    attention.dropout = d->as_fraction();
    if (attention.dropout >= 1) d->fail("attention_dropout must be below 1");
  }
  read_attention_variant(map, attention);
  double eps = 1e-6;
  if (auto e = map.optional("eps")) eps = e->as_positive_number();
  static constexpr std::array<std::string_view, 2> kNorms = {"rmsnorm", "layernorm"};
  LayerType norm_type = LayerType::rmsnorm;
  if (auto n = map.optional("norm")) {
    norm_type = n->as_choice(kNorms) == 0 ? LayerType::rmsnorm : LayerType::layernorm;
  }
  Activation activation{LayerType::silu, false};
  if (auto a = map.optional("activation")) activation = read_activation(*a);
  bool gated = true;
  if (auto g = map.optional("gated")) gated = g->as_bool();
  bool mlp_bias = false;
  if (auto b = map.optional("mlp_bias")) mlp_bias = b->as_bool();

  auto norm = [&](std::string_view what) {
    Layer layer = make_layer(norm_type, sub(what), mark);
    layer.eps = eps;
    return primitive(std::move(layer));
  };
  auto residual = [&](std::string_view what, std::vector<ModelNode> body) {
    ModelNode node;
    node.kind = ModelNode::Kind::residual;
    node.name = sub(what);
    node.mark = mark;
    node.body = std::move(body);
    return node;
  };
  std::vector<ModelNode> attention_body;
  attention_body.push_back(norm("input_layernorm"));
  attention_body.push_back(primitive(std::move(attention)));
  out.push_back(residual("attention_residual", std::move(attention_body)));

  std::vector<ModelNode> mlp_body;
  mlp_body.push_back(norm("post_attention_layernorm"));
  if (gated) {
    gated_mlp(sub("mlp"), mark, ffn, d_model, activation, mlp_bias, mlp_body);
  } else {  // up, activation, down (GPT-2's c_fc and c_proj, Phi's fc1 and fc2)
    Layer up = make_linear(sub("mlp.up_proj"), mark, ffn);
    up.bias = mlp_bias;
    Layer act = make_layer(activation.type, sub("mlp.act_fn"), mark);
    act.tanh_approximation = activation.tanh_approximation;
    Layer down = make_linear(sub("mlp.down_proj"), mark, d_model);
    down.bias = mlp_bias;
    mlp_body.push_back(primitive(std::move(up)));
    mlp_body.push_back(primitive(std::move(act)));
    mlp_body.push_back(primitive(std::move(down)));
  }
  out.push_back(residual("mlp_residual", std::move(mlp_body)));
}

ModelSpec read_model(const yaml::Document& document) {
  yaml::Node root = document.root();
  expect_file_kind(root, FileKind::model);
  yaml::MapReader top(root, {"kind", "name", "description", "source", "input", "layers"});
  ModelSpec spec;
  spec.source_file = document.file_name();
  spec.name = top.required("name").as_string();
  if (auto d = top.optional("description")) spec.description = d->as_string();
  if (auto s = top.optional("source")) s->as_string();

  yaml::Node input_node = top.required("input");
  yaml::MapReader input(input_node, {"shape", "dtype"});
  spec.input_mark = input_node.mark();
  spec.input_shape.dims = input.required("shape").as_int_list(1);
  if (spec.input_shape.rank() > 4) {
    input.required("shape").fail("at most 4 dimensions per sample are supported");
  }
  std::int64_t elements = 1;
  for (std::int64_t d : spec.input_shape.dims) {
    if (d > kMaxTensorElements / elements) {
      input.required("shape").fail(
          fmt::format("a sample of more than {} elements is beyond what "
                      "epochcast models",
                      kMaxTensorElements));
    }
    elements *= d;
  }
  if (auto dtype = input.optional("dtype")) {
    spec.input_dtype = static_cast<DType>(dtype->as_choice(kDTypeNames));
  }

  ModelReader reader(spec.source_file);
  spec.layers = reader.read_sequence(top.required("layers"), "");
  reader.check_every_output_is_read();
  return spec;
}

}  // namespace

std::string_view name_of(LayerType type) {
  return info(type).yaml_name;
}
std::string_view torch_class_name(LayerType type) {
  return info(type).torch_name;
}
bool is_torch_module(LayerType type) {
  return info(type).torch_module;
}

ModelSpec load_model(const std::filesystem::path& file) {
  if (is_huggingface_config(file)) return load_huggingface_model(file);
  return read_model(yaml::Document::load_file(file));
}

ModelSpec load_model_from_string(const std::string& text, const std::string& name) {
  return read_model(yaml::Document::load_string(text, name));
}

}  // namespace epochcast

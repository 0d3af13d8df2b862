// Builds the LibTorch tape of a model spec, one step per layer of core's analysis.
#include "runtime/model/torch_model.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

#include <fmt/format.h>
#include <torch/version.h>

#include "core/model/tensor_shape.h"
#include "core/system_failure.h"

namespace epochcast::runtime {

namespace {

using Inputs = std::vector<torch::Tensor>;

// register_module rejects dots, so "layer1.0.conv1" is registered as "layer1_0_conv1".
std::string module_name(const std::string& layer_name) {
  std::string name = layer_name;
  for (char& c : name) {
    if (c == '.') c = '_';
  }
  return name;
}

[[maybe_unused]] std::string fused_attention_unavailable() {
  return fmt::format(
      "attention: sdpa needs scaled_dot_product_attention, which LibTorch has from 2.0 on; this "
      "runtime is built with LibTorch {}",
      TORCH_VERSION);
}

[[noreturn]] void broken(const std::string& what) {
  throw std::logic_error("torch model: " + what);
}

// Self-attention with core's parameter names and layout (nn.MultiheadAttention's packed
// in_proj_weight, or Hugging Face's q/k/v/o projections when they are apart), computed as core
// costs it: the projections; rotary embeddings on q and k; k and v repeated to the query heads
// (grouped-query attention); then nn.MultiheadAttention's unfused math path (scale q, q·kᵀ, mask,
// softmax, dropout, ·v), Hugging Face's eager path (q·kᵀ, scale, additive mask, softmax in
// float32, dropout, ·v) or scaled_dot_product_attention's fused kernel (LibTorch 2.0 or later);
// the heads merged; the output projection. Inputs and outputs are [batch, tokens, features].
class SelfAttentionImpl : public torch::nn::Cloneable<SelfAttentionImpl> {
 public:
  SelfAttentionImpl(std::int64_t features, const Layer& layer)
      : features_(features), layer_(layer) {
    reset();
  }

  void reset() override {
    const std::int64_t heads = layer_.heads;
    const std::int64_t kv = layer_.kv_heads > 0 ? layer_.kv_heads : heads;
    head_dim_ = features_ / heads;
    kv_width_ = kv * head_dim_;
    const bool bias = layer_.bias;
    auto linear = [&](const std::string& name, std::int64_t out, bool with_bias) {
      return register_module(
          name, torch::nn::Linear(torch::nn::LinearOptions(features_, out).bias(with_bias)));
    };
    if (layer_.separate_projections) {
      q_proj_ = linear("q_proj", features_, bias);
      k_proj_ = linear("k_proj", kv_width_, bias);
      v_proj_ = linear("v_proj", kv_width_, bias);
      out_proj_ = linear("o_proj", features_, layer_.output_bias);
    } else {
      const std::int64_t width = features_ + 2 * kv_width_;
      in_proj_weight_ = register_parameter("in_proj_weight", torch::empty({width, features_}));
      if (bias) in_proj_bias_ = register_parameter("in_proj_bias", torch::zeros({width}));
      out_proj_ = linear("out_proj", features_, layer_.output_bias);
      // PyTorch's MultiheadAttention initialisation.
      torch::nn::init::xavier_uniform_(in_proj_weight_);
      if (layer_.output_bias) torch::nn::init::zeros_(out_proj_->bias);
    }
  }

  torch::Tensor forward(const torch::Tensor& x) {
    const std::int64_t batch = x.size(0), tokens = x.size(1), heads = layer_.heads;
    const std::int64_t kv_heads = kv_width_ / head_dim_;
    torch::Tensor q, k, v;
    if (layer_.separate_projections) {
      q = q_proj_->forward(x);
      k = k_proj_->forward(x);
      v = v_proj_->forward(x);
    } else {
      std::vector<torch::Tensor> qkv = torch::linear(x, in_proj_weight_, in_proj_bias_)
                                           .split({features_, kv_width_, kv_width_}, -1);
      q = qkv[0];
      k = qkv[1];
      v = qkv[2];
    }
    auto split_heads = [&](const torch::Tensor& t, std::int64_t count) {
      return t.reshape({batch, tokens, count, head_dim_}).transpose(1, 2);
    };
    q = split_heads(q, heads);
    k = split_heads(k, kv_heads);
    v = split_heads(v, kv_heads);
    if (layer_.rotary) {
      auto [cos, sin] = rotation(tokens, x);
      q = rotate(q, cos, sin);
      k = rotate(k, cos, sin);
    }
    if (kv_heads < heads) {  // Hugging Face's repeat_kv
      auto repeat = [&](const torch::Tensor& t) {
        return t.unsqueeze(2)
            .expand({batch, kv_heads, heads / kv_heads, tokens, head_dim_})
            .reshape({batch, heads, tokens, head_dim_});
      };
      k = repeat(k);
      v = repeat(v);
    }
    const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim_));
    torch::Tensor context;
    switch (layer_.attention) {
      case AttentionKernels::sdpa:
#if TORCH_VERSION_MAJOR >= 2
        // The heads stay strided views; the kernel scales by 1/sqrt(head_dim) itself.
        context = at::scaled_dot_product_attention(
            q, k, v, {}, is_training() ? layer_.dropout : 0.0, layer_.causal);
        break;
#else
        throw SystemFailure(fused_attention_unavailable());
#endif
      case AttentionKernels::math: {
        torch::Tensor scores = torch::matmul(q * scale, k.transpose(-2, -1));
        if (layer_.causal) {
          scores = scores.masked_fill(future(tokens, x), -std::numeric_limits<double>::infinity());
        }
        context = torch::matmul(
            torch::dropout(torch::softmax(scores, -1), layer_.dropout, is_training()), v);
        break;
      }
      case AttentionKernels::eager: {
        torch::Tensor scores = torch::matmul(q, k.transpose(-2, -1)) * scale;
        if (layer_.causal) {
          // The additive mask Hugging Face builds: the type's lowest value above the diagonal.
          torch::Tensor mask =
              torch::zeros({tokens, tokens}, scores.options())
                  .masked_fill(future(tokens, x), std::numeric_limits<float>::lowest());
          scores = scores + mask;
        }
        torch::Tensor probabilities = torch::softmax(scores, -1, torch::kFloat).to(q.scalar_type());
        context = torch::matmul(torch::dropout(probabilities, layer_.dropout, is_training()), v);
        break;
      }
    }
    return out_proj_->forward(context.transpose(1, 2).reshape({batch, tokens, features_}));
  }

 private:
  static torch::Tensor future(std::int64_t tokens, const torch::Tensor& like) {
    return torch::ones({tokens, tokens}, like.options().dtype(torch::kBool)).triu(1);
  }

  // Hugging Face's rotary tables: the inverse frequencies theta^(-2i/d), their angles at each
  // position, duplicated to the head size; then x·cos + rotate_half(x)·sin.
  std::pair<torch::Tensor, torch::Tensor> rotation(std::int64_t tokens,
                                                   const torch::Tensor& like) const {
    torch::TensorOptions options = like.options().dtype(torch::kFloat);
    torch::Tensor inverse =
        torch::pow(layer_.rotary_theta, -torch::arange(0, head_dim_, 2, options) / head_dim_);
    torch::Tensor angles = torch::outer(torch::arange(tokens, options), inverse);
    torch::Tensor doubled = torch::cat({angles, angles}, -1);
    return {doubled.cos().to(like.scalar_type()), doubled.sin().to(like.scalar_type())};
  }
  static torch::Tensor rotate(const torch::Tensor& t, const torch::Tensor& cos,
                              const torch::Tensor& sin) {
    const std::int64_t half = t.size(-1) / 2;
    torch::Tensor rotated = torch::cat({-t.slice(-1, half), t.slice(-1, 0, half)}, -1);
    return t * cos + rotated * sin;
  }

  std::int64_t features_;
  Layer layer_;
  std::int64_t head_dim_ = 0, kv_width_ = 0;
  torch::Tensor in_proj_weight_, in_proj_bias_;
  torch::nn::Linear q_proj_{nullptr}, k_proj_{nullptr}, v_proj_{nullptr}, out_proj_{nullptr};
};
TORCH_MODULE(SelfAttention);

// A learned tensor multiplied in, broadcast over the batch (ConvNeXt's layer_scale, initialised
// as torchvision does: 1e-6 everywhere).
class ScaleImpl : public torch::nn::Cloneable<ScaleImpl> {
 public:
  explicit ScaleImpl(std::vector<std::int64_t> shape) : shape_(std::move(shape)) { reset(); }
  void reset() override { weight = register_parameter("weight", torch::full(shape_, 1e-6)); }
  torch::Tensor forward(const torch::Tensor& x) { return weight * x; }
  torch::Tensor weight;

 private:
  std::vector<std::int64_t> shape_;
};
TORCH_MODULE(Scale);

// Hugging Face's LlamaRMSNorm, op for op as core costs it: float32 statistics, the weight
// applied after the cast back.
class RMSNormImpl : public torch::nn::Cloneable<RMSNormImpl> {
 public:
  RMSNormImpl(std::int64_t features, double eps) : features_(features), eps_(eps) { reset(); }
  void reset() override { weight = register_parameter("weight", torch::ones({features_})); }
  torch::Tensor forward(const torch::Tensor& x) {
    torch::Tensor x32 = x.to(torch::kFloat);
    torch::Tensor variance = x32.pow(2).mean(-1, true);
    return weight * (x32 * torch::rsqrt(variance + eps_)).to(x.scalar_type());
  }
  torch::Tensor weight;

 private:
  std::int64_t features_;
  double eps_;
};
TORCH_MODULE(RMSNorm);

// The bias of a linear layer whose weight is an embedding's table: the layer owns only the bias
// (core counts the shared weight once, at the embedding).
class TiedLinearBiasImpl : public torch::nn::Cloneable<TiedLinearBiasImpl> {
 public:
  explicit TiedLinearBiasImpl(std::int64_t out_features) : out_features_(out_features) { reset(); }
  void reset() override { bias = register_parameter("bias", torch::zeros({out_features_})); }
  torch::Tensor bias;

 private:
  std::int64_t out_features_;
};
TORCH_MODULE(TiedLinearBias);

// Learned tokens prepended to every sample's sequence (ViT's class token), zero-initialised
// as torchvision does.
class ClassTokenImpl : public torch::nn::Cloneable<ClassTokenImpl> {
 public:
  ClassTokenImpl(std::int64_t tokens, std::int64_t features)
      : tokens_(tokens), features_(features) {
    reset();
  }
  void reset() override { token = register_parameter("token", torch::zeros({tokens_, features_})); }
  torch::Tensor forward(const torch::Tensor& x) {
    return torch::cat({token.expand({x.size(0), tokens_, features_}), x}, 1);
  }
  torch::Tensor token;

 private:
  std::int64_t tokens_, features_;
};
TORCH_MODULE(ClassToken);

// One learned vector per position, added to the input (ViT's pos_embedding; normal with
// standard deviation 0.02, as torchvision initialises it).
class LearnedPositionsImpl : public torch::nn::Cloneable<LearnedPositionsImpl> {
 public:
  LearnedPositionsImpl(std::int64_t tokens, std::int64_t features)
      : tokens_(tokens), features_(features) {
    reset();
  }
  void reset() override {
    weight = register_parameter("weight", torch::empty({tokens_, features_}));
    torch::nn::init::normal_(weight, 0.0, 0.02);
  }
  torch::Tensor forward(const torch::Tensor& x) { return x + weight; }
  torch::Tensor weight;

 private:
  std::int64_t tokens_, features_;
};
TORCH_MODULE(LearnedPositions);

// The batch dimension first, then a per-sample permutation shifted past it.
std::vector<std::int64_t> batched_permutation(const std::vector<std::int64_t>& per_sample) {
  std::vector<std::int64_t> order{0};
  for (std::int64_t d : per_sample)
    order.push_back(d + 1);
  return order;
}

void count_references(const std::vector<ModelNode>& nodes, std::map<std::string, int>& counts) {
  for (const ModelNode& node : nodes) {
    for (const std::string& name : node.inputs)
      ++counts[name];
    count_references(node.body, counts);
    count_references(node.shortcut, counts);
  }
}

std::string node_name(const ModelNode& node) {
  return node.kind == ModelNode::Kind::layer ? node.layer.name : node.name;
}

}  // namespace

std::string unsupported_by_libtorch(const ModelAnalysis& analysis) {
#if TORCH_VERSION_MAJOR < 2
  for (const LayerCosts& layer : analysis.layers) {
    if (layer.layer.fused_attention()) return fused_attention_unavailable();
  }
#else
  (void)analysis;
#endif
  return "";
}

struct TorchModelImpl::Step {
  std::vector<std::size_t> reads;
  std::size_t writes = 0;
  // Slots no later step reads: cleared so their tensors are freed as early as eager code would.
  std::vector<std::size_t> releases;
  LayerFunction compute;
};

TorchModelImpl::TorchModelImpl(std::shared_ptr<const ModelSpec> spec,
                               std::shared_ptr<const ModelAnalysis> analysis)
    : spec_(std::move(spec)), analysis_(std::move(analysis)) {
  if (!spec_ || !analysis_) broken("needs a spec and its analysis");
  reset();
}

void TorchModelImpl::reset() {
  // Cloneable::clone() copies this object (steps included) before calling reset(): the copied
  // steps point at the original's modules, so everything is rebuilt.
  steps_.clear();
  hooks_ = {};
  embeddings_.clear();
  pins_.clear();
  references_.clear();
  named_slots_.clear();
  value_count_ = 1;  // slot 0 holds the input
  shape_ = spec_->input_shape;
  count_references(spec_->layers, references_);
  name_output(std::string(kModelInput), 0, shape_);
  std::size_t value = 0, cursor = 0;
  build_sequence(spec_->layers, value, cursor);
  if (cursor != analysis_->layers.size()) {
    broken(fmt::format("the spec gives {} layers but its analysis has {}", cursor,
                       analysis_->layers.size()));
  }
  output_value_ = value;
  embeddings_.clear();
  named_slots_.clear();
}

void TorchModelImpl::name_output(const std::string& name, std::size_t slot,
                                 const TensorShape& shape) {
  auto found = references_.find(name);
  if (found == references_.end() || found->second == 0) return;
  // Pinned until its last reader has run: no later step overwrites it.
  named_slots_[name] = {slot, shape};
  pins_[slot] += found->second;
}

void TorchModelImpl::build_sequence(const std::vector<ModelNode>& nodes, std::size_t& value,
                                    std::size_t& cursor) {
  for (const ModelNode& node : nodes) {
    if (node.inputs.empty()) {
      if (node.kind == ModelNode::Kind::layer) {
        build_primitive(node.layer, value, cursor);
      } else {
        build_residual(node, value, cursor);
      }
    } else {
      build_named_reader(node, value, cursor);
    }
    name_output(node_name(node), value, shape_);
  }
}

void TorchModelImpl::build_named_reader(const ModelNode& node, std::size_t& value,
                                        std::size_t& cursor) {
  const std::size_t previous = value;
  const std::size_t first_step = steps_.size();
  std::vector<std::size_t> slots;
  for (const std::string& name : node.inputs) {
    auto found = named_slots_.find(name);
    if (found == named_slots_.end())
      broken(fmt::format("'{}' is read before it is computed", name));
    slots.push_back(found->second.slot);
    shape_ = found->second.shape;
    --pins_[found->second.slot];
  }
  const bool joins_inputs =
      node.kind == ModelNode::Kind::layer &&
      (node.layer.type == LayerType::concat || node.layer.type == LayerType::add ||
       node.layer.type == LayerType::mul);
  if (joins_inputs) {
    const LayerCosts& costs = analysed_layer(cursor, node.layer.name, node.layer.type);
    auto step = std::make_shared<Step>();
    step->reads = slots;
    step->writes = value_count_++;
    for (std::size_t slot : slots) {
      bool listed =
          std::find(step->releases.begin(), step->releases.end(), slot) != step->releases.end();
      if (!pinned(slot) && !listed) step->releases.push_back(slot);
    }
    step->compute = make_layer(costs);
    steps_.push_back(std::move(step));
    value = steps_.back()->writes;
    shape_ = costs.output_shape;
    ++cursor;
  } else {
    value = slots.front();
    if (node.kind == ModelNode::Kind::layer) {
      build_primitive(node.layer, value, cursor);
    } else {
      build_residual(node, value, cursor);
    }
    // A read slot left behind (the step wrote elsewhere while it was pinned) and no longer
    // needed is freed after the node's first step.
    if (!pinned(slots.front()) && slots.front() != value && first_step < steps_.size()) {
      steps_[first_step]->releases.push_back(slots.front());
    }
  }
  // The previous node's output, if nothing else holds it, is not read any more.
  bool read_here = std::find(slots.begin(), slots.end(), previous) != slots.end();
  if (!read_here && !pinned(previous) && previous != value && first_step < steps_.size()) {
    steps_[first_step]->releases.push_back(previous);
  }
}

const LayerCosts& TorchModelImpl::analysed_layer(std::size_t cursor, const std::string& name,
                                                 LayerType type) const {
  if (cursor >= analysis_->layers.size()) {
    broken(fmt::format("layer '{}' is beyond the analysis' {} layers", name,
                       analysis_->layers.size()));
  }
  const LayerCosts& costs = analysis_->layers[cursor];
  if (costs.layer.name != name || costs.layer.type != type) {
    broken(fmt::format("layer {} is '{}' ({}) in the spec but '{}' ({}) in the analysis", cursor,
                       name, name_of(type), costs.layer.name, name_of(costs.layer.type)));
  }
  return costs;
}

bool TorchModelImpl::pinned(std::size_t value) const {
  auto found = pins_.find(value);
  return found != pins_.end() && found->second > 0;
}

void TorchModelImpl::build_primitive(const Layer& layer, std::size_t& value, std::size_t& cursor) {
  const LayerCosts& costs = analysed_layer(cursor, layer.name, layer.type);
  auto step = std::make_shared<Step>();
  step->reads = {value};
  // A value a residual block still needs (its fork) is never overwritten.
  step->writes = pinned(value) ? value_count_++ : value;
  step->compute = make_layer(costs);
  steps_.push_back(std::move(step));
  value = steps_.back()->writes;
  shape_ = costs.output_shape;
  ++cursor;
}

void TorchModelImpl::build_residual(const ModelNode& node, std::size_t& value,
                                    std::size_t& cursor) {
  // The same decisions as core's analysis, from the same shapes.
  const std::size_t fork = value;
  const TensorShape input_shape = shape_;
  ++pins_[fork];
  std::size_t body = fork;
  build_sequence(node.body, body, cursor);
  const bool same_shape = shape_ == input_shape;
  if (node.rule == ModelNode::ResidualRule::add_if_shape_kept && !same_shape) {
    --pins_[fork];
    // The block degenerates to its body; its last step is the fork's last reader.
    if (!pinned(fork) && body != fork) steps_.back()->releases.push_back(fork);
    value = body;
    return;
  }
  const TensorShape body_shape = shape_;
  std::size_t shortcut = fork;
  const bool use_shortcut =
      node.rule == ModelNode::ResidualRule::always ||
      (node.rule == ModelNode::ResidualRule::project_if_shape_changes && !same_shape);
  if (use_shortcut) build_sequence(node.shortcut, shortcut, cursor);
  --pins_[fork];

  const bool product = node.join == LayerType::mul;
  analysed_layer(cursor, node.name + (product ? ".mul" : ".add"), node.join);  // the lock step
  auto step = std::make_shared<Step>();
  step->reads = {body, shortcut};
  // The sum goes back into the fork's slot unless an enclosing block still needs the fork, else
  // into the body's unless a later layer names the body's output.
  if (!pinned(fork)) {
    step->writes = fork;
  } else {
    step->writes = body != fork && !pinned(body) ? body : value_count_++;
  }
  for (std::size_t slot : {body, shortcut}) {
    bool already = !step->releases.empty() && step->releases.back() == slot;
    if (slot != fork && slot != step->writes && !already && !pinned(slot)) {
      step->releases.push_back(slot);
    }
  }
  if (product) {
    step->compute = [](const Inputs& in) { return in.at(0) * in.at(1); };
  } else {
    step->compute = [](const Inputs& in) { return in.at(0) + in.at(1); };
  }
  steps_.push_back(std::move(step));
  value = steps_.back()->writes;
  shape_ = body_shape;
  ++cursor;
}

TorchModelImpl::LayerFunction TorchModelImpl::make_layer(const LayerCosts& costs) {
  namespace nn = torch::nn;
  const Layer& l = costs.layer;  // widths resolved against the input (channel_multiplier, ...)
  const std::string registered = module_name(l.name);
  switch (l.type) {
    case LayerType::linear: {
      if (l.tied_to.empty()) {
        auto linear = register_module(
            registered,
            nn::Linear(nn::LinearOptions(costs.in_features, l.out_features).bias(l.bias)));
        return [linear](const Inputs& in) { return linear->forward(in.at(0)); };
      }
      auto found = embeddings_.find(l.tied_to);
      if (found == embeddings_.end()) {
        broken(
            fmt::format("'{}' is tied to '{}', which is no earlier embedding", l.name, l.tied_to));
      }
      nn::Embedding table = found->second;
      if (!l.bias) {
        return [table](const Inputs& in) { return torch::linear(in.at(0), table->weight); };
      }
      auto bias = register_module(registered, TiedLinearBias(l.out_features));
      return [table, bias](const Inputs& in) {
        return torch::linear(in.at(0), table->weight, bias->bias);
      };
    }
    case LayerType::conv1d: {
      auto conv = register_module(
          registered, nn::Conv1d(nn::Conv1dOptions(costs.in_features, l.out_features, l.kernel)
                                     .stride(l.stride)
                                     .padding(torch::ExpandingArray<1>(l.padding))
                                     .dilation(l.dilation)
                                     .groups(l.groups)
                                     .bias(l.bias)));
      return [conv](const Inputs& in) { return conv->forward(in.at(0)); };
    }
    case LayerType::conv2d: {
      auto conv = register_module(
          registered, nn::Conv2d(nn::Conv2dOptions(costs.in_features, l.out_features, l.kernel)
                                     .stride(l.stride)
                                     .padding(torch::ExpandingArray<2>(l.padding))
                                     .dilation(l.dilation)
                                     .groups(l.groups)
                                     .bias(l.bias)));
      return [conv](const Inputs& in) { return conv->forward(in.at(0)); };
    }
    case LayerType::batchnorm1d: {
      auto norm = register_module(
          registered, nn::BatchNorm1d(nn::BatchNorm1dOptions(costs.in_features).eps(l.eps)));
      return [norm](const Inputs& in) { return norm->forward(in.at(0)); };
    }
    case LayerType::batchnorm2d: {
      auto norm = register_module(
          registered, nn::BatchNorm2d(nn::BatchNorm2dOptions(costs.in_features).eps(l.eps)));
      return [norm](const Inputs& in) { return norm->forward(in.at(0)); };
    }
    case LayerType::layernorm: {
      auto norm = register_module(
          registered, nn::LayerNorm(nn::LayerNormOptions({costs.in_features}).eps(l.eps)));
      return [norm](const Inputs& in) { return norm->forward(in.at(0)); };
    }
    // Activations run out of place even when the spec says `inplace`: the profiler replays
    // each layer on a recorded input, which an in-place op would overwrite.
    case LayerType::relu:
      return [](const Inputs& in) { return torch::relu(in.at(0)); };
    case LayerType::relu6:
      return [](const Inputs& in) { return torch::hardtanh(in.at(0), 0.0, 6.0); };
    case LayerType::sigmoid:
      return [](const Inputs& in) { return torch::sigmoid(in.at(0)); };
    case LayerType::tanh:
      return [](const Inputs& in) { return torch::tanh(in.at(0)); };
    case LayerType::gelu:  // nn.GELU's default, the exact erf form, or its tanh approximation
      if (l.tanh_approximation) {
        return [](const Inputs& in) { return torch::gelu(in.at(0), "tanh"); };
      }
      return [](const Inputs& in) { return torch::gelu(in.at(0)); };
    case LayerType::gelu_new:  // Hugging Face's NewGELUActivation, as written
      return [](const Inputs& in) {
        const torch::Tensor& x = in.at(0);
        const double root = std::sqrt(2.0 / 3.141592653589793);
        return 0.5 * x * (1.0 + torch::tanh(root * (x + 0.044715 * torch::pow(x, 3.0))));
      };
    case LayerType::silu:
      return [](const Inputs& in) { return torch::silu(in.at(0)); };
    case LayerType::hardswish:
      return [](const Inputs& in) { return torch::hardswish(in.at(0)); };
    case LayerType::scale: {
      auto scale = register_module(registered, Scale(l.target_shape));
      return [scale](const Inputs& in) { return scale->forward(in.at(0)); };
    }
    case LayerType::hardsigmoid:
      return [](const Inputs& in) { return torch::hardsigmoid(in.at(0)); };
    case LayerType::stochastic_depth: {
      // torchvision.ops.stochastic_depth, mode "row": each sample kept with probability 1 - p
      // and scaled by 1 / (1 - p) in training; the identity otherwise.
      const double p = l.dropout;
      return [this, p](const Inputs& in) {
        const torch::Tensor& x = in.at(0);
        if (!is_training() || p == 0) return x;
        std::vector<std::int64_t> shape(static_cast<std::size_t>(x.dim()), 1);
        shape[0] = x.size(0);
        torch::Tensor noise = torch::empty(shape, x.options()).bernoulli_(1 - p).div_(1 - p);
        return x * noise;
      };
    }
    case LayerType::rmsnorm: {
      auto norm = register_module(registered, RMSNorm(costs.in_features, l.eps));
      return [norm](const Inputs& in) { return norm->forward(in.at(0)); };
    }
    case LayerType::softmax:
      return [](const Inputs& in) { return torch::softmax(in.at(0), -1); };
    case LayerType::maxpool1d: {
      std::vector<std::int64_t> kernel = l.kernel, stride = l.stride, padding = l.padding;
      const bool ceil = l.ceil_mode;
      return [kernel, stride, padding, ceil](const Inputs& in) {
        return torch::max_pool1d(in.at(0), kernel, stride, padding, 1, ceil);
      };
    }
    case LayerType::maxpool2d: {
      std::vector<std::int64_t> kernel = l.kernel, stride = l.stride, padding = l.padding;
      const bool ceil = l.ceil_mode;
      return [kernel, stride, padding, ceil](const Inputs& in) {
        return torch::max_pool2d(in.at(0), kernel, stride, padding, 1, ceil);
      };
    }
    case LayerType::avgpool2d: {
      std::vector<std::int64_t> kernel = l.kernel, stride = l.stride, padding = l.padding;
      const bool ceil = l.ceil_mode;
      return [kernel, stride, padding, ceil](const Inputs& in) {
        return torch::avg_pool2d(in.at(0), kernel, stride, padding, ceil);
      };
    }
    case LayerType::adaptive_avgpool2d: {
      std::vector<std::int64_t> output_size = l.output_size;
      return [output_size](const Inputs& in) {
        return torch::adaptive_avg_pool2d(in.at(0), output_size);
      };
    }
    case LayerType::flatten:
      return [](const Inputs& in) { return in.at(0).flatten(1); };
    case LayerType::reshape: {
      // The analysis has already resolved the -1.
      std::vector<std::int64_t> per_sample = costs.output_shape.dims;
      return [per_sample](const Inputs& in) {
        std::vector<std::int64_t> shape{in.at(0).size(0)};
        shape.insert(shape.end(), per_sample.begin(), per_sample.end());
        return in.at(0).reshape(shape);
      };
    }
    case LayerType::dropout: {
      auto dropout = register_module(registered, nn::Dropout(nn::DropoutOptions(l.dropout)));
      return [dropout](const Inputs& in) { return dropout->forward(in.at(0)); };
    }
    case LayerType::embedding: {
      auto table = register_module(
          registered, nn::Embedding(nn::EmbeddingOptions(l.num_embeddings, l.embedding_dim)));
      embeddings_.emplace(l.name, table);
      return [table](const Inputs& in) { return table->forward(in.at(0)); };
    }
    case LayerType::position_embedding: {
      if (l.positions_from_input) {
        auto positions =
            register_module(registered, LearnedPositions(l.num_embeddings, costs.in_features));
        return [positions](const Inputs& in) { return positions->forward(in.at(0)); };
      }
      auto table = register_module(
          registered, nn::Embedding(nn::EmbeddingOptions(l.num_embeddings, costs.in_features)));
      return [table](const Inputs& in) {
        const torch::Tensor& x = in.at(0);
        torch::Tensor positions =
            torch::arange(x.size(1), torch::TensorOptions().dtype(torch::kLong).device(x.device()));
        return x + table->forward(positions);
      };
    }
    case LayerType::token_type_embedding: {
      auto table = register_module(
          registered, nn::Embedding(nn::EmbeddingOptions(l.num_embeddings, costs.in_features)));
      return [table](const Inputs& in) {
        const torch::Tensor& x = in.at(0);
        // Every token is of type 0 (single-segment inputs), as a tokenizer gives them.
        torch::Tensor types = torch::zeros(
            {x.size(1)}, torch::TensorOptions().dtype(torch::kLong).device(x.device()));
        return x + table->forward(types);
      };
    }
    case LayerType::token_select: {
      std::int64_t index = l.index;
      return [index](const Inputs& in) { return in.at(0).select(1, index); };
    }
    case LayerType::conv_transpose2d: {
      auto conv = register_module(
          registered, nn::ConvTranspose2d(
                          nn::ConvTranspose2dOptions(costs.in_features, l.out_features, l.kernel)
                              .stride(l.stride)
                              .padding(torch::ExpandingArray<2>(l.padding))
                              .output_padding(torch::ExpandingArray<2>(l.output_padding))
                              .dilation(l.dilation)
                              .groups(l.groups)
                              .bias(l.bias)));
      return [conv](const Inputs& in) { return conv->forward(in.at(0)); };
    }
    case LayerType::upsample: {
      // The analysis' output size: for integer factors the same sampling as scale_factor.
      std::vector<std::int64_t> size(costs.output_shape.dims.begin() + 1,
                                     costs.output_shape.dims.end());
      auto options = nn::functional::InterpolateFuncOptions().size(size);
      if (l.bilinear) {
        options.mode(torch::kBilinear).align_corners(l.align_corners);
      } else {
        options.mode(torch::kNearest);
      }
      return [options](const Inputs& in) { return nn::functional::interpolate(in.at(0), options); };
    }
    case LayerType::permute:
    case LayerType::transpose: {
      // The analysis resolved both into a full per-sample permutation; the copy is costed.
      std::vector<std::int64_t> order = batched_permutation(l.permutation);
      return [order](const Inputs& in) { return in.at(0).permute(order).contiguous(); };
    }
    case LayerType::concat: {
      std::int64_t dim = l.dim + 1;  // resolved by the analysis; past the batch dimension
      return [dim](const Inputs& in) { return torch::cat(in, dim); };
    }
    case LayerType::class_token: {
      auto token = register_module(registered, ClassToken(l.tokens, costs.in_features));
      return [token](const Inputs& in) { return token->forward(in.at(0)); };
    }
    case LayerType::multihead_attention: {
      auto attention = register_module(registered, SelfAttention(costs.in_features, l));
      return [attention](const Inputs& in) { return attention->forward(in.at(0)); };
    }
    case LayerType::add:  // a written join of two outputs (a residual's join is built apart)
      return [](const Inputs& in) { return in.at(0) + in.at(1); };
    case LayerType::mul:
      return [](const Inputs& in) { return in.at(0) * in.at(1); };
  }
  broken(fmt::format("layer '{}' ({}) is not a primitive", l.name, name_of(l.type)));
}

std::size_t TorchModelImpl::layer_count() const {
  return steps_.size();
}

const LayerCosts& TorchModelImpl::layer_costs(std::size_t i) const {
  return analysis_->layers.at(i);
}

std::vector<torch::Tensor> TorchModelImpl::layer_parameters(std::size_t i) {
  // make_layer registers a layer's module under the layer's name, or nothing.
  const std::string registered = module_name(layer_costs(i).layer.name);
  const torch::OrderedDict<std::string, std::shared_ptr<torch::nn::Module>> children =
      named_children();
  if (const auto* module = children.find(registered)) return (*module)->parameters();
  return {};
}

torch::Tensor TorchModelImpl::run_layer(std::size_t i, const std::vector<torch::Tensor>& inputs) {
  const Step& step = *steps_.at(i);
  if (inputs.size() != step.reads.size()) {
    broken(fmt::format("layer {} ('{}') takes {} inputs, got {}", i, layer_costs(i).layer.name,
                       step.reads.size(), inputs.size()));
  }
  return step.compute(inputs);
}

torch::Tensor TorchModelImpl::forward(torch::Tensor input) {
  return run(std::move(input), nullptr);
}

torch::Tensor TorchModelImpl::forward_recording(
    torch::Tensor input, std::vector<std::vector<torch::Tensor>>& layer_inputs) {
  return run(std::move(input), &layer_inputs);
}

torch::Tensor TorchModelImpl::run(torch::Tensor input,
                                  std::vector<std::vector<torch::Tensor>>* layer_inputs) {
  std::vector<torch::Tensor> values(value_count_);
  values[0] = std::move(input);
  if (layer_inputs) {
    layer_inputs->clear();
    layer_inputs->reserve(steps_.size());
  }
  Inputs args;
  for (const std::shared_ptr<Step>& step : steps_) {
    for (std::size_t slot : step->reads)
      args.push_back(values[slot]);
    if (layer_inputs) {
      std::vector<torch::Tensor>& recorded = layer_inputs->emplace_back();
      for (const torch::Tensor& arg : args)
        recorded.push_back(arg.detach());
    }
    const std::size_t layer = static_cast<std::size_t>(&step - steps_.data());
    if (hooks_.before) hooks_.before(layer);
    values[step->writes] = step->compute(args);
    if (hooks_.after) hooks_.after(layer, values[step->writes]);
    args.clear();  // so a released slot's tensor is freed now, not one step later
    for (std::size_t slot : step->releases)
      values[slot] = torch::Tensor();
  }
  return values[output_value_];
}

TorchModel build_torch_model(const ModelSpec& spec) {
  CostOptions fp32;
  fp32.activation_dtype = DType::float32;
  fp32.parameter_dtype = DType::float32;
  auto analysis = std::make_shared<const ModelAnalysis>(analyze_model(spec, fp32));
  return TorchModel(std::make_shared<const ModelSpec>(spec), std::move(analysis));
}

std::int64_t input_vocabulary(const ModelAnalysis& analysis) {
  if (!is_integer(analysis.input_dtype)) return 0;
  for (const LayerCosts& layer : analysis.layers) {
    if (layer.layer.type == LayerType::embedding) return layer.layer.num_embeddings;
  }
  return 0;
}

torch::Tensor random_model_input(const ModelAnalysis& analysis, std::int64_t batch,
                                 torch::Generator generator) {
  std::vector<std::int64_t> shape{batch};
  shape.insert(shape.end(), analysis.input_shape.dims.begin(), analysis.input_shape.dims.end());
  torch::TensorOptions options;
  if (generator.defined()) options = options.device(generator.device());
  if (!is_integer(analysis.input_dtype)) {
    options = options.dtype(torch::kFloat);
    return generator.defined() ? torch::randn(shape, generator, options)
                               : torch::randn(shape, options);
  }
  std::int64_t vocabulary = input_vocabulary(analysis);
  if (vocabulary == 0) {
    throw std::invalid_argument(
        fmt::format("model '{}' takes {} inputs but has no embedding to bound their values",
                    analysis.model_name, name_of(analysis.input_dtype)));
  }
  options = options.dtype(torch::kLong);
  return generator.defined() ? torch::randint(0, vocabulary, shape, generator, options)
                             : torch::randint(0, vocabulary, shape, options);
}

}  // namespace epochcast::runtime

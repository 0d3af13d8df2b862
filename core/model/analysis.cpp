// Walks a model spec: shapes flow layer to layer, residual blocks fork and join, and every
// tensor held for backward is counted once however many layers hold it.
#include "core/model/analysis.h"

#include <algorithm>
#include <array>
#include <map>
#include <stdexcept>

#include <fmt/format.h>

#include "core/model/kernel_launches.h"
#include "core/model/layer_costs.h"

namespace epochcast {

namespace {

template <typename Q>
PerBatch<Q> sum(const std::vector<KernelWork>& kernels, PerBatch<Q> KernelWork::*field) {
  PerBatch<Q> total;
  for (const KernelWork& k : kernels)
    total += k.*field;
  return total;
}

// A tensor flowing through the model, as autograd sees it: its size, whether it requires a
// gradient, and whether something already holds it for backward.
struct Tensor {
  Bytes bytes_per_sample;
  DType dtype = DType::float32;
  bool requires_grad = false;
  bool held = false;
};

class Analyzer {
 public:
  Analyzer(const ModelSpec& spec, const CostOptions& options) : spec_(spec), options_(options) {}

  ModelAnalysis run() {
    ModelAnalysis result;
    result.model_name = spec_.name;
    result.input_shape = spec_.input_shape;
    result.input_dtype = spec_.input_dtype;
    result.options = options_;
    Flow input{spec_.input_shape, new_tensor(spec_.input_shape, spec_.input_dtype, false),
               new_value()};
    outputs_.emplace(std::string(kModelInput), input);
    Flow out = sequence(spec_.layers, input);
    result.output_shape = out.shape;
    result.layers = std::move(layers_);
    summarise(result);
    return result;
  }

 private:
  // A value flowing between layers: its shape, the storage it lives in (views share one), and
  // which output it is (each layer's output is a value of its own, even when it aliases).
  struct Flow {
    TensorShape shape;
    std::size_t tensor = 0;
    std::size_t value = 0;
  };

  std::size_t new_value() {
    readers_.push_back(0);
    return readers_.size() - 1;
  }

  std::size_t new_tensor(const TensorShape& shape, DType dtype, bool requires_grad) {
    tensors_.push_back(
        Tensor{Bytes(shape.elements() * element_bytes(dtype)), dtype, requires_grad, false});
    return tensors_.size() - 1;
  }

  Bytes hold(std::size_t tensor) {
    if (tensors_[tensor].held) return Bytes(0);
    tensors_[tensor].held = true;
    return tensors_[tensor].bytes_per_sample;
  }

  [[noreturn]] void fail(const Layer& layer, const std::string& problem) const {
    throw InputError(
        layer.mark,
        fmt::format("layer {} '{}' ({})", layers_.size() + 1, layer.name, name_of(layer.type)),
        problem);
  }

  Flow sequence(const std::vector<ModelNode>& nodes, Flow flow) {
    for (const ModelNode& node : nodes) {
      if (!node.inputs.empty()) {
        std::vector<Flow> inputs = named_inputs(node);
        const bool joins = node.kind == ModelNode::Kind::layer &&
                           (node.layer.type == LayerType::add || node.layer.type == LayerType::mul);
        if (node.kind == ModelNode::Kind::layer && node.layer.type == LayerType::concat) {
          flow = concat(node.layer, inputs);
        } else if (joins) {
          flow = binary(node.layer, inputs);
        } else {
          flow = node.kind == ModelNode::Kind::layer ? primitive(node.layer, inputs.front())
                                                     : residual(node, inputs.front());
        }
      } else {
        flow = node.kind == ModelNode::Kind::layer ? primitive(node.layer, flow)
                                                   : residual(node, flow);
      }
      outputs_[node.kind == ModelNode::Kind::layer ? node.layer.name : node.name] = flow;
    }
    return flow;
  }

  // The outputs a node names. A value that something has already read gets its gradients from
  // more than one consumer, which autograd sums: one add per extra reader, in this node's
  // backward. (Residual blocks count their own fork's sum at their join.)
  std::vector<Flow> named_inputs(const ModelNode& node) {
    std::vector<Flow> inputs;
    for (const std::string& name : node.inputs) {
      auto found = outputs_.find(name);
      if (found == outputs_.end()) {
        throw std::logic_error("model analysis: '" + name + "' was not computed before its reader");
      }
      const Flow& flow = found->second;
      if (readers_[flow.value] > 0 && tensors_[flow.tensor].requires_grad) {
        pending_gradient_sums_.push_back(flow.shape.elements());
      }
      ++readers_[flow.value];
      inputs.push_back(flow);
    }
    return inputs;
  }

  Flow concat(const Layer& layer, const std::vector<Flow>& inputs) {
    std::vector<TensorShape> shapes;
    bool needs_grad = false;
    for (const Flow& in : inputs) {
      shapes.push_back(in.shape);
      needs_grad = needs_grad || tensors_[in.tensor].requires_grad;
      if (is_integer(tensors_[in.tensor].dtype)) {
        fail(layer, "gets integer token ids; a concat joins activations");
      }
    }
    detail::PrimitiveCosts p;
    try {
      p = detail::cost_concat(layer, shapes, needs_grad, options_);
    } catch (const detail::ShapeProblem& problem) {
      fail(layer, problem.what());
    }
    // The output needs a gradient when any part does; commit reads that from its input.
    Flow first = inputs.front();
    for (const Flow& in : inputs) {
      if (tensors_[in.tensor].requires_grad) first = in;
    }
    return commit(std::move(p), first);
  }

  // A written add or mul of two outputs. The output needs a gradient when either input does;
  // a product holds each factor that the other's gradient needs.
  Flow binary(const Layer& layer, const std::vector<Flow>& inputs) {
    std::array<bool, 2> grads{};
    for (std::size_t i = 0; i < 2; ++i) {
      if (is_integer(tensors_[inputs[i].tensor].dtype)) {
        fail(layer,
             fmt::format("gets integer token ids; an {} joins activations", name_of(layer.type)));
      }
      grads[i] = tensors_[inputs[i].tensor].requires_grad;
    }
    detail::PrimitiveCosts p;
    try {
      p = detail::cost_binary(layer, inputs[0].shape, inputs[1].shape, grads, options_);
    } catch (const detail::ShapeProblem& problem) {
      fail(layer, problem.what());
    }
    if (p.saves_second_input) p.saved_extra.per_sample += hold(inputs[1].tensor);
    return commit(std::move(p), inputs[0], grads[1]);
  }

  Flow primitive(const Layer& layer, const Flow& in) {
    ++readers_[in.value];
    const Tensor& input = tensors_[in.tensor];
    detail::PrimitiveCosts p;
    try {
      p = detail::cost_primitive(layer, in.shape, input.dtype, input.requires_grad, options_);
    } catch (const detail::ShapeProblem& problem) {
      fail(layer, problem.what());
    }
    return commit(std::move(p), in);
  }

  // `also_requires_grad`: another input of the layer needs a gradient (`in` is its first).
  Flow commit(detail::PrimitiveCosts p, const Flow& in, bool also_requires_grad = false) {
    LayerCosts& c = p.costs;
    std::int64_t elements = 1;
    for (std::int64_t d : c.output_shape.dims) {
      if (d <= 0)
        fail(c.layer, fmt::format("its output {} has an empty dimension", c.output_shape.str()));
      if (d > kMaxTensorElements / elements) {
        fail(c.layer, fmt::format("its output would hold more than {} elements per sample",
                                  kMaxTensorElements));
      }
      elements *= d;
    }
    bool output_requires_grad = tensors_[in.tensor].requires_grad || also_requires_grad ||
                                c.params > 0 || !c.layer.tied_to.empty();
    // Autograd records nothing for a layer whose input and parameters need no gradient.
    if (!output_requires_grad) {
      c.backward_input.clear();
      c.backward_weight.clear();
      p.saves_input = p.saves_output = false;
      p.saved_extra = {};
    }
    // Gradients summed for a value that this node read besides another consumer.
    if (output_requires_grad) {
      for (std::int64_t summed : pending_gradient_sums_)
        c.backward_input.push_back(gradient_sum(summed));
    }
    pending_gradient_sums_.clear();
    Flow out;
    out.shape = c.output_shape;
    out.value = new_value();
    const bool keeps_dtype =
        c.layer.type == LayerType::reshape || c.layer.type == LayerType::flatten ||
        c.layer.type == LayerType::permute || c.layer.type == LayerType::transpose;
    DType out_dtype = keeps_dtype ? tensors_[in.tensor].dtype : options_.activation_dtype;
    out.tensor = p.output_aliases_input
                     ? in.tensor
                     : new_tensor(c.output_shape, out_dtype, output_requires_grad);
    tensors_[out.tensor].requires_grad = output_requires_grad;
    c.saved = p.saved_extra;
    if (p.saves_input) c.saved.per_sample += hold(in.tensor);
    if (p.saves_output) c.saved.per_sample += hold(out.tensor);
    if (is_torch_module(c.layer.type)) {
      c.display_name = fmt::format("{}-{}", torch_class_name(c.layer.type), ++module_count_);
    }
    check_tie(c);
    layers_.push_back(std::move(c));
    return out;
  }

  // Autograd's sum of two gradients that reach one value: an add over its elements per sample.
  KernelWork gradient_sum(std::int64_t elements) const {
    const std::int64_t a = element_bytes(options_.activation_dtype);
    KernelWork sum;
    sum.name = "add";
    sum.op_class = OpClass::elementwise;
    sum.flops = {Flops(elements), Flops(0)};
    sum.bytes = {Bytes(3 * a * elements), Bytes(0)};
    sum.launch = launch::elementwise({elements, 0});
    return sum;
  }

  // A linear layer tied to an embedding uses that embedding's table as its weight.
  void check_tie(const LayerCosts& c) {
    if (c.layer.tied_to.empty()) return;
    for (const LayerCosts& other : layers_) {
      if (other.layer.name != c.layer.tied_to) continue;
      if (other.layer.type != LayerType::embedding) {
        fail(c.layer, fmt::format("tied_to '{}' must name an embedding, not a {}", c.layer.tied_to,
                                  name_of(other.layer.type)));
      }
      if (other.layer.num_embeddings != c.layer.out_features ||
          other.layer.embedding_dim != c.in_features) {
        fail(c.layer, fmt::format("cannot share the {}x{} table of '{}' with a {}->{} linear layer",
                                  other.layer.num_embeddings, other.layer.embedding_dim,
                                  c.layer.tied_to, c.in_features, c.layer.out_features));
      }
      return;
    }
    fail(c.layer, fmt::format("tied_to '{}' names no earlier layer", c.layer.tied_to));
  }

  Flow residual(const ModelNode& node, const Flow& in) {
    Flow body = sequence(node.body, in);
    bool same_shape = body.shape == in.shape;
    Layer join;
    join.type = LayerType::add;
    join.name = node.name + ".add";
    join.mark = node.mark;
    join.block = node.layer.block;  // the block the residual is a part of, if any
    if (node.rule == ModelNode::ResidualRule::add_if_shape_kept && !same_shape) return body;
    Flow shortcut = in;
    bool use_shortcut =
        node.rule == ModelNode::ResidualRule::always ||
        (node.rule == ModelNode::ResidualRule::project_if_shape_changes && !same_shape);
    if (use_shortcut) shortcut = sequence(node.shortcut, in);
    if (body.shape != shortcut.shape) {
      fail(join, fmt::format("the residual branches disagree: the body gives {} but the shortcut "
                             "gives {}",
                             body.shape.str(), shortcut.shape.str()));
    }
    bool fork_grad = tensors_[in.tensor].requires_grad;
    detail::PrimitiveCosts p;
    if (node.join == LayerType::mul) {  // a gated block: body * shortcut
      join.type = LayerType::mul;
      join.name = node.name + ".mul";
      p = detail::cost_binary(
          join, body.shape, shortcut.shape,
          {tensors_[body.tensor].requires_grad, tensors_[shortcut.tensor].requires_grad}, options_);
      if (fork_grad) {  // the gradients from both branches summed at the fork
        p.costs.backward_input.push_back(gradient_sum(in.shape.elements()));
      }
      if (p.saves_second_input) p.saved_extra.per_sample += hold(shortcut.tensor);
    } else {
      p = detail::cost_residual_add(join, body.shape, fork_grad, options_);
    }
    p.costs.needs_input_grad =
        tensors_[body.tensor].requires_grad || tensors_[shortcut.tensor].requires_grad;
    return commit(std::move(p), body);
  }

  void summarise(ModelAnalysis& r) const {
    std::int64_t module_outputs = 0;
    for (const LayerCosts& c : r.layers) {
      r.params += c.params;
      r.buffers += c.buffers;
      r.macs_per_sample += c.macs_per_sample;
      r.forward_flops += c.forward_flops();
      r.backward_input_flops += c.backward_input_flops();
      r.backward_weight_flops += c.backward_weight_flops();
      r.saved_activations += c.saved;
      r.forward_kernels += static_cast<std::int64_t>(c.forward_kernels());
      r.backward_kernels += static_cast<std::int64_t>(c.backward_kernels());
      r.param_tensors.insert(r.param_tensors.end(), c.param_tensors.begin(), c.param_tensors.end());
      if (is_torch_module(c.layer.type)) module_outputs += c.output_shape.elements();
    }
    // torchsummary counts float32 (4 bytes) and MB = 2^20 bytes; "forward/backward" doubles the
    // module outputs to account for their gradients.
    constexpr double kMB = 1024.0 * 1024.0;
    r.torchsummary_input_mb = static_cast<double>(r.input_shape.elements()) * 4.0 / kMB;
    r.torchsummary_forward_backward_mb = 2.0 * static_cast<double>(module_outputs) * 4.0 / kMB;
    r.torchsummary_params_mb = static_cast<double>(r.params) * 4.0 / kMB;
  }

  const ModelSpec& spec_;
  CostOptions options_;
  std::vector<Tensor> tensors_;
  std::vector<int> readers_;                         // per value: the layers that have read it
  std::map<std::string, Flow> outputs_;              // per node name (and kModelInput): its output
  std::vector<std::int64_t> pending_gradient_sums_;  // elements, for the next committed layer
  std::vector<LayerCosts> layers_;
  int module_count_ = 0;
};

}  // namespace

StridePhases stride_phases(const ConvGeometry& g) {
  StridePhases phases;
  for (int d = 0; d < g.spatial_dims && d < 2; ++d) {
    const std::int64_t stride = std::max<std::int64_t>(1, g.stride[d]);
    phases.all *= stride;
    phases.with_taps *= std::min(stride, std::max<std::int64_t>(1, g.window[d]));
  }
  return phases;
}

PerBatch<Flops> LayerCosts::forward_flops() const {
  return sum(forward, &KernelWork::flops);
}
PerBatch<Flops> LayerCosts::backward_input_flops() const {
  return sum(backward_input, &KernelWork::flops);
}
PerBatch<Flops> LayerCosts::backward_weight_flops() const {
  return sum(backward_weight, &KernelWork::flops);
}
PerBatch<Bytes> LayerCosts::forward_bytes() const {
  return sum(forward, &KernelWork::bytes);
}
PerBatch<Bytes> LayerCosts::backward_bytes() const {
  PerBatch<Bytes> total = sum(backward_input, &KernelWork::bytes);
  total += sum(backward_weight, &KernelWork::bytes);
  return total;
}

ModelAnalysis analyze_model(const ModelSpec& spec, const CostOptions& options) {
  return Analyzer(spec, options).run();
}

OutputClasses output_classes(const TensorShape& output) {
  OutputClasses classes;
  if (output.rank() >= 3) {  // [classes, height, width]: a label per pixel
    classes.classes = output.dims[0];
    classes.label_shape.assign(output.dims.begin() + 1, output.dims.end());
  } else {  // [classes], or [tokens, classes]: a label per sample or per token
    classes.classes = output.last();
    classes.label_shape.assign(output.dims.begin(), output.dims.end() - 1);
  }
  for (std::int64_t d : classes.label_shape)
    classes.labels_per_sample *= d;
  return classes;
}

LayerCosts cross_entropy_costs(const TensorShape& logits, const CostOptions& options) {
  std::int64_t a = element_bytes(options.activation_dtype);
  const OutputClasses classes = output_classes(logits);
  std::int64_t e = logits.elements(), rows = classes.labels_per_sample;
  LayerCosts c;
  c.layer.type = LayerType::softmax;
  c.layer.name = "loss";
  c.input_shape = logits;
  c.output_shape.dims = {};
  auto work = [](std::string_view name, OpClass op, std::int64_t f, std::int64_t b,
                 KernelLaunch launch) {
    KernelWork k;
    k.name = name;
    k.op_class = op;
    k.flops = {Flops(f), Flops(0)};
    k.bytes = {Bytes(b), Bytes(0)};
    k.launch = launch;
    return k;
  };
  // How the loss launches (SoftMax.cu, Loss.cu, NLLLoss2d.cu): scores of [classes] or [tokens,
  // classes] are log-softmaxed along rows and the mean NLL is one block of 32 threads; scores
  // of [classes, height, width] run the spatial log-softmax over the classes of each pixel and
  // NLLLoss2d's blocks of 1,024 threads, max(1, ceil(pixels / 1,024) / 128) per sample. The
  // backward zeroes the input gradient, then writes each label's entry. autocast computes the
  // loss in float32 (its list of float32 ops), whatever the scores' type.
  const bool per_pixel = classes.label_shape.size() >= 2;
  const KernelLaunch softmax = per_pixel ? launch::spatial_softmax(rows, classes.classes)
                                         : launch::softmax({rows, 0}, classes.classes, 4);
  const KernelLaunch nll =
      per_pixel
          ? launch::blocks_of({std::max<std::int64_t>(1, (rows + 1023) / 1024 / 128), 0}, 1, 1024)
          : launch::single_block(32);
  // Passes of the row kernels (launch::softmax_half_passes); the spatial kernel's as two and
  // three. log_softmax's backward needs no product first (softmax's does).
  const std::int64_t forward_half =
      per_pixel ? 4 : launch::softmax_half_passes(classes.classes, 4, false);
  const std::int64_t backward_half =
      per_pixel ? 6 : launch::softmax_half_passes(classes.classes, 4, true);
  c.forward.push_back(
      work("log_softmax", OpClass::normalization, 5 * e, forward_half * a * e / 2, softmax));
  c.forward.push_back(work("nll_loss", OpClass::reduction, rows, a * rows + 8 * rows, nll));
  c.backward_input.push_back(
      work("zero_", OpClass::elementwise, 0, a * e, launch::elementwise({e, 0})));
  c.backward_input.push_back(
      work("nll_loss_backward", OpClass::elementwise, rows, a * rows + 8 * rows, nll));
  c.backward_input.push_back(work("log_softmax_backward", OpClass::normalization, 4 * e,
                                  backward_half * a * e / 2, softmax));
  c.saved = {Bytes(a * e + 8 * rows), Bytes(0)};  // log-probabilities and targets
  return c;
}

}  // namespace epochcast

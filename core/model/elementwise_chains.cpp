// Layers that eager PyTorch runs as chains of small kernels, each one pass over memory, with
// backwards that autograd assembles from each op's own: Hugging Face's RMSNorm and NewGELU,
// torchvision's stochastic depth, a learned scale, and the element-wise joins of two outputs
// (add, mul) with PyTorch's broadcasting.
#include <algorithm>

#include "core/model/cost_building.h"

namespace epochcast::detail {

// Hugging Face's LlamaRMSNorm (also Mistral's, Qwen2's), as its forward is written:
//   x32 = x.to(float32); variance = x32.pow(2).mean(-1, keepdim=True)
//   y32 = x32 * rsqrt(variance + eps); return weight * y32.to(x.dtype)
// The casts are copies when activations are 16-bit and nothing in float32. Forward: [copy], pow,
// mean (a row reduction), add and rsqrt over one value per row, mul, [copy], mul by the weight.
// Backward, as autograd derives it op by op: the weight's gradient (dy·y, summed over rows); the
// input's: dy·weight, [copy], the two factors' gradients (one summed over the row for the
// rsqrt), rsqrt's backward over the per-row values (pow, mul, mul), mean's (a division that
// spreads each row's value), pow's (pow, mul, mul), the two uses of x32 summed, [copy].
PrimitiveCosts rmsnorm_costs(PrimitiveCosts p, const CostOptions& o, bool needs_grad) {
  const TensorShape& in = p.costs.input_shape;
  const I64 a = element_bytes(o.activation_dtype), w = element_bytes(o.parameter_dtype);
  const I64 d = in.last(), e = elements(in), rows = e / d;
  const bool cast = a != 4;
  p.costs.in_features = narrow(d);
  p.costs.output_shape = in;
  add_param(p.costs, "weight", d);
  auto row_values = [&](std::string_view name, I64 reads) {
    return elementwise(name, rows, 4 * (reads + 1) * rows, rows);
  };
  const KernelLaunch row_sums = launch::reduction(count(rows), count(0, d), ReductionLayout::rows);

  auto& f = p.costs.forward;
  if (cast) f.push_back(elementwise("copy", 0, (a + 4) * e, e));
  f.push_back(elementwise("pow", e, 8 * e, e));
  f.push_back(kernel("mean", OpClass::reduction, flops(e), bytes(4 * e + 4 * rows), row_sums));
  f.push_back(row_values("add", 1));
  f.push_back(row_values("rsqrt", 1));
  f.push_back(elementwise("mul", e, 8 * e + 4 * rows, e));
  if (cast) f.push_back(elementwise("copy", 0, (4 + a) * e, e));
  f.push_back(kernel("mul", OpClass::elementwise, flops(e), bytes(2 * a * e, w * d), each(e)));

  // The weight's gradient: dy times the normalised rows, summed over the rows.
  auto& bw = p.costs.backward_weight;
  bw.push_back(elementwise("mul", e, 3 * a * e, e));
  bw.push_back(kernel("sum", OpClass::reduction, flops(e), bytes(a * e, w * d),
                      launch::reduction(count(0, d), count(rows), ReductionLayout::columns)));
  if (needs_grad) {
    auto& b = p.costs.backward_input;
    b.push_back(kernel("mul", OpClass::elementwise, flops(e), bytes(2 * a * e, w * d), each(e)));
    if (cast) b.push_back(elementwise("copy", 0, (a + 4) * e, e));
    b.push_back(elementwise("mul", e, 8 * e + 4 * rows, e));  // d(x32) = g·rstd
    b.push_back(elementwise("mul", e, 12 * e, e));            // g·x32, summed per row:
    b.push_back(kernel("sum", OpClass::reduction, flops(e), bytes(4 * e + 4 * rows), row_sums));
    b.push_back(row_values("pow", 1));  // rsqrt's backward: -0.5·g·rstd³
    b.push_back(row_values("mul", 2));
    b.push_back(row_values("mul", 1));
    b.push_back(elementwise("div", e, 4 * rows + 4 * e, e));  // mean's: spread over the row
    b.push_back(elementwise("pow", e, 8 * e, e));             // pow's: g·2·x32
    b.push_back(elementwise("mul", e, 8 * e, e));
    b.push_back(elementwise("mul", e, 12 * e, e));
    b.push_back(elementwise("add", e, 12 * e, e));  // x32's two uses
    if (cast) b.push_back(elementwise("copy", 0, (4 + a) * e, e));
  }
  // Held: x32 (the input itself in float32), the per-row rstd, and the normalised rows in the
  // activations' type (for the weight's gradient).
  p.saves_input = !cast;
  p.saved_extra = bytes((cast ? 4 * e : 0) + 4 * rows + a * e);
  return p;
}

// Hugging Face's NewGELUActivation (GPT-2's "gelu_new"), computed as written:
//   0.5 * x * (1.0 + tanh(sqrt(2 / pi) * (x + 0.044715 * pow(x, 3.0))))
// eight kernels forward (mul, pow, mul, add, mul, tanh, add, mul), and eleven backward: the
// last product's two gradients, tanh's, the two scalings', pow's (pow, mul, mul), 0.5·x's, and
// the three gradients that reach x summed (two adds). One F.gelu(approximate='tanh') kernel
// computes the same function (`gelu` with `approximate: tanh`).
PrimitiveCosts gelu_new_costs(PrimitiveCosts p, const CostOptions& o, bool needs_grad) {
  const I64 a = element_bytes(o.activation_dtype), e = elements(p.costs.input_shape);
  p.costs.output_shape = p.costs.input_shape;
  const KernelWork unary = elementwise("mul", e, 2 * a * e, e);
  const KernelWork binary = elementwise("mul", e, 3 * a * e, e);
  auto named = [](KernelWork k, std::string_view name, I64 flop_each, I64 e_) {
    k.name = name;
    k.flops = flops(flop_each * e_);
    return k;
  };
  auto& f = p.costs.forward;
  f.push_back(unary);                       // 0.5 * x
  f.push_back(named(unary, "pow", 2, e));   // x³
  f.push_back(unary);                       // 0.044715 * x³
  f.push_back(named(binary, "add", 1, e));  // x + ...
  f.push_back(unary);                       // sqrt(2/pi) * (...)
  f.push_back(named(unary, "tanh", 4, e));  // tanh
  f.push_back(named(unary, "add", 1, e));   // 1 + tanh
  f.push_back(binary);                      // 0.5x * (1 + tanh)
  if (needs_grad) {
    auto& b = p.costs.backward_input;
    b.push_back(binary);                                // d(0.5x) = g·(1 + t)
    b.push_back(binary);                                // d(1 + t) = g·0.5x
    b.push_back(named(binary, "tanh_backward", 3, e));  // ·(1 - t²)
    b.push_back(unary);                                 // ·sqrt(2/pi)
    b.push_back(unary);                                 // ·0.044715
    b.push_back(named(unary, "pow", 2, e));             // pow's: x²,
    b.push_back(unary);                                 // ·3,
    b.push_back(binary);                                // ·g
    b.push_back(unary);                                 // 0.5x's: ·0.5
    b.push_back(named(binary, "add", 1, e));            // x's three gradients summed
    b.push_back(named(binary, "add", 1, e));
  }
  // Held: x (for pow's backward), 0.5x and 1 + t (each other's factor), t (tanh's backward).
  p.saves_input = true;
  p.saved_extra = bytes(3 * a * e);
  return p;
}

// torchvision.ops.stochastic_depth in "row" mode, as written: a [batch, 1, ...] noise tensor
// drawn with bernoulli_ and divided by the survival rate (two kernels over one value a sample),
// then input * noise; its backward multiplies the gradient by the same noise. At p = 0 it
// returns the input untouched.
PrimitiveCosts stochastic_depth_costs(PrimitiveCosts p, const CostOptions& o, bool needs_grad) {
  const I64 a = element_bytes(o.activation_dtype), e = elements(p.costs.input_shape);
  p.costs.output_shape = p.costs.input_shape;
  if (p.costs.layer.dropout == 0) {
    p.output_aliases_input = true;
    return p;
  }
  auto per_sample = [&](std::string_view name, I64 byte) {
    KernelWork k = elementwise(name, 1, byte, 1);
    k.training_only = true;
    return k;
  };
  p.costs.forward.push_back(per_sample("bernoulli_", a));
  p.costs.forward.push_back(per_sample("div_", 2 * a));
  KernelWork scale = elementwise("mul", e, 2 * a * e + a, e);
  scale.training_only = true;
  p.costs.forward.push_back(scale);
  if (needs_grad) p.costs.backward_input.push_back(elementwise("mul", e, 2 * a * e + a, e));
  p.saved_extra = bytes(a);  // the noise, one value a sample
  return p;
}

// A learned tensor of `shape` (per sample, aligned at the last dimension, each size the
// input's or 1) multiplied in: ConvNeXt's `layer_scale * x`. Forward one mul; backward the
// input's gradient (g·w) and the tensor's (g·x, summed back to its shape).
PrimitiveCosts scale_costs(PrimitiveCosts p, const CostOptions& o, bool needs_grad) {
  const TensorShape& in = p.costs.input_shape;
  const std::vector<Count>& shape = p.costs.layer.target_shape;
  if (shape.size() > in.rank()) {
    problem(fmt::format("a learned [{}] does not broadcast over {}", dims_str(shape), in.str()));
  }
  for (std::size_t k = 0; k < shape.size(); ++k) {
    const Count mine = shape[shape.size() - 1 - k], theirs = in.dims[in.rank() - 1 - k];
    if (mine != 1 && mine != theirs) {
      problem(
          fmt::format("a learned [{}] does not broadcast over {}: each size must be the "
                      "input's or 1",
                      dims_str(shape), in.str()));
    }
  }
  const I64 a = element_bytes(o.activation_dtype), w = element_bytes(o.parameter_dtype);
  const I64 e = elements(in), n = product(shape);
  p.costs.output_shape = in;
  add_param(p.costs, "weight", n);
  p.costs.forward.push_back(
      kernel("mul", OpClass::elementwise, flops(e), bytes(2 * a * e, w * n), each(e)));
  if (needs_grad) {
    p.costs.backward_input.push_back(
        kernel("mul", OpClass::elementwise, flops(e), bytes(2 * a * e, w * n), each(e)));
  }
  p.costs.backward_weight.push_back(elementwise("mul", e, 3 * a * e, e));
  if (n < e) {
    p.costs.backward_weight.push_back(
        kernel("sum", OpClass::reduction, flops(e), bytes(a * e, w * n),
               launch::reduction(count(0, n), count(e / n), ReductionLayout::columns)));
  }
  p.saves_input = true;
  return p;
}

PrimitiveCosts cost_binary(const Layer& layer, const TensorShape& first, const TensorShape& second,
                           std::array<bool, 2> grads, const CostOptions& options) {
  PrimitiveCosts p;
  p.costs.layer = layer;
  p.costs.input_shape = first;
  p.costs.needs_input_grad = grads[0] || grads[1];
  const TensorShape* shapes[2] = {&first, &second};
  // PyTorch's broadcasting, aligned at the last dimension.
  const std::size_t rank = std::max(first.rank(), second.rank());
  TensorShape out;
  out.dims.assign(rank, 1);
  for (std::size_t i = 0; i < rank; ++i) {
    for (const TensorShape* shape : shapes) {
      if (i >= shape->rank()) continue;
      const Count size = shape->dims[shape->rank() - 1 - i];
      Count& joined = out.dims[rank - 1 - i];
      if (joined == 1) {
        joined = size;
      } else if (size != 1 && size != joined) {
        problem(
            fmt::format("cannot {} {} and {}: each dimension must agree or be 1 in one of "
                        "them (PyTorch's broadcasting)",
                        name_of(layer.type), first.str(), second.str()));
      }
    }
  }
  p.costs.output_shape = out;
  const I64 a = element_bytes(options.activation_dtype), e = elements(out);
  const I64 sizes[2] = {elements(first), elements(second)};
  const bool product = layer.type == LayerType::mul;
  p.costs.forward.push_back(elementwise(name_of(layer.type), e, a * (sizes[0] + sizes[1] + e), e));
  for (int i = 0; i < 2; ++i) {
    if (!grads[static_cast<std::size_t>(i)]) continue;
    // A product's gradient is the output's times the other factor; a sum's is the output's.
    if (product)
      p.costs.backward_input.push_back(elementwise("mul", e, a * (2 * e + sizes[1 - i]), e));
    if (sizes[i] < e) {  // broadcast: summed back over the stretched dimensions
      const TensorShape& shape = *shapes[i];
      // The stretched dimensions are adjacent in memory when they are the trailing ones.
      bool trailing = true, seen_kept = false;
      for (std::size_t k = 0; k < rank; ++k) {
        const std::size_t from_end = rank - 1 - k;
        const bool stretched =
            k >= shape.rank() || (shape.dims[shape.rank() - 1 - k] == 1 && out.dims[from_end] != 1);
        if (!stretched) seen_kept = true;
        if (stretched && seen_kept) trailing = false;
      }
      p.costs.backward_input.push_back(
          kernel("sum", OpClass::reduction, flops(e), bytes(a * (e + sizes[i])),
                 launch::reduction(count(sizes[i]), count(0, e / sizes[i]),
                                   trailing ? ReductionLayout::rows : ReductionLayout::columns)));
    }
  }
  // A product keeps each factor for the other's gradient.
  p.saves_input = product && grads[1];
  p.saves_second_input = product && grads[0];
  return p;
}

}  // namespace epochcast::detail

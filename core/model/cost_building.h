// Internal to core/model: the building blocks of the layers' cost formulas (checked counts,
// kernels, GEMM shapes, launches), shared by the files that cost one family of layers each.
//
// Conventions: E is a tensor's elements per sample, a the activation element size, w the
// parameter element size. A multiply-add is two FLOPs. Transcendental functions count a few
// FLOPs each (exp 4, erf 8); they are memory-bound on every GPU, so the choice hardly matters.
// Byte counts are device-memory traffic assuming each operand is read once and each result
// written once. Kernel lists follow what PyTorch eager mode launches on CUDA.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "core/model/kernel_launches.h"
#include "core/model/layer_costs.h"

namespace epochcast::detail {

// Costs are computed in 128 bits and narrowed with a check, so absurd sizes in a spec become
// an error naming the layer instead of a silent 64-bit overflow.
__extension__ using I64 = __int128;
using Count = std::int64_t;

[[noreturn]] inline void problem(const std::string& message) {
  throw ShapeProblem(message);
}

// Per kernel and sample: beyond any real model (GPT-3's largest kernel at 2048 tokens is about
// 2^43 FLOPs), and small enough that sums over kMaxModelLayers layers stay inside 64 bits.
inline constexpr Count kMaxCount = Count{1} << 44;

inline Count narrow(I64 value) {
  if (value < 0 || value > kMaxCount) {
    problem("its sizes are too large: a count exceeds 2^44 per sample, beyond any real model");
  }
  return static_cast<Count>(value);
}

inline PerBatch<Flops> flops(I64 per_sample, I64 fixed = 0) {
  return {Flops(narrow(per_sample)), Flops(narrow(fixed))};
}
inline PerBatch<Bytes> bytes(I64 per_sample, I64 fixed = 0) {
  return {Bytes(narrow(per_sample)), Bytes(narrow(fixed))};
}
inline PerBatch<Count> count(I64 per_sample, I64 fixed = 0) {
  return {narrow(per_sample), narrow(fixed)};
}

inline KernelWork kernel(std::string_view name, OpClass op_class, PerBatch<Flops> f,
                         PerBatch<Bytes> b, KernelLaunch launch) {
  KernelWork k;
  k.name = name;
  k.op_class = op_class;
  k.flops = f;
  k.bytes = b;
  k.launch = launch;
  return k;
}

// An element-wise kernel over per_sample x batch + fixed elements (TensorIterator's launch).
inline KernelLaunch each(I64 per_sample, I64 fixed = 0) {
  return launch::elementwise(count(per_sample, fixed));
}

// An element-wise kernel of `flop` FLOPs and `byte` bytes per sample over `e` elements per
// sample.
inline KernelWork elementwise(std::string_view name, I64 flop, I64 byte, I64 e) {
  return kernel(name, OpClass::elementwise, flops(flop), bytes(byte), each(e));
}

// A (batches × m × k) by (k × n) product; every dimension may scale with the batch.
inline KernelWork gemm(std::string_view name, OpClass op_class, PerBatch<Count> batches,
                       PerBatch<Count> m, PerBatch<Count> n, PerBatch<Count> k, PerBatch<Bytes> b) {
  // FLOPs = 2·batches·m·n·k, where exactly one factor scales with the batch. Its blocks are
  // its tiles (the device model's tile choice); the launch here only stands for the output.
  auto size = [](PerBatch<Count> x) -> I64 { return x.per_sample != 0 ? x.per_sample : x.fixed; };
  I64 outputs = size(batches) * size(m) * size(n);
  I64 total = 2 * outputs * size(k);
  bool output_scales = batches.per_sample || m.per_sample || n.per_sample;
  KernelWork w =
      kernel(name, op_class, flops(total), b, output_scales ? each(outputs) : each(0, outputs));
  w.has_gemm_shape = true;
  w.gemm = GemmShape{batches, m, n, k};
  return w;
}

// The same product with its operands handed to BLAS in `layout` (GemmLayout).
inline KernelWork laid_out(KernelWork w, GemmLayout layout) {
  w.gemm.layout = layout;
  return w;
}

// The same products computed inside a fused kernel, not by BLAS.
inline KernelWork fused(KernelWork w) {
  w.gemm.blas = false;
  return w;
}

inline PerBatch<Count> per_sample(I64 v) {
  return {narrow(v), 0};
}
inline PerBatch<Count> fixed(I64 v) {
  return {0, narrow(v)};
}

inline I64 product(const std::vector<Count>& v, std::size_t from = 0) {
  I64 p = 1;
  for (std::size_t i = from; i < v.size(); ++i)
    p *= v[i];
  return p;
}

// Elements of a shape, computed wide: output shapes are checked only once they exist.
inline I64 elements(const TensorShape& shape) {
  return product(shape.dims);
}

inline std::string dims_str(const std::vector<Count>& v) {
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i)
    out += (i ? "x" : "") + std::to_string(v[i]);
  return out;
}

inline void add_param(LayerCosts& c, std::string_view what, I64 elements) {
  c.params += narrow(elements);
  c.param_tensors.push_back({fmt::format("{}.{}", c.layer.name, what), narrow(elements)});
}

// Elementwise activation: `f_fwd`/`f_bwd` FLOPs per element; launched element-wise unless
// `launch` says otherwise (softmax, along its rows).
inline PrimitiveCosts activation(PrimitiveCosts p, I64 e, I64 a, std::string_view fwd_name,
                                 std::string_view bwd_name, I64 f_fwd, I64 f_bwd, bool needs_grad,
                                 OpClass op_class = OpClass::elementwise,
                                 std::optional<KernelLaunch> launch = std::nullopt) {
  p.costs.output_shape = p.costs.input_shape;
  const KernelLaunch how = launch.value_or(each(e));
  p.costs.forward.push_back(kernel(fwd_name, op_class, flops(f_fwd * e), bytes(2 * a * e), how));
  if (needs_grad) {
    p.costs.backward_input.push_back(
        kernel(bwd_name, op_class, flops(f_bwd * e), bytes(3 * a * e), how));
  }
  return p;
}

// Output length of a sliding window (convolution or pooling), PyTorch's floor rule.
inline Count window_output(I64 size, I64 kernel_size, I64 stride, I64 pad, I64 dilation,
                           std::string_view what) {
  I64 span = dilation * (kernel_size - 1) + 1;
  if (size + 2 * pad < span) {
    problem(fmt::format("{} ({}{}) is larger than its padded input ({} + 2x{} = {})", what,
                        kernel_size, dilation > 1 ? fmt::format(", dilation {}", dilation) : "",
                        size, pad, size + 2 * pad));
  }
  return narrow((size + 2 * pad - span) / stride + 1);
}

inline void expect_rank(const TensorShape& in, std::size_t rank, std::string_view layout) {
  if (in.rank() != rank) {
    problem(fmt::format("expects {} per sample, got {}", layout, in.str()));
  }
}

}  // namespace epochcast::detail

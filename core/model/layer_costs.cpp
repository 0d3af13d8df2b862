// Shape rules and cost formulas of the primitive layers (conventions: cost_building.h).
#include "core/model/layer_costs.h"

#include "core/model/cost_building.h"

namespace epochcast::detail {

namespace {

PrimitiveCosts linear(PrimitiveCosts p, const CostOptions& o, bool needs_grad) {
  const TensorShape& in = p.costs.input_shape;
  I64 a = element_bytes(o.activation_dtype), w = element_bytes(o.parameter_dtype);
  I64 f_in = in.last(), f_out = p.costs.layer.out_features;
  I64 rows = in.elements() / f_in;
  p.costs.in_features = narrow(f_in);
  p.costs.output_shape = in;
  p.costs.output_shape.dims.back() = narrow(f_out);
  bool tied = !p.costs.layer.tied_to.empty();
  if (!tied) add_param(p.costs, "weight", f_in * f_out);
  if (p.costs.layer.bias) add_param(p.costs, "bias", f_out);
  I64 weight_bytes = w * f_in * f_out;
  p.costs.macs_per_sample = narrow(rows * f_in * f_out);

  // y = x·Wᵀ + b: one addmm (mm without bias), the bias add fused into it.
  I64 bias_bytes = p.costs.layer.bias ? w * f_out : 0;
  KernelWork fwd = laid_out(
      gemm(p.costs.layer.bias ? "addmm" : "mm", OpClass::gemm, fixed(1), per_sample(rows),
           fixed(f_out), fixed(f_in), bytes(a * rows * (f_in + f_out), weight_bytes + bias_bytes)),
      GemmLayout::tn);
  if (p.costs.layer.bias) fwd.flops.per_sample += Flops(narrow(rows * f_out));
  p.costs.forward.push_back(fwd);
  if (needs_grad) {  // dx = dy·W
    p.costs.backward_input.push_back(gemm("mm", OpClass::gemm, fixed(1), per_sample(rows),
                                          fixed(f_in), fixed(f_out),
                                          bytes(a * rows * (f_in + f_out), weight_bytes)));
  }
  // dW = dyᵀ·x: the batch is the reduction dimension.
  p.costs.backward_weight.push_back(
      laid_out(gemm("mm", OpClass::gemm, fixed(1), fixed(f_out), fixed(f_in), per_sample(rows),
                    bytes(a * rows * (f_in + f_out), weight_bytes)),
               GemmLayout::nt));
  if (p.costs.layer.bias) {
    // dy.sum(0) over [rows, f_out]: a column sum (Reduce.cuh).
    p.costs.backward_weight.push_back(
        kernel("sum", OpClass::reduction, flops(rows * f_out), bytes(a * rows * f_out, w * f_out),
               launch::reduction(count(0, f_out), count(rows), ReductionLayout::columns)));
  }
  if (tied) {  // autograd adds this use's gradient into the shared weight's
    p.costs.backward_weight.push_back(kernel("add", OpClass::elementwise, flops(0, f_in * f_out),
                                             bytes(0, 3 * weight_bytes), each(0, f_in * f_out)));
  }
  p.saves_input = true;
  return p;
}

PrimitiveCosts conv(PrimitiveCosts p, const CostOptions& o, bool needs_grad, std::size_t nd) {
  const TensorShape& in = p.costs.input_shape;
  Layer& l = p.costs.layer;
  expect_rank(in, nd + 1, nd == 1 ? "[channels, length]" : "[channels, height, width]");
  I64 a = element_bytes(o.activation_dtype), w = element_bytes(o.parameter_dtype);
  I64 c_in = in.dims[0];
  if (l.channel_multiplier > 0) l.out_features = narrow(c_in * l.channel_multiplier);
  if (l.depthwise) l.groups = narrow(c_in);
  if (c_in % l.groups != 0) {
    problem(fmt::format("input channels ({}) are not divisible by groups ({})", c_in, l.groups));
  }
  if (l.out_features % l.groups != 0) {
    problem(fmt::format("out_channels ({}) are not divisible by groups ({})", l.out_features,
                        l.groups));
  }
  p.costs.in_features = narrow(c_in);
  std::vector<Count> out_spatial;
  for (std::size_t d = 0; d < nd; ++d) {
    out_spatial.push_back(window_output(in.dims[d + 1], l.kernel[d], l.stride[d], l.padding[d],
                                        l.dilation[d], "the kernel"));
  }
  I64 c_out = l.out_features, g = l.groups;
  I64 window = narrow(product(l.kernel));
  I64 in_positions = product(in.dims, 1), out_positions = product(out_spatial);
  I64 weights = narrow(narrow(c_out * (c_in / g)) * window);
  add_param(p.costs, "weight", weights);
  if (l.bias) add_param(p.costs, "bias", c_out);
  p.costs.output_shape.dims = {narrow(c_out)};
  p.costs.output_shape.dims.insert(p.costs.output_shape.dims.end(), out_spatial.begin(),
                                   out_spatial.end());
  I64 e_in = c_in * in_positions, e_out = c_out * out_positions;
  p.costs.macs_per_sample = narrow(e_out * (c_in / g) * window);

  OpClass op_class = (g > 1 && g == c_in) ? OpClass::depthwise_conv : OpClass::conv;
  PerBatch<Bytes> traffic = bytes(a * (e_in + e_out), w * weights);
  ConvGeometry geometry;
  geometry.spatial_dims = static_cast<int>(nd);
  geometry.in_channels = narrow(c_in);
  geometry.out_channels = narrow(c_out);
  geometry.groups = narrow(g);
  for (std::size_t d = 0; d < nd; ++d) {
    geometry.window[d] = l.kernel[d];
    geometry.stride[d] = l.stride[d];
    geometry.dilation[d] = l.dilation[d];
    geometry.padding[d] = l.padding[d];
    geometry.in_size[d] = in.dims[d + 1];
    geometry.out_size[d] = out_spatial[d];
  }
  auto with_geometry = [&](KernelWork k, ConvPass pass) {
    if (op_class == OpClass::depthwise_conv) return k;  // its own direct kernel, no choice
    k.has_conv_geometry = true;
    k.conv = geometry;
    k.conv.pass = pass;
    return k;
  };
  // Convolution as an implicit GEMM per group: output positions × out channels, reducing
  // over in-channels × window. The device model may run another algorithm for it.
  p.costs.forward.push_back(
      with_geometry(gemm("conv_forward", op_class, fixed(g), per_sample(out_positions),
                         fixed(c_out / g), fixed((c_in / g) * window), traffic),
                    ConvPass::forward));
  if (l.bias) {  // PyTorch adds the bias in a separate kernel after cuDNN's convolution
    p.costs.forward.push_back(
        kernel("add_bias", OpClass::elementwise, flops(e_out), bytes(2 * a * e_out), each(e_out)));
  }
  if (needs_grad) {
    // Per group: the input positions of the phases with taps × in channels, reducing over out
    // channels × those phases' taps (stride_phases): the forward's work for any stride.
    const StridePhases phases = stride_phases(geometry);
    p.costs.backward_input.push_back(with_geometry(
        gemm("conv_backward_data", op_class, fixed(g),
             per_sample((in_positions * phases.with_taps + phases.all - 1) / phases.all),
             fixed(c_in / g),
             fixed(((c_out / g) * window + phases.with_taps - 1) / phases.with_taps), traffic),
        ConvPass::backward_data));
  }
  p.costs.backward_weight.push_back(
      with_geometry(gemm("conv_backward_weight", op_class, fixed(g), fixed(c_out / g),
                         fixed((c_in / g) * window), per_sample(out_positions), traffic),
                    ConvPass::backward_weight));
  if (l.bias) {  // dy.sum over batch and positions, per channel (Reduce.cuh)
    p.costs.backward_weight.push_back(
        kernel("sum", OpClass::reduction, flops(e_out), bytes(a * e_out, w * c_out),
               launch::reduction(count(0, c_out), count(e_out / c_out), ReductionLayout::channels,
                                 nd == 2)));
  }
  p.saves_input = true;
  return p;
}

PrimitiveCosts batchnorm(PrimitiveCosts p, const CostOptions& o, bool needs_grad, bool two_d) {
  const TensorShape& in = p.costs.input_shape;
  if (two_d) {
    expect_rank(in, 3, "[channels, height, width]");
  } else if (in.rank() != 1 && in.rank() != 2) {
    problem(fmt::format("expects [features] or [channels, length] per sample, got {}", in.str()));
  }
  I64 a = element_bytes(o.activation_dtype), w = element_bytes(o.parameter_dtype);
  I64 c = in.dims[0], e = in.elements();
  p.costs.in_features = narrow(c);
  p.costs.output_shape = in;
  add_param(p.costs, "weight", c);
  add_param(p.costs, "bias", c);
  p.costs.buffers = narrow(2 * c + 1);  // running mean, running variance, num_batches_tracked
  // Training mode: statistics (one read), normalise (one read, one write); running stats
  // updated in place; then the module's num_batches_tracked += 1. PyTorch hands 3-D and 4-D
  // inputs to cuDNN unless they are bfloat16 (Normalization.cpp, _select_batch_norm_backend):
  // one kernel, whose launch is not published; we take it to cut the work as ATen's own
  // kernels do, a block per channel (cuDNN's bn_fw_tr_1C11 kernels reduce per channel, 512
  // threads). bfloat16 and [batch, features] inputs run ATen's kernels: statistics, the
  // running statistics' update, then the normalisation pass.
  const I64 positions = e / c;
  const Count c_ = narrow(c), positions_ = narrow(positions);
  const bool cudnn = o.activation_dtype != DType::bfloat16 && in.rank() >= 2;
  if (cudnn) {
    p.costs.forward.push_back(kernel("batch_norm_forward", OpClass::normalization, flops(8 * e),
                                     bytes(3 * a * e, 6 * w * c),
                                     launch::channel_statistics(c_, positions_, two_d)));
  } else {
    p.costs.forward.push_back(kernel("batch_norm_collect_statistics", OpClass::normalization,
                                     flops(3 * e), bytes(a * e, 2 * w * c),
                                     launch::channel_statistics(c_, positions_, two_d)));
    p.costs.forward.push_back(kernel("batch_norm_update_stats_and_invert", OpClass::elementwise,
                                     flops(0, 6 * c), bytes(0, 4 * w * c), each(0, c)));
    p.costs.forward.push_back(kernel("batch_norm_transform_input", OpClass::normalization,
                                     flops(5 * e), bytes(2 * a * e, 2 * w * c),
                                     launch::channel_transform(c_, positions_, two_d)));
  }
  KernelWork counter = kernel("add", OpClass::elementwise, flops(0, 1), bytes(0, 16), each(0, 1));
  counter.training_only = true;
  p.costs.forward.push_back(counter);
  // The backward reads x and dy twice (the reductions, then dx) and gives dx, dgamma and dbeta:
  // one kernel a block per channel (ATen's batch_norm_backward_kernel; cuDNN's bn_bw_1C11), or
  // for [batch, features] ATen's channels-last pair, the reductions then the element-wise dx.
  // (bfloat16 in channels-last memory takes that pair too; it is costed as the one kernel.)
  auto& backward = needs_grad ? p.costs.backward_input : p.costs.backward_weight;
  if (in.rank() == 1) {
    backward.push_back(kernel("batch_norm_backward_reduce", OpClass::normalization, flops(4 * e),
                              bytes(2 * a * e, 4 * w * c),
                              launch::channel_statistics(c_, positions_, false)));
    backward.push_back(kernel("batch_norm_backward_elemt", OpClass::normalization, flops(6 * e),
                              bytes(3 * a * e, 2 * w * c),
                              launch::channel_transform(c_, positions_, false)));
  } else {
    backward.push_back(kernel("batch_norm_backward", OpClass::normalization, flops(10 * e),
                              bytes(5 * a * e, 6 * w * c),
                              launch::channel_statistics(c_, positions_, two_d)));
  }
  p.saves_input = true;
  p.saved_extra = bytes(0, 2 * 4 * c);  // saved mean and inverse std, float32
  return p;
}

PrimitiveCosts layernorm(PrimitiveCosts p, const CostOptions& o, bool needs_grad) {
  const TensorShape& in = p.costs.input_shape;
  I64 a = element_bytes(o.activation_dtype), w = element_bytes(o.parameter_dtype);
  I64 d = in.last(), e = in.elements(), rows = e / d;
  p.costs.in_features = narrow(d);
  p.costs.output_shape = in;
  add_param(p.costs, "weight", d);
  add_param(p.costs, "bias", d);
  // A block of 128 threads per row forward and for the input gradient; the gamma and beta
  // gradients sum columns over every row (layer_norm_kernel.cu). The forward reads each row
  // twice (vectorized_layer_norm_kernel: its statistics, then the normalisation) and writes it;
  // the input gradient reads dy and x twice (compute_gI: two sums, then dx) and writes dx.
  p.costs.forward.push_back(kernel("layer_norm", OpClass::normalization, flops(8 * e),
                                   bytes(3 * a * e, 2 * w * d), launch::per_row(count(rows), 128)));
  if (needs_grad) {
    p.costs.backward_input.push_back(kernel("layer_norm_backward", OpClass::normalization,
                                            flops(8 * e), bytes(5 * a * e, w * d),
                                            launch::per_row(count(rows), 128)));
  }
  p.costs.backward_weight.push_back(kernel("layer_norm_backward_gamma_beta", OpClass::reduction,
                                           flops(4 * e), bytes(2 * a * e, 2 * w * d),
                                           launch::column_sums(narrow(d), count(rows))));
  p.saves_input = true;
  p.saved_extra = bytes(2 * 4 * rows);  // mean and rstd per row, float32
  return p;
}

PrimitiveCosts pooling(PrimitiveCosts p, const CostOptions& o, bool needs_grad, std::size_t nd,
                       bool is_max) {
  const TensorShape& in = p.costs.input_shape;
  const Layer& l = p.costs.layer;
  expect_rank(in, nd + 1, nd == 1 ? "[channels, length]" : "[channels, height, width]");
  I64 a = element_bytes(o.activation_dtype);
  std::vector<Count> out_spatial;
  for (std::size_t d = 0; d < nd; ++d) {
    Count size =
        window_output(in.dims[d + 1], l.kernel[d], l.stride[d], l.padding[d], 1, "the window");
    // ceil_mode (PyTorch's pooling_output_shape): one more window where the floor rule leaves
    // input over, unless that window would start in the right padding.
    if (l.ceil_mode && (I64{in.dims[d + 1]} + 2 * l.padding[d] - l.kernel[d]) % l.stride[d] != 0 &&
        I64{size} * l.stride[d] < I64{in.dims[d + 1]} + l.padding[d]) {
      ++size;
    }
    out_spatial.push_back(size);
  }
  p.costs.output_shape.dims = {in.dims[0]};
  p.costs.output_shape.dims.insert(p.costs.output_shape.dims.end(), out_spatial.begin(),
                                   out_spatial.end());
  I64 e_in = in.elements(), e_out = elements(p.costs.output_shape);
  I64 window = product(l.kernel);
  if (is_max) {
    // Max pooling writes int64 indices of the maxima, which backward scatters through.
    // DilatedMaxPool2d.cu: forward a thread per output in blocks of 256; backward a row of
    // blocks of 256 input positions per plane (grid: positions / 256 x batch x channels).
    p.costs.forward.push_back(kernel("max_pool_forward", OpClass::pooling, flops(e_out * window),
                                     bytes(a * (e_in + e_out) + 8 * e_out),
                                     launch::blocks_of(count(e_out), 256, 256)));
    if (needs_grad) {
      const I64 planes = in.dims[0], positions = e_in / planes;
      p.costs.backward_input.push_back(
          kernel("zero_", OpClass::elementwise, flops(0), bytes(a * e_in), each(e_in)));
      p.costs.backward_input.push_back(kernel(
          "max_pool_backward", OpClass::pooling, flops(e_out), bytes(2 * a * e_out + 8 * e_out),
          launch::blocks_of(count(planes * ((positions + 255) / 256)), 1, 256)));
    }
    p.saves_input = true;
    p.saved_extra = bytes(8 * e_out);
  } else {
    // AveragePool2d.cu: a thread per output (forward) or input (backward), blocks of 1,024.
    p.costs.forward.push_back(kernel("avg_pool_forward", OpClass::pooling, flops(e_out * window),
                                     bytes(a * (e_in + e_out)),
                                     launch::blocks_of(count(e_out), 1024, 1024)));
    if (needs_grad) {
      p.costs.backward_input.push_back(kernel("avg_pool_backward", OpClass::pooling, flops(e_in),
                                              bytes(a * (e_in + e_out)),
                                              launch::blocks_of(count(e_in), 1024, 1024)));
    }
  }
  return p;
}

PrimitiveCosts adaptive_avgpool(PrimitiveCosts p, const CostOptions& o, bool needs_grad) {
  const TensorShape& in = p.costs.input_shape;
  expect_rank(in, 3, "[channels, height, width]");
  I64 a = element_bytes(o.activation_dtype);
  p.costs.output_shape.dims = {in.dims[0], p.costs.layer.output_size[0],
                               p.costs.layer.output_size[1]};
  I64 e_in = in.elements(), e_out = elements(p.costs.output_shape);
  const I64 planes = in.dims[0], positions = e_in / planes;
  if (e_out == planes) {
    // To 1x1, PyTorch takes the mean over height and width (AdaptiveAveragePooling.cpp): a
    // reduction per plane, whose backward spreads each gradient over its plane.
    p.costs.forward.push_back(kernel(
        "mean", OpClass::pooling, flops(e_in), bytes(a * (e_in + e_out)),
        launch::reduction(count(planes), count(0, positions), ReductionLayout::channels, true)));
    if (needs_grad) {
      p.costs.backward_input.push_back(kernel("mean_backward", OpClass::pooling, flops(e_in),
                                              bytes(a * (e_in + e_out)), each(e_in)));
    }
    return p;
  }
  // AdaptiveAveragePooling.cu: blocks of 32 x 8 threads on a grid of (batch x planes,
  // max(16 / planes, 1)), forward and backward.
  const I64 blocks = planes * std::max<I64>(16 / planes, 1);
  p.costs.forward.push_back(kernel("adaptive_avg_pool_forward", OpClass::pooling, flops(e_in),
                                   bytes(a * (e_in + e_out)),
                                   launch::blocks_of(count(blocks), 1, 256)));
  if (needs_grad) {
    p.costs.backward_input.push_back(kernel("adaptive_avg_pool_backward", OpClass::pooling,
                                            flops(e_in), bytes(a * (e_in + e_out)),
                                            launch::blocks_of(count(blocks), 1, 256)));
  }
  return p;
}

PrimitiveCosts dropout(PrimitiveCosts p, const CostOptions& o, bool needs_grad) {
  I64 a = element_bytes(o.activation_dtype), e = p.costs.input_shape.elements();
  p.costs.output_shape = p.costs.input_shape;
  if (p.costs.layer.dropout == 0) {  // PyTorch returns the input untouched
    p.output_aliases_input = true;
    return p;
  }
  // Fused kernel: draws the mask (one byte per element), scales the survivors by 1/(1-p).
  KernelWork forward =
      kernel("fused_dropout", OpClass::elementwise, flops(2 * e), bytes(2 * a * e + e),
             launch::blocks_of(count(e), 256, 256));  // Dropout.cu: 256 threads, one element each
  forward.training_only = true;
  forward.bernoulli_draws = count(e);  // one a element
  p.costs.forward.push_back(forward);
  if (needs_grad) {
    p.costs.backward_input.push_back(
        kernel("masked_scale", OpClass::elementwise, flops(e), bytes(2 * a * e + e), each(e)));
  }
  p.saved_extra = bytes(e);
  return p;
}

PrimitiveCosts embedding(PrimitiveCosts p, const CostOptions& o, DType input_dtype) {
  const TensorShape& in = p.costs.input_shape;
  if (!is_integer(input_dtype)) {
    problem(fmt::format("expects integer token ids, got {} values", name_of(input_dtype)));
  }
  expect_rank(in, 1, "[tokens]");
  I64 a = element_bytes(o.activation_dtype), w = element_bytes(o.parameter_dtype);
  I64 tokens = in.dims[0], dim = p.costs.layer.embedding_dim, rows = p.costs.layer.num_embeddings;
  p.costs.output_shape.dims = {narrow(tokens), narrow(dim)};
  add_param(p.costs, "weight", rows * dim);
  p.costs.forward.push_back(kernel("embedding", OpClass::embedding, flops(0),
                                   bytes(8 * tokens + 2 * a * tokens * dim), each(tokens * dim)));
  // Dense gradient: zero the whole table, sort the ids, accumulate rows.
  p.costs.backward_weight.push_back(kernel("zero_", OpClass::elementwise, flops(0),
                                           bytes(0, w * rows * dim), each(0, rows * dim)));
  p.costs.backward_weight.push_back(
      kernel("sort", OpClass::reduction, flops(0), bytes(4 * 8 * tokens), each(tokens)));
  p.costs.backward_weight.push_back(kernel("embedding_dense_backward", OpClass::embedding,
                                           flops(tokens * dim), bytes(2 * a * tokens * dim),
                                           each(tokens * dim)));
  p.saves_input = true;  // the ids
  return p;
}

// Learned table indexed by position (or token type) and added to the input.
PrimitiveCosts added_embedding(PrimitiveCosts p, const CostOptions& o, bool by_position) {
  const TensorShape& in = p.costs.input_shape;
  expect_rank(in, 2, "[tokens, features]");
  I64 a = element_bytes(o.activation_dtype), w = element_bytes(o.parameter_dtype);
  I64 tokens = in.dims[0], dim = in.dims[1], rows = p.costs.layer.num_embeddings;
  if (by_position && tokens > rows) {
    problem(
        fmt::format("the sequence ({} tokens) is longer than max_positions ({})", tokens, rows));
  }
  p.costs.in_features = narrow(dim);
  p.costs.output_shape = in;
  add_param(p.costs, "weight", rows * dim);
  I64 e = tokens * dim;
  p.costs.forward.push_back(
      kernel("embedding", OpClass::embedding, flops(0), bytes(8 * tokens + 2 * a * e), each(e)));
  p.costs.forward.push_back(
      kernel("add", OpClass::elementwise, flops(e), bytes(3 * a * e), each(e)));
  p.costs.backward_weight.push_back(kernel("zero_", OpClass::elementwise, flops(0),
                                           bytes(0, w * rows * dim), each(0, rows * dim)));
  p.costs.backward_weight.push_back(
      kernel("embedding_dense_backward", OpClass::embedding, flops(e), bytes(2 * a * e), each(e)));
  p.saved_extra = bytes(8 * tokens);  // the position / type ids
  return p;
}

// A per-sample dimension as written (negative counts from the end), checked against the rank.
std::size_t resolve_dim(Count dim, std::size_t rank, std::string_view what) {
  const auto r = static_cast<Count>(rank);
  if (dim < -r || dim >= r) {
    problem(fmt::format("{} {} is outside the {} per-sample dimensions (0 to {}, or -{} to -1)",
                        what, dim, rank, r - 1, r));
  }
  return static_cast<std::size_t>(dim < 0 ? dim + r : dim);
}

// ConvTranspose2d: the gradient of a convolution with respect to its input, used forward (the
// up-convolution of U-Net and of decoders). Each input position scatters a (out/groups) x
// window patch, so the work is input positions x in x (out/groups) x window multiply-adds,
// computed as a GEMM followed by a col2im scatter (PyTorch's own formulation; cuDNN runs it as
// its data-gradient kernel); backward data is a convolution of the output gradient, backward
// weight a GEMM reducing over the input positions.
PrimitiveCosts conv_transpose(PrimitiveCosts p, const CostOptions& o, bool needs_grad) {
  const TensorShape& in = p.costs.input_shape;
  Layer& l = p.costs.layer;
  expect_rank(in, 3, "[channels, height, width]");
  I64 a = element_bytes(o.activation_dtype), w = element_bytes(o.parameter_dtype);
  I64 c_in = in.dims[0], c_out = l.out_features, g = l.groups;
  if (c_in % g != 0) {
    problem(fmt::format("input channels ({}) are not divisible by groups ({})", c_in, g));
  }
  p.costs.in_features = narrow(c_in);
  std::vector<Count> out_spatial;
  for (std::size_t d = 0; d < 2; ++d) {
    // PyTorch: (in - 1) x stride - 2 x padding + dilation x (kernel - 1) + output_padding + 1.
    I64 size = (I64{in.dims[d + 1]} - 1) * l.stride[d] - 2 * I64{l.padding[d]} +
               I64{l.dilation[d]} * (l.kernel[d] - 1) + l.output_padding[d] + 1;
    if (size < 1) {
      problem(
          fmt::format("its output would be {} wide in dimension {}: the padding ({}) is too "
                      "large for an input of {}",
                      static_cast<long long>(size), d, l.padding[d], in.dims[d + 1]));
    }
    out_spatial.push_back(narrow(size));
  }
  // Narrowed factor by factor: hostile sizes stop at the 2^44 check, never overflow 128 bits.
  I64 window = narrow(product(l.kernel));
  I64 in_positions = product(in.dims, 1), out_positions = product(out_spatial);
  I64 weights = narrow(narrow(c_in * (c_out / g)) * window);
  add_param(p.costs, "weight", weights);
  if (l.bias) add_param(p.costs, "bias", c_out);
  p.costs.output_shape.dims = {narrow(c_out), out_spatial[0], out_spatial[1]};
  I64 e_in = c_in * in_positions, e_out = c_out * out_positions;
  p.costs.macs_per_sample = narrow(in_positions * c_in * (c_out / g) * window);
  PerBatch<Bytes> traffic = bytes(a * (e_in + e_out), w * weights);
  p.costs.forward.push_back(gemm("conv_transpose_forward", OpClass::conv, fixed(g),
                                 per_sample(in_positions), fixed((c_out / g) * window),
                                 fixed(c_in / g), traffic));
  if (l.bias) {
    p.costs.forward.push_back(
        kernel("add_bias", OpClass::elementwise, flops(e_out), bytes(2 * a * e_out), each(e_out)));
  }
  if (needs_grad) {
    p.costs.backward_input.push_back(gemm("conv_transpose_backward_data", OpClass::conv, fixed(g),
                                          per_sample(in_positions), fixed(c_in / g),
                                          fixed((c_out / g) * window), traffic));
  }
  p.costs.backward_weight.push_back(gemm("conv_transpose_backward_weight", OpClass::conv, fixed(g),
                                         fixed(c_in / g), fixed((c_out / g) * window),
                                         per_sample(in_positions), traffic));
  if (l.bias) {  // dy.sum over batch and positions, per channel (Reduce.cuh)
    p.costs.backward_weight.push_back(kernel(
        "sum", OpClass::reduction, flops(e_out), bytes(a * e_out, w * c_out),
        launch::reduction(count(0, c_out), count(e_out / c_out), ReductionLayout::channels, true)));
  }
  p.saves_input = true;
  return p;
}

// nn.Upsample on [channels, height, width]: nearest copies each input pixel to a block;
// bilinear blends four neighbours (about 8 FLOPs an output). Backward gathers (nearest) or
// scatters with atomic adds into a zeroed gradient (bilinear). Memory-bound like pooling.
PrimitiveCosts upsample(PrimitiveCosts p, const CostOptions& o, bool needs_grad) {
  const TensorShape& in = p.costs.input_shape;
  const Layer& l = p.costs.layer;
  expect_rank(in, 3, "[channels, height, width]");
  I64 a = element_bytes(o.activation_dtype);
  std::vector<Count> out_size = l.output_size;
  if (!l.scale_factor.empty()) {
    out_size = {narrow(I64{in.dims[1]} * l.scale_factor[0]),
                narrow(I64{in.dims[2]} * l.scale_factor[1])};
  }
  p.costs.output_shape.dims = {in.dims[0], out_size[0], out_size[1]};
  I64 e_in = in.elements(), e_out = elements(p.costs.output_shape);
  if (l.bilinear) {
    p.costs.forward.push_back(kernel("upsample_bilinear2d", OpClass::pooling, flops(8 * e_out),
                                     bytes(a * (e_in + e_out)), each(e_out)));
    if (needs_grad) {
      p.costs.backward_input.push_back(
          kernel("zero_", OpClass::elementwise, flops(0), bytes(a * e_in), each(e_in)));
      p.costs.backward_input.push_back(kernel("upsample_bilinear2d_backward", OpClass::pooling,
                                              flops(8 * e_out), bytes(a * (e_out + 4 * e_out)),
                                              each(e_out)));
    }
  } else {
    p.costs.forward.push_back(kernel("upsample_nearest2d", OpClass::pooling, flops(0),
                                     bytes(a * (e_in + e_out)), each(e_out)));
    if (needs_grad) {
      p.costs.backward_input.push_back(kernel("upsample_nearest2d_backward", OpClass::pooling,
                                              flops(e_out), bytes(a * (e_in + e_out)), each(e_in)));
    }
  }
  return p;
}

// permute / transpose: PyTorch returns a strided view, and the next kernel that needs its
// input contiguous (a layer norm, a linear layer's GEMM on [tokens, features]) copies it; that
// copy is counted here, where it happens once, and so is its mirror in backward. The runtime
// makes the copy at the same place (`.contiguous()`). The identity permutation is free.
PrimitiveCosts permute(PrimitiveCosts p, const CostOptions& o, bool needs_grad) {
  const TensorShape& in = p.costs.input_shape;
  Layer& l = p.costs.layer;
  std::vector<Count> order;
  if (l.type == LayerType::transpose) {
    for (std::size_t d = 0; d < in.rank(); ++d)
      order.push_back(static_cast<Count>(d));
    std::swap(order[resolve_dim(l.permutation[0], in.rank(), "dimension")],
              order[resolve_dim(l.permutation[1], in.rank(), "dimension")]);
  } else {
    if (l.permutation.size() != in.rank()) {
      problem(fmt::format("permutes {} dimensions but its input {} has {}", l.permutation.size(),
                          in.str(), in.rank()));
    }
    order = l.permutation;
  }
  l.permutation = order;  // resolved, for the runtime
  p.costs.output_shape.dims.clear();
  bool identity = true;
  for (std::size_t d = 0; d < order.size(); ++d) {
    p.costs.output_shape.dims.push_back(in.dims[static_cast<std::size_t>(order[d])]);
    identity = identity && order[d] == static_cast<Count>(d);
  }
  if (identity) {
    p.output_aliases_input = true;
    return p;
  }
  I64 a = element_bytes(o.activation_dtype), e = in.elements();
  p.costs.forward.push_back(
      kernel("copy", OpClass::elementwise, flops(0), bytes(2 * a * e), each(e)));
  if (needs_grad) {
    p.costs.backward_input.push_back(
        kernel("copy", OpClass::elementwise, flops(0), bytes(2 * a * e), each(e)));
  }
  return p;
}

// Learned tokens prepended to a sequence (ViT's class token): the parameter is expanded over
// the batch (a view) and concatenated in front; its gradient is the batch's sum.
PrimitiveCosts class_token(PrimitiveCosts p, const CostOptions& o) {
  const TensorShape& in = p.costs.input_shape;
  expect_rank(in, 2, "[tokens, features]");
  I64 a = element_bytes(o.activation_dtype), w = element_bytes(o.parameter_dtype);
  I64 tokens = p.costs.layer.tokens, d = in.dims[1];
  p.costs.in_features = narrow(d);
  p.costs.output_shape.dims = {narrow(I64{in.dims[0]} + tokens), narrow(d)};
  add_param(p.costs, "token", tokens * d);
  I64 e_in = in.elements(), e_out = elements(p.costs.output_shape);
  p.costs.forward.push_back(kernel("cat", OpClass::elementwise, flops(0),
                                   bytes(a * (e_in + e_out), w * tokens * d), each(e_out)));
  // The batch's sum of each token's gradient: a column sum over the samples.
  p.costs.backward_weight.push_back(
      kernel("sum", OpClass::reduction, flops(tokens * d), bytes(a * tokens * d, w * tokens * d),
             launch::reduction(count(0, tokens * d), count(1), ReductionLayout::columns)));
  return p;
}

// Learned positions sized from the input, added to it (ViT: a [1, tokens, features] parameter):
// a broadcast add forward, the batch's sum as the parameter's gradient.
PrimitiveCosts learned_positions(PrimitiveCosts p, const CostOptions& o) {
  const TensorShape& in = p.costs.input_shape;
  expect_rank(in, 2, "[tokens, features]");
  I64 a = element_bytes(o.activation_dtype), w = element_bytes(o.parameter_dtype);
  I64 e = in.elements();
  p.costs.layer.num_embeddings = in.dims[0];
  p.costs.in_features = in.dims[1];
  add_param(p.costs, "weight", e);
  p.costs.forward.push_back(
      kernel("add", OpClass::elementwise, flops(e), bytes(2 * a * e, w * e), each(e)));
  p.costs.backward_weight.push_back(
      kernel("sum", OpClass::reduction, flops(e), bytes(a * e, w * e),
             launch::reduction(count(0, e), count(1), ReductionLayout::columns)));
  return p;
}

}  // namespace

PrimitiveCosts cost_concat(const Layer& layer, const std::vector<TensorShape>& inputs,
                           bool needs_input_grad, const CostOptions& options) {
  PrimitiveCosts p;
  p.costs.layer = layer;
  p.costs.input_shape = inputs.front();
  p.costs.needs_input_grad = needs_input_grad;
  const TensorShape& first = inputs.front();
  const std::size_t dim = resolve_dim(layer.dim, first.rank(), "dim");
  p.costs.layer.dim = static_cast<Count>(dim);  // resolved, for the runtime
  TensorShape out = first;
  for (std::size_t i = 1; i < inputs.size(); ++i) {
    const TensorShape& next = inputs[i];
    bool fits = next.rank() == first.rank();
    for (std::size_t d = 0; fits && d < first.rank(); ++d) {
      fits = d == dim || next.dims[d] == first.dims[d];
    }
    if (!fits) {
      problem(
          fmt::format("cannot join {} and {} along dimension {}: every other dimension must "
                      "agree (input {} of {})",
                      first.str(), next.str(), dim, i + 1, inputs.size()));
    }
    out.dims[dim] = narrow(I64{out.dims[dim]} + next.dims[dim]);
  }
  p.costs.output_shape = out;
  I64 a = element_bytes(options.activation_dtype), e = elements(out);
  p.costs.forward.push_back(
      kernel("cat", OpClass::elementwise, flops(0), bytes(2 * a * e), each(e)));
  return p;
}

PrimitiveCosts cost_primitive(const Layer& layer, const TensorShape& input, DType input_dtype,
                              bool needs_input_grad, const CostOptions& options) {
  PrimitiveCosts p;
  p.costs.layer = layer;
  p.costs.input_shape = input;
  p.costs.output_shape = input;
  p.costs.needs_input_grad = needs_input_grad;
  I64 a = element_bytes(options.activation_dtype);
  I64 e = input.elements();
  bool grad = needs_input_grad;

  if (is_integer(input_dtype) && layer.type != LayerType::embedding &&
      layer.type != LayerType::reshape && layer.type != LayerType::flatten &&
      layer.type != LayerType::permute && layer.type != LayerType::transpose) {
    problem(fmt::format("gets integer {} values; token ids must go through an embedding first",
                        name_of(input_dtype)));
  }
  switch (layer.type) {
    case LayerType::linear:
      return linear(std::move(p), options, grad);
    case LayerType::conv1d:
      return conv(std::move(p), options, grad, 1);
    case LayerType::conv2d:
      return conv(std::move(p), options, grad, 2);
    case LayerType::batchnorm1d:
      return batchnorm(std::move(p), options, grad, false);
    case LayerType::batchnorm2d:
      return batchnorm(std::move(p), options, grad, true);
    case LayerType::layernorm:
      return layernorm(std::move(p), options, grad);
    case LayerType::relu:
      p.saves_output = true;  // threshold_backward uses the result
      p.output_aliases_input = layer.inplace;
      return activation(std::move(p), e, a, "relu", "threshold_backward", 1, 1, grad);
    case LayerType::relu6:
      p.saves_output = layer.inplace;  // hardtanh_backward uses the result in place, else the input
      p.saves_input = !layer.inplace;
      p.output_aliases_input = layer.inplace;
      return activation(std::move(p), e, a, "hardtanh", "hardtanh_backward", 2, 2, grad);
    case LayerType::sigmoid:
      p.saves_output = true;
      return activation(std::move(p), e, a, "sigmoid", "sigmoid_backward", 4, 3, grad);
    case LayerType::tanh:
      p.saves_output = true;
      return activation(std::move(p), e, a, "tanh", "tanh_backward", 4, 3, grad);
    case LayerType::gelu:  // the erf form, or the tanh approximation: one kernel each
      p.saves_input = true;
      return activation(std::move(p), e, a, "gelu", "gelu_backward", 8, 12, grad);
    case LayerType::gelu_new:
      return gelu_new_costs(std::move(p), options, grad);
    case LayerType::silu:  // x·sigmoid(x); silu_backward recomputes the sigmoid from x
      p.saves_input = true;
      return activation(std::move(p), e, a, "silu", "silu_backward", 5, 8, grad);
    case LayerType::rmsnorm:
      return rmsnorm_costs(std::move(p), options, grad);
    case LayerType::hardswish:  // x·relu6(x + 3)/6; the backward reads x
      p.saves_input = true;
      return activation(std::move(p), e, a, "hardswish", "hardswish_backward", 4, 4, grad);
    case LayerType::hardsigmoid:
      p.saves_input = true;
      return activation(std::move(p), e, a, "hardsigmoid", "hardsigmoid_backward", 3, 2, grad);
    case LayerType::stochastic_depth:
      return stochastic_depth_costs(std::move(p), options, grad);
    case LayerType::scale:
      return scale_costs(std::move(p), options, grad);
    case LayerType::softmax: {
      p.saves_output = true;
      // Over the last dimension: rows of its length (SoftMax.cu), each read and written as
      // many times as its kernel passes over it.
      const int bytes_each = static_cast<int>(a);
      const KernelLaunch rows = launch::softmax(count(e / input.last()), input.last(), bytes_each);
      p.costs.output_shape = input;
      const I64 forward_half = launch::softmax_half_passes(input.last(), bytes_each, false);
      const I64 backward_half = launch::softmax_half_passes(input.last(), bytes_each, true);
      p.costs.forward.push_back(kernel("softmax", OpClass::normalization, flops(5 * e),
                                       bytes(forward_half * a * e / 2), rows));
      if (grad) {
        // softmax_backward_cuda_out multiplies the gradient by the output first (tmp = grad *
        // output), then runs the backward kernel on tmp.
        p.costs.backward_input.push_back(
            kernel("mul", OpClass::elementwise, flops(e), bytes(3 * a * e), each(e)));
        p.costs.backward_input.push_back(kernel("softmax_backward", OpClass::normalization,
                                                flops(4 * e), bytes(backward_half * a * e / 2),
                                                rows));
      }
      return p;
    }
    case LayerType::maxpool1d:
      return pooling(std::move(p), options, grad, 1, true);
    case LayerType::maxpool2d:
      return pooling(std::move(p), options, grad, 2, true);
    case LayerType::avgpool2d:
      return pooling(std::move(p), options, grad, 2, false);
    case LayerType::adaptive_avgpool2d:
      return adaptive_avgpool(std::move(p), options, grad);
    case LayerType::flatten:
      p.costs.output_shape.dims = {narrow(e)};
      p.output_aliases_input = true;
      return p;
    case LayerType::reshape: {
      std::vector<Count> dims = layer.target_shape;
      I64 known = 1;
      for (Count d : dims)
        known *= (d == -1 ? 1 : d);
      for (Count& d : dims) {
        if (d == -1) {
          if (e % known != 0) {
            problem(fmt::format("cannot reshape {} ({} elements) to [{}]", input.str(), e,
                                dims_str(layer.target_shape)));
          }
          d = narrow(e / known);
        }
      }
      if (product(dims) != e) {
        problem(fmt::format("cannot reshape {} ({} elements) to [{}] ({} elements)", input.str(), e,
                            dims_str(dims), product(dims)));
      }
      p.costs.output_shape.dims = dims;
      p.output_aliases_input = true;
      return p;
    }
    case LayerType::dropout:
      return dropout(std::move(p), options, grad);
    case LayerType::embedding:
      return embedding(std::move(p), options, input_dtype);
    case LayerType::position_embedding:
      if (layer.positions_from_input) return learned_positions(std::move(p), options);
      return added_embedding(std::move(p), options, true);
    case LayerType::token_type_embedding:
      return added_embedding(std::move(p), options, false);
    case LayerType::token_select: {
      expect_rank(input, 2, "[tokens, features]");
      if (layer.index >= input.dims[0]) {
        problem(fmt::format("index {} is outside the sequence of {} tokens", layer.index,
                            input.dims[0]));
      }
      p.costs.output_shape.dims = {input.dims[1]};
      p.output_aliases_input = true;
      if (grad) {  // the gradient of a slice: zeros everywhere else
        p.costs.backward_input.push_back(
            kernel("select_backward", OpClass::elementwise, flops(0), bytes(a * e), each(e)));
      }
      return p;
    }
    case LayerType::multihead_attention:
      return attention_costs(std::move(p), options, grad);
    case LayerType::conv_transpose2d:
      return conv_transpose(std::move(p), options, grad);
    case LayerType::upsample:
      return upsample(std::move(p), options, grad);
    case LayerType::permute:
    case LayerType::transpose:
      return permute(std::move(p), options, grad);
    case LayerType::class_token:
      return class_token(std::move(p), options);
    case LayerType::concat:  // joins several inputs: cost_concat
    case LayerType::add:     // joins two: cost_binary, cost_residual_add
    case LayerType::mul:
      break;
  }
  problem("is not a primitive layer");
}

PrimitiveCosts cost_residual_add(const Layer& layer, const TensorShape& shape, bool fork_needs_grad,
                                 const CostOptions& options) {
  PrimitiveCosts p;
  p.costs.layer = layer;
  p.costs.input_shape = shape;
  p.costs.output_shape = shape;
  p.costs.needs_input_grad = fork_needs_grad;
  I64 a = element_bytes(options.activation_dtype), e = shape.elements();
  p.costs.forward.push_back(
      kernel("add", OpClass::elementwise, flops(e), bytes(3 * a * e), each(e)));
  if (fork_needs_grad) {
    // Gradients arriving at the fork from both branches are summed.
    p.costs.backward_input.push_back(
        kernel("add", OpClass::elementwise, flops(e), bytes(3 * a * e), each(e)));
  }
  return p;
}

}  // namespace epochcast::detail

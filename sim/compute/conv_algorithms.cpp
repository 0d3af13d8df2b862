// The kernels each convolution algorithm launches, with their FLOPs, traffic and GEMM shapes.
#include "sim/compute/conv_algorithms.h"

#include <algorithm>
#include <cmath>

#include "core/model/kernel_launches.h"

namespace epochcast::sim {

namespace {

// Counts are formed in double and narrowed with a cap, so absurd sizes cannot overflow.
std::int64_t narrow(double v) {
  constexpr double kCap = 4.0e18;
  return static_cast<std::int64_t>(std::llround(std::clamp(v, 0.0, kCap)));
}

PerBatch<Flops> flops(double per_sample, double fixed = 0) {
  return {Flops(narrow(per_sample)), Flops(narrow(fixed))};
}
PerBatch<Bytes> bytes(double per_sample, double fixed = 0) {
  return {Bytes(narrow(per_sample)), Bytes(narrow(fixed))};
}
PerBatch<std::int64_t> count(double per_sample, double fixed = 0) {
  return {narrow(per_sample), narrow(fixed)};
}

// cuDNN's transform kernels (layout changes, Winograd and FFT transforms) over `elements`:
// their launches are not published; cut as TensorIterator cuts element-wise kernels.
KernelPart elementwise(std::string what, PerBatch<Flops> f, PerBatch<Bytes> b,
                       PerBatch<std::int64_t> elements) {
  KernelPart part;
  part.what = std::move(what);
  part.work.name = "transform";
  part.work.op_class = OpClass::elementwise;
  part.work.flops = f;
  part.work.bytes = b;
  part.work.launch = launch::elementwise(elements);
  return part;
}

KernelPart gemm_part(std::string what, OpClass op_class, GemmShape shape, PerBatch<Flops> f,
                     PerBatch<Bytes> b, bool tensor_cores) {
  KernelPart part;
  part.what = std::move(what);
  part.work.name = "gemm";
  part.work.op_class = op_class;
  part.work.flops = f;
  part.work.bytes = b;
  part.work.has_gemm_shape = true;
  part.work.gemm = shape;
  part.tensor_cores = tensor_cores;
  return part;
}

PerBatch<std::int64_t> per_sample(double v) {
  return count(v, 0);
}
PerBatch<std::int64_t> fixed(double v) {
  return count(0, v);
}

// The two activations a pass touches per sample, with their channel counts: `source` is read
// (and transformed on the way in), `result` comes out. The weight gradient reads both: x as its
// source and dy in the result slot (its own result, the filter gradient, is not per sample).
struct Roles {
  double source_channels, source_positions;
  double result_channels, result_positions;
};

Roles roles(const ConvGeometry& g) {
  double in_positions = static_cast<double>(g.in_size[0] * g.in_size[1]);
  double out_positions = static_cast<double>(g.out_size[0] * g.out_size[1]);
  double c = static_cast<double>(g.in_channels), k = static_cast<double>(g.out_channels);
  switch (g.pass) {
    case ConvPass::forward:
      return {c, in_positions, k, out_positions};
    case ConvPass::backward_data:
      return {k, out_positions, c, in_positions};
    case ConvPass::backward_weight:
      return {c, in_positions, k, out_positions};
  }
  return {};
}

double window_size(const ConvGeometry& g) {
  return static_cast<double>(g.window[0] * g.window[1]);
}

// The fast algorithms tile what a pass produces: the output (forward; the weight gradient's dy
// is output-sized) or, for the data gradient, the input.
const std::int64_t* produced_size(const ConvGeometry& g) {
  return g.pass == ConvPass::backward_data ? g.in_size : g.out_size;
}

ConvPlan implicit_gemm(const KernelWork& conv, const ConvContext& cx) {
  const ConvGeometry& g = conv.conv;
  const std::int64_t multiple = cx.tensor_cores ? cx.channel_multiple : 1;
  const double c = static_cast<double>(round_up(g.in_channels / g.groups, multiple));
  const double k = static_cast<double>(round_up(g.out_channels / g.groups, multiple));
  const double window = window_size(g);
  GemmShape shape = conv.gemm;  // the counted shape; channels padded below
  switch (g.pass) {
    case ConvPass::forward:
      shape.n = fixed(k);
      shape.k = fixed(c * window);
      shape.split_reduction = false;
      break;
    case ConvPass::backward_data:
      // By stride phase, each reducing over its own taps only (stride_phases).
      shape.n = fixed(c);
      shape.k = fixed(std::ceil(k * window / static_cast<double>(stride_phases(g).with_taps)));
      shape.split_reduction = false;
      break;
    case ConvPass::backward_weight:
      shape.m = fixed(k);
      shape.n = fixed(c * window);
      break;
  }
  ConvPlan plan;
  plan.algorithm = ConvAlgorithm::implicit_gemm;
  plan.parts.push_back(
      gemm_part("implicit GEMM", conv.op_class, shape, conv.flops, conv.bytes, cx.tensor_cores));
  if (cx.tensor_cores && !cx.channels_last) {
    // cuDNN's tensor-core kernels work in NHWC: NCHW tensors are transposed in and out (read
    // and written once more each).
    Roles r = roles(g);
    double elements =
        r.source_channels * r.source_positions + r.result_channels * r.result_positions;
    plan.parts.push_back(elementwise(
        "NCHW<->NHWC transposes", flops(0),
        bytes(2.0 * static_cast<double>(cx.activation_bytes) * elements), per_sample(elements)));
  }
  return plan;
}

bool winograd_applies(const ConvGeometry& g) {
  return g.spatial_dims == 2 && g.groups == 1 && g.window[0] == 3 && g.window[1] == 3 &&
         g.stride[0] == 1 && g.stride[1] == 1 && g.dilation[0] == 1 && g.dilation[1] == 1;
}

ConvPlan winograd(const ConvGeometry& g, const ConvContext& cx) {
  // F(4x4, 3x3): 4x4 outputs per tile, 6x6 transformed elements, 3x3 filter taps.
  constexpr double kTileOut = 4, kTransformed = 36, kTaps = 9;
  const double a = static_cast<double>(cx.activation_bytes);
  const double w = static_cast<double>(cx.weight_bytes);
  const double c = static_cast<double>(g.in_channels), k = static_cast<double>(g.out_channels);
  Roles r = roles(g);
  const std::int64_t* size = produced_size(g);
  const double tiles = std::ceil(static_cast<double>(size[0]) / kTileOut) *
                       std::ceil(static_cast<double>(size[1]) / kTileOut);
  auto transform = [&](std::string what, double channels, double positions) {
    double transformed = kTransformed * tiles * channels;
    // A few additions per transformed element (the 6x6 transforms are sums of small multiples).
    return elementwise(std::move(what), flops(4 * transformed),
                       bytes(a * (channels * positions + transformed)), per_sample(transformed));
  };
  ConvPlan plan;
  plan.algorithm = ConvAlgorithm::winograd;
  if (g.pass == ConvPass::backward_weight) {
    plan.parts.push_back(transform("Winograd input transform", c, r.source_positions));
    plan.parts.push_back(transform("Winograd gradient transform", k, r.result_positions));
    GemmShape shape{fixed(kTransformed), fixed(k), fixed(c), per_sample(tiles)};
    plan.parts.push_back(gemm_part(
        "Winograd batched GEMM (36)", OpClass::conv, shape, flops(2 * kTransformed * tiles * k * c),
        bytes(a * kTransformed * tiles * (c + k), a * kTransformed * k * c), false));
    plan.parts.push_back(elementwise(
        "Winograd filter-gradient transform", flops(0, 4 * kTransformed * k * c),
        bytes(0, a * kTransformed * k * c + w * kTaps * k * c), fixed(kTransformed * k * c)));
    return plan;
  }
  plan.parts.push_back(elementwise("Winograd filter transform", flops(0, 4 * kTransformed * k * c),
                                   bytes(0, w * kTaps * k * c + a * kTransformed * k * c),
                                   fixed(kTransformed * k * c)));
  plan.parts.push_back(
      transform("Winograd input transform", r.source_channels, r.source_positions));
  GemmShape shape{fixed(kTransformed), per_sample(tiles), fixed(r.result_channels),
                  fixed(r.source_channels)};
  plan.parts.push_back(
      gemm_part("Winograd batched GEMM (36)", OpClass::conv, shape,
                flops(2 * kTransformed * tiles * r.result_channels * r.source_channels),
                bytes(a * kTransformed * tiles * (r.source_channels + r.result_channels),
                      a * kTransformed * k * c),
                false));
  plan.parts.push_back(
      transform("Winograd output transform", r.result_channels, r.result_positions));
  return plan;
}

constexpr std::int64_t kFftTile = 32;

bool fft_tiling_applies(const ConvGeometry& g) {
  if (g.groups != 1 || window_size(g) <= 1) return false;
  for (int d = 0; d < g.spatial_dims; ++d) {
    if (g.stride[d] != 1 || g.dilation[d] != 1 || g.window[d] > kFftTile) return false;
  }
  return true;
}

ConvPlan fft_tiling(const ConvGeometry& g, const ConvContext& cx) {
  const double a = static_cast<double>(cx.activation_bytes);
  const double w = static_cast<double>(cx.weight_bytes);
  constexpr double kComplex = 8;  // complex fp32
  const double c = static_cast<double>(g.in_channels), k = static_cast<double>(g.out_channels);
  Roles r = roles(g);
  const std::int64_t* size = produced_size(g);
  double tiles = 1, points = 1, bins = 1;
  for (int d = 0; d < g.spatial_dims; ++d) {
    // Overlap-save: each 32-point tile yields 32 - window + 1 outputs along that dimension.
    double useful = static_cast<double>(kFftTile - g.window[d] + 1);
    tiles *= std::ceil(static_cast<double>(size[d]) / useful);
    points *= kFftTile;
    bins *= d == g.spatial_dims - 1 ? kFftTile / 2 + 1 : kFftTile;  // real-to-complex
  }
  // A radix-2 FFT of n points: about 5 n log2 n real FLOPs, half that for real input.
  const double fft_flops = 2.5 * points * std::log2(points);
  auto forward_fft = [&](std::string what, double channels, double positions) {
    return elementwise(std::move(what), flops(tiles * channels * fft_flops),
                       bytes(a * channels * positions + kComplex * tiles * channels * bins),
                       per_sample(tiles * channels * bins));
  };
  auto filter_fft = [&](std::string what) {
    return elementwise(std::move(what), flops(0, k * c * fft_flops),
                       bytes(0, w * k * c * window_size(g) + kComplex * k * c * bins),
                       fixed(k * c * bins));
  };
  // One complex product per frequency bin: four real multiply-adds per complex one.
  auto products = [&](GemmShape shape, double per_sample_macs, PerBatch<Bytes> traffic) {
    return gemm_part("FFT complex GEMM per bin", OpClass::conv, shape,
                     flops(2 * 4 * per_sample_macs), traffic, false);
  };
  ConvPlan plan;
  plan.algorithm = ConvAlgorithm::fft_tiling;
  if (g.pass == ConvPass::backward_weight) {
    plan.parts.push_back(forward_fft("FFT of the input tiles", c, r.source_positions));
    plan.parts.push_back(forward_fft("FFT of the gradient tiles", k, r.result_positions));
    GemmShape shape{fixed(bins), fixed(k), fixed(c), per_sample(4 * tiles)};
    plan.parts.push_back(
        products(shape, bins * tiles * k * c,
                 bytes(kComplex * bins * tiles * (c + k), kComplex * bins * k * c)));
    plan.parts.push_back(filter_fft("inverse FFT of the filter gradient"));
    return plan;
  }
  plan.parts.push_back(filter_fft("FFT of the filters"));
  plan.parts.push_back(
      forward_fft("FFT of the input tiles", r.source_channels, r.source_positions));
  GemmShape shape{fixed(bins), per_sample(tiles), fixed(r.result_channels),
                  fixed(4 * r.source_channels)};
  plan.parts.push_back(
      products(shape, bins * tiles * r.result_channels * r.source_channels,
               bytes(kComplex * bins * tiles * (r.source_channels + r.result_channels),
                     kComplex * bins * k * c)));
  plan.parts.push_back(elementwise("inverse FFT of the output tiles",
                                   flops(tiles * r.result_channels * fft_flops),
                                   bytes(kComplex * tiles * r.result_channels * bins +
                                         a * r.result_channels * r.result_positions),
                                   per_sample(tiles * r.result_channels * bins)));
  return plan;
}

// oneDNN's direct kernels unroll at most 28 output columns a block (ur_w) and refuse code past
// 256 KiB, counting 15 bytes of code a multiply-add instruction of the unrolled block: the
// window's width x the input channels of a block (16, or all of them below 16: a first layer)
// x the block's columns, once for the middle and once more for each padded edge. The data
// gradient runs the window flipped, so what overhangs either edge, (width - 1 - padding) /
// stride, must fit the block; the weight gradient's kernel takes windows up to 14 wide.
constexpr std::int64_t kOnednnUnroll = 28, kOnednnCodeBytes = 256 * 1024, kOnednnBytesPerFma = 15,
                       kOnednnChannelBlock = 16, kOnednnWeightGradientWidth = 14;

// im2col and a GEMM (oneDNN's gemm_convolution.cpp): the column matrix (input channels x window
// x output positions a sample) is written by im2col and read by the GEMM, or, for the data
// gradient, written by the GEMM and added back into the input gradient by col2im. Its traffic
// is what the direct kernel does not pay. The GEMMs keep the convolution's class (its
// efficiency is the library's, whichever way it computes).
ConvPlan im2col_gemm(const KernelWork& conv, const ConvContext& cx) {
  const ConvGeometry& g = conv.conv;
  const double a = static_cast<double>(cx.activation_bytes);
  const double w = static_cast<double>(cx.weight_bytes);
  const double groups = static_cast<double>(std::max<std::int64_t>(1, g.groups));
  const double c = static_cast<double>(g.in_channels) / groups;
  const double k = static_cast<double>(g.out_channels) / groups;
  const double window = window_size(g);
  // Unused spatial dimensions are 1, as roles() counts positions.
  const double in_positions = static_cast<double>(g.in_size[0] * g.in_size[1]);
  const double out_positions = static_cast<double>(g.out_size[0] * g.out_size[1]);
  const double columns = groups * c * window * out_positions;  // a sample's column matrix
  const double inputs = groups * c * in_positions, outputs = groups * k * out_positions;
  const double weights = groups * k * c * window;
  const KernelPart im2col =
      elementwise("im2col", flops(0), bytes(a * (inputs + columns)), per_sample(columns));
  ConvPlan plan;
  plan.algorithm = ConvAlgorithm::im2col_gemm;
  switch (g.pass) {
    case ConvPass::forward:
      plan.parts.push_back(im2col);
      plan.parts.push_back(gemm_part(
          "im2col GEMM", conv.op_class,
          GemmShape{fixed(groups), per_sample(out_positions), fixed(k), fixed(c * window)},
          conv.flops, bytes(a * (columns + outputs), w * weights), false));
      break;
    case ConvPass::backward_data:
      plan.parts.push_back(gemm_part(
          "GEMM into the columns", conv.op_class,
          GemmShape{fixed(groups), per_sample(out_positions), fixed(c * window), fixed(k)},
          conv.flops, bytes(a * (outputs + columns), w * weights), false));
      // One addition a column element, into the input gradient it reads and writes.
      plan.parts.push_back(elementwise("col2im", flops(columns), bytes(a * (columns + 2 * inputs)),
                                       per_sample(columns)));
      break;
    case ConvPass::backward_weight:
      plan.parts.push_back(im2col);
      // Laid out whole, the column matrix leaves the caches before the GEMM reads it, and the
      // GEMM's packing of it (its transposed operand) streams it from memory and back: once
      // read, once written. A block at a time, it is packed where im2col left it.
      if (cx.onednn && onednn_full_columns(g, cx)) {
        plan.parts.push_back(elementwise("GEMM packs the column matrix", flops(0),
                                         bytes(2 * a * columns), per_sample(columns)));
      }
      plan.parts.push_back(gemm_part(
          "GEMM over the columns", conv.op_class,
          GemmShape{fixed(groups), fixed(k), fixed(c * window), per_sample(out_positions)},
          conv.flops, bytes(a * (columns + outputs), w * weights), false));
      break;
  }
  return plan;
}

}  // namespace

bool onednn_full_columns(const ConvGeometry& g, const ConvContext& cx) {
  if (g.pass == ConvPass::forward) return false;  // forward blocks its columns for the L2 cache
  // gemm_convolution_utils.cpp, init_conf (oneDNN 2.x): scratchpad_limit, and the f32 column
  // buffer's "required memory overflows" test for the backward passes. In double: products of
  // a model's sizes may pass 2^63.
  constexpr double kScratchpadPerThread = 15, kScratchpadMost = 1024.0 * 1024 * 1024;
  constexpr double kFloatBytes = 4;  // the buffer's element and the reduction buffer's booking
  const auto at = [](std::int64_t v) { return static_cast<double>(v); };
  const double a = at(cx.activation_bytes), threads = at(std::max<std::int64_t>(1, cx.threads));
  const double batch = at(std::max<std::int64_t>(1, cx.batch));
  const double groups = at(std::max<std::int64_t>(1, g.groups));
  const double in_positions = at(g.in_size[0] * g.in_size[1]);
  const double out_positions = at(g.out_size[0] * g.out_size[1]);
  const double source = batch * at(g.in_channels) * in_positions * a;
  const double destination = batch * at(g.out_channels) * out_positions * a;
  const double weights =
      at(g.out_channels) * at(g.in_channels) / groups * window_size(g) * at(cx.weight_bytes);
  const double limit =
      std::min(kScratchpadMost, kScratchpadPerThread * threads * (source + weights + destination));
  // The weight gradient's reduction buffer is booked first, threads x weights "elements" of the
  // weights' size in bytes.
  const double booked = g.pass == ConvPass::backward_weight ? kFloatBytes * threads * weights : 0;
  // Threads share one column matrix where a sample's positions give each at least 256 (oneDNN's
  // outer_threading off), else each computes samples of its own, with a matrix each.
  constexpr double kPositionsPerThread = 256;
  const double buffers = out_positions / threads >= kPositionsPerThread ? 1 : threads;
  const double columns = at(g.in_channels) / groups * window_size(g) * out_positions;
  return limit - booked >= buffers * columns * kFloatBytes;
}

bool onednn_direct_applies(const ConvGeometry& g) {
  // In double: a model's sizes are checked below 2^44 each, not their products.
  const int d = std::clamp(g.spatial_dims - 1, 0, 1);  // the width: the last spatial dimension
  const auto at = [](std::int64_t v) { return static_cast<double>(v); };
  const double width = at(g.window[d]), stride = at(g.stride[d]), left = at(g.padding[d]);
  const double right =
      std::max(0.0, (at(g.out_size[d]) - 1) * stride + (width - 1) * at(g.dilation[d]) + 1 -
                        at(g.in_size[d]) - left);
  const double unroll_most = at(kOnednnUnroll);
  auto code_fits = [&](double channels, double columns) {
    const double copies = 1 + (left > 0 ? 1 : 0) + (right > 0 ? 1 : 0);
    return copies * width * std::min(channels, at(kOnednnChannelBlock)) *
               std::min(columns, unroll_most) * at(kOnednnBytesPerFma) <=
           at(kOnednnCodeBytes);
  };
  switch (g.pass) {
    case ConvPass::forward: {
      const double unroll = std::min(at(g.out_size[d]), unroll_most);
      return left <= unroll && right <= unroll &&
             code_fits(at(g.in_channels) / at(std::max<std::int64_t>(1, g.groups)),
                       at(g.out_size[d]));
    }
    case ConvPass::backward_data:
      return width - 1 - left <= unroll_most * stride &&
             width - 1 - right <= unroll_most * stride &&
             code_fits(at(kOnednnChannelBlock), at(g.in_size[d]));
    case ConvPass::backward_weight:
      return width <= at(kOnednnWeightGradientWidth);
  }
  return true;
}

const char* conv_algorithm_name(ConvAlgorithm algorithm) {
  switch (algorithm) {
    case ConvAlgorithm::implicit_gemm:
      return "implicit GEMM";
    case ConvAlgorithm::winograd:
      return "Winograd F(4x4,3x3)";
    case ConvAlgorithm::fft_tiling:
      return "FFT, 32-point tiles";
    case ConvAlgorithm::im2col_gemm:
      return "im2col + GEMM";
  }
  return "";
}

std::int64_t round_up(std::int64_t value, std::int64_t multiple) {
  if (multiple <= 1) return value;
  return (value + multiple - 1) / multiple * multiple;
}

std::vector<ConvPlan> conv_plans(const KernelWork& conv, const ConvContext& context) {
  if (context.onednn) {
    if (!onednn_direct_applies(conv.conv)) return {im2col_gemm(conv, context)};
    ConvPlan direct = implicit_gemm(conv, context);
    direct.parts.front().what = "direct (oneDNN)";
    return {direct};
  }
  std::vector<ConvPlan> plans;
  plans.push_back(implicit_gemm(conv, context));
  if (winograd_applies(conv.conv)) plans.push_back(winograd(conv.conv, context));
  if (fft_tiling_applies(conv.conv)) plans.push_back(fft_tiling(conv.conv, context));
  return plans;
}

}  // namespace epochcast::sim

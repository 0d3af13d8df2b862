// Shape inference and cost counting: what one training step of a model asks of a GPU.
//
// Every primitive layer becomes a list of kernels, the way an eager framework (PyTorch on CUDA)
// launches them, for the forward pass and for the two halves of the backward pass (gradient
// with respect to the input, and with respect to the weights). Each kernel carries its FLOPs
// and memory traffic split into a part that grows with the batch and a part that does not
// (weights read once per step), plus the shape of its parallel work, so the simulator can apply
// a roofline with wave quantisation at any batch size.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/enum_name.h"
#include "core/model/model_spec.h"
#include "core/model/tensor_shape.h"
#include "core/units.h"

namespace epochcast {

// Kinds of kernel that run at different efficiencies on a GPU; calibration fits one
// efficiency per class.
enum class OpClass {
  gemm,
  conv,
  depthwise_conv,
  elementwise,
  normalization,
  pooling,
  reduction,
  embedding,
  optimizer,
};
inline constexpr std::string_view kOpClassNames[] = {
    "gemm",    "conv",      "depthwise_conv", "elementwise", "normalization",
    "pooling", "reduction", "embedding",      "optimizer"};
inline std::string_view name_of(OpClass value) {
  return enum_name(kOpClassNames, value);
}
inline constexpr std::size_t kOpClassCount = 9;

// A quantity that is `per_sample` × batch + `fixed` for one step at a given batch size.
template <typename Q>
struct PerBatch {
  Q per_sample{};
  Q fixed{};

  // Exact; callers keep batch × per_sample inside 64 bits (see scaled() for untrusted sizes).
  Q at(std::int64_t batch) const { return per_sample * batch + fixed; }
  PerBatch& operator+=(const PerBatch& other) {
    per_sample += other.per_sample;
    fixed += other.fixed;
    return *this;
  }
};

// per_sample × batch + fixed in double: never overflows, for sizes that come from user input.
inline double scaled(const PerBatch<std::int64_t>& q, std::int64_t batch) {
  return static_cast<double>(q.per_sample) * static_cast<double>(batch) +
         static_cast<double>(q.fixed);
}
template <typename Q>
double scaled(const PerBatch<Q>& q, std::int64_t batch) {
  return static_cast<double>(q.per_sample.value()) * static_cast<double>(batch) +
         static_cast<double>(q.fixed.value());
}

// How BLAS is handed a product's operands, in its column-major terms: whether each is
// transposed ("t") or not ("n"). nn.Linear's forward y = x·Wᵀ is "tn", its input gradient
// dx = dy·W "nn" and its weight gradient dW = dyᵀ·x "nt"; torch.mm and torch.bmm of
// contiguous tensors are "nn". cuBLAS keeps different kernels (tiles) for each.
enum class GemmLayout { nn, tn, nt };

// Matrix-multiply structure of gemm and convolution kernels (convolution as implicit GEMM):
// `batches` independent products of (m × k) by (k × n). Used for wave quantisation.
struct GemmShape {
  PerBatch<std::int64_t> batches{0, 1};
  PerBatch<std::int64_t> m, n, k;
  GemmLayout layout = GemmLayout::nn;
  // Handed to BLAS (cuBLAS: nn.Linear, matmul, bmm), or computed inside a fused kernel with
  // tiles of its own (FlashAttention, memory-efficient attention).
  bool blas = true;
  // Whether the library may split the reduction (k) across blocks when too few output tiles
  // fill the GPU (cuBLAS's split-K; cuDNN's weight-gradient kernels). cuDNN's forward and
  // data-gradient implicit GEMMs do not: a block reduces its tile's whole window of channels.
  bool split_reduction = true;
};

// What a convolution kernel computes, for the choice of algorithm: cuDNN's fast algorithms
// (Winograd, FFT) apply to some geometries only, and tensor cores pad the channels. Sizes are per
// spatial dimension (1-D convolutions use entry 0; unused entries are 1). For the data gradient
// the roles of input and output swap, as they do in the library's call.
enum class ConvPass { forward, backward_data, backward_weight };
struct ConvGeometry {
  ConvPass pass = ConvPass::forward;
  int spatial_dims = 2;
  std::int64_t in_channels = 0, out_channels = 0, groups = 1;  // of the layer
  std::int64_t window[2] = {1, 1}, stride[2] = {1, 1}, dilation[2] = {1, 1};
  std::int64_t padding[2] = {0, 0};
  std::int64_t in_size[2] = {1, 1}, out_size[2] = {1, 1};  // the layer's input and output
};

// The data gradient of a strided convolution as cuDNN computes it: by stride phase (an input
// position's phase is its index modulo the stride, per dimension), each phase a stride-1
// convolution over its own positions with only the filter taps that land on them, so that its
// work is the forward's rather than stride^2 times it. `with_taps` phases have at least one tap
// (min(stride, window) per dimension), of `all` (the stride's product); every tap belongs to
// exactly one phase. A stride of 1 is one phase with every tap.
struct StridePhases {
  std::int64_t with_taps = 1, all = 1;
};
StridePhases stride_phases(const ConvGeometry& g);

// How the library that runs a kernel cuts it into CUDA thread blocks, in the terms of its launch
// code; sim/compute/kernel_launch.h turns it into a grid for a GPU and a memory format (GEMMs
// and convolutions are cut into tiles instead: sim/compute/gemm_tiles.h).
enum class LaunchKind {
  // ceil(units / per_block) blocks of `threads`: element-wise kernels (TensorIterator: 512
  // elements a block), a block per row (LayerNorm) or per chunk (multi-tensor kernels), one
  // block in all (units {0, 1}).
  blocks,
  // Softmax and log-softmax over `units` rows of `length` elements of `element_bytes`: a warp
  // per row when rows are short, else a block per row.
  softmax,
  // Softmax over the channels of each position (`length` channels, `units` positions per
  // sample, the samples outermost): the loss of a label per pixel.
  spatial_softmax,
  // A reduction (ATen's Reduce.cuh) to `units` outputs of `length` inputs each, laid out as
  // `layout` says.
  reduction,
  // BatchNorm over `units` channels of `length` positions each (spatial size x batch): the
  // statistics pass (and the fused backward), and the normalisation pass.
  channel_statistics,
  channel_transform,
  // LayerNorm's gamma and beta gradients: `units` columns (features), each summed over `length`
  // rows.
  column_sums,
};
inline constexpr std::string_view kLaunchKindNames[] = {"blocks",
                                                        "softmax",
                                                        "spatial_softmax",
                                                        "reduction",
                                                        "channel_statistics",
                                                        "channel_transform",
                                                        "column_sums"};
inline std::string_view name_of(LaunchKind value) {
  return enum_name(kLaunchKindNames, value);
}

// Where a reduction's inputs lie: along rows (adjacent: a row sum), across rows (a column sum,
// such as a bias gradient over [rows, features]), or over the batch and positions of a channel
// (adjacent in channels-first memory, across rows in channels-last).
enum class ReductionLayout { rows, columns, channels };

struct KernelLaunch {
  LaunchKind kind = LaunchKind::blocks;
  PerBatch<std::int64_t> units;   // elements, rows, chunks, outputs, channels or columns
  PerBatch<std::int64_t> length;  // row length, inputs per output, positions per channel, rows
  std::int64_t per_block = 512;   // `blocks`: units per block
  int threads = 128;              // `blocks`: threads per block
  int element_bytes = 4;          // `softmax`: the path depends on a row's bytes
  ReductionLayout layout = ReductionLayout::columns;  // `reduction`
  // A 4-D activation ([batch, channels, height, width]): the one PyTorch's channels_last memory
  // format lays out as NHWC (channel layouts and BatchNorm's kernels follow it).
  bool four_d = false;
};

struct KernelWork {
  std::string_view name;  // e.g. "addmm", "conv_dgrad", "threshold_backward"
  OpClass op_class = OpClass::elementwise;
  PerBatch<Flops> flops;
  PerBatch<Bytes> bytes;  // device-memory traffic, read + written
  // How its library launches it (kernels without a GEMM shape; see KernelLaunch).
  KernelLaunch launch;
  bool has_gemm_shape = false;
  GemmShape gemm;
  bool has_conv_geometry = false;  // convolutions (not depthwise): the device model picks an
  ConvGeometry conv;               // algorithm for them
  // Skipped in evaluation (validation) passes: dropout, batch-norm statistics.
  bool training_only = false;
  // Elements of a Bernoulli mask it draws (dropout's): a GPU draws them inside the kernel, in its
  // FLOPs; a CPU one after another on one core (GpuEfficiency::cpu_bernoulli_ns).
  PerBatch<std::int64_t> bernoulli_draws;
};

struct ParamTensor {
  std::string name;  // "layer1.0.conv1.weight"
  std::int64_t elements = 0;
};

// The costs of one primitive layer, per step of `batch` samples on one device.
struct LayerCosts {
  Layer layer;               // hyper-parameters with widths resolved against the input
  std::string display_name;  // torchsummary-style "Conv1d-1" (empty for non-modules)
  TensorShape input_shape;   // first input; a residual add has two of this shape
  TensorShape output_shape;
  std::int64_t in_features = 0;  // linear in_features / conv in_channels / norm features

  std::int64_t params = 0;   // trainable parameters owned by this layer (tied ones: 0)
  std::int64_t buffers = 0;  // non-trainable state (batch-norm running statistics)
  std::vector<ParamTensor> param_tensors;
  std::int64_t macs_per_sample = 0;  // multiply-accumulates of gemm/conv work, as papers count

  bool needs_input_grad = true;  // false before the first layer with parameters
  std::vector<KernelWork> forward;
  std::vector<KernelWork> backward_input;   // gradient w.r.t. the layer's input
  std::vector<KernelWork> backward_weight;  // gradient w.r.t. its parameters

  // Bytes kept alive from forward to backward that this layer is the first to hold
  // (tensors shared by several layers are counted once, at their first holder).
  PerBatch<Bytes> saved;

  PerBatch<Flops> forward_flops() const;
  PerBatch<Flops> backward_input_flops() const;
  PerBatch<Flops> backward_weight_flops() const;
  PerBatch<Bytes> forward_bytes() const;
  PerBatch<Bytes> backward_bytes() const;
  std::size_t forward_kernels() const { return forward.size(); }
  std::size_t backward_kernels() const { return backward_input.size() + backward_weight.size(); }
};

// Element sizes used for counting bytes. Parameters, gradients and optimizer state stay in
// parameter_dtype (fp32 master weights under mixed precision).
struct CostOptions {
  DType activation_dtype = DType::float32;
  DType parameter_dtype = DType::float32;
};

struct ModelAnalysis {
  std::string model_name;
  TensorShape input_shape;
  DType input_dtype = DType::float32;
  TensorShape output_shape;
  CostOptions options;
  std::vector<LayerCosts> layers;  // primitives in execution order

  std::int64_t params = 0;
  std::int64_t buffers = 0;
  std::int64_t macs_per_sample = 0;
  PerBatch<Flops> forward_flops;
  PerBatch<Flops> backward_input_flops;
  PerBatch<Flops> backward_weight_flops;
  PerBatch<Bytes> saved_activations;
  std::int64_t forward_kernels = 0;
  std::int64_t backward_kernels = 0;
  // Parameter tensors in registration order (DDP buckets them in reverse).
  std::vector<ParamTensor> param_tensors;

  // torchsummary's figures, computed its way (float32, MB = 2^20 bytes): the input, twice the
  // sum of every module's output ("Forward/backward pass size"), and the parameters.
  double torchsummary_input_mb = 0;
  double torchsummary_forward_backward_mb = 0;
  double torchsummary_params_mb = 0;
};

// Infers shapes and counts costs. Raises InputError at the offending layer (index, name and
// file position) when shapes do not fit: a kernel larger than its padded input, channels that
// do not divide into groups, a residual whose branches disagree, and so on.
ModelAnalysis analyze_model(const ModelSpec& spec, const CostOptions& options = {});

// How training reads a model's output as class scores: [classes] gives one label per sample,
// [tokens, classes] one per token (a language model), [classes, height, width] one per pixel
// (segmentation, trained with cross-entropy at every pixel as torchvision's segmentation
// references do; PyTorch's cross_entropy takes [batch, classes, height, width] scores as they
// are).
struct OutputClasses {
  std::int64_t classes = 0;
  std::int64_t labels_per_sample = 1;
  std::vector<std::int64_t> label_shape;  // per sample: [] , [tokens] or [height, width]
};
OutputClasses output_classes(const TensorShape& output);

// Cross-entropy loss on the model's output (log-softmax + negative log-likelihood over the
// class dimension, one term per label), as a pseudo-layer the simulator appends after the model.
LayerCosts cross_entropy_costs(const TensorShape& logits, const CostOptions& options);

}  // namespace epochcast

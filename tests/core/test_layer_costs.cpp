// Layer cost formulas against closed forms computed here, and the bookkeeping rules of the
// analysis: first layers skip input gradients, shared tensors are held once, residuals fork.
#include <algorithm>

#include <catch2/catch.hpp>

#include "core/model/analysis.h"

using namespace epochcast;

namespace {

ModelAnalysis analyze_text(const std::string& layers, const std::string& shape = "[64]",
                           const std::string& dtype = "float32") {
  std::string text = "kind: model\nname: t\ninput: {shape: " + shape + ", dtype: " + dtype +
                     "}\nlayers:\n" + layers;
  return analyze_model(load_model_from_string(text, "test.yaml"));
}

std::int64_t total_flops(const std::vector<KernelWork>& kernels, std::int64_t batch) {
  std::int64_t sum = 0;
  for (const KernelWork& k : kernels)
    sum += k.flops.at(batch).value();
  return sum;
}

}  // namespace

TEST_CASE("a linear layer costs 2·in·out FLOPs per sample each way, plus its bias") {
  const std::int64_t in = 64, out = 32;
  ModelAnalysis a = analyze_text(
      "  - {type: linear, out_features: 32}\n"
      "  - {type: linear, out_features: 8}\n");
  const LayerCosts& first = a.layers[0];
  CHECK(first.params == in * out + out);
  CHECK(first.macs_per_sample == in * out);
  CHECK(first.forward_flops().per_sample.value() == 2 * in * out + out);
  CHECK(first.backward_weight_flops().per_sample.value() == 2 * in * out + out);
  // The model input needs no gradient, so the first layer skips dX; the second does not.
  CHECK_FALSE(first.needs_input_grad);
  CHECK(first.backward_input.empty());
  const LayerCosts& second = a.layers[1];
  CHECK(second.needs_input_grad);
  CHECK(second.backward_input_flops().per_sample.value() == 2 * out * 8);
  // Weights are read once per step whatever the batch.
  CHECK(first.forward[0].bytes.fixed.value() == 4 * (in * out + out));
  CHECK(first.forward[0].bytes.per_sample.value() == 4 * (in + out));
}

TEST_CASE("gemm shapes put the batch where the matrices grow with it") {
  ModelAnalysis a = analyze_text(
      "  - {type: linear, out_features: 32}\n"
      "  - {type: linear, out_features: 8}\n");
  const KernelWork& forward = a.layers[1].forward[0];
  REQUIRE(forward.has_gemm_shape);
  CHECK(forward.gemm.m.per_sample == 1);  // one row per sample
  CHECK(forward.gemm.n.fixed == 8);
  CHECK(forward.gemm.k.fixed == 32);
  const KernelWork& weight_grad = a.layers[1].backward_weight[0];
  CHECK(weight_grad.gemm.k.per_sample == 1);  // dW reduces over the batch
  CHECK(weight_grad.launch.units.per_sample == 0);
  CHECK(weight_grad.launch.units.fixed == 8 * 32);
  // As cuBLAS is handed them: y = x·Wᵀ "tn", dx = dy·W "nn", dW = dyᵀ·x "nt".
  CHECK(forward.gemm.layout == GemmLayout::tn);
  CHECK(a.layers[1].backward_input[0].gemm.layout == GemmLayout::nn);
  CHECK(weight_grad.gemm.layout == GemmLayout::nt);
  for (std::int64_t batch : {1, 7, 256}) {
    CHECK(forward.flops.at(batch).value() ==
          2 * forward.gemm.m.at(batch) * forward.gemm.n.at(batch) * forward.gemm.k.at(batch) +
              8 * batch);
  }
}

TEST_CASE("convolution output lengths follow floor((L + 2p - d(k-1) - 1)/s) + 1") {
  const std::int64_t length = 100, kernel = 7, pad = 2, stride = 3, dilation = 2;
  ModelAnalysis a = analyze_text(
      "  - {type: conv1d, out_channels: 6, kernel: 7, padding: 2, stride: 3, dilation: 2}\n",
      "[4, 100]");
  std::int64_t expected = (length + 2 * pad - dilation * (kernel - 1) - 1) / stride + 1;
  CHECK(a.output_shape.dims == std::vector<std::int64_t>{6, expected});
  CHECK(a.layers[0].macs_per_sample == 6 * expected * 4 * kernel);
  CHECK(a.params == 6 * 4 * kernel + 6);
}

TEST_CASE("grouped and depthwise convolutions divide the work by the groups") {
  ModelAnalysis grouped = analyze_text(
      "  - {type: conv2d, out_channels: 16, kernel: 3, padding: 1, groups: 4, bias: false}\n",
      "[8, 10, 10]");
  CHECK(grouped.params == 16 * (8 / 4) * 9);
  CHECK(grouped.macs_per_sample == 16 * 100 * (8 / 4) * 9);
  CHECK(grouped.layers[0].forward[0].op_class == OpClass::conv);

  ModelAnalysis depthwise = analyze_text(
      "  - {type: conv2d, out_channels: 8, kernel: 3, padding: 1, groups: 8, bias: false}\n",
      "[8, 10, 10]");
  CHECK(depthwise.params == 8 * 9);
  CHECK(depthwise.layers[0].forward[0].op_class == OpClass::depthwise_conv);
}

TEST_CASE("a strided convolution's data gradient does the forward's work, phase by phase") {
  // cuDNN computes it by stride phase (stride_phases): for 1x1 at stride 2 one phase of the four
  // has a tap, over a quarter of the input positions; for 3x3 at stride 2 all four do, 9/4 taps
  // each on average. Either way the forward's multiply-adds, not stride^2 times them.
  for (const char* conv :
       {"{type: conv2d, out_channels: 32, kernel: 1, stride: 2, bias: false}",
        "{type: conv2d, out_channels: 32, kernel: 3, stride: 2, padding: 1, bias: false}",
        "{type: conv2d, out_channels: 32, kernel: 3, padding: 1, bias: false}"}) {
    ModelAnalysis a = analyze_text(
        std::string("  - {type: conv2d, out_channels: 16, kernel: 1, bias: false}\n  - ") + conv +
            "\n",
        "[8, 56, 56]");
    INFO(conv);
    REQUIRE(a.layers[1].backward_input.size() == 1);
    CHECK(total_flops(a.layers[1].backward_input, 1) == total_flops(a.layers[1].forward, 1));
  }
  ConvGeometry g;
  g.window[0] = g.window[1] = 3;
  CHECK((stride_phases(g).with_taps == 1 && stride_phases(g).all == 1));
  g.stride[0] = g.stride[1] = 2;
  CHECK((stride_phases(g).with_taps == 4 && stride_phases(g).all == 4));
  g.window[0] = g.window[1] = 1;
  CHECK((stride_phases(g).with_taps == 1 && stride_phases(g).all == 4));
}

TEST_CASE("a tensor held by two layers is counted once") {
  // ReLU holds its output for backward; the following linear holds the same tensor as input.
  ModelAnalysis a = analyze_text(
      "  - {type: linear, out_features: 100}\n"
      "  - relu\n"
      "  - {type: linear, out_features: 10}\n");
  const std::int64_t input_bytes = 64 * 4, relu_out_bytes = 100 * 4;
  CHECK(a.layers[0].saved.per_sample.value() == input_bytes);
  CHECK(a.layers[1].saved.per_sample.value() == relu_out_bytes);
  CHECK(a.layers[2].saved.per_sample.value() == 0);
  CHECK(a.saved_activations.per_sample.value() == input_bytes + relu_out_bytes);
}

TEST_CASE("layers before the first parameter record nothing for backward") {
  ModelAnalysis a = analyze_text(
      "  - relu\n  - {type: dropout, p: 0.5}\n"
      "  - {type: linear, out_features: 4}\n");
  CHECK(a.layers[0].backward_kernels() == 0);
  CHECK(a.layers[0].saved.per_sample.value() == 0);
  CHECK(a.layers[1].backward_kernels() == 0);
  CHECK(a.layers[1].saved.per_sample.value() == 0);
}

TEST_CASE("dropout holds a one-byte mask per element and costs nothing at p = 0") {
  ModelAnalysis a = analyze_text(
      "  - {type: linear, out_features: 50}\n"
      "  - {type: dropout, p: 0.1}\n"
      "  - {type: dropout, p: 0}\n");
  CHECK(a.layers[1].saved.per_sample.value() == 50);
  CHECK(a.layers[1].forward.at(0).training_only);
  // Its mask: one Bernoulli draw an element (which a CPU makes one after another).
  CHECK(a.layers[1].forward.at(0).bernoulli_draws.per_sample == 50);
  CHECK(a.layers[1].forward.at(0).bernoulli_draws.fixed == 0);
  CHECK(a.layers[2].forward_kernels() == 0);
}

TEST_CASE("max pooling keeps int64 indices, average pooling keeps nothing") {
  ModelAnalysis a = analyze_text(
      "  - {type: conv2d, out_channels: 2, kernel: 1}\n"
      "  - {type: maxpool2d, kernel: 2}\n"
      "  - {type: avgpool2d, kernel: 2}\n",
      "[2, 8, 8]");
  const std::int64_t pooled = 2 * 4 * 4;
  CHECK(a.layers[1].output_shape.dims == std::vector<std::int64_t>{2, 4, 4});
  // The conv output (its input) plus 8-byte indices per output element.
  CHECK(a.layers[1].saved.per_sample.value() == 2 * 8 * 8 * 4 + 8 * pooled);
  CHECK(a.layers[2].saved.per_sample.value() == 0);
  CHECK(a.output_shape.dims == std::vector<std::int64_t>{2, 2, 2});
}

TEST_CASE("a residual block adds its branches and sums their gradients at the fork") {
  ModelAnalysis a = analyze_text(
      "  - {type: linear, out_features: 64}\n"
      "  - type: residual\n"
      "    body:\n"
      "      - {type: linear, out_features: 64}\n"
      "      - relu\n");
  const LayerCosts& join = a.layers.back();
  CHECK(join.layer.type == LayerType::add);
  CHECK(join.forward_kernels() == 1);
  CHECK(join.backward_input.size() == 1);
  CHECK(join.forward[0].flops.per_sample.value() == 64);
  CHECK(a.output_shape.dims == std::vector<std::int64_t>{64});
}

TEST_CASE("bottleneck blocks project the shortcut only when the shape changes") {
  ModelAnalysis a = analyze_text("  - {type: bottleneck, width: 4, repeat: 2}\n", "[16, 8, 8]");
  int projections = 0;
  for (const LayerCosts& layer : a.layers) {
    if (layer.layer.name.find("downsample.0") != std::string::npos) ++projections;
  }
  CHECK(projections == 0);  // 16 channels in, 4 x 4 out: the shape is kept
  ModelAnalysis b =
      analyze_text("  - {type: bottleneck, width: 8, repeat: 2, stride: 2}\n", "[16, 8, 8]");
  projections = 0;
  for (const LayerCosts& layer : b.layers) {
    if (layer.layer.name.find("downsample.0") != std::string::npos) ++projections;
  }
  CHECK(projections == 1);  // only the first instance strides and widens
  CHECK(b.output_shape.dims == std::vector<std::int64_t>{32, 4, 4});
}

TEST_CASE("attention costs 4·L·d² + 2·L²·d multiply-adds and holds the L² probabilities") {
  const std::int64_t len = 16, d = 32, heads = 4;
  ModelAnalysis a = analyze_text(
      "  - {type: linear, out_features: 32}\n"
      "  - {type: multihead_attention, heads: 4, dropout: 0}\n",
      "[16, 32]");
  const LayerCosts& attention = a.layers[1];
  CHECK(attention.params == 4 * d * d + 4 * d);
  CHECK(attention.macs_per_sample == 4 * len * d * d + 2 * len * len * d);
  // Projections, scores and context as 2·MACs plus the small elementwise parts.
  CHECK(attention.forward_flops().per_sample.value() >= 2 * attention.macs_per_sample);
  const std::int64_t held = 4 * (len * d /*input*/ + 3 * len * d /*q,k,v*/ +
                                 heads * len * len /*probabilities*/ + len * d /*context*/);
  CHECK(attention.saved.per_sample.value() == held);
}

TEST_CASE("attention: sdpa runs one fused kernel each way and holds no L² scores") {
  const std::int64_t len = 16, d = 32, heads = 4;
  auto analyse = [&](const std::string& options) {
    return analyze_text(
        "  - {type: linear, out_features: 32}\n"
        "  - {type: multihead_attention, heads: 4, dropout: 0.1" +
            options + "}\n",
        "[16, 32]");
  };
  const LayerCosts math = analyse("").layers[1];
  const LayerCosts sdpa = analyse(", attention: sdpa").layers[1];
  CHECK(sdpa.params == math.params);
  CHECK(sdpa.macs_per_sample == math.macs_per_sample);
  auto count = [](const std::vector<KernelWork>& kernels, std::string_view name) {
    return std::count_if(kernels.begin(), kernels.end(),
                         [&](const KernelWork& k) { return k.name == name; });
  };
  // Input projection, the fused kernel, merging the heads, output projection.
  CHECK(sdpa.forward.size() == 4);
  CHECK(count(sdpa.forward, "_scaled_dot_product_attention") == 1);
  CHECK(count(sdpa.forward, "softmax") == 0);
  CHECK(count(sdpa.backward_input, "_scaled_dot_product_attention_backward") == 1);
  // The fused forward does the two products' FLOPs (4·L²·d); its backward five of them.
  auto fused_flops = [&](const std::vector<KernelWork>& kernels, std::string_view name) {
    for (const KernelWork& k : kernels)
      if (k.name == name) return k.flops.at(1).value();
    return std::int64_t{0};
  };
  CHECK(fused_flops(sdpa.forward, "_scaled_dot_product_attention") == 4 * len * len * d);
  CHECK(fused_flops(sdpa.backward_input, "_scaled_dot_product_attention_backward") ==
        10 * len * len * d);
  // The fused kernels' products are their own, not BLAS calls (no cuBLAS tiles); the
  // projections are cuBLAS's.
  for (const KernelWork& k : sdpa.forward)
    CHECK(k.gemm.blas == (k.name != "_scaled_dot_product_attention"));
  // Held: input, q, k, v, the output, the merged context and a float log-sum-exp per head and
  // row; the math path adds the L² probabilities and, with dropout, their mask and dropped copy.
  CHECK(sdpa.saved.per_sample.value() == 4 * (6 * len * d) + 4 * heads * len);
  CHECK(math.saved.per_sample.value() - sdpa.saved.per_sample.value() ==
        4 * heads * len * len * 2 + heads * len * len - 4 * len * d - 4 * heads * len);
  // A causal mask halves the fused work.
  const LayerCosts causal = analyse(", causal: true, attention: sdpa").layers[1];
  CHECK(fused_flops(causal.forward, "_scaled_dot_product_attention") == 2 * len * len * d);
}

TEST_CASE("flops at a batch are per-sample times batch plus the fixed part") {
  ModelAnalysis a = analyze_text("  - {type: linear, out_features: 32}\n");
  for (std::int64_t batch : {1, 3, 1000}) {
    CHECK(total_flops(a.layers[0].backward_weight, batch) ==
          batch * a.backward_weight_flops.per_sample.value() +
              a.backward_weight_flops.fixed.value());
  }
}

TEST_CASE("cross-entropy on 10 classes costs a log-softmax and its gradient") {
  TensorShape logits{{10}};
  LayerCosts loss = cross_entropy_costs(logits, CostOptions{});
  CHECK(loss.forward_kernels() == 2);  // log_softmax, nll_loss
  // nll_loss_backward zeroes the input gradient before writing each label's entry (Loss.cu).
  CHECK(loss.backward_kernels() == 3);
  CHECK(loss.backward_input[0].name == "zero_");
  CHECK(loss.saved.per_sample.value() == 10 * 4 + 8);
}

TEST_CASE("conv_transpose2d follows PyTorch's output size and counts its scattered work once") {
  // 8 channels 5x7 -> 4 channels: (5-1)x2 - 2x1 + 1x(3-1) + 1 + 1 = 9 and (7-1)x2 - 2 + 2 + 1 + 1.
  ModelAnalysis a = analyze_text(
      "  - {type: conv_transpose2d, out_channels: 4, kernel: 3, stride: 2, padding: 1, "
      "output_padding: 1}\n",
      "[8, 5, 7]");
  const LayerCosts& up = a.layers[0];
  CHECK(up.output_shape.dims == std::vector<std::int64_t>{4, 10, 14});
  CHECK(up.params == 8 * 4 * 9 + 4);
  CHECK(up.macs_per_sample == 5 * 7 * 8 * 4 * 9);  // every input pixel x in x out x window
  CHECK(up.forward[0].flops.per_sample.value() == 2 * 5 * 7 * 8 * 4 * 9);
  CHECK(up.backward_weight[0].flops.per_sample.value() == 2 * 5 * 7 * 8 * 4 * 9);
  // U-Net's 2x2 stride-2 up-convolution exactly doubles the size.
  ModelAnalysis unet_up = analyze_text(
      "  - {type: conv_transpose2d, out_channels: 2, kernel: 2, stride: 2}\n", "[4, 6, 6]");
  CHECK(unet_up.output_shape.dims == std::vector<std::int64_t>{2, 12, 12});
}

TEST_CASE("concat joins along a dimension and a skip read twice sums its gradients once") {
  ModelAnalysis a = analyze_text(
      "  - {type: conv2d, name: enc, out_channels: 4, kernel: 1}\n"
      "  - {type: maxpool2d, name: pool, kernel: 2}\n"
      "  - {type: upsample, name: up, scale_factor: 2}\n"
      "  - {type: concat, name: join, inputs: [enc, up]}\n"
      "  - {type: conv2d, name: head, out_channels: 3, kernel: 1}\n",
      "[2, 8, 8]");
  auto layer = [&](const std::string& name) -> const LayerCosts& {
    return *std::find_if(a.layers.begin(), a.layers.end(),
                         [&](const LayerCosts& c) { return c.layer.name == name; });
  };
  CHECK(layer("up").output_shape.dims == std::vector<std::int64_t>{4, 8, 8});
  const LayerCosts& join = layer("join");
  CHECK(join.output_shape.dims == std::vector<std::int64_t>{8, 8, 8});
  REQUIRE(join.forward.size() == 1);
  CHECK(join.forward[0].bytes.per_sample.value() == 2 * 4 * 8 * 8 * 8);  // read and write once
  // enc's output feeds the pool and the concat: autograd adds the two gradients.
  REQUIRE(join.backward_input.size() == 1);
  CHECK(join.backward_input[0].name == "add");
  CHECK(join.backward_input[0].flops.per_sample.value() == 4 * 8 * 8);
  // Negative dims count from the end, as in PyTorch.
  ModelAnalysis last = analyze_text(
      "  - {type: relu, name: r}\n  - {type: concat, inputs: [input, r], dim: -1}\n", "[3, 5]");
  CHECK(last.output_shape.dims == std::vector<std::int64_t>{3, 10});
}

TEST_CASE("permute copies unless it is the identity, class tokens and positions size from input") {
  ModelAnalysis a = analyze_text(
      "  - {type: transpose, dims: [0, 1]}\n"
      "  - {type: class_token, name: cls, tokens: 2}\n"
      "  - {type: position_embedding, name: pos}\n"
      "  - {type: permute, dims: [0, 1]}\n",
      "[6, 4]");
  CHECK(a.layers[0].output_shape.dims == std::vector<std::int64_t>{4, 6});
  CHECK(a.layers[0].forward.size() == 1);
  CHECK(a.layers[1].output_shape.dims == std::vector<std::int64_t>{6, 6});
  CHECK(a.layers[1].params == 2 * 6);
  CHECK(a.layers[2].params == 6 * 6);  // one vector per token, class tokens included
  CHECK(a.layers[3].forward.empty());  // the identity: a view
  CHECK(a.output_shape.dims == std::vector<std::int64_t>{6, 6});
}

TEST_CASE("per-pixel outputs give one label per pixel and a loss over every pixel") {
  OutputClasses pixels = output_classes(TensorShape{{3, 4, 5}});
  CHECK(pixels.classes == 3);
  CHECK(pixels.label_shape == std::vector<std::int64_t>{4, 5});
  OutputClasses tokens = output_classes(TensorShape{{7, 100}});
  CHECK(tokens.classes == 100);
  CHECK(tokens.labels_per_sample == 7);
  OutputClasses one = output_classes(TensorShape{{10}});
  CHECK(one.classes == 10);
  CHECK(one.labels_per_sample == 1);
  LayerCosts loss = cross_entropy_costs(TensorShape{{3, 4, 5}}, {});
  CHECK(loss.forward[1].flops.per_sample.value() == 20);  // nll over 20 pixels
}

TEST_CASE("row-wise kernels count every pass ATen 2.1 makes over their rows") {
  // LayerNorm over [32, 768]: the forward reads each row twice and writes it (3 passes), the
  // input gradient reads dy and x twice and writes dx (5), beside gamma and beta.
  ModelAnalysis ln = analyze_text("  - {type: layernorm}\n", "[32, 768]");
  const std::int64_t e = 32 * 768;
  const LayerCosts& norm = ln.layers[0];
  REQUIRE(norm.forward.size() == 1);
  CHECK(norm.forward[0].bytes.per_sample.value() == 3 * 4 * e);
  // The first layer has no input gradient; a linear layer before it gives one.
  ModelAnalysis ln2 =
      analyze_text("  - {type: linear, out_features: 768}\n  - {type: layernorm}\n", "[32, 768]");
  REQUIRE(ln2.layers[1].backward_input.size() == 1);
  CHECK(ln2.layers[1].backward_input[0].bytes.per_sample.value() == 5 * 4 * e);

  // Softmax: rows of 1,024 fp32 elements stay in registers (read once, written once; backward
  // 3 passes after softmax_backward's own grad * output); 1,025 take the block kernels, three
  // reads and one write with half the two re-reads cached (3 passes), backward 3.5.
  auto softmax_bytes = [](std::int64_t length) {
    ModelAnalysis s = analyze_text(
        "  - {type: linear, out_features: " + std::to_string(length) + "}\n  - softmax\n",
        "[8, " + std::to_string(length) + "]");
    const LayerCosts& layer = s.layers[1];
    REQUIRE(layer.forward.size() == 1);
    REQUIRE(layer.backward_input.size() == 2);
    CHECK(layer.backward_input[0].name == "mul");
    CHECK(layer.backward_input[0].bytes.per_sample.value() == 3 * 4 * 8 * length);
    return std::pair{layer.forward[0].bytes.per_sample.value(),
                     layer.backward_input[1].bytes.per_sample.value()};
  };
  CHECK(softmax_bytes(1024) ==
        std::pair<std::int64_t, std::int64_t>{2 * 4 * 8 * 1024, 3 * 4 * 8 * 1024});
  CHECK(softmax_bytes(1025) ==
        std::pair<std::int64_t, std::int64_t>{3 * 4 * 8 * 1025, 7 * 4 * 8 * 1025 / 2});
}

// Self-attention's costs: nn.MultiheadAttention's unfused math path, Hugging Face's eager
// attention and F.scaled_dot_product_attention's fused kernel, with what today's decoders add
// (grouped-query attention, separate q/k/v projections, rotary position embeddings).
//
// The layer runs: the input projections; rotary embeddings on q and k; k and v repeated to the
// query heads (grouped-query attention, Hugging Face's repeat_kv); the scores and context on one
// of the three paths; the heads merged (a copy); the output projection. Its backward runs the
// same in reverse, the input projections' weight gradients last.
#include "core/model/cost_building.h"

namespace epochcast::detail {

namespace {

// The sizes every part of the layer is costed from (elements per sample unless named).
struct Sizes {
  I64 a = 4, w = 4;       // activation and parameter element bytes
  I64 len = 0, d = 0;     // tokens, features
  I64 h = 0, kv = 0;      // query heads, key/value heads
  I64 dh = 0, dkv = 0;    // head size; key (or value) projection width, kv x dh
  I64 ld = 0, lkv = 0;    // elements of q (and of the layer's output), of k (or v)
  I64 scores = 0;         // h x len x len
  bool repeated = false;  // k and v copied out to every query head
};

std::string_view product_name(bool bias) {
  return bias ? "addmm" : "mm";
}

// The input projections' output widths: one packed [q k v] projection, or q, k and v apart.
std::vector<I64> projection_widths(const Layer& l, const Sizes& s) {
  if (!l.separate_projections) return {s.d + 2 * s.dkv};
  return {s.d, s.dkv, s.dkv};
}

void project_inputs(std::vector<KernelWork>& f, const Layer& l, const Sizes& s) {
  for (I64 width : projection_widths(l, s)) {
    f.push_back(laid_out(
        gemm(product_name(l.bias), OpClass::gemm, fixed(1), per_sample(s.len), fixed(width),
             fixed(s.d), bytes(s.a * (s.ld + s.len * width), s.w * width * s.d)),
        GemmLayout::tn));
  }
}

void project_output(std::vector<KernelWork>& f, const Layer& l, const Sizes& s) {
  f.push_back(laid_out(gemm(product_name(l.output_bias), OpClass::gemm, fixed(1), per_sample(s.len),
                            fixed(s.d), fixed(s.d), bytes(s.a * 2 * s.ld, s.w * s.d * s.d)),
                       GemmLayout::tn));
}

// Hugging Face's apply_rotary_pos_emb on a tensor of `e` elements: x·cos + rotate_half(x)·sin,
// where rotate_half negates the second half and concatenates it before the first: mul, neg,
// cat, mul, add. (The cos and sin tables are made once per forward pass for every layer, over
// [tokens, head size]: not costed.)
void rotate(std::vector<KernelWork>& f, I64 e, I64 a) {
  f.push_back(elementwise("mul", e, 2 * a * e, e));
  f.push_back(elementwise("neg", e / 2, a * e, e / 2));
  f.push_back(elementwise("cat", 0, 2 * a * e, e));
  f.push_back(elementwise("mul", e, 2 * a * e, e));
  f.push_back(elementwise("add", e, 3 * a * e, e));
}

// Its backward: the gradient times cos and times sin, neg's backward on one half, each half of
// rotate_half's input given back by slice_backward (a zero-filled tensor, then a copy into it),
// and the three gradients that reach x summed.
void rotate_backward(std::vector<KernelWork>& b, I64 e, I64 a) {
  b.push_back(elementwise("mul", e, 2 * a * e, e));
  b.push_back(elementwise("mul", e, 2 * a * e, e));
  b.push_back(elementwise("neg", e / 2, a * e, e / 2));
  for (int half = 0; half < 2; ++half) {
    b.push_back(elementwise("fill_", 0, a * e, e));
    b.push_back(elementwise("copy_", 0, a * e, e / 2));
  }
  b.push_back(elementwise("add", e, 3 * a * e, e));
  b.push_back(elementwise("add", e, 3 * a * e, e));
}

// Everything before the scores: projections, rotary embeddings, k and v repeated.
void prepare_heads(std::vector<KernelWork>& f, const Layer& l, const Sizes& s) {
  project_inputs(f, l, s);
  if (l.rotary) {
    rotate(f, s.ld, s.a);
    rotate(f, s.lkv, s.a);
  }
  if (s.repeated) {  // expand + reshape of k and of v: a copy to every query head
    for (int tensor = 0; tensor < 2; ++tensor)
      f.push_back(elementwise("copy", 0, s.a * (s.lkv + s.ld), s.ld));
  }
}

// The backward of prepare_heads up to the projections: the repeats summed back into the
// key/value heads, then the rotations undone (q's and k's).
void unprepare_heads(std::vector<KernelWork>& b, const Layer& l, const Sizes& s) {
  if (s.repeated) {
    for (int tensor = 0; tensor < 2; ++tensor) {
      b.push_back(
          kernel("sum", OpClass::reduction, flops(s.ld), bytes(s.a * (s.ld + s.lkv)),
                 launch::reduction(count(s.lkv), count(0, s.h / s.kv), ReductionLayout::columns)));
    }
  }
  if (l.rotary) {
    rotate_backward(b, s.ld, s.a);
    rotate_backward(b, s.lkv, s.a);
  }
}

// The end of the backward: the chain (the gradients through the output projection, the
// attention and the head preparation, needed for the input projections' weight gradients even
// when the layer's input needs none), the input projections' input gradients (summed when apart),
// and the weight and bias gradients, the output projection's first.
void backward_tail(PrimitiveCosts& p, const Sizes& s, bool needs_grad,
                   const std::vector<KernelWork>& chain) {
  const Layer& l = p.costs.layer;
  const std::vector<I64> widths = projection_widths(l, s);
  auto& chain_target = needs_grad ? p.costs.backward_input : p.costs.backward_weight;
  chain_target.insert(chain_target.end(), chain.begin(), chain.end());
  if (needs_grad) {
    for (I64 width : widths) {
      p.costs.backward_input.push_back(
          gemm("mm", OpClass::gemm, fixed(1), per_sample(s.len), fixed(s.d), fixed(width),
               bytes(s.a * (s.ld + s.len * width), s.w * width * s.d)));
    }
    for (std::size_t extra = 1; extra < widths.size(); ++extra)
      p.costs.backward_input.push_back(elementwise("add", s.ld, 3 * s.a * s.ld, s.ld));
  }
  auto& bw = p.costs.backward_weight;
  auto weight_gradient = [&](I64 width, bool bias) {
    bw.push_back(
        laid_out(gemm("mm", OpClass::gemm, fixed(1), fixed(width), fixed(s.d), per_sample(s.len),
                      bytes(s.a * (s.ld + s.len * width), s.w * width * s.d)),
                 GemmLayout::nt));
    if (bias) {
      bw.push_back(kernel(
          "sum", OpClass::reduction, flops(s.len * width), bytes(s.a * s.len * width, s.w * width),
          launch::reduction(count(0, width), count(s.len), ReductionLayout::columns)));
    }
  };
  weight_gradient(s.d, l.output_bias);
  for (I64 width : widths)
    weight_gradient(width, l.bias);
}

// Through F.scaled_dot_product_attention's fused kernel (`attention: sdpa`): FlashAttention-2
// (Dao, "FlashAttention-2: Faster Attention with Better Parallelism and Work Partitioning",
// 2023), or the memory-efficient kernel where FlashAttention does not apply (fp32, older GPUs),
// computes q·kᵀ, the softmax (online, tile by tile) and ·v in one kernel that never writes the
// tokens x tokens scores to memory; its backward recomputes them from q, k and the saved
// log-sum-exp, with five matrix products to the forward's two (the paper's section 3.1:
// backward ~2.5x the forward's FLOPs). A causal mask skips the tiles above the diagonal, about
// half the work. q, k and v stay strided views of the input projection, the 1/sqrt(head_dim)
// scale is applied inside, dropout draws from a seed (no mask is saved); merging the heads
// after it is a copy. Hugging Face repeats k and v to the query heads before it (repeat_kv).
PrimitiveCosts fused_attention(PrimitiveCosts p, const Sizes& s, bool needs_grad) {
  const Layer& l = p.costs.layer;
  const I64 lse = 4 * s.h * s.len;  // the log-sum-exp per query row, float32
  // As tiles see it: each head's len query rows against dh columns, reducing over the keys,
  // twice forward (q·kᵀ, then ·v) and five times backward; half the keys when causal.
  const I64 forward_k = l.causal ? s.len : 2 * s.len;
  const I64 backward_k = l.causal ? (5 * s.len + 1) / 2 : 5 * s.len;

  auto& f = p.costs.forward;
  prepare_heads(f, l, s);
  f.push_back(
      fused(gemm("_scaled_dot_product_attention", OpClass::gemm, per_sample(s.h), fixed(s.len),
                 fixed(s.dh), fixed(forward_k), bytes(s.a * 4 * s.ld + lse))));
  f.push_back(elementwise("copy", 0, 2 * s.a * s.ld, s.ld));
  project_output(f, l, s);

  std::vector<KernelWork> chain;
  chain.push_back(gemm("mm", OpClass::gemm, fixed(1), per_sample(s.len), fixed(s.d), fixed(s.d),
                       bytes(s.a * 2 * s.ld, s.w * s.d * s.d)));
  chain.push_back(elementwise("copy", 0, 2 * s.a * s.ld, s.ld));
  // Reads q, k, v, the output and its gradient and the log-sum-exp; writes dq, dk, dv.
  chain.push_back(
      fused(gemm("_scaled_dot_product_attention_backward", OpClass::gemm, per_sample(s.h),
                 fixed(s.len), fixed(s.dh), fixed(backward_k), bytes(s.a * 8 * s.ld + lse))));
  unprepare_heads(chain, l, s);
  backward_tail(p, s, needs_grad, chain);
  // Held for backward: the input, q, k, v (as the kernel reads them), the attention output and
  // its log-sum-exp, and the merged context (for the output projection's weight gradient); no
  // scores.
  const I64 keys = s.repeated ? s.ld : s.lkv;
  p.saves_input = true;
  p.saved_extra = bytes(s.a * (s.ld + 2 * keys + s.ld + s.ld) + lse);
  return p;
}

// The unfused paths. `math` (nn.MultiheadAttention): scale q; S = q·kᵀ; mask; softmax; dropout;
// context = P·v. `eager` (Hugging Face's eager_attention_forward): S = q·kᵀ; S scaled; the
// causal mask added; softmax in float32 (dtype=torch.float32) and cast back when activations
// are 16-bit; dropout; context = P·v.
PrimitiveCosts unfused_attention(PrimitiveCosts p, const Sizes& s, bool needs_grad) {
  const Layer& l = p.costs.layer;
  const bool eager = l.attention == AttentionKernels::eager;
  const I64 S = s.scores, a = s.a;
  // The softmax's element size: float32 on the eager path, which casts back afterwards.
  const bool cast = eager && a != 4;
  const I64 sa = cast ? 4 : a;
  const int sa_int = static_cast<int>(sa);
  const KernelLaunch rows = launch::softmax(count(s.h * s.len), narrow(s.len), sa_int);
  auto& f = p.costs.forward;
  prepare_heads(f, l, s);
  if (!eager) f.push_back(elementwise("mul", s.ld, 2 * a * s.ld, s.ld));
  f.push_back(gemm("bmm", OpClass::gemm, per_sample(s.h), fixed(s.len), fixed(s.len), fixed(s.dh),
                   bytes(a * (2 * s.ld + S))));
  if (eager) {
    f.push_back(elementwise("mul", S, 2 * a * S, S));
    if (l.causal) f.push_back(elementwise("add", S, 2 * a * S + a * s.len * s.len, S));
  } else if (l.causal) {
    f.push_back(kernel("masked_fill", OpClass::elementwise, flops(S), bytes(2 * a * S), each(S)));
  }
  // A 16-bit row read, a float32 row written, when the eager path casts.
  const I64 forward_half = launch::softmax_half_passes(narrow(s.len), sa_int, false);
  const I64 softmax_bytes =
      cast ? (forward_half - 2) * a * S / 2 + 4 * S : forward_half * a * S / 2;
  f.push_back(kernel("softmax", OpClass::normalization, flops(5 * S), bytes(softmax_bytes), rows));
  if (cast) f.push_back(elementwise("copy", 0, (4 + a) * S, S));
  if (l.dropout > 0) {
    KernelWork drop = kernel("fused_dropout", OpClass::elementwise, flops(2 * S),
                             bytes(2 * a * S + S), launch::blocks_of(count(S), 256, 256));
    drop.training_only = true;
    drop.bernoulli_draws = count(S);
    f.push_back(drop);
  }
  f.push_back(gemm("bmm", OpClass::gemm, per_sample(s.h), fixed(s.len), fixed(s.dh), fixed(s.len),
                   bytes(a * (S + 2 * s.ld))));
  f.push_back(elementwise("copy", 0, 2 * a * s.ld, s.ld));
  project_output(f, l, s);

  std::vector<KernelWork> chain;
  chain.push_back(gemm("mm", OpClass::gemm, fixed(1), per_sample(s.len), fixed(s.d), fixed(s.d),
                       bytes(a * 2 * s.ld, s.w * s.d * s.d)));
  chain.push_back(elementwise("copy", 0, 2 * a * s.ld, s.ld));
  chain.push_back(gemm("bmm", OpClass::gemm, per_sample(s.h), fixed(s.len), fixed(s.len),
                       fixed(s.dh), bytes(a * (2 * s.ld + S))));
  chain.push_back(gemm("bmm", OpClass::gemm, per_sample(s.h), fixed(s.len), fixed(s.dh),
                       fixed(s.len), bytes(a * (S + 2 * s.ld))));
  if (l.dropout > 0) {
    chain.push_back(
        kernel("masked_scale", OpClass::elementwise, flops(S), bytes(2 * a * S + S), each(S)));
  }
  if (cast) chain.push_back(elementwise("copy", 0, (a + 4) * S, S));
  // softmax_backward_cuda_out: tmp = grad * output, then the backward kernel on tmp.
  chain.push_back(elementwise("mul", S, 3 * sa * S, S));
  chain.push_back(
      kernel("softmax_backward", OpClass::normalization, flops(4 * S),
             bytes(launch::softmax_half_passes(narrow(s.len), sa_int, true) * sa * S / 2), rows));
  if (eager) {
    chain.push_back(elementwise("mul", S, 2 * a * S, S));  // the scaling's; the mask's is none
  } else if (l.causal) {
    chain.push_back(
        kernel("masked_fill", OpClass::elementwise, flops(S), bytes(2 * a * S), each(S)));
  }
  chain.push_back(gemm("bmm", OpClass::gemm, per_sample(s.h), fixed(s.len), fixed(s.dh),
                       fixed(s.len), bytes(a * (S + 2 * s.ld))));
  chain.push_back(gemm("bmm", OpClass::gemm, per_sample(s.h), fixed(s.len), fixed(s.dh),
                       fixed(s.len), bytes(a * (S + 2 * s.ld))));
  if (!eager) chain.push_back(elementwise("mul", s.ld, 2 * a * s.ld, s.ld));
  unprepare_heads(chain, l, s);
  backward_tail(p, s, needs_grad, chain);
  // Held for backward: the input (for the input projections' weight gradients), q, k, v as the
  // products read them, the probabilities (float32 and their cast on the eager path), the
  // dropout mask and dropped probabilities, and the merged context (for the output projection's
  // weight gradient).
  const I64 keys = s.repeated ? s.ld : s.lkv;
  p.saves_input = true;
  I64 held = a * (s.ld + 2 * keys) + sa * S + a * s.ld;
  if (cast && l.dropout == 0) held += a * S;
  if (l.dropout > 0) held += S + a * S;
  p.saved_extra = bytes(held);
  return p;
}

}  // namespace

PrimitiveCosts attention_costs(PrimitiveCosts p, const CostOptions& o, bool needs_grad) {
  const TensorShape& in = p.costs.input_shape;
  const Layer& l = p.costs.layer;
  expect_rank(in, 2, "[tokens, features]");
  Sizes s;
  s.a = element_bytes(o.activation_dtype);
  s.w = element_bytes(o.parameter_dtype);
  s.len = in.dims[0];
  s.d = in.dims[1];
  s.h = l.heads;
  s.kv = l.kv_heads > 0 ? l.kv_heads : l.heads;
  if (s.d % s.h != 0) {
    problem(fmt::format("the feature size ({}) is not divisible by heads ({})", s.d, s.h));
  }
  s.dh = s.d / s.h;
  if (l.rotary && s.dh % 2 != 0) {
    problem(
        fmt::format("rotary embeddings rotate pairs of features, but a head has {} (odd)", s.dh));
  }
  s.dkv = s.kv * s.dh;
  s.ld = s.len * s.d;
  s.lkv = s.len * s.dkv;
  s.scores = s.h * s.len * s.len;
  s.repeated = s.kv < s.h;

  p.costs.in_features = narrow(s.d);
  p.costs.output_shape = in;
  if (l.separate_projections) {
    const std::string_view names[] = {"q_proj", "k_proj", "v_proj"};
    const std::vector<I64> widths = projection_widths(l, s);
    for (std::size_t i = 0; i < widths.size(); ++i) {
      add_param(p.costs, fmt::format("{}.weight", names[i]), widths[i] * s.d);
      if (l.bias) add_param(p.costs, fmt::format("{}.bias", names[i]), widths[i]);
    }
  } else {
    add_param(p.costs, "in_proj_weight", (s.d + 2 * s.dkv) * s.d);
    if (l.bias) add_param(p.costs, "in_proj_bias", s.d + 2 * s.dkv);
  }
  // Hugging Face's names where the projections are apart, nn.MultiheadAttention's otherwise.
  const std::string_view out = l.separate_projections ? "o_proj" : "out_proj";
  add_param(p.costs, fmt::format("{}.weight", out), s.d * s.d);
  if (l.output_bias) add_param(p.costs, fmt::format("{}.bias", out), s.d);
  p.costs.macs_per_sample =
      narrow(s.len * s.d * (s.d + 2 * s.dkv) + s.len * s.d * s.d + 2 * s.len * s.len * s.d);
  if (l.attention == AttentionKernels::sdpa) return fused_attention(std::move(p), s, needs_grad);
  return unfused_attention(std::move(p), s, needs_grad);
}

}  // namespace epochcast::detail

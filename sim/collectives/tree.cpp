// Tree algorithms: pipelined reduce up and broadcast down a binary tree. NCCL streams a tree's
// data through every hop in chunks, keeping several in flight per channel, so the latency is
// paid per hop, not per chunk, as in its tuning model. Each hop carries the data as three
// transfers rather than one per chunk: the first chunk, once the first chunk came in from below
// (the pipeline's fill); the chunks between as one stream beside the inputs' streams, its
// latency hidden (Transfer::pipelined); and the last chunk, once the last came in (its drain).
// No hop ends before its inputs have ended and one chunk more has crossed it, as with chunks
// one by one, in a plan whose size does not grow with the chunks (DDP's buckets cross 2,048
// nodes in tens of them).
#include <algorithm>

#include "sim/collectives/algorithms.h"

namespace epochcast::sim {

namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}

struct Segment {
  Bytes bytes;
  bool pipelined = false;
};

// The first chunk, the chunks between as one, the last chunk (as many as there are chunks).
std::vector<Segment> segments(Bytes bytes, Bytes chunk) {
  const std::int64_t chunks = std::max<std::int64_t>(1, ceil_div(bytes.value(), chunk.value()));
  if (chunks == 1) return {Segment{bytes, false}};
  std::vector<Segment> out{Segment{chunk, false}};
  if (chunks > 2) out.push_back(Segment{Bytes((chunks - 2) * chunk.value()), true});
  out.push_back(Segment{Bytes(bytes.value() - (chunks - 1) * chunk.value()), true});
  return out;
}

void tree_pass(TransferPlan& plan, const Tree& tree, Bytes bytes, Bytes chunk, bool reduce,
               bool broadcast) {
  const int n = static_cast<int>(tree.ranks.size());
  const std::vector<Segment> parts = segments(bytes, chunk);
  // [segment][position]: the transfer position -> parent (up) or parent -> position (down).
  std::vector<std::vector<int>> up(parts.size(), std::vector<int>(static_cast<std::size_t>(n), -1));
  std::vector<std::vector<int>> down = up;
  for (std::size_t s = 0; s < parts.size(); ++s) {
    // The first chunk and the stream wait for their inputs' first chunk; the last for their last.
    const std::size_t input = s + 1 == parts.size() ? s : 0;
    auto& up_now = up[s];
    auto& down_now = down[s];
    if (reduce) {
      // Deepest positions first, so children exist before their parents' sends.
      for (int p = n - 1; p > 0; --p) {
        Transfer t;
        t.src = tree.ranks[static_cast<std::size_t>(p)];
        t.dst = tree.ranks[static_cast<std::size_t>(tree.parent(p))];
        t.bytes = parts[s].bytes;
        t.pipelined = parts[s].pipelined;
        for (int c : tree.children(p))
          t.deps.push_back(up[input][static_cast<std::size_t>(c)]);
        if (s > 0) t.deps.push_back(up[s - 1][static_cast<std::size_t>(p)]);
        up_now[static_cast<std::size_t>(p)] = plan.add(std::move(t));
      }
    }
    if (broadcast) {
      for (int p = 1; p < n; ++p) {
        Transfer t;
        t.src = tree.ranks[static_cast<std::size_t>(tree.parent(p))];
        t.dst = tree.ranks[static_cast<std::size_t>(p)];
        t.bytes = parts[s].bytes;
        t.pipelined = parts[s].pipelined;
        int parent = tree.parent(p);
        if (parent > 0) {
          t.deps.push_back(down[input][static_cast<std::size_t>(parent)]);
        } else if (reduce) {
          // The root has a chunk once all of its children's partial sums of it arrived.
          for (int c : tree.children(0))
            t.deps.push_back(up[input][static_cast<std::size_t>(c)]);
        }
        if (s > 0) t.deps.push_back(down[s - 1][static_cast<std::size_t>(p)]);
        down_now[static_cast<std::size_t>(p)] = plan.add(std::move(t));
      }
    }
  }
}

TransferPlan tree_plan(const Tree& tree, Bytes bytes, Bytes chunk, bool reduce, bool broadcast,
                       Collective collective) {
  TransferPlan plan;
  plan.collective = collective;
  plan.algorithm = Algorithm::tree;
  plan.ranks = tree.ranks;
  if (tree.ranks.size() > 1) tree_pass(plan, tree, bytes, chunk, reduce, broadcast);
  return plan;
}

}  // namespace

Bytes tree_chunk(Bytes bytes, int channels, int ranks, int nodes) {
  nodes = std::max(1, nodes);
  int log2_nodes = 0;
  while ((2 << log2_nodes) <= nodes)
    ++log2_nodes;
  const std::int64_t depth = std::max(1, ranks / nodes) - 1 + log2_nodes;
  // NCCL divides in whole chunks per channel, as here.
  const std::int64_t per_channel = bytes.value() / std::max(1, channels);
  std::int64_t chunk = kTreeFirstChunkBytes;
  auto halve_while = [&](std::int64_t chunks_wanted, std::int64_t floor) {
    while (per_channel / chunk < chunks_wanted && chunk > floor)
      chunk /= 2;
  };
  halve_while(depth * 8, 128 << 10);
  halve_while(depth * 4, 64 << 10);
  halve_while(depth, 32 << 10);
  return Bytes(chunk);
}

TransferPlan tree_all_reduce(const Tree& tree, Bytes bytes, Bytes chunk) {
  return tree_plan(tree, bytes, chunk, true, true, Collective::all_reduce);
}
TransferPlan double_tree_all_reduce(const std::vector<int>& ranks, Bytes bytes, Bytes chunk) {
  // The second tree is the first over the ranks in reverse order: its inner positions (the
  // front of the order) are then the first tree's leaves (the back).
  std::vector<int> reversed(ranks.rbegin(), ranks.rend());
  const Bytes half(bytes.value() / 2);
  TransferPlan plan = tree_all_reduce(Tree{ranks}, bytes - half, chunk);
  append_phase(plan, tree_all_reduce(Tree{reversed}, half, chunk), {});
  return plan;
}

TransferPlan tree_broadcast(const Tree& tree, Bytes bytes, Bytes chunk) {
  return tree_plan(tree, bytes, chunk, false, true, Collective::broadcast);
}
TransferPlan tree_reduce(const Tree& tree, Bytes bytes, Bytes chunk) {
  return tree_plan(tree, bytes, chunk, true, false, Collective::reduce);
}

}  // namespace epochcast::sim

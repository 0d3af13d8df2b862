// Tree algorithms: pipelined reduce up and broadcast down a binary tree. A chunk after the first
// on a hop costs only its data (Transfer::pipelined): NCCL keeps several steps in flight per
// channel, so the latency is paid per hop, not per chunk, as in its tuning model.
#include <algorithm>

#include "sim/collectives/algorithms.h"

namespace epochcast::sim {

namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}

struct TreePass {
  std::vector<std::vector<int>> up;    // [chunk][position]: transfer position -> parent
  std::vector<std::vector<int>> down;  // [chunk][position]: transfer parent -> position
};

TreePass tree_pass(TransferPlan& plan, const Tree& tree, Bytes bytes, Bytes chunk, bool reduce,
                   bool broadcast) {
  const int n = static_cast<int>(tree.ranks.size());
  const std::int64_t chunks = std::max<std::int64_t>(1, ceil_div(bytes.value(), chunk.value()));
  TreePass pass;
  pass.up.assign(static_cast<std::size_t>(chunks),
                 std::vector<int>(static_cast<std::size_t>(n), -1));
  pass.down = pass.up;
  for (std::int64_t k = 0; k < chunks; ++k) {
    Bytes size(std::min(chunk.value(), bytes.value() - k * chunk.value()));
    auto& up = pass.up[static_cast<std::size_t>(k)];
    auto& down = pass.down[static_cast<std::size_t>(k)];
    if (reduce) {
      // Deepest positions first, so children exist before their parents' sends.
      for (int p = n - 1; p > 0; --p) {
        Transfer t;
        t.src = tree.ranks[static_cast<std::size_t>(p)];
        t.dst = tree.ranks[static_cast<std::size_t>(tree.parent(p))];
        t.bytes = size;
        t.pipelined = k > 0;
        for (int c : tree.children(p))
          t.deps.push_back(up[static_cast<std::size_t>(c)]);
        if (k > 0)
          t.deps.push_back(pass.up[static_cast<std::size_t>(k - 1)][static_cast<std::size_t>(p)]);
        up[static_cast<std::size_t>(p)] = plan.add(std::move(t));
      }
    }
    if (broadcast) {
      for (int p = 1; p < n; ++p) {
        Transfer t;
        t.src = tree.ranks[static_cast<std::size_t>(tree.parent(p))];
        t.dst = tree.ranks[static_cast<std::size_t>(p)];
        t.bytes = size;
        t.pipelined = k > 0;
        int parent = tree.parent(p);
        if (parent > 0) {
          t.deps.push_back(down[static_cast<std::size_t>(parent)]);
        } else if (reduce) {
          // The root has this chunk once all of its children's partial sums arrived.
          for (int c : tree.children(0))
            t.deps.push_back(up[static_cast<std::size_t>(c)]);
        }
        if (k > 0) {
          t.deps.push_back(pass.down[static_cast<std::size_t>(k - 1)][static_cast<std::size_t>(p)]);
        }
        down[static_cast<std::size_t>(p)] = plan.add(std::move(t));
      }
    }
  }
  return pass;
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

// Collectives across nodes: inside each node, then along each rail across nodes, then inside.
#include <algorithm>

#include "sim/collectives/algorithms.h"

namespace epochcast::sim {

std::map<int, std::vector<int>> append_phase(TransferPlan& plan, const TransferPlan& phase,
                                             const std::map<int, std::vector<int>>& entry) {
  const int offset = static_cast<int>(plan.transfers.size());
  std::map<int, std::vector<int>> touching;
  for (const Transfer& t : phase.transfers) {
    Transfer copy = t;
    for (int& d : copy.deps)
      d += offset;
    if (t.deps.empty()) {
      for (int rank : {t.src, t.dst}) {
        auto found = entry.find(rank);
        if (found != entry.end())
          copy.deps.insert(copy.deps.end(), found->second.begin(), found->second.end());
      }
    }
    int index = plan.add(std::move(copy));
    touching[t.src].push_back(index);
    if (t.dst != t.src) touching[t.dst].push_back(index);
  }
  return touching;
}

namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}

// Node 0's rings, renamed onto node k's GPUs (same local order).
std::vector<Ring> rings_of_node(const Hierarchy& h, std::size_t k) {
  std::vector<Ring> rings = h.local_rings;
  const std::vector<int>& base = h.nodes.front();
  for (Ring& ring : rings) {
    for (int& gpu : ring.order) {
      auto local = std::find(base.begin(), base.end(), gpu) - base.begin();
      gpu = h.nodes[k][static_cast<std::size_t>(local)];
    }
  }
  return rings;
}

// One rail's cross-node all-reduce in a symmetric cluster, as mirror transfers from `gpu`.
// Ring: 2(N-1) steps of shard/N bytes, exactly what every node does. Tree: NCCL's double binary
// tree over the nodes, pipelined in chunks; every node is inner in one tree and a leaf in the
// other, so its NIC sends (and receives) about twice the shard, streamed back to back, and the
// pipeline takes 2d - 1 more chunk hops to fill and drain. Trees have a root and leaves, so
// unlike the ring this is an estimate of the node's part (tests compare it with every node's).
TransferPlan mirrored_rail(int gpu, int nodes, Bytes shard, bool tree, Bytes chunk) {
  TransferPlan plan;
  std::int64_t steps = 2 * (nodes - 1);
  Bytes size(ceil_div(shard.value(), nodes));
  int previous = -1;
  if (tree) {
    // The stream of 2K chunks goes through the NIC back to back; the pipeline's fill and drain
    // add 2d - 1 chunk hops, each paying the latency.
    Tree shape;
    shape.ranks.resize(static_cast<std::size_t>(nodes));
    previous = plan.add(Transfer{gpu, gpu, true, Bytes(2 * shard.value()), {}});
    steps = 2 * shape.depth() - 1;
    // Each of the two trees carries half the shard, in chunks of at most `chunk`.
    size = Bytes(std::min(chunk.value(), ceil_div(shard.value(), 2)));
  }
  for (std::int64_t s = 0; s < steps; ++s) {
    Transfer t{gpu, gpu, true, size, {}};
    if (previous >= 0) t.deps = {previous};
    previous = plan.add(std::move(t));
  }
  return plan;
}

}  // namespace

TransferPlan hierarchical_all_reduce(const Hierarchy& h, Bytes bytes, bool tree_across,
                                     Bytes chunk) {
  TransferPlan plan;
  plan.collective = Collective::all_reduce;
  plan.algorithm = tree_across ? Algorithm::hierarchical_tree : Algorithm::hierarchical_ring;
  plan.channels = static_cast<int>(h.local_rings.size());
  for (const std::vector<int>& node : h.nodes)
    plan.ranks.insert(plan.ranks.end(), node.begin(), node.end());
  const std::size_t local = h.nodes.front().size();
  const Bytes shard(ceil_div(bytes.value(), static_cast<std::int64_t>(local)));

  std::map<int, std::vector<int>> after_scatter;
  for (std::size_t k = 0; k < h.nodes.size(); ++k) {
    for (auto& [rank, deps] :
         append_phase(plan, ring_reduce_scatter(rings_of_node(h, k), bytes), {})) {
      after_scatter[rank] = deps;
    }
  }
  std::map<int, std::vector<int>> after_rails;
  for (std::size_t r = 0; r < local; ++r) {
    TransferPlan rail;
    if (h.symmetric) {
      rail = mirrored_rail(h.nodes.front()[r], h.total_nodes, shard, tree_across, chunk);
    } else {
      std::vector<int> members;
      for (const std::vector<int>& node : h.nodes)
        members.push_back(node[r]);
      if (tree_across) {
        rail = double_tree_all_reduce(members, shard, chunk);
      } else {
        rail = ring_all_reduce({Ring{members}}, shard);
      }
    }
    for (auto& [rank, deps] : append_phase(plan, rail, after_scatter))
      after_rails[rank] = deps;
  }
  // Ranks whose rail had nothing to do (one node) go on from their reduce-scatter.
  for (auto& [rank, deps] : after_scatter)
    after_rails.emplace(rank, deps);
  for (std::size_t k = 0; k < h.nodes.size(); ++k) {
    append_phase(plan, ring_all_gather(rings_of_node(h, k), bytes), after_rails);
  }
  return plan;
}

}  // namespace epochcast::sim

// Collectives across nodes: inside each node, then along each rail across nodes, then inside.
#include <algorithm>
#include <iterator>
#include <stdexcept>
#include <tuple>
#include <unordered_map>

#include "sim/collectives/algorithms.h"

namespace epochcast::sim {

std::map<int, std::vector<int>> append_phase(TransferPlan& plan, TransferPlan phase,
                                             const std::map<int, std::vector<int>>& entry) {
  const int offset = static_cast<int>(plan.transfers.size());
  std::map<int, std::vector<int>> touching;
  for (Transfer& t : phase.transfers) {
    const int src = t.src;
    const int dst = t.dst;
    if (t.deps.empty()) {
      for (int rank : {src, dst}) {
        auto found = entry.find(rank);
        if (found != entry.end())
          t.deps.insert(t.deps.end(), found->second.begin(), found->second.end());
      }
    } else {
      for (int& d : t.deps)
        d += offset;
    }
    int index = plan.add(std::move(t));
    touching[src].push_back(index);
    if (dst != src) touching[dst].push_back(index);
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

// The most half-shards a node sends (and receives) in NCCL's double binary tree over `nodes`:
// per tree one up to its parent (but the root) and one down to each child, the second tree
// being the first over the nodes in reverse. 2 over two nodes (a root and a leaf in each tree),
// 3 over four, 4 from about eight on (inner in one tree with two children, a leaf in the other).
std::int64_t double_tree_half_shards(int nodes) {
  Tree shape;
  shape.ranks.resize(static_cast<std::size_t>(nodes));
  auto sends = [&](int position) {
    return (position > 0 ? 1 : 0) + static_cast<int>(shape.children(position).size());
  };
  int most = 0;
  for (int p = 0; p < nodes; ++p)
    most = std::max(most, sends(p) + sends(nodes - 1 - p));
  return most;
}

// One rail's cross-node all-reduce in a symmetric cluster, as mirror transfers from `gpu`.
// Ring: 2(N-1) steps of shard/N bytes (N-1 for a reduce-scatter or an all-gather of the shard:
// `ring_steps`), exactly what every node does. Tree: NCCL's double binary
// tree over the nodes, pipelined in chunks; the busiest node's NIC sends (and receives) its
// half-shards back to back (double_tree_half_shards: the shard once over two nodes, twice over
// many, as tuning.cc's tree bandwidth, bwInter for 2 nodes and bwInter/2 beyond), and the
// pipeline takes 2d - 1 more chunk hops to fill and drain (`drain`: only after the last piece of
// a pipelined all-reduce). Trees have a root and leaves, so unlike the ring this is an estimate
// of the node's part (tests compare it with every node's).
TransferPlan mirrored_rail(int gpu, int nodes, Bytes shard, bool tree, Bytes chunk, bool drain,
                           int ring_steps) {
  TransferPlan plan;
  std::int64_t steps = ring_steps * (nodes - 1);
  Bytes size(ceil_div(shard.value(), nodes));
  int previous = -1;
  if (tree) {
    Tree shape;
    shape.ranks.resize(static_cast<std::size_t>(nodes));
    const std::int64_t streamed = double_tree_half_shards(nodes) * ceil_div(shard.value(), 2);
    previous = plan.add(Transfer{gpu, gpu, true, Bytes(streamed), {}});
    steps = drain ? 2 * shape.depth() - 1 : 0;
    // Each of the two trees carries half the shard, in chunks of at most `chunk`.
    size = Bytes(std::min(chunk.value(), ceil_div(shard.value(), 2)));
  }
  // The steps one after another through the same NIC: one transfer of that many steps.
  if (steps > 0) {
    Transfer t{gpu, gpu, true, Bytes(size.value() * steps), {}};
    t.steps = static_cast<int>(steps);
    if (previous >= 0) t.deps = {previous};
    plan.add(std::move(t));
  }
  return plan;
}

// Per rank, the transfers of a phase that touch it.
using Touching = std::map<int, std::vector<int>>;

// Pieces keep their order on every hop of a stage: a piece's first transfer on a hop waits for
// the last transfer of the piece before on the same hop, so one hop never carries two pieces
// at once (the analytic cost has no other way to share a link's time) and a fast stage runs
// ahead while a slow one streams.
class HopOrder {
 public:
  // Orders plan.transfers[from, end) behind the previous piece's transfers on their hops.
  // Called once per piece, then next_piece().
  void order(TransferPlan& plan, std::size_t from) {
    for (std::size_t i = from; i < plan.transfers.size(); ++i) {
      Transfer& t = plan.transfers[i];
      auto [current, first_on_hop] = current_.try_emplace(key(t), static_cast<int>(i));
      if (first_on_hop) {
        auto before = previous_.find(current->first);
        if (before != previous_.end()) t.deps.push_back(before->second);
      } else {
        current->second = static_cast<int>(i);
      }
    }
  }
  void next_piece() {
    for (const auto& [hop, index] : current_)
      previous_[hop] = index;
    current_.clear();
  }

 private:
  // The hop (in_network: a mirror's own hop), packed: GPU numbers fit 28 bits with room to
  // spare (a plan of 2^28 GPUs would not fit in memory).
  static std::uint64_t key(const Transfer& t) {
    return static_cast<std::uint64_t>(static_cast<std::uint32_t>(t.src)) << 32 |
           static_cast<std::uint64_t>(static_cast<std::uint32_t>(t.dst) & 0x0fffffffu) << 4 |
           static_cast<std::uint64_t>(t.mirror) << 3 | static_cast<std::uint64_t>(t.fabric);
  }
  std::unordered_map<std::uint64_t, int> previous_, current_;
};

Algorithm algorithm_of(InsideNodes inside, AcrossNodes across) {
  if (inside == InsideNodes::rings && across == AcrossNodes::ring)
    return Algorithm::hierarchical_ring;
  if (inside == InsideNodes::rings && across == AcrossNodes::tree)
    return Algorithm::hierarchical_tree;
  if (inside == InsideNodes::nvls && across == AcrossNodes::tree) return Algorithm::nvls_tree;
  if (inside == InsideNodes::direct && across == AcrossNodes::in_network)
    return Algorithm::collnet_direct;
  if (inside == InsideNodes::rings && across == AcrossNodes::in_network)
    return Algorithm::collnet_chain;
  if (inside == InsideNodes::nvls && across == AcrossNodes::in_network) return Algorithm::nvls;
  throw std::logic_error("a combination of stages NCCL does not run");
}

// One piece's reduce-scatter (or all-gather) inside node k.
TransferPlan inside_node(const Hierarchy& h, std::size_t k, Collective collective, Bytes piece) {
  switch (h.inside) {
    case InsideNodes::nvls:
      return nvls_collective(collective, h.nodes[k], piece);
    case InsideNodes::direct:
      // Either way every GPU sends each peer one n-th: its partial shard to be reduced there,
      // or its reduced shard.
      return direct_all_to_all(h.nodes[k], piece);
    case InsideNodes::rings:
      break;
  }
  return collective == Collective::reduce_scatter ? ring_reduce_scatter(rings_of_node(h, k), piece)
                                                  : ring_all_gather(rings_of_node(h, k), piece);
}

// Every node's GPU at `rail` sends its shard through its NIC to the switches, which reduce it
// with the other nodes' and return the result: one exchange each way.
TransferPlan in_network_rail(const std::vector<int>& members, Bytes shard) {
  TransferPlan plan;
  for (int gpu : members) {
    Transfer t{gpu, gpu, true, shard, {}};
    t.in_network = true;
    plan.add(std::move(t));
  }
  return plan;
}

}  // namespace

TransferPlan hierarchical_collective(const Hierarchy& h, Collective collective, Bytes bytes,
                                     AcrossNodes across, Bytes chunk, int pieces) {
  const bool all_reduce = collective == Collective::all_reduce;
  if (!all_reduce && collective != Collective::reduce_scatter &&
      collective != Collective::all_gather) {
    throw std::logic_error("across nodes: all-reduce, reduce-scatter and all-gather");
  }
  if (!all_reduce && (across != AcrossNodes::ring || h.inside != InsideNodes::rings)) {
    throw std::logic_error("NCCL runs reduce-scatter and all-gather across nodes on rings");
  }
  TransferPlan plan;
  plan.collective = collective;
  plan.algorithm = algorithm_of(h.inside, across);
  plan.channels = h.inside == InsideNodes::rings ? static_cast<int>(h.local_rings.size()) : 1;
  for (const std::vector<int>& node : h.nodes)
    plan.ranks.insert(plan.ranks.end(), node.begin(), node.end());
  const std::size_t local = h.nodes.front().size();
  pieces = std::max(1, pieces);
  const Bytes piece(ceil_div(bytes.value(), pieces));
  const Bytes shard(ceil_div(piece.value(), static_cast<std::int64_t>(local)));

  // The stages in order: an all-reduce reduces inside, across, then gathers inside; a
  // reduce-scatter ends across the nodes with each rank's share; an all-gather starts there.
  enum class Stage { scatter_inside, rails, gather_inside };
  std::vector<Stage> stages;
  if (collective != Collective::all_gather) stages.push_back(Stage::scatter_inside);
  stages.push_back(Stage::rails);
  if (collective != Collective::reduce_scatter) stages.push_back(Stage::gather_inside);
  const int ring_steps = all_reduce ? 2 : 1;

  std::vector<HopOrder> orders(stages.size());
  for (int p = 0; p < pieces; ++p) {
    const std::size_t first = plan.transfers.size();
    std::vector<std::size_t> stage_first;
    Touching entry;  // per rank, what its part of the next stage waits for
    std::vector<std::size_t> drain;
    for (Stage stage : stages) {
      stage_first.push_back(plan.transfers.size());
      Touching after;
      if (stage == Stage::rails) {
        for (std::size_t r = 0; r < local; ++r) {
          std::vector<int> members;
          for (const std::vector<int>& node : h.nodes)
            members.push_back(node[r]);
          TransferPlan rail;
          if (across == AcrossNodes::in_network) {
            // The same exchange for every node: the mirror is exact.
            rail = in_network_rail(members, shard);
          } else if (h.symmetric) {
            rail = mirrored_rail(members.front(), h.total_nodes, shard, across == AcrossNodes::tree,
                                 chunk, p == pieces - 1, ring_steps);
          } else if (across == AcrossNodes::tree) {
            rail = double_tree_all_reduce(members, shard, chunk);
          } else {
            // Every node simulated: the ring over the nodes in lockstep, whose plan grows with
            // the nodes rather than their square (33 M single steps per bucket at 512 nodes).
            rail = lockstep_ring(Ring{members}, shard, collective);
          }
          const std::size_t rail_first = plan.transfers.size();
          const bool rail_moves = !rail.transfers.empty();
          Touching touching = append_phase(plan, std::move(rail), entry);
          if (!h.symmetric && across == AcrossNodes::ring && rail_moves) {
            // Each member goes on from its own step after the ring's close (lockstep_ring).
            const int own = static_cast<int>(plan.transfers.size() - members.size());
            for (std::size_t m = 0; m < members.size(); ++m) {
              const Transfer& step = plan.transfers[static_cast<std::size_t>(own) + m];
              if (step.src != members[m] || step.dst != members[m]) {
                throw std::logic_error("a lockstep ring that does not end with its ranks' steps");
              }
              touching[members[m]] = {own + static_cast<int>(m)};
            }
          }
          for (auto& [rank, deps] : touching)
            after[rank] = std::move(deps);
          // A mirrored tree's fill and drain hops (after its stream) are the pipeline's depth:
          // they keep their latency even behind earlier pieces.
          if (h.symmetric && across == AcrossNodes::tree) {
            for (std::size_t i = rail_first + 1; i < plan.transfers.size(); ++i)
              drain.push_back(i);
          }
        }
        // Ranks whose rail had nothing to do (one node) go on from the stage before.
        for (auto& [rank, deps] : entry)
          after.try_emplace(rank, std::move(deps));
      } else {
        const Collective inside =
            stage == Stage::scatter_inside ? Collective::reduce_scatter : Collective::all_gather;
        for (std::size_t k = 0; k < h.nodes.size(); ++k) {
          for (auto& [rank, deps] : append_phase(plan, inside_node(h, k, inside, piece), entry))
            after[rank] = std::move(deps);
        }
      }
      orders[stage_first.size() - 1].order(plan, stage_first.back());
      entry = std::move(after);
    }
    const std::size_t end = plan.transfers.size();
    // NCCL costs NVLS's reduction and its multicast as one step (tuning.cc: NVLSTree's latency
    // is one intra-node hwLat, 23 us, plus the tree's): the multicast's step latency is already
    // in the reduction's. A piece after the first streams behind it: its latency is hidden.
    const std::size_t hidden_from = p > 0                           ? first
                                    : h.inside == InsideNodes::nvls ? stage_first.back()
                                                                    : end;
    for (std::size_t i = hidden_from; i < end; ++i)
      plan.transfers[i].pipelined = true;
    for (std::size_t i : drain)
      plan.transfers[i].pipelined = false;
    // Inside a node, one piece's reduce-scatter and the previous piece's all-gather step along
    // the same links at once: the analytic cost shares those links between the two (the flows
    // share them by themselves). The first reduce-scatter and the last all-gather run alone.
    if (all_reduce && h.inside != InsideNodes::nvls) {
      for (std::size_t i = p > 0 ? first : end; i < stage_first[1]; ++i)
        plan.transfers[i].sharing *= 2;
      for (std::size_t i = p + 1 < pieces ? stage_first[2] : end; i < end; ++i)
        plan.transfers[i].sharing *= 2;
    }
    for (HopOrder& order : orders)
      order.next_piece();
  }
  return plan;
}

TransferPlan chain_across_nodes(const Hierarchy& h, Collective collective, int root, Bytes bytes,
                                ChainChunks chunks) {
  const bool broadcast = collective == Collective::broadcast;
  if (!broadcast && collective != Collective::reduce) {
    throw std::logic_error("a chain across nodes: broadcast or reduce");
  }
  // One channel per rail, as NCCL's rings across nodes each cross through their own NIC: the
  // node's first ring, turned to leave the node from rail r's GPU.
  const std::vector<int>& base = h.local_rings.front().order;
  std::vector<std::vector<int>> orders;  // node 0's order on each channel
  for (std::size_t r = 0; r < base.size(); ++r) {
    std::vector<int> order = base;
    std::rotate(order.begin(), order.begin() + static_cast<std::ptrdiff_t>((r + 1) % base.size()),
                order.end());
    orders.push_back(std::move(order));
  }
  if (!h.symmetric) {
    // Every node simulated: each channel's ring runs through the nodes one after another, each
    // node in the same local order; the chain follows it from (or into) the root.
    std::vector<Ring> flat(orders.size());
    for (std::size_t c = 0; c < orders.size(); ++c) {
      for (const std::vector<int>& node : h.nodes) {
        for (int gpu : orders[c]) {
          const auto local = std::find(h.nodes.front().begin(), h.nodes.front().end(), gpu) -
                             h.nodes.front().begin();
          flat[c].order.push_back(node[static_cast<std::size_t>(local)]);
        }
      }
    }
    TransferPlan plan = broadcast ? ring_broadcast(flat, root, bytes, chunks)
                                  : ring_reduce(flat, root, bytes, chunks);
    plan.algorithm = Algorithm::hierarchical_ring;
    // The analytic cost charges each channel's hop its link alone, as the mirror's chain below
    // does: ring_chain's sharing assumes every channel on the pair at once the whole way, which
    // only one node's channels are (in lockstep from the root). Across nodes each channel is held
    // up at its own crossing and they drift apart; the flows share the links by themselves
    // either way. With that sharing a ResNet-50 epoch came out 1.05% above the mirror's on 256
    // GPUs (test_multi_gpu: "32 symmetric nodes"), 4.7% on 1,024.
    for (Transfer& t : plan.transfers)
      t.sharing = 1;
    return plan;
  }
  // Node 0 stands for every node (the root's node only starts or ends the chain): on each
  // channel its GPUs pass the chunks on, and the last (into the root, the first) crosses to
  // the next node through its NIC as a mirror transfer. The last chunk then still has the other
  // N - 1 nodes' hops to make, one after another, each at its step latency: n - 1 inside each
  // and a crossing after each, the last back into the root's node (a channel's ring entered
  // from the root partway along its node's part crosses N times; about nN hops in all).
  TransferPlan plan;
  plan.collective = collective;
  plan.algorithm = Algorithm::hierarchical_ring;
  plan.ranks = h.nodes.front();
  plan.channels = static_cast<int>(orders.size());
  const auto channels = static_cast<std::int64_t>(orders.size());
  for (std::size_t c = 0; c < orders.size(); ++c) {
    const std::vector<int>& order = orders[c];
    const std::int64_t share = bytes.value() / channels +
                               (static_cast<std::int64_t>(c) < bytes.value() % channels ? 1 : 0);
    const std::int64_t step = chain_step(Bytes(share), chunks).value();
    const std::int64_t count = std::max<std::int64_t>(1, ceil_div(share, step));
    // Hops of node 0's part: (src, dst), the NIC crossing as (gpu, gpu).
    std::vector<std::pair<int, int>> hops;
    if (!broadcast) hops.emplace_back(order.back(), order.back());
    for (std::size_t k = 0; k + 1 < order.size(); ++k)
      hops.emplace_back(order[k], order[k + 1]);
    if (broadcast) hops.emplace_back(order.back(), order.back());
    std::vector<int> previous_chunk(hops.size(), -1);
    int last = -1;
    for (std::int64_t k = 0; k < count; ++k) {
      const Bytes size(std::min(step, share - k * step));
      int previous_hop = -1;
      for (std::size_t j = 0; j < hops.size(); ++j) {
        Transfer t{hops[j].first, hops[j].second, hops[j].first == hops[j].second, size, {}};
        if (previous_hop >= 0) t.deps.push_back(previous_hop);
        if (previous_chunk[j] >= 0) {
          t.deps.push_back(previous_chunk[j]);
          t.pipelined = true;
        }
        previous_hop = plan.add(std::move(t));
        previous_chunk[j] = previous_hop;
      }
      last = previous_hop;
    }
    // Those hops, each made once per other node, as one transfer of N - 1 steps per hop (they
    // take turns in the chain, so the time is the same; the plan no longer grows with N).
    const Bytes tail(std::min(step, std::max<std::int64_t>(share, 1)));
    const int others = h.total_nodes - 1;
    std::vector<std::pair<int, int>> tail_hops;
    for (std::size_t k = 0; k + 1 < order.size(); ++k)
      tail_hops.emplace_back(order[k], order[k + 1]);
    tail_hops.emplace_back(order.back(), order.back());
    if (others > 0) {
      for (const auto& [src, dst] : tail_hops) {
        Transfer t{src, dst, src == dst, Bytes(tail.value() * others), {last}};
        t.steps = others;
        last = plan.add(std::move(t));
      }
    }
  }
  return plan;
}

int hierarchy_pieces(Bytes bytes, std::size_t local_gpus) {
  const std::int64_t per_gpu_chunks =
      bytes.value() /
      (static_cast<std::int64_t>(std::max<std::size_t>(1, local_gpus)) * kPipelineChunkBytes);
  return static_cast<int>(std::clamp<std::int64_t>(per_gpu_chunks, 1, kHierarchyPieces));
}

}  // namespace epochcast::sim

// Direct copies between a root and the other ranks.
#include "sim/collectives/algorithms.h"

namespace epochcast::sim {

namespace {

TransferPlan direct(const std::vector<int>& ranks, int root, Bytes bytes, bool from_root,
                    Collective collective) {
  TransferPlan plan;
  plan.collective = collective;
  plan.algorithm = Algorithm::direct;
  plan.ranks = ranks;
  const std::int64_t n = static_cast<std::int64_t>(ranks.size());
  Bytes share((bytes.value() + n - 1) / n);
  for (int r : ranks) {
    if (r == root) continue;
    Transfer t;
    t.src = from_root ? root : r;
    t.dst = from_root ? r : root;
    t.bytes = share;
    plan.add(std::move(t));
  }
  return plan;
}

}  // namespace

TransferPlan direct_scatter(const std::vector<int>& ranks, int root, Bytes bytes) {
  return direct(ranks, root, bytes, true, Collective::scatter);
}

TransferPlan direct_gather(const std::vector<int>& ranks, int root, Bytes bytes) {
  return direct(ranks, root, bytes, false, Collective::gather);
}

TransferPlan send_recv(int src, int dst, Bytes bytes) {
  TransferPlan plan;
  plan.collective = Collective::send_recv;
  plan.algorithm = Algorithm::direct;
  plan.ranks = {src, dst};
  plan.add(Transfer{src, dst, false, bytes, {}});
  return plan;
}

TransferPlan direct_all_to_all(const std::vector<int>& ranks, Bytes bytes) {
  TransferPlan plan;
  plan.collective = Collective::all_to_all;
  plan.algorithm = Algorithm::direct;
  plan.ranks = ranks;
  const std::int64_t n = static_cast<std::int64_t>(ranks.size());
  const Bytes share((bytes.value() + n - 1) / n);
  for (int src : ranks) {
    for (int dst : ranks) {
      if (src == dst) continue;
      Transfer t{src, dst, false, share, {}};
      t.sharing = static_cast<int>(n - 1);
      plan.add(std::move(t));
    }
  }
  return plan;
}

TransferPlan mirrored_all_to_all(const std::vector<int>& node, int nodes, Bytes bytes) {
  const auto local = static_cast<std::int64_t>(node.size());
  const std::int64_t ranks = local * nodes;
  const Bytes share((bytes.value() + ranks - 1) / ranks);
  // Inside the node, the sends of an all-to-all over its GPUs of one share each.
  TransferPlan plan = direct_all_to_all(node, Bytes(share.value() * local));
  for (int src : node)
    plan.add(Transfer{src, src, true, Bytes(share.value() * local * (nodes - 1)), {}});
  return plan;
}

}  // namespace epochcast::sim

// Ring algorithms.
#include <algorithm>
#include <map>
#include <stdexcept>
#include <utility>

#include "sim/collectives/algorithms.h"

namespace epochcast::sim {

namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}

// Bytes of channel c when `bytes` is split over `channels` as evenly as possible.
Bytes channel_share(Bytes bytes, std::size_t channels, std::size_t c) {
  std::int64_t base = bytes.value() / static_cast<std::int64_t>(channels);
  std::int64_t extra = bytes.value() % static_cast<std::int64_t>(channels);
  return Bytes(base + (static_cast<std::int64_t>(c) < extra ? 1 : 0));
}

// `steps` ring steps on every channel: in step s each GPU sends one chunk to the next, once it
// has received step s-1's chunk from the previous GPU and finished its own step s-1 send.
// How many channels send along each directed edge a -> b (they share that link).
std::map<std::pair<int, int>, int> edge_sharing(const std::vector<Ring>& channels) {
  std::map<std::pair<int, int>, int> count;
  for (const Ring& ring : channels) {
    const std::size_t n = ring.order.size();
    for (std::size_t i = 0; i < n && n > 1; ++i)
      count[{ring.order[i], ring.order[(i + 1) % n]}]++;
  }
  return count;
}

TransferPlan ring_steps(const std::vector<Ring>& channels, Bytes bytes, int steps_factor,
                        Collective collective) {
  const std::map<std::pair<int, int>, int> sharing = edge_sharing(channels);
  TransferPlan plan;
  plan.collective = collective;
  plan.algorithm = Algorithm::ring;
  plan.ranks = channels.front().order;
  plan.channels = static_cast<int>(channels.size());
  // A flat ring over 1,024 ranks has 2.1 million transfers: the plan is sized once, and each
  // edge's sharing looked up once per channel, not once per step (a map search each).
  std::size_t transfers = 0;
  for (const Ring& ring : channels) {
    const std::size_t n = ring.order.size();
    if (n >= 2) transfers += static_cast<std::size_t>(steps_factor) * (n - 1) * n;
  }
  plan.transfers.reserve(transfers);
  std::vector<int> edge_sharing_of;  // by the sending GPU's place in the channel's ring
  std::vector<int> previous, current;
  for (std::size_t c = 0; c < channels.size(); ++c) {
    const std::vector<int>& order = channels[c].order;
    const int n = static_cast<int>(order.size());
    if (n < 2) continue;
    Bytes chunk(ceil_div(channel_share(bytes, channels.size(), c).value(), n));
    const int steps = steps_factor * (n - 1);
    edge_sharing_of.assign(static_cast<std::size_t>(n), 0);
    for (int i = 0; i < n; ++i) {
      edge_sharing_of[static_cast<std::size_t>(i)] = sharing.at(
          {order[static_cast<std::size_t>(i)], order[static_cast<std::size_t>((i + 1) % n)]});
    }
    previous.assign(static_cast<std::size_t>(n), -1);
    current.assign(static_cast<std::size_t>(n), -1);
    for (int s = 0; s < steps; ++s) {
      for (int i = 0; i < n; ++i) {
        Transfer t;
        t.src = order[static_cast<std::size_t>(i)];
        t.dst = order[static_cast<std::size_t>((i + 1) % n)];
        t.bytes = chunk;
        t.sharing = edge_sharing_of[static_cast<std::size_t>(i)];
        if (s > 0) {
          t.deps = {previous[static_cast<std::size_t>((i + n - 1) % n)],
                    previous[static_cast<std::size_t>(i)]};
        }
        current[static_cast<std::size_t>(i)] = plan.add(std::move(t));
      }
      std::swap(previous, current);
    }
  }
  return plan;
}

// A chain along the ring from `root` (or, reversed, into it), pipelined in chunks: chunk k
// moves over hop j once it has crossed hop j-1 and chunk k-1 has crossed hop j, its step
// latency hidden behind chunk k-1's (Transfer::pipelined).
TransferPlan ring_chain(const std::vector<Ring>& channels, int root, Bytes bytes,
                        ChainChunks chunks, bool into_root, Collective collective) {
  const std::map<std::pair<int, int>, int> sharing = edge_sharing(channels);
  TransferPlan plan;
  plan.collective = collective;
  plan.algorithm = Algorithm::ring;
  plan.ranks = channels.front().order;
  plan.channels = static_cast<int>(channels.size());
  for (std::size_t c = 0; c < channels.size(); ++c) {
    std::vector<int> order = channels[c].order;
    const int n = static_cast<int>(order.size());
    if (n < 2) continue;
    // Rotate so the chain starts at the root (broadcast) or ends at it (reduce).
    auto at = std::find(order.begin(), order.end(), root);
    std::rotate(order.begin(), into_root ? std::next(at) : at, order.end());
    Bytes share = channel_share(bytes, channels.size(), c);
    const Bytes step = chain_step(share, chunks);
    const std::int64_t count = std::max<std::int64_t>(1, ceil_div(share.value(), step.value()));
    std::vector<int> previous_chunk(static_cast<std::size_t>(n - 1), -1);
    for (std::int64_t k = 0; k < count; ++k) {
      Bytes size(std::min(step.value(), share.value() - k * step.value()));
      int previous_hop = -1;
      for (int j = 0; j + 1 < n; ++j) {
        Transfer t;
        t.src = order[static_cast<std::size_t>(j)];
        t.dst = order[static_cast<std::size_t>(j + 1)];
        t.bytes = size;
        t.sharing = sharing.at({t.src, t.dst});
        if (previous_hop >= 0) t.deps.push_back(previous_hop);
        if (previous_chunk[static_cast<std::size_t>(j)] >= 0) {
          t.deps.push_back(previous_chunk[static_cast<std::size_t>(j)]);
          t.pipelined = true;
        }
        previous_hop = plan.add(std::move(t));
        previous_chunk[static_cast<std::size_t>(j)] = previous_hop;
      }
    }
  }
  return plan;
}

}  // namespace

TransferPlan ring_all_reduce(const std::vector<Ring>& channels, Bytes bytes) {
  return ring_steps(channels, bytes, 2, Collective::all_reduce);
}
TransferPlan ring_reduce_scatter(const std::vector<Ring>& channels, Bytes bytes) {
  return ring_steps(channels, bytes, 1, Collective::reduce_scatter);
}
TransferPlan ring_all_gather(const std::vector<Ring>& channels, Bytes bytes) {
  return ring_steps(channels, bytes, 1, Collective::all_gather);
}
TransferPlan lockstep_ring(const Ring& ring, Bytes bytes, Collective collective) {
  TransferPlan plan;
  plan.collective = collective;
  plan.algorithm = Algorithm::ring;
  plan.ranks = ring.order;
  const std::vector<int>& order = ring.order;
  const auto n = static_cast<std::int64_t>(order.size());
  if (n < 2) return plan;
  const std::int64_t steps = (collective == Collective::all_reduce ? 2 : 1) * (n - 1);
  const Bytes chunk(ceil_div(bytes.value(), n));  // as ring_steps cuts one channel's share
  Transfer close{order.front(), order.front(), false, Bytes(0), {}};
  for (std::size_t i = 0; i < order.size(); ++i) {
    Transfer t{order[i], order[(i + 1) % order.size()], false, Bytes(chunk.value() * steps), {}};
    t.steps = static_cast<int>(steps);
    close.deps.push_back(plan.add(std::move(t)));
  }
  const int closed = plan.add(std::move(close));
  // And each rank's own zero-byte step after it: a rank's part of a collective ends with the
  // transfers that touch it (collective_ops), and the close touches only the first.
  for (int rank : order)
    plan.add(Transfer{rank, rank, false, Bytes(0), {closed}});
  return plan;
}
TransferPlan ring_broadcast(const std::vector<Ring>& channels, int root, Bytes bytes,
                            ChainChunks chunks) {
  return ring_chain(channels, root, bytes, chunks, false, Collective::broadcast);
}
TransferPlan ring_reduce(const std::vector<Ring>& channels, int root, Bytes bytes,
                         ChainChunks chunks) {
  return ring_chain(channels, root, bytes, chunks, true, Collective::reduce);
}

Bytes chain_step(Bytes share, ChainChunks chunks) {
  if (chunks.size.value() <= 0 || chunks.most <= 0 || chunks.largest < chunks.size) {
    throw std::logic_error("a chain cut in chunks of no bytes, in none, or larger than largest");
  }
  const std::int64_t step = std::max(
      chunks.size.value(), std::min(ceil_div(share.value(), chunks.most), chunks.largest.value()));
  return Bytes(std::max(step, ceil_div(share.value(), kMaxChainChunks)));
}

ChainChunks chain_chunks(Protocol protocol) {
  constexpr std::int64_t kMostPieces = 4;
  switch (protocol) {
    case Protocol::simple:
      return {Bytes(kSimpleStepBytes), kMaxChainChunks, Bytes(kSimpleStepBytes)};
    case Protocol::ll:
      return {Bytes(kLlPassBytes), kMostPieces, Bytes(kPipelineChunkBytes)};
    case Protocol::ll128:
      return {Bytes(kLl128PassBytes), kMostPieces, Bytes(kPipelineChunkBytes)};
  }
  throw std::logic_error("a chain cut for an unknown protocol");
}

}  // namespace epochcast::sim

// Collective algorithms: each turns a collective over a logical topology into a transfer plan.
// Sizes are the collective's data size as nccl-tests counts it (the buffer each rank holds).
#pragma once

#include <limits>
#include <map>
#include <string_view>
#include <vector>

#include "sim/collectives/collective.h"
#include "sim/collectives/logical_topology.h"

namespace epochcast::sim {

// Pipelining chunk of tree algorithms and of the stages across nodes (NCCL moves data in slices
// of this order).
inline constexpr std::int64_t kPipelineChunkBytes = 1 << 20;
// One step of NCCL's Simple protocol: its buffer, 4 MiB (NCCL_BUFFSIZE), over NCCL_STEPS = 8.
inline constexpr std::int64_t kSimpleStepBytes = (4 << 20) / 8;
// What one block of NCCL's LL and LL128 kernels moves in a pass over its lines, in data bytes:
// LL's 512 threads (NCCL_LL_MAX_NTHREADS) 8 each (a 16-byte line of data and flag, prims_ll.h),
// 4,096; LL128's 640 threads (NCCL_LL128_MAX_NTHREADS) 8 eight-byte words each
// (NCCL_LL128_SHMEM_ELEMS_PER_THREAD), in 128-byte lines of which 120 bytes are data, 38,400
// (minChunkSizeLL128 in src/device/broadcast.h). NCCL runs small messages on fewer threads and
// channels (enqueue.cc's ramp, not modelled: tests/cli/test_collective_cli.cpp).
inline constexpr std::int64_t kLlPassBytes = 512 * 8;
inline constexpr std::int64_t kLl128PassBytes = 640 * 8 * 8 * 120 / 128;
// A chain never cuts a channel's share into more than this many chunks (larger ones beyond,
// 2 GiB a channel in Simple's steps), so that its plan stays small: the pipeline's fill then
// grows by its hops / 4096 of the time, under 3% for 128 hops.
inline constexpr std::int64_t kMaxChainChunks = 4096;

// How a chain (ring broadcast and reduce) cuts each channel's share: chunks of `size`; where
// that makes more than `most`, fewer and larger ones, but none larger than `largest` (save for
// kMaxChainChunks). Each chunk crosses a hop whole before the next hop starts it.
struct ChainChunks {
  Bytes size;
  std::int64_t most = kMaxChainChunks;
  Bytes largest{std::numeric_limits<std::int64_t>::max()};
};
// The unit NCCL's ring broadcast and reduce forward in, by protocol (src/device/broadcast.h,
// reduce.h). Simple stores and forwards a whole step (kSimpleStepBytes, one step a chunk:
// BROADCAST_CHUNKSTEPS = REDUCE_CHUNKSTEPS = 1). LL and LL128 pass each line on as soon as its
// flag shows it arrived, so a chunk flows through the chain a block's pass at a time
// (kLlPassBytes, kLl128PassBytes). Every rank's plan holds a flow per hop and chunk, so LL's and
// LL128's shares are cut in at most 4 pieces, each at most kPipelineChunkBytes, which keeps an
// every-rank plan small for little change in the epoch (measured: docs/performance.md, "Chains
// cut in protocol passes"); a share past 4 MiB is cut in 1 MiB pieces.
ChainChunks chain_chunks(Protocol protocol);
// The bytes of each chunk of a channel's `share` (ChainChunks' rule).
Bytes chain_step(Bytes share, ChainChunks chunks);

// Ring algorithms (ring.cpp). Data is split across the channels. All-reduce is a reduce-scatter
// then an all-gather: 2(n-1) steps each moving bytes/(channels x n) along every ring edge.
// Broadcast and reduce run as a chain from (or to) the root, pipelined in chunks.
TransferPlan ring_all_reduce(const std::vector<Ring>& channels, Bytes bytes);
TransferPlan ring_reduce_scatter(const std::vector<Ring>& channels, Bytes bytes);
TransferPlan ring_all_gather(const std::vector<Ring>& channels, Bytes bytes);
// One ring's k (n - 1) steps (k = 2 for an all-reduce, 1 for a reduce-scatter or an
// all-gather) with each rank's sends to the next as one transfer of that many steps, then a
// zero-byte transfer once all have arrived and after it one zero-byte transfer per rank onto
// itself (the last n, in ring order), from which that rank goes on. A ring moves in lockstep
// (each step needs the one before it from the previous rank), so no rank is done before its
// slowest edge has made all its steps: the single steps' end, in 2n + 1 transfers instead of
// k (n - 1) n. Across nodes with every node simulated.
TransferPlan lockstep_ring(const Ring& ring, Bytes bytes, Collective collective);
TransferPlan ring_broadcast(const std::vector<Ring>& channels, int root, Bytes bytes,
                            ChainChunks chunks);
TransferPlan ring_reduce(const std::vector<Ring>& channels, int root, Bytes bytes,
                         ChainChunks chunks);

// Tree algorithms (tree.cpp): reduce up a binary tree and broadcast down it, pipelined in chunks.
// The chunk of a tree all-reduce across `nodes` nodes of `ranks` ranks in all, whose `bytes`
// run over `channels` trees, as NCCL picks it for the Simple protocol (src/enqueue.cc,
// computeColl): one step of the Simple buffer (4 MiB / NCCL_STEPS = 512 KiB), halved while a
// channel's data makes too few chunks to fill the tree's pipeline: fewer than depth x 8 down to
// 128 KiB, depth x 4 down to 64 KiB, depth down to 32 KiB, with NCCL's depth ranks / nodes - 1 +
// floor(log2(nodes)) (src/graph/connect.cc, connectTrees). A large chunk would make the tree's
// fill and drain, 2 x depth chunk hops, the size of the data itself.
Bytes tree_chunk(Bytes bytes, int channels, int ranks, int nodes);
inline constexpr std::int64_t kTreeFirstChunkBytes = kSimpleStepBytes;
TransferPlan tree_all_reduce(const Tree& tree, Bytes bytes, Bytes chunk);
TransferPlan tree_broadcast(const Tree& tree, Bytes bytes, Bytes chunk);
TransferPlan tree_reduce(const Tree& tree, Bytes bytes, Bytes chunk);
// NCCL's double binary tree: half of the data on each of two trees, every rank inner in at most
// one of them, so no rank's links carry much more than another's.
TransferPlan double_tree_all_reduce(const std::vector<int>& ranks, Bytes bytes, Bytes chunk);

// Direct copies (direct.cpp): scatter and gather between a root and every other rank, and one
// point-to-point copy.
TransferPlan direct_scatter(const std::vector<int>& ranks, int root, Bytes bytes);
TransferPlan direct_gather(const std::vector<int>& ranks, int root, Bytes bytes);
TransferPlan send_recv(int src, int dst, Bytes bytes);
// All-to-all (nccl-tests' alltoall): every rank sends bytes / n to every other rank at once; a
// rank's n - 1 sends share its links.
TransferPlan direct_all_to_all(const std::vector<int>& ranks, Bytes bytes);
// The same over `nodes` identical nodes in a symmetric simulation: each of node 0's GPUs sends
// its share to every local peer and, as one mirror transfer through its NIC, the shares of all
// n (N - 1) GPUs of the other nodes (with NCCL's PXN a share for another rail goes first to the
// local GPU of that rail over NVLink, then out of its NIC: the NIC bytes are the same).
TransferPlan mirrored_all_to_all(const std::vector<int>& node, int nodes, Bytes bytes);

// Across nodes (hierarchical.cpp): reduce-scatter inside each node, all-reduce each rank's shard
// across nodes along its rail, all-gather inside each node. `nodes` lists, per node, its GPUs in
// the same local order (rails). In a symmetric simulation only node 0 is listed and
// `total_nodes` says how many nodes there are: the cross-node steps become mirror transfers, one
// per rail and step, standing for every node's identical traffic.
//
// Inside a node: the rings above, NVLS (the NVSwitch reduces and multicasts) or direct copies
// (every GPU sends each peer its share at once, through an NVSwitch). Across nodes: a ring over
// the nodes, NCCL's pipelined double binary tree, or the network's switches reducing the shard
// (SHARP) — each GPU sends its shard once and gets the result back. The combinations NCCL runs:
// rings + ring or tree (its ring and tree algorithms), NVLS + tree (NVLSTree), NVLS + in the
// network (NVLS across nodes, which NCCL runs only with CollNet), direct + in the network
// (CollNet Direct, on NVSwitch nodes), rings + in the network (CollNet Chain elsewhere; NCCL
// chains the GPUs to the NIC, which rings approximate in bytes per link).
//
// NCCL streams the data through these stages (one kernel, NCCL_STEPS = 8 steps in flight per
// channel), so a large all-reduce runs at the rate of its slowest stage, not the sum of the
// three. The plan cuts the data into `pieces` that follow each other through the stages: a
// piece takes a hop of a stage once the piece before has left that hop, and after the first
// its steps' latency is hidden (Transfer::pipelined). One piece is the stages back to back.
enum class InsideNodes { rings, nvls, direct };
enum class AcrossNodes { ring, tree, in_network };
struct Hierarchy {
  std::vector<std::vector<int>> nodes;
  std::vector<Ring> local_rings;  // rings over node 0's GPUs; other nodes use the same order
  int total_nodes = 1;
  bool symmetric = false;
  InsideNodes inside = InsideNodes::rings;
};
// All-reduce, and (rings inside and across only, as NCCL runs them) reduce-scatter — inside, then
// along the rails, each rank ending with its share — and all-gather, the reverse. Sizes as
// nccl-tests counts them: the buffer each rank holds (all-reduce, reduce-scatter's input), the
// gathered buffer (all-gather).
TransferPlan hierarchical_collective(const Hierarchy& hierarchy, Collective collective, Bytes bytes,
                                     AcrossNodes across, Bytes chunk, int pieces);
// Broadcast from `root` and reduce into it across nodes, as NCCL runs them: a pipelined chain
// along each channel's ring through every GPU of every node, the data split over the channels
// (each crossing between nodes through its own NIC). In a symmetric simulation (`root` then on
// node 0) node 0's part stands for every node's, and the last chunk's hops through the other
// nodes are added one after another, so the chain has NCCL's length.
TransferPlan chain_across_nodes(const Hierarchy& hierarchy, Collective collective, int root,
                                Bytes bytes, ChainChunks chunks);
inline TransferPlan hierarchical_all_reduce(const Hierarchy& hierarchy, Bytes bytes,
                                            AcrossNodes across, Bytes chunk, int pieces) {
  return hierarchical_collective(hierarchy, Collective::all_reduce, bytes, across, chunk, pieces);
}
// The pieces for `bytes` over nodes of `local_gpus`: one per pipeline chunk each GPU's shard
// holds, at most kHierarchyPieces (NCCL_STEPS, src/include/device.h: the steps a channel keeps in
// flight), at least one.
int hierarchy_pieces(Bytes bytes, std::size_t local_gpus);
inline constexpr std::int64_t kHierarchyPieces = 8;

// How NCCL's NVLS kernels walk a buffer (src/enqueue.cc for the chunk; src/device/all_reduce.h,
// reduce_scatter.h, all_gather.h for the loop): each of channels x heads concurrent operations
// (heads: the node's GPUs) takes a chunk per loop iteration, so a loop covers loop_bytes. The
// chunk is 128 KiB (NCCL_NVLS_CHUNKSIZE), halved to 64 KiB below 64 loops' worth of 128 KiB
// chunks, to 32 KiB below 8 loops' worth, to 16 KiB below 2. Each loop passes through the
// kernel's warp groups in turn, `stages` of them: all-reduce scatters into the switch's buffer,
// reduces and multicasts, gathers (3); reduce-scatter and all-gather have two. A pipeline of
// `stages` over `loops` iterations takes loops + stages - 1 iteration times, and the collective
// one more (fitted with the iteration's latency to the public DGX H100 all_reduce_perf table:
// docs/evidence/nccl-all-reduce-sizes.md), so that a few bytes take four iterations, NCCL's own
// latency for NVLS (tuning.cc hwLat NVLS, 23 us in NCCL 2.20).
struct NvlsLoop {
  std::int64_t chunk_bytes = 0;
  std::int64_t loop_bytes = 0;
  std::int64_t loops = 0;
  int stages = 0;
};
NvlsLoop nvls_loop(Collective collective, Bytes bytes, int heads);

// NVLink SHARP (nvls.cpp): the NVSwitch reduces and multicasts, so each GPU exchanges its data
// with the switch once instead of stepping it around a ring. All-reduce: every GPU's NVSwitch
// links carry S (1 + 1/n) each way (the switch reads every GPU's S/n shards for the reduction,
// each GPU gets its reduced S/n and stores it once to the multicast address, which delivers
// every shard to every GPU), one round-trip fabric transfer per rank; all-gather and
// reduce-scatter move S one way and S/n the other, two one-way transfers per rank. Each
// transfer is the NVLS loop's pipeline (nvls_loop): one step of links.step_latency_us.nvls per
// iteration time, and the first loop's data once more for each stage it fills and drains (an
// idle stage costs the time its data would take).
TransferPlan nvls_collective(Collective collective, const std::vector<int>& ranks, Bytes bytes);
// Whether NCCL can run NVLS over `ranks`: one node, 3 GPUs or more (ncclNvlsInit returns for 2
// or fewer), a Hopper or later GPU (multicast objects need NVSwitch gen3 and CUDA 12.1; NCCL
// checks CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED), every rank on the same NVSwitch fabric, and
// an all-reduce, all-gather or reduce-scatter (NVIDIA/nccl src/transport/nvls.cc,
// src/tuning/nvls.cc).
bool nvls_available(const Topology& topology, std::string_view architecture,
                    const std::vector<int>& ranks, int total_nodes, Collective collective);
// NCCL's NVLS channels on Hopper (NVLS_NCHANNELS_SM90, src/include/nvls.h).
inline constexpr int kNvlsChannelsHopper = 16;

// Appends `phase` to `plan` (its transfers moved, not copied: with every rank of a large
// cluster, the candidates' plans have millions). A transfer of `phase` that starts a rank's part
// (no dependency of its own) waits for that rank's `entry` transfers. Returns, per rank, the
// transfers of the phase that touch it (what the rank's next phase must wait for).
std::map<int, std::vector<int>> append_phase(TransferPlan& plan, TransferPlan phase,
                                             const std::map<int, std::vector<int>>& entry);

}  // namespace epochcast::sim

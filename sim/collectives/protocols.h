// NCCL's three protocols as its tuning model costs them (src/graph/tuning.cc, NCCL 2.19-2.21,
// commit b647562): per step a latency that depends on the protocol and the kind of link, a
// share of the link's bandwidth, and a base latency per collective call.
//
// - Simple: the data in large chunks with a memory fence per step; full bandwidth, the highest
//   per-step latency. Its per-step latencies are the profile's links.step_latency_us (NCCL's
//   ring/Simple hwLat: NVLink 3.4, PCI 5.7, network 14 us), so calibration can move them.
// - LL (low latency): 8-byte stores of 4 data bytes and a flag, polled by the receiver; half
//   the bandwidth, as its lines are half flags (NCCL's tuner took a quarter for all-reduce in
//   2.20 and takes half in src/tuning/ring.cc at commit 1fc949c), at a per-step latency of
//   0.6 us over NVLink, 1.0 over PCIe, 2.7 over the network (the profile's
//   links.ll_step_latency_us, these by default); its CTAs' pace bounds it at small sizes
//   (kernel_rate_limit).
// - LL128: 128-byte lines of 120 data bytes and a flag, relying on NVLink's ordering; 0.92 of
//   the bandwidth at 1.9 / 2.5 / 4.0 us per step. NCCL enables it by default only on Volta,
//   Ampere and Hopper when NVLink joins the GPUs of a node.
// - A base latency per collective on the GPU, before its first step: rings LL 6.6, LL128 14.0,
//   Simple 8.4 us; trees 6.8, 14.0, 0 (tuning.cc baseLat); NVLS none (its one step is its
//   latency). The host's cost of issuing the call is apart: links.collective_launch_us.
//
// GPUs that run LL or LL128 otherwise than NCCL's tuner assumes (another NCCL, another
// generation) say so in their profile: links.ll_step_latency_us, ll_rate_relative and
// ll128_rate_relative (LinkCosts), which a collective's time takes. The choice of algorithm
// and protocol takes the tuner's figures whatever the profile says (ProtocolFigures), as NCCL
// does.
#pragma once

#include <array>
#include <string_view>
#include <vector>

#include "core/spec/profile_spec.h"
#include "sim/collectives/collective.h"
#include "sim/network/topology.h"

namespace epochcast::sim {

// Whose LL and LL128 figures a time takes: the machine's (the profile's links.ll_* figures,
// what a collective then takes) or NCCL's tuner's (their defaults, by which NCCL picks an
// algorithm and protocol whatever the GPUs do).
enum class ProtocolFigures { machine, tuner };

// LL's work a step is the SMs' (each thread stores a line and its flag, and polls for the
// next): over NVLink it takes NCCL's hwLat (0.6 us) and a thread 0.27 us a line on an H100 SXM
// at its 1980 MHz boost, where both were checked (tests/sim/data/nccl-tests/dgx-h100-*), and on
// other GPUs as many cycles at their own boost clock: this ratio of the H100's clock to the
// topology's GPUs' (1 where the catalogue has no clock). On 8x A100 (1410 MHz) it gives LL's
// hop 0.84 us, where public tables calibrate to 0.72-1.12 (docs/evidence/nccl-all-reduce-sizes.md).
double ll_clock_scale(const Topology& topology);
double ll_clock_scale(const GpuSpec& gpu);
// LL's step over a link of `kind` as the machine runs it: the profile's own
// links.ll_step_latency_us, else NCCL's hwLat, over NVLink at the GPUs' clock (`clock_scale`).
Seconds machine_ll_step_latency(const HardwareProfile& profile, LinkKind kind, double clock_scale);
// A thread's pace under LL over NVLink at the reference clock: one 16-byte line (8 bytes of data)
// each this long (kernel_rate_limit says where it is fitted).
inline constexpr double kLlLinePaceUs = 0.27;
// The H100 SXM5's boost clock (topologies/gpus.yaml, MHz), ll_clock_scale's reference.
inline constexpr double kLlReferenceClockMhz = 1980;
// The per-step latency of a step whose slowest link is of each kind, under `protocol`. Under
// the machine's figures LL's NVLink and NVSwitch steps without the profile's own latency take
// NCCL's times `ll_clock_scale` (ll_clock_scale(topology)).
std::array<Seconds, kLinkKinds> protocol_step_latencies(
    const HardwareProfile& profile, Protocol protocol,
    ProtocolFigures figures = ProtocolFigures::machine, double ll_clock_scale = 1);
// NCCL's base latency of a collective run by `algorithm` under `protocol` (0 for direct copies,
// which NCCL runs as point-to-point operations outside its tuning model, and for NVLS, NVLSTree
// and CollNet: tuning.cc baseLat 0).
Seconds protocol_base_latency(Algorithm algorithm, Protocol protocol);
// The channels NCCL's communicator holds for a plan's algorithm (comm->nChannels, or
// nvlsChannels): each runs as one CTA of a collective's kernel. NVLS on Hopper: 16
// (NVLS_NCHANNELS_SM90); rings whose every edge is NVLink: 24 (an 8x H100 NVSwitch node's log,
// NVIDIA/nccl issue 1367: the ring search finds 12 channels and NCCL doubles them, as it does
// wherever a channel's bandwidth is 25 GB/s or more, ncclTopoDupChannels); others (PCIe, shared
// memory, the network): 2, an estimate (a PCIe ring is found once or twice and not doubled
// below 25 GB/s). A plan that moves nothing: 0.
int communicator_channels(const TransferPlan& plan, const Topology& topology);
// How NCCL launches a collective's kernel at one size: its channels (one CTA each, so also the
// SMs the kernel holds while it runs) and the threads of each.
struct NcclLaunch {
  int channels = 0;
  int threads = 0;
  bool nvlink = false;     // NVLink joins every two neighbours of the node's rings
  double clock_scale = 1;  // ll_clock_scale of the GPUs: LL's pace a line under their clock
};
// The launch of a collective of `bytes`. Rings and trees start from the communicator's channels
// and the protocol's threads and, while bytes < channels x threads x threshold, drop a channel,
// then, down to one, halve the threads while they are a multiple of 128 (enqueue.cc,
// topoGetAlgoInfo, NCCL 2.18-2.21): threads a channel, LL 512, LL128 640, Simple 512
// (NCCL_*_MAX_NTHREADS); bytes a thread, LL 8 (times the communicator's `ranks` on rings), LL128
// 8, Simple 64 (NCCL_*_THREAD_THRESHOLD, tuning.cc). Simple adds a warp for synchronisation on
// rings, four on trees, and no CTA has fewer than 3 warps. An 8-rank ring under LL so runs 1
// channel of 96 threads up to 8 KiB, 512 threads from 32 KiB and all 24 channels from 768 KiB.
// NVLS keeps its 16; NVLSTree, CollNet and point-to-point copies keep the communicator's (NCCL
// cuts them by rules of their own, not modelled). `bytes`: the whole buffer, nccl-tests' size
// (NCCL's nBytes, all ranks' data for all-gather and reduce-scatter).
NcclLaunch nccl_launch(const TransferPlan& plan, const Topology& topology, Bytes bytes, int ranks);
// nccl_launch's channels.
int nccl_channels(const TransferPlan& plan, const Topology& topology, Bytes bytes, int ranks);
// The most data (bytes a second) a rank's transfers together move under the plan's protocol,
// however fast its links, when NCCL launches it as `launch` on `nodes` nodes of `architecture`:
// for the steps of a ring all-reduce, all-gather or reduce-scatter (a flat ring, in one node or
// across nodes); 0 where nothing but the links limits it (Simple; chains, trees, NVLS, CollNet,
// point-to-point copies, whose pipelined chunks are timed at the links' rate).
// - LL: each thread stores one 16-byte line (8 bytes of data and their flags) and waits for it
//   to land before the next, 0.27 us a line over NVLink at an H100's clock (times the launch's
//   clock_scale under the machine's figures), so a channel of 512 threads moves about 15 GB/s;
//   and a rank never more than NCCL's llMaxBw (ArchitectureTraits). The pace is
//   fitted to an 8x H100 node's all_reduce_perf table from 64 B to 1 MiB
//   (tests/sim/data/nccl-tests/dgx-h100-all-reduce.csv; docs/evidence/nccl-small-messages.md);
//   without NVLink rings only llMaxBw is applied (no table to fit a PCIe or network pace).
// - LL128: NCCL's perChMaxRingLL128Bw a channel, in proportion to the threads launched.
// Under `figures` machine, llMaxBw and LL128's rate are each times the profile's
// links.ll_rate_relative or links.ll128_rate_relative (a thread's LL pace is not: where a thread
// stores a line a step, the pace adds to each step as LL's step latency does).
double kernel_rate_limit(const TransferPlan& plan, const NcclLaunch& launch,
                         const HardwareProfile& profile, std::string_view architecture, int nodes,
                         ProtocolFigures figures = ProtocolFigures::machine);
// The share of a link's (Simple) bandwidth the protocol's data gets: LL half (its lines are
// half flags), LL128 0.92 (tuning.cc), each times the machine's rate relative to the tuner's.
double protocol_bandwidth_share(const HardwareProfile& profile, Protocol protocol,
                                ProtocolFigures figures = ProtocolFigures::machine);
// Whether NCCL enables the protocol by default: LL128 needs a Volta, Ampere or Hopper GPU and
// NVLink on every edge of the rings laid over `ranks` (NCCL: typeIntra <= PATH_NVB).
bool protocol_enabled(Protocol protocol, const Topology& topology, std::string_view architecture,
                      const std::vector<int>& ranks);
// The per-step latency tables of the three protocols, in Protocol order, then one of zeros for
// pipelined steps (Transfer::pipelined), at kPipelinedStepTable (for the flow network).
std::vector<std::array<Seconds, kLinkKinds>> protocol_step_tables(const HardwareProfile& profile,
                                                                  double ll_clock_scale = 1);
inline constexpr int kPipelinedStepTable = static_cast<int>(kProtocolCount);

}  // namespace epochcast::sim

// NCCL's protocol constants (see protocols.h for the source).
#include "sim/collectives/protocols.h"

#include "core/spec/architecture_traits.h"
#include "sim/collectives/algorithms.h"
#include "sim/collectives/logical_topology.h"

namespace epochcast::sim {

namespace {

// NCCL's LL128 hwLat for rings, by the hardware class of a link kind: NVLink, PCI, network (us).
// LL's are the profile's (LinkCosts::kNcclLlStepLatencyUs, the same table's other row).
constexpr double kLl128StepLatencyUs[3] = {1.9, 2.5, 4.0};

int hardware_class(LinkKind kind) {
  switch (kind) {
    case LinkKind::nvlink:
    case LinkKind::nvswitch:
    case LinkKind::nvls:
      return 0;
    case LinkKind::network:
    case LinkKind::sharp:
      return 2;
    case LinkKind::pcie:
    case LinkKind::socket:
    case LinkKind::host_bridge:
    // NCCL costs every intra-node graph without NVLink, shared-memory transport included, as
    // PCI (tuning.cc: intraHw = typeIntra == LINK_NVL ? NCCL_HW_NVLINK : NCCL_HW_PCI).
    case LinkKind::shm:
      return 1;
  }
  return 1;
}

double clock_scale_of(double boost_mhz) {
  return boost_mhz > 0 ? kLlReferenceClockMhz / boost_mhz : 1.0;
}

}  // namespace

double ll_clock_scale(const Topology& topology) {
  return clock_scale_of(topology.gpu_boost_mhz());
}

double ll_clock_scale(const GpuSpec& gpu) {
  return clock_scale_of(gpu.clocks ? gpu.clocks->boost_mhz : 0);
}

Seconds machine_ll_step_latency(const HardwareProfile& profile, LinkKind kind, double clock_scale) {
  const auto k = static_cast<std::size_t>(kind);
  if (profile.links.ll_step_latency[k]) return *profile.links.ll_step_latency[k];
  // Over NVLink the step is the SMs' work (ll_clock_scale); over PCIe and the network the
  // links' round trips set it, whatever the clock.
  const Seconds nccl = microseconds(LinkCosts::kNcclLlStepLatencyUs[k]);
  return hardware_class(kind) == 0 ? nccl * clock_scale : nccl;
}

std::array<Seconds, kLinkKinds> protocol_step_latencies(const HardwareProfile& profile,
                                                        Protocol protocol, ProtocolFigures figures,
                                                        double ll_clock_scale) {
  if (protocol == Protocol::simple) return profile.links.step_latency;
  std::array<Seconds, kLinkKinds> out{};
  for (std::size_t k = 0; k < kLinkKinds; ++k) {
    if (protocol == Protocol::ll) {
      out[k] = figures == ProtocolFigures::tuner
                   ? microseconds(LinkCosts::kNcclLlStepLatencyUs[k])
                   : machine_ll_step_latency(profile, static_cast<LinkKind>(k), ll_clock_scale);
    } else {
      out[k] = microseconds(kLl128StepLatencyUs[hardware_class(static_cast<LinkKind>(k))]);
    }
  }
  return out;
}

Seconds protocol_base_latency(Algorithm algorithm, Protocol protocol) {
  // tuning.cc baseLat[algorithm][protocol] in LL, LL128, Simple order (us).
  constexpr double kRing[] = {6.6, 14.0, 8.4};
  constexpr double kTree[] = {6.8, 14.0, 0};
  const auto p = static_cast<std::size_t>(protocol == Protocol::ll      ? 0
                                          : protocol == Protocol::ll128 ? 1
                                                                        : 2);
  switch (algorithm) {
    case Algorithm::ring:
    case Algorithm::hierarchical_ring:
      return microseconds(kRing[p]);
    case Algorithm::tree:
    case Algorithm::hierarchical_tree:
      return microseconds(kTree[p]);
    case Algorithm::direct:
    case Algorithm::nvls:
    case Algorithm::nvls_tree:
    case Algorithm::collnet_direct:
    case Algorithm::collnet_chain:
      break;
  }
  return Seconds(0);
}

double protocol_bandwidth_share(const HardwareProfile& profile, Protocol protocol,
                                ProtocolFigures figures) {
  const bool machine = figures == ProtocolFigures::machine;
  switch (protocol) {
    case Protocol::simple:
      return 1.0;
    case Protocol::ll:
      return 0.5 * (machine ? profile.links.ll_rate_or_default() : 1.0);
    case Protocol::ll128:
      return 0.92 * (machine ? profile.links.ll128_rate_or_default() : 1.0);
  }
  return 1.0;
}

namespace {

// The channels of a communicator whose rings are all NVLink, and of others (communicator_channels).
constexpr int kNvlinkRings = 24, kOtherRings = 2;

// Whether NVLink (directly or through NVSwitch) joins every two neighbours of the rings laid
// over `ranks` (NCCL: typeIntra <= PATH_NVB).
bool rings_on_nvlink(const Topology& topology, const std::vector<int>& ranks) {
  for (const Ring& ring : build_rings(topology, ranks)) {
    const std::size_t n = ring.order.size();
    for (std::size_t i = 0; i < n; ++i) {
      if (topology.nvlinks(ring.order[i], ring.order[(i + 1) % n]) == 0) return false;
    }
  }
  return true;
}

// Whether NVLink joins every two neighbours of the rings over the plan's GPUs in its first node.
bool node_rings_on_nvlink(const TransferPlan& plan, const Topology& topology) {
  std::vector<int> local;
  for (int gpu : plan.ranks) {
    if (topology.node_of(gpu) == topology.node_of(plan.ranks.front())) local.push_back(gpu);
  }
  return local.size() >= 2 && rings_on_nvlink(topology, local);
}

}  // namespace

bool protocol_enabled(Protocol protocol, const Topology& topology, std::string_view architecture,
                      const std::vector<int>& ranks) {
  if (protocol != Protocol::ll128) return true;
  if (!architecture_traits(architecture).nccl_ll128) return false;
  return ranks.size() >= 2 && rings_on_nvlink(topology, ranks);
}

namespace {

// communicator_channels, with whether the node's rings are all NVLink found already.
int communicator_channels(const TransferPlan& plan, bool nvlink) {
  if (plan.algorithm == Algorithm::nvls || plan.algorithm == Algorithm::nvls_tree)
    return kNvlsChannelsHopper;
  // A collective of one rank moves nothing; a symmetric cluster's plan over nodes of one GPU
  // lists that GPU only, its steps crossing the network.
  if (plan.transfers.empty()) return 0;
  return nvlink ? kNvlinkRings : kOtherRings;
}

}  // namespace

int communicator_channels(const TransferPlan& plan, const Topology& topology) {
  const bool nvls = plan.algorithm == Algorithm::nvls || plan.algorithm == Algorithm::nvls_tree;
  return communicator_channels(
      plan, !nvls && !plan.transfers.empty() && node_rings_on_nvlink(plan, topology));
}

namespace {

// Threads of a channel's CTA (NCCL_{LL,LL128,SIMPLE}_MAX_NTHREADS, src/include/device.h).
constexpr int kLlThreads = 512, kLl128Threads = 640, kSimpleThreads = 512, kWarp = 32;
constexpr double kLlLineDataBytes = 8;

}  // namespace

NcclLaunch nccl_launch(const TransferPlan& plan, const Topology& topology, Bytes bytes, int ranks) {
  NcclLaunch launch;
  launch.nvlink = !plan.transfers.empty() && node_rings_on_nvlink(plan, topology);
  launch.clock_scale = ll_clock_scale(topology);
  launch.channels = communicator_channels(plan, launch.nvlink);
  launch.threads = plan.protocol == Protocol::ll      ? kLlThreads
                   : plan.protocol == Protocol::ll128 ? kLl128Threads
                                                      : kSimpleThreads;
  const bool ring =
      plan.algorithm == Algorithm::ring || plan.algorithm == Algorithm::hierarchical_ring;
  const bool tree =
      plan.algorithm == Algorithm::tree || plan.algorithm == Algorithm::hierarchical_tree;
  if (!ring && !tree) return launch;
  // Bytes a thread before another channel is worth it (NCCL_*_THREAD_THRESHOLD,
  // src/include/comm.h; tuning.cc multiplies LL's by the ranks on rings).
  constexpr std::int64_t kLlBytesPerThread = 8, kLl128BytesPerThread = 8,
                         kSimpleBytesPerThread = 64;
  std::int64_t per_thread = kSimpleBytesPerThread;
  if (plan.protocol == Protocol::ll) {
    per_thread = ring ? kLlBytesPerThread * ranks : kLlBytesPerThread;
  } else if (plan.protocol == Protocol::ll128) {
    per_thread = kLl128BytesPerThread;
  }
  std::int64_t channels = launch.channels, threads = launch.threads;
  while (bytes.value() < channels * threads * per_thread) {
    if (channels >= 2) {
      --channels;
    } else if (threads % 128 == 0) {
      threads /= 2;
    } else {
      break;
    }
  }
  if (plan.protocol == Protocol::simple) threads += ring ? kWarp : 4 * kWarp;
  launch.channels = static_cast<int>(channels);
  launch.threads = static_cast<int>(std::max<std::int64_t>(threads, 3 * kWarp));
  return launch;
}

int nccl_channels(const TransferPlan& plan, const Topology& topology, Bytes bytes, int ranks) {
  return nccl_launch(plan, topology, bytes, ranks).channels;
}

double kernel_rate_limit(const TransferPlan& plan, const NcclLaunch& launch,
                         const HardwareProfile& profile, std::string_view architecture, int nodes,
                         ProtocolFigures figures) {
  // Ring steps only: chains and trees forward pipelined chunks, whose cut (chain_chunks) takes
  // the links' rate for the chunk's time a hop, where under LL a thread forwards each line as
  // it lands.
  const bool ring_steps =
      plan.algorithm == Algorithm::ring &&
      (plan.collective == Collective::all_reduce || plan.collective == Collective::all_gather ||
       plan.collective == Collective::reduce_scatter);
  if (!ring_steps || launch.channels <= 0 || plan.protocol == Protocol::simple) return 0;
  const ArchitectureTraits& traits = architecture_traits(architecture);
  constexpr double kGb = 1e9;
  const bool machine = figures == ProtocolFigures::machine;
  if (plan.protocol == Protocol::ll) {
    // llMaxBws' rows: one node, two, more (tuning.cc: nNodes <= 2 ? nNodes - 1 : 2).
    const std::size_t row = nodes <= 1 ? 0 : nodes == 2 ? 1 : 2;
    const double rate = machine ? profile.links.ll_rate_or_default() : 1.0;
    double limit = traits.nccl_ll_max_gbps[row] * kGb * rate;
    if (launch.nvlink) {
      const double pace_us = kLlLinePaceUs * (machine ? launch.clock_scale : 1.0);
      const double per_channel = launch.threads * kLlLineDataBytes / (pace_us * 1e-6);
      limit = std::min(limit, launch.channels * per_channel);
    }
    return limit;
  }
  if (plan.protocol == Protocol::ll128) {
    const double rate = machine ? profile.links.ll128_rate_or_default() : 1.0;
    return launch.channels * traits.nccl_ll128_channel_gbps * kGb * rate *
           (static_cast<double>(launch.threads) / kLl128Threads);
  }
  return 0;
}

std::vector<std::array<Seconds, kLinkKinds>> protocol_step_tables(const HardwareProfile& profile,
                                                                  double ll_clock_scale) {
  std::vector<std::array<Seconds, kLinkKinds>> tables;
  for (std::size_t p = 0; p < kProtocolCount; ++p) {
    tables.push_back(protocol_step_latencies(profile, static_cast<Protocol>(p),
                                             ProtocolFigures::machine, ll_clock_scale));
  }
  tables.push_back({});  // pipelined: the latency is hidden
  return tables;
}

}  // namespace epochcast::sim

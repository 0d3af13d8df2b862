// NCCL's protocol constants (see protocols.h for the source).
#include "sim/collectives/protocols.h"

#include "core/spec/architecture_traits.h"
#include "sim/collectives/algorithms.h"
#include "sim/collectives/logical_topology.h"

namespace epochcast::sim {

namespace {

// NCCL's hwLat for rings, by the hardware class of a link kind: NVLink, PCI, network (us).
constexpr double kRingStepLatencyUs[2][3] = {
    {0.6, 1.0, 2.7},  // LL
    {1.9, 2.5, 4.0},  // LL128
};

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

}  // namespace

std::array<Seconds, kLinkKinds> protocol_step_latencies(const HardwareProfile& profile,
                                                        Protocol protocol) {
  if (protocol == Protocol::simple) return profile.links.step_latency;
  std::array<Seconds, kLinkKinds> out{};
  const int p = protocol == Protocol::ll ? 0 : 1;
  for (std::size_t k = 0; k < kLinkKinds; ++k) {
    out[k] = microseconds(kRingStepLatencyUs[p][hardware_class(static_cast<LinkKind>(k))]);
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

double protocol_bandwidth_share(Protocol protocol, Collective collective) {
  switch (protocol) {
    case Protocol::simple:
      return 1.0;
    case Protocol::ll:
      return collective == Collective::all_reduce || collective == Collective::reduce ? 0.25
                                                                                      : 1.0 / 3;
    case Protocol::ll128:
      return 0.92;
  }
  return 1.0;
}

namespace {

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

}  // namespace

bool protocol_enabled(Protocol protocol, const Topology& topology, std::string_view architecture,
                      const std::vector<int>& ranks) {
  if (protocol != Protocol::ll128) return true;
  if (!architecture_traits(architecture).nccl_ll128) return false;
  return ranks.size() >= 2 && rings_on_nvlink(topology, ranks);
}

int communicator_channels(const TransferPlan& plan, const Topology& topology) {
  constexpr int kNvlinkRings = 24, kOtherRings = 2;
  if (plan.algorithm == Algorithm::nvls || plan.algorithm == Algorithm::nvls_tree)
    return kNvlsChannelsHopper;
  // A collective of one rank moves nothing; a symmetric cluster's plan over nodes of one GPU
  // lists that GPU only, its steps crossing the network.
  if (plan.transfers.empty()) return 0;
  std::vector<int> local;
  for (int gpu : plan.ranks) {
    if (topology.node_of(gpu) == topology.node_of(plan.ranks.front())) local.push_back(gpu);
  }
  return local.size() >= 2 && rings_on_nvlink(topology, local) ? kNvlinkRings : kOtherRings;
}

int nccl_channels(const TransferPlan& plan, const Topology& topology, Bytes bytes, int ranks) {
  int channels = communicator_channels(plan, topology);
  switch (plan.algorithm) {
    case Algorithm::ring:
    case Algorithm::tree:
    case Algorithm::hierarchical_ring:
    case Algorithm::hierarchical_tree:
      break;
    default:
      return channels;
  }
  // Threads of a channel's CTA (NCCL_{LL,LL128,SIMPLE}_MAX_NTHREADS, src/include/device.h) and
  // bytes a thread before another channel is worth it (NCCL_*_THREAD_THRESHOLD,
  // src/include/comm.h; tuning.cc multiplies LL's by the ranks on rings).
  constexpr std::int64_t kLlThreads = 512, kLl128Threads = 640, kSimpleThreads = 512;
  constexpr std::int64_t kLlBytesPerThread = 8, kLl128BytesPerThread = 8,
                         kSimpleBytesPerThread = 64;
  const bool ring =
      plan.algorithm == Algorithm::ring || plan.algorithm == Algorithm::hierarchical_ring;
  std::int64_t threads = kSimpleThreads, per_thread = kSimpleBytesPerThread;
  if (plan.protocol == Protocol::ll) {
    threads = kLlThreads;
    per_thread = ring ? kLlBytesPerThread * ranks : kLlBytesPerThread;
  } else if (plan.protocol == Protocol::ll128) {
    threads = kLl128Threads;
    per_thread = kLl128BytesPerThread;
  }
  while (channels > 1 && bytes.value() < channels * threads * per_thread)
    --channels;
  return channels;
}

std::vector<std::array<Seconds, kLinkKinds>> protocol_step_tables(const HardwareProfile& profile) {
  std::vector<std::array<Seconds, kLinkKinds>> tables;
  for (std::size_t p = 0; p < kProtocolCount; ++p)
    tables.push_back(protocol_step_latencies(profile, static_cast<Protocol>(p)));
  tables.push_back({});  // pipelined: the latency is hidden
  return tables;
}

}  // namespace epochcast::sim

// Collectives against closed forms, flows against alpha-beta, nccl-tests' bus bandwidth, and
// the symmetric simulation of a cluster against the full one.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <stdexcept>

#include <catch2/catch.hpp>

#include "core/spec/architecture_traits.h"
#include "core/spec/hardware_spec.h"
#include "core/spec/profile_spec.h"
#include "sim/collectives/alpha_beta.h"
#include "sim/collectives/collective_sweep.h"
#include "sim/collectives/flow_run.h"
#include "sim/collectives/protocols.h"
#include "sim/network/max_min_fair.h"
#include "sim/network/network_map.h"
#include "support/paths.h"
#include "support/text.h"

using namespace epochcast;
using namespace epochcast::sim;

namespace {

MachineSpec machine(const std::string& name) {
  return load_machine(test::source_dir() / "topologies" / (name + ".yaml"),
                      bundled_gpu_catalogue());
}
HardwareProfile profile() {
  return load_profile(test::source_dir() / "topologies/profiles/default.yaml");
}
// `p` as a profile written before the link kind `kind` (and those after it) had figures: the
// writer's efficiency and step-latency tables cut at that kind.
HardwareProfile written_before(const HardwareProfile& p, const std::string& kind) {
  std::string text = profile_yaml(p, "test");
  for (std::size_t at; (at = text.find(", " + kind + ": ")) != std::string::npos;)
    text.erase(at, text.find('}', at) - at);
  return load_profile_from_string(text, "old.yaml");
}
// `nodes` nodes of 8 GPUs, numbered node by node.
std::vector<std::vector<int>> cluster(int nodes) {
  std::vector<std::vector<int>> out;
  for (int k = 0; k < nodes; ++k) {
    std::vector<int> gpus;
    for (int g = 0; g < 8; ++g)
      gpus.push_back(k * 8 + g);
    out.push_back(gpus);
  }
  return out;
}
// A link kind NCCL models on top of another (`base`): the profile's figures are `factor` of the
// base kind's efficiency and `latency_us` a step, and a profile written before the kind had
// figures takes the same.
void check_nccl_model(const HardwareProfile& p, LinkKind kind, LinkKind base, double factor,
                      double latency_us) {
  const auto k = static_cast<std::size_t>(kind);
  const double expected = p.links.efficiency[static_cast<std::size_t>(base)] * factor;
  const HardwareProfile old = written_before(p, std::string(kLinkKindKeys[k]));
  for (const HardwareProfile* profile : {&p, &old}) {
    CHECK(profile->links.efficiency[k] == Approx(expected));
    CHECK(profile->links.step_latency[k].value() == Approx(latency_us * 1e-6));
  }
}
std::vector<int> first(int n) {
  std::vector<int> ranks;
  for (int i = 0; i < n; ++i)
    ranks.push_back(i);
  return ranks;
}

// Alpha and beta of the single hop kind between two GPUs, from the profile and topology.
struct AlphaBeta {
  double alpha, beta;
};
AlphaBeta alpha_beta(const Topology& t, const HardwareProfile& p, int a, int b) {
  TransferRoute r = transfer_route(t, p, Transfer{a, b, false, Bytes(0), {}});
  return {r.latency.value(), r.bandwidth.value()};
}

}  // namespace

TEST_CASE(
    "a transfer's dependencies: two held in place, more on the heap, copied and moved whole") {
  std::vector<int> reference;
  TransferDeps deps;
  CHECK(deps.empty());
  // Grow one at a time past the two held in place (2 -> 4 -> 8 -> 16), checking each step.
  for (int i = 0; i < 11; ++i) {
    deps.push_back(3 * i + 1);
    reference.push_back(3 * i + 1);
    REQUIRE(deps.size() == reference.size());
    CHECK(deps == reference);
    CHECK(deps.back() == 3 * i + 1);
  }
  for (std::size_t held : {std::size_t{0}, std::size_t{1}, std::size_t{2}, std::size_t{3}}) {
    INFO(held << " held");
    const std::vector<int> some(reference.begin(), reference.begin() + held);
    TransferDeps source(some);
    TransferDeps copy(source);
    CHECK(copy == some);
    CHECK(source == some);
    TransferDeps moved(std::move(source));
    CHECK(moved == some);
    CHECK(source.empty());  // moved from: empty, and usable again
    source.push_back(7);
    CHECK(source == std::vector<int>{7});
    // Assignments between every pair of sizes, in place and on the heap.
    for (std::size_t other : {std::size_t{0}, std::size_t{2}, std::size_t{5}}) {
      const std::vector<int> rest(reference.begin(), reference.begin() + other);
      TransferDeps target(rest);
      target = copy;
      CHECK(target == some);
      TransferDeps into(rest);
      into = TransferDeps(some);
      CHECK(into == some);
      into.insert(into.end(), rest.begin(), rest.end());
      std::vector<int> joined = some;
      joined.insert(joined.end(), rest.begin(), rest.end());
      CHECK(into == joined);
      for (int& d : into)
        d += 1;
      for (int& d : joined)
        d += 1;
      CHECK(into == joined);
    }
  }
  // Self-assignment keeps the list; a list may append itself, in place or growing.
  for (std::size_t held : {std::size_t{1}, std::size_t{2}, std::size_t{3}, std::size_t{6}}) {
    INFO(held << " held, appended to itself");
    const std::vector<int> some(reference.begin(), reference.begin() + held);
    TransferDeps self(some);
    const TransferDeps& alias = self;
    self = alias;
    CHECK(self == some);
    self = std::move(self);  // a self-move, on purpose
    CHECK(self == some);
    self.insert(self.end(), self.begin(), self.end());
    std::vector<int> twice = some;
    twice.insert(twice.end(), some.begin(), some.end());
    CHECK(self == twice);
    self.insert(self.end(), some.end(), some.end());  // nothing to append
    CHECK(self == twice);
    TransferDeps other;
    other = std::move(self);
    CHECK(other == twice);
    CHECK(self.empty());  // moved from by assignment: empty too
  }
  TransferDeps listed = {4, 5, 6};
  CHECK(listed == std::vector<int>{4, 5, 6});
  listed = {9};
  CHECK(listed == std::vector<int>{9});
  CHECK_THROWS_AS(listed.insert(listed.begin(), reference.begin(), reference.end()),
                  std::logic_error);
}

TEST_CASE("ring all-reduce costs 2(n-1)(alpha + S/(n beta)) on a switch fabric") {
  MachineSpec m = machine("dgx-a100");
  HardwareProfile p = profile();
  Topology t = Topology::build(m, 1);
  const int n = 8;
  const std::int64_t bytes = 256 << 20;
  std::vector<Ring> rings = build_rings(t, first(n));
  REQUIRE(rings.size() == 1);  // through NVSwitch the reverse ring adds nothing
  AlphaBeta ab = alpha_beta(t, p, 0, 1);
  // Every GPU reaches the others through its twelve NVLinks to the switch fabric.
  CHECK(ab.beta == Approx(12 * m.gpu.nvlink->per_link_per_direction.value() *
                          p.links.efficiency[static_cast<int>(LinkKind::nvswitch)]));
  double expected = 2.0 * (n - 1) * (ab.alpha + std::ceil(bytes / double(n)) / ab.beta);
  CHECK(plan_time(t, p, ring_all_reduce(rings, Bytes(bytes))).value() == Approx(expected));
}

TEST_CASE("under LL and LL128 a ring step costs NCCL's per-step latency and a share of beta") {
  MachineSpec m = machine("dgx-a100");
  HardwareProfile p = profile();
  Topology t = Topology::build(m, 1);
  const int n = 8;
  const std::int64_t bytes = 4 << 20;
  TransferPlan plan = ring_all_reduce(build_rings(t, first(n)), Bytes(bytes));
  AlphaBeta simple = alpha_beta(t, p, 0, 1);
  // NCCL's per-step latency replaces the links' own (measured hop to hop, wire included).
  CHECK(simple.alpha == Approx(p.links.step_latency[static_cast<int>(LinkKind::nvswitch)].value()));
  // NCCL src/graph/tuning.cc: ring hwLat over NVLink LL 0.6 us (at an H100's clock: an A100
  // takes as many cycles, ll_clock_scale), LL128 1.9 us; LL half the bandwidth (a line's 8 data
  // bytes and their flags), LL128 0.92 of it. (A plan made by hand has no kernel pace:
  // choose_collective sets it.)
  const double clock = ll_clock_scale(t);
  REQUIRE(clock == Approx(1980.0 / 1410.0));
  const struct {
    Protocol protocol;
    double step_us, share;
  } cases[] = {{Protocol::ll, 0.6 * clock, 0.5}, {Protocol::ll128, 1.9, 0.92}};
  for (const auto& c : cases) {
    plan.protocol = c.protocol;
    const double expected =
        2.0 * (n - 1) * (c.step_us * 1e-6 + std::ceil(bytes / double(n)) / (simple.beta * c.share));
    CHECK(plan_time(t, p, plan).value() == Approx(expected));
    CHECK(simulate_plan(plan, t, p).value() == Approx(expected).epsilon(1e-3));
  }
  // LL128 runs on the A100's NVLink; the tuner takes LL for a tiny message, Simple for a huge one.
  CHECK(protocol_enabled(Protocol::ll128, t, "ampere", first(n)));
  CHECK_FALSE(protocol_enabled(Protocol::ll128, t, "ada", first(n)));
  CollectiveRequest request;
  request.nodes = {first(n)};
  request.architecture = "ampere";
  request.bytes = Bytes(8);
  const CollectiveChoice tiny = choose_collective(request, t, p);
  CHECK(tiny.plan.protocol == Protocol::ll);
  // NCCL's model of a tiny ring all-reduce: baseLat 6.6 us, then 2(n-1) LL steps of 0.6 us,
  // each at the A100's clock.
  CHECK(tiny.time.value() == Approx(6.6e-6 + 2 * (n - 1) * 0.6e-6 * clock).epsilon(0.01));
  CHECK(tiny.time.value() ==
        Approx((protocol_base_latency(Algorithm::ring, Protocol::ll) + plan_time(t, p, tiny.plan))
                   .value()));
  // One rank moves nothing and costs nothing.
  request.nodes = {first(1)};
  CHECK(choose_collective(request, t, p).time.value() == 0);
  request.nodes = {first(n)};
  request.bytes = Bytes(std::int64_t{4} << 30);
  CHECK(choose_collective(request, t, p).plan.protocol == Protocol::simple);
}

TEST_CASE("all-to-all costs alpha + (n-1)(S/n)/beta: a rank's n-1 sends share its links") {
  MachineSpec m = machine("dgx-a100");
  HardwareProfile p = profile();
  Topology t = Topology::build(m, 1);
  const int n = 8;
  const std::int64_t bytes = 256 << 20;
  const TransferPlan plan = direct_all_to_all(first(n), Bytes(bytes));
  CHECK(plan.transfers.size() == static_cast<std::size_t>(n * (n - 1)));
  AlphaBeta ab = alpha_beta(t, p, 0, 1);
  const double expected = ab.alpha + (n - 1) * std::ceil(bytes / double(n)) / ab.beta;
  CHECK(plan_time(t, p, plan).value() == Approx(expected));
  // Every rank's sends leave through its own links to the switch at once: the flows agree.
  CHECK(simulate_plan(plan, t, p).value() == Approx(expected).epsilon(1e-3));
}

TEST_CASE("a pipelined chain broadcast costs (n - 1) alpha + (K + n - 2) chunk/beta") {
  // NCCL keeps several steps in flight per channel, so a chunk's step latency hides behind the
  // chunk before it on the same hop: latency per hop, not per chunk, as NCCL's tuning model.
  MachineSpec m = machine("seed001-box");
  HardwareProfile p = profile();
  Topology t = Topology::build(m, 1);
  const int n = 4, chunks = 16;
  const std::int64_t chunk = kPipelineChunkBytes;
  std::vector<Ring> rings = build_rings(t, first(n));
  REQUIRE(rings.size() == 1);
  AlphaBeta ab = alpha_beta(t, p, 0, 1);
  const double expected = (n - 1) * ab.alpha + (chunks + n - 2) * (chunk / ab.beta);
  const TransferPlan plan =
      ring_broadcast(rings, 0, Bytes(chunks * chunk), ChainChunks{Bytes(chunk)});
  CHECK(plan_time(t, p, plan).value() == Approx(expected));
  CHECK(simulate_plan(plan, t, p).value() == Approx(expected).epsilon(1e-3));
  // A large broadcast over NVSwitch reaches the link's rate (busbw = algbw for broadcast).
  MachineSpec h100 = machine("dgx-h100");
  Topology fabric = Topology::build(h100, 1);
  const Bytes big(std::int64_t{1} << 32);
  const TransferPlan chain = ring_broadcast(build_rings(fabric, first(8)), 0, big,
                                            ChainChunks{Bytes(kPipelineChunkBytes)});
  const double link = h100.gpu.nvlink->per_link_per_direction.value() * h100.gpu.nvlink->links *
                      p.links.efficiency[static_cast<std::size_t>(LinkKind::nvswitch)];
  CHECK(algorithm_bandwidth(big, plan_time(fabric, p, chain)) == Approx(link).epsilon(0.01));
}

TEST_CASE("flows and alpha-beta agree where no two transfers share a link direction") {
  HardwareProfile p = profile();
  struct Case {
    const char* machine;
    int gpus;
  };
  for (Case c : {Case{"dgx-a100", 8}, Case{"seed001-box", 4}, Case{"pcie-2socket-8gpu", 2},
                 Case{"dgx-h100", 8}}) {
    Topology t = Topology::build(machine(c.machine), 1);
    std::vector<Ring> rings = build_rings(t, first(c.gpus));
    for (std::int64_t bytes : {std::int64_t{4096}, std::int64_t{64} << 20}) {
      INFO(c.machine << " " << bytes << " bytes, " << rings.size() << " channel(s)");
      TransferPlan all_reduce = ring_all_reduce(rings, Bytes(bytes));
      TransferPlan broadcast =
          ring_broadcast(rings, 0, Bytes(bytes), ChainChunks{Bytes(kPipelineChunkBytes)});
      // Flows round each step up to whole nanoseconds.
      for (const TransferPlan* plan : {&all_reduce, &broadcast}) {
        double analytic = plan_time(t, p, *plan).value();
        double flows = simulate_plan(*plan, t, p).value();
        CHECK(flows == Approx(analytic).margin(1e-9 * static_cast<double>(plan->transfers.size())));
      }
    }
  }
}

TEST_CASE("on the DGX-1, rings sharing two-lane NVLink pairs cost about what the flows find") {
  // Two rings split a pair's two lanes; alpha-beta assumes they always share, while flows let a
  // transfer run alone at full speed when the other is elsewhere in its ring.
  HardwareProfile p = profile();
  Topology t = Topology::build(machine("dgx1-v100"), 1);
  TransferPlan plan = ring_all_reduce(build_rings(t, first(8)), Bytes(64 << 20));
  CHECK(simulate_plan(plan, t, p).value() == Approx(plan_time(t, p, plan).value()).epsilon(0.05));
}

TEST_CASE("the DGX-1 cube-mesh gets three NVLink rings and their reverses") {
  Topology t = Topology::build(machine("dgx1-v100"), 1);
  std::vector<Ring> rings = build_rings(t, first(8));
  // Six NVLink lanes per GPU, two per ring: three rings, each also run in reverse.
  REQUIRE(rings.size() == 6);
  std::map<std::pair<int, int>, int> lanes_used;
  for (const Ring& ring : rings) {
    for (std::size_t i = 0; i < 8; ++i) {
      int a = ring.order[i], b = ring.order[(i + 1) % 8];
      CHECK(t.nvlinks(a, b) > 0);
      lanes_used[{std::min(a, b), std::max(a, b)}]++;
    }
  }
  for (const auto& [pair, used] : lanes_used) {
    CHECK(used <= 2 * t.nvlinks(pair.first, pair.second));  // each lane once per direction
  }
}

TEST_CASE("large-message ring all-reduce reaches a bus bandwidth equal to the ring's bottleneck") {
  HardwareProfile p = profile();
  for (const char* name : {"dgx-a100", "seed001-box", "dgx-h100"}) {
    Topology t = Topology::build(machine(name), 1);
    const int n = t.gpus();
    std::vector<Ring> ring = {build_rings(t, first(n)).front()};  // one channel
    const Bytes bytes(std::int64_t{4} << 30);
    Seconds time = simulate_plan(ring_all_reduce(ring, bytes), t, p);
    double bottleneck = alpha_beta(t, p, ring[0].order[0], ring[0].order[1]).beta;
    INFO(name);
    CHECK(bus_bandwidth(Collective::all_reduce, n, bytes, time) ==
          Approx(bottleneck).epsilon(0.01));
  }
}

TEST_CASE("small messages are latency-bound") {
  HardwareProfile p = profile();
  Topology t = Topology::build(machine("dgx-a100"), 1);
  TransferPlan ring = ring_all_reduce(build_rings(t, first(8)), Bytes(1024));
  AlphaBeta ab = alpha_beta(t, p, 0, 1);
  const double steps = 2.0 * 7;
  CHECK(plan_time(t, p, ring).value() == Approx(steps * ab.alpha).epsilon(0.001));
}

TEST_CASE("NCCL launches a small ring on fewer channels and threads and its kernel paces it") {
  MachineSpec m = machine("dgx-h100");
  Topology t = Topology::build(m, 1);
  TransferPlan ring = ring_all_reduce(build_rings(t, first(8)), Bytes(1 << 20));
  ring.protocol = Protocol::ll;
  // enqueue.cc's loop for an 8-rank ring under LL (64 bytes a thread): one channel of 3 warps
  // up to 8 KiB, its threads doubling to 512 by 32 KiB, then a channel more each 32 KiB.
  const struct {
    std::int64_t bytes;
    int channels, threads;
  } ll[] = {{8, 1, 96},           {4 << 10, 1, 96},     {8 << 10, 1, 128},
            {16 << 10, 1, 256},   {32 << 10, 1, 512},   {64 << 10, 2, 512},
            {512 << 10, 16, 512}, {768 << 10, 24, 512}, {1 << 30, 24, 512}};
  for (const auto& c : ll) {
    INFO(c.bytes << " B");
    const NcclLaunch launch = nccl_launch(ring, t, Bytes(c.bytes), 8);
    CHECK(launch.channels == c.channels);
    CHECK(launch.threads == c.threads);
    CHECK(launch.nvlink);
  }
  // Simple adds a synchronisation warp; LL128 needs 8 bytes a thread of 640.
  ring.protocol = Protocol::simple;
  CHECK(nccl_launch(ring, t, Bytes(1 << 30), 8).threads == 512 + 32);
  ring.protocol = Protocol::ll128;
  CHECK(nccl_launch(ring, t, Bytes(24 * 640 * 8), 8).channels == 24);
  CHECK(nccl_launch(ring, t, Bytes(24 * 640 * 8 - 1), 8).channels == 23);

  // The pace: 8 data bytes a thread every 0.27 us, under Hopper's llMaxBw of 141 GB/s.
  ring.protocol = Protocol::ll;
  const HardwareProfile defaults = profile();
  const auto limit = [&](std::int64_t bytes, int nodes = 1) {
    return kernel_rate_limit(ring, nccl_launch(ring, t, Bytes(bytes), 8), defaults, "hopper",
                             nodes);
  };
  CHECK(limit(8) == Approx(96 * 8 / 0.27e-6));
  CHECK(limit(32 << 10) == Approx(512 * 8 / 0.27e-6));
  CHECK(limit(1 << 30) == Approx(141e9));
  CHECK(limit(1 << 30, 2) == Approx(45e9));
  CHECK(limit(1 << 30, 4) == Approx(35e9));
  CHECK(kernel_rate_limit(ring, nccl_launch(ring, t, Bytes(1 << 30), 8), defaults, "ampere", 1) ==
        Approx(87.7e9));
  ring.protocol = Protocol::ll128;
  CHECK(limit(1 << 30) == Approx(24 * 36.7e9));
  ring.protocol = Protocol::simple;
  CHECK(limit(1 << 30) == 0);
  // Without NVLink (a PCIe box, NCCL staging through host memory) only llMaxBw is known.
  MachineSpec box = machine("seed001-box");
  Topology pcie = Topology::build(box, 1);
  TransferPlan pcie_ring = ring_all_reduce(build_rings(pcie, first(4)), Bytes(1 << 20));
  pcie_ring.protocol = Protocol::ll;
  const NcclLaunch small = nccl_launch(pcie_ring, pcie, Bytes(8), 4);
  CHECK_FALSE(small.nvlink);
  CHECK(kernel_rate_limit(pcie_ring, small, defaults, box.gpu.architecture, 1) ==
        Approx(architecture_traits(box.gpu.architecture).nccl_ll_max_gbps[0] * 1e9));

  // The tuner sets the pace on the plan it picks; the analytic cost and the flows both keep
  // to it: a 32 KiB all-reduce on one channel of 512 threads moves 1.75 x 32 KiB at 15.2 GB/s.
  HardwareProfile p = profile();
  CollectiveRequest request{Collective::all_reduce, Bytes(32 << 10), {first(8)}, 1, false, 0};
  request.architecture = m.gpu.architecture;
  request.algorithm = CollectiveAlgorithm::ring;
  const CollectiveChoice choice = choose_collective(request, t, p);
  REQUIRE(choice.plan.protocol == Protocol::ll);
  CHECK(choice.plan.rank_rate_limit == Approx(512 * 8 / 0.27e-6));
  // NCCL's ring LL latency, 6.6 us base and 14 steps of 0.6 us (tuning.cc), then 2 x 7 / 8 of
  // the bytes at the one channel's pace.
  const double expected = (6.6 + 14 * 0.6) * 1e-6 + 1.75 * (32 << 10) / (512 * 8 / 0.27e-6);
  CHECK(choice.time.value() == Approx(expected).epsilon(1e-3));
  CHECK((protocol_base_latency(choice.plan.algorithm, choice.plan.protocol) +
         simulate_plan(choice.plan, t, p))
            .value() == Approx(expected).epsilon(2e-3));
}

TEST_CASE("a machine's own LL and LL128 figures move a collective's time, not NCCL's choice") {
  // GPUs that run LL's steps at 1.2 us, LL at half NCCL's llMaxBw and LL128 at 0.6 of its rate:
  // at every size of an 8x A100 node the tuner still picks what it picks with NCCL's figures
  // (its own), and the time is the machine's, by formula where LL's latency sets it.
  MachineSpec m = machine("dgx-a100");
  Topology t = Topology::build(m, 1);
  const HardwareProfile nccl = profile();
  HardwareProfile slow = nccl;
  const auto nvswitch = static_cast<std::size_t>(LinkKind::nvswitch);
  slow.links.ll_step_latency[nvswitch] = microseconds(1.2);
  slow.links.ll_rate = 0.5;
  slow.links.ll128_rate = 0.6;
  CollectiveRequest request{Collective::all_reduce, Bytes(8), {first(8)}, 1, false, 0};
  request.architecture = m.gpu.architecture;
  std::set<Protocol> seen;
  for (std::int64_t bytes = 8; bytes <= (std::int64_t{1} << 30); bytes *= 4) {
    INFO(bytes << " B");
    request.bytes = Bytes(bytes);
    const CollectiveChoice as_nccl = choose_collective(request, t, nccl);
    const CollectiveChoice as_machine = choose_collective(request, t, slow);
    CHECK(as_machine.plan.algorithm == as_nccl.plan.algorithm);
    CHECK(as_machine.plan.protocol == as_nccl.plan.protocol);
    CHECK(as_machine.channels == as_nccl.channels);
    seen.insert(as_nccl.plan.protocol);
    if (as_nccl.plan.protocol == Protocol::simple) {
      CHECK(as_machine.time.value() == Approx(as_nccl.time.value()));
    } else {
      CHECK(as_machine.time > as_nccl.time);
    }
    // The flows take the machine's figures too.
    CHECK((protocol_base_latency(as_machine.plan.algorithm, as_machine.plan.protocol) +
           simulate_plan(as_machine.plan, t, slow))
              .value() == Approx(as_machine.time.value()).epsilon(0.02));
  }
  CHECK(seen.size() == 3);
  // 8 B: NCCL's base latency and 14 steps at the machine's 1.2 us.
  request.bytes = Bytes(8);
  CHECK(choose_collective(request, t, slow).time.value() ==
        Approx((6.6 + 14 * 1.2) * 1e-6).epsilon(0.01));
  // The rates: llMaxBw and LL128's channels, each at the machine's share of NCCL's.
  TransferPlan ring = ring_all_reduce(build_rings(t, first(8)), Bytes(1 << 30));
  ring.protocol = Protocol::ll;
  const NcclLaunch wide = nccl_launch(ring, t, Bytes(1 << 30), 8);
  CHECK(kernel_rate_limit(ring, wide, slow, "ampere", 1) == Approx(0.5 * 87.7e9));
  CHECK(kernel_rate_limit(ring, wide, slow, "ampere", 1, ProtocolFigures::tuner) == Approx(87.7e9));
  CHECK(protocol_bandwidth_share(slow, Protocol::ll) == Approx(0.25));
  CHECK(protocol_bandwidth_share(slow, Protocol::ll128) == Approx(0.6 * 0.92));
  CHECK(protocol_bandwidth_share(slow, Protocol::ll128, ProtocolFigures::tuner) == Approx(0.92));
}

TEST_CASE("across nodes the tuner takes trees for latency and rings for bandwidth") {
  HardwareProfile p = profile();
  MachineSpec m = machine("dgx-h100-cluster");
  Topology one = Topology::build(m, 1, true);
  CollectiveRequest request{Collective::all_reduce, Bytes(64 << 10), {first(8)}, 64, true, 0};
  request.architecture = m.gpu.architecture;
  // Small message, many nodes. Ring: 2 x 63 latency-bound cross-node steps; tree: about
  // 2 log2(64) levels.
  CHECK(choose_collective(request, one, p).plan.algorithm == Algorithm::hierarchical_tree);
  // Large message, few nodes: a ring's NIC moves 2(N-1)/N of its shard (4/3 over three nodes),
  // the busiest node's of a double binary tree 3/2 of it (twice from about eight nodes on).
  // On Hopper the tuner takes NVLSTree there (NVLink SHARP inside the node, trees across), as
  // NCCL does on H100 clusters; between ring and tree alone, the ring.
  request.total_nodes = 3;
  request.bytes = Bytes(std::int64_t{4} << 30);
  CHECK(choose_collective(request, one, p).plan.algorithm == Algorithm::nvls_tree);
  request.algorithm = CollectiveAlgorithm::ring;
  const CollectiveChoice rings = choose_collective(request, one, p);
  CHECK(rings.plan.algorithm == Algorithm::hierarchical_ring);
  request.algorithm = CollectiveAlgorithm::tree;
  CHECK(rings.time.value() < choose_collective(request, one, p).time.value());
  // Large message, many nodes: both near the NIC's bandwidth, within a few percent.
  request.total_nodes = 64;
  request.algorithm = CollectiveAlgorithm::ring;
  double ring = choose_collective(request, one, p).time.value();
  request.algorithm = CollectiveAlgorithm::tree;
  double tree = choose_collective(request, one, p).time.value();
  CHECK(tree == Approx(ring).epsilon(0.05));
}

TEST_CASE(
    "NCCL launches a small collective on fewer channels: bytes under channels x threads x "
    "threshold") {
  // enqueue.cc topoGetAlgoInfo (NCCL 2.18-2.21): from the communicator's channels, one fewer
  // while nBytes < nc * nThreads * threadThreshold. Threads a channel: LL 512, LL128 640,
  // Simple 512; bytes a thread: LL 8 times the ranks on rings, LL128 8, Simple 64.
  HardwareProfile p = profile();
  MachineSpec m = machine("dgx-a100");
  Topology t = Topology::build(m, 1);
  struct Case {
    Protocol protocol;
    std::int64_t per_channel;
  };
  for (const Case& c : {Case{Protocol::ll, 512 * 8 * 8}, Case{Protocol::ll128, 640 * 8},
                        Case{Protocol::simple, 512 * 64}}) {
    for (std::int64_t bytes :
         {std::int64_t{8}, std::int64_t{4} << 10, std::int64_t{32} << 10, std::int64_t{64} << 10,
          std::int64_t{256} << 10, std::int64_t{512} << 10, std::int64_t{768} << 10,
          std::int64_t{1} << 30}) {
      INFO(name_of(c.protocol) << " at " << bytes << " bytes");
      CollectiveRequest request{Collective::all_reduce, Bytes(bytes), {first(8)}, 1, false, 0};
      request.architecture = m.gpu.architecture;
      request.protocol = c.protocol;
      const CollectiveChoice choice = choose_collective(request, t, p);
      REQUIRE(choice.plan.algorithm == Algorithm::ring);
      CHECK(communicator_channels(choice.plan, t) == 24);
      const std::int64_t expected = std::clamp<std::int64_t>(bytes / c.per_channel, 1, 24);
      CHECK(choice.channels == expected);
    }
  }
  // An 8-rank ring under LL: one channel up to 32 KiB, all 24 from 768 KiB (NCCL's log of an
  // 8x H100 node in NVIDIA/nccl issue 1259 prints the thresholds 64/8/64 on rings).
  CollectiveRequest small{Collective::all_reduce, Bytes(32 << 10), {first(8)}, 1, false, 0};
  small.architecture = m.gpu.architecture;
  small.protocol = Protocol::ll;
  CHECK(choose_collective(small, t, p).channels == 1);
  // A collective of one rank moves nothing and holds no SM.
  CollectiveRequest alone{Collective::all_reduce, Bytes(1 << 20), {{0}}, 1, false, 0};
  alone.architecture = m.gpu.architecture;
  CHECK(choose_collective(alone, t, p).channels == 0);
}

TEST_CASE("NVLS chunks as NCCL sizes them: 128 KiB halved for small buffers") {
  // src/enqueue.cc: channels x heads operations (16 x 8 on an 8-GPU H100 node, 128), the chunk
  // halved to 64 KiB below 64 x 128 x 128 KiB (1 GiB), to 32 KiB below 8 x 128 x 64 KiB
  // (64 MiB), to 16 KiB below 2 x 128 x 32 KiB (8 MiB).
  struct Case {
    std::int64_t bytes, chunk, loops;
  };
  for (const Case& c :
       {Case{8, 16 << 10, 1}, Case{std::int64_t{2} << 20, 16 << 10, 1},
        Case{std::int64_t{8} << 20, 32 << 10, 2}, Case{std::int64_t{64} << 20, 64 << 10, 8},
        Case{(std::int64_t{1} << 30) - 1, 64 << 10, 128},
        Case{std::int64_t{1} << 30, 128 << 10, 64}}) {
    const NvlsLoop loop = nvls_loop(Collective::all_reduce, Bytes(c.bytes), 8);
    INFO(c.bytes << " B");
    CHECK(loop.chunk_bytes == c.chunk);
    CHECK(loop.loop_bytes == 128 * c.chunk);
    CHECK(loop.loops == c.loops);
    CHECK(loop.stages == 3);
  }
  // Fewer heads, smaller loops; reduce-scatter and all-gather run two warp groups, not three.
  CHECK(nvls_loop(Collective::all_reduce, Bytes(std::int64_t{1} << 30), 4).loop_bytes ==
        64 * (128 << 10));
  CHECK(nvls_loop(Collective::reduce_scatter, Bytes(1 << 20), 8).stages == 2);
  CHECK(nvls_loop(Collective::all_gather, Bytes(1 << 20), 8).stages == 2);
}

TEST_CASE("NVLS: its loop's iterations, S(1 + 1/n) each way over a GPU's NVSwitch links") {
  HardwareProfile p = profile();
  const double nvls = p.links.efficiency[static_cast<std::size_t>(LinkKind::nvls)];
  // The profile's figures, fitted to a DGX H100's nccl-tests table (default.yaml): 0.78 of the
  // NVSwitch links, 5.75 us an iteration. A profile written before NVLS had figures takes the
  // same, relative to its NVSwitch links.
  check_nccl_model(p, LinkKind::nvls, LinkKind::nvswitch, 0.78 / 0.80, 5.75);
  MachineSpec m = machine("dgx-h100");
  Topology t = Topology::build(m, 1);
  const double link = m.gpu.nvlink->per_link_per_direction.value() * m.gpu.nvlink->links;
  for (int n : {3, 8}) {
    for (std::int64_t mib : {1, 256}) {
      const Bytes bytes(mib << 20);
      TransferPlan plan = nvls_collective(Collective::all_reduce, first(n), bytes);
      REQUIRE(plan.transfers.size() == static_cast<std::size_t>(n));
      // A pipeline of three warp groups over the loops: loops + 2 iterations and one more for
      // the collective, and the first loop's data twice more (the stages filling and draining).
      const NvlsLoop loop = nvls_loop(Collective::all_reduce, bytes, n);
      const double moved = static_cast<double>(bytes.value()) +
                           2.0 * static_cast<double>(std::min(loop.loop_bytes, bytes.value()));
      const double per_gpu = moved * (1 + 1.0 / n);
      TransferRoute route = transfer_route(t, p, plan.transfers[0]);
      CHECK(route.slowest == LinkKind::nvls);
      CHECK(plan.transfers[0].steps == loop.loops + 3);
      const double expected =
          static_cast<double>(loop.loops + 3) * route.latency.value() + per_gpu / (link * nvls);
      INFO(n << " GPUs, " << mib << " MiB");
      CHECK(route.latency.value() == Approx(5.75e-6));
      CHECK(plan_time(t, p, plan).value() == Approx(expected).epsilon(1e-6));
      // As flows: every GPU's exchange on its own links at once, in the same time.
      CHECK(simulate_plan(plan, t, p).value() == Approx(expected).epsilon(1e-3));
    }
  }
  // The tuner: NVLS for large all-reduces over 8 H100s, rings for small ones (LL's short
  // steps), never over 2 GPUs, on A100s (no multicast), across nodes or under LL.
  CollectiveRequest request{Collective::all_reduce, Bytes(256 << 20), {first(8)}, 1, false, 0};
  request.architecture = m.gpu.architecture;
  CHECK(choose_collective(request, t, p).plan.algorithm == Algorithm::nvls);
  request.bytes = Bytes(1 << 10);
  CHECK(choose_collective(request, t, p).plan.algorithm == Algorithm::ring);
  request.bytes = Bytes(256 << 20);
  request.nodes = {first(2)};
  CHECK(choose_collective(request, t, p).plan.algorithm == Algorithm::ring);
  request.nodes = {first(8)};
  request.algorithm = CollectiveAlgorithm::ring;
  CHECK(choose_collective(request, t, p).plan.algorithm == Algorithm::ring);
  request.algorithm = CollectiveAlgorithm::automatic;
  request.protocol = Protocol::ll;
  CHECK(choose_collective(request, t, p).plan.algorithm == Algorithm::ring);
  request.protocol = std::nullopt;
  request.collective = Collective::broadcast;
  CHECK(choose_collective(request, t, p).plan.algorithm == Algorithm::ring);
  MachineSpec a100 = machine("dgx-a100");
  CHECK_FALSE(nvls_available(Topology::build(a100, 1), a100.gpu.architecture, first(8), 1,
                             Collective::all_reduce));
  CHECK(nvls_available(t, "hopper", first(8), 1, Collective::reduce_scatter));
  CHECK_FALSE(nvls_available(t, "hopper", first(8), 2, Collective::all_reduce));
}

TEST_CASE("a mirrored tree across nodes streams 2K chunks, then fills and drains in 2d - 1 hops") {
  HardwareProfile p = profile();
  MachineSpec m = machine("dgx-h100-cluster");
  Topology one = Topology::build(m, 1, true);
  const int nodes = 16, depth = 4;  // a binary tree of 16 nodes has 4 levels below its root
  const std::int64_t chunk = kPipelineChunkBytes, chunks = 8;
  Hierarchy h{{first(8)}, build_rings(one, first(8)), nodes, true};
  const Bytes bytes(8 * chunks * chunk);  // each of the 8 rails carries `chunks` chunks
  TransferPlan tree = hierarchical_all_reduce(h, bytes, AcrossNodes::tree, Bytes(chunk), 1);
  TransferPlan intra_only = ring_reduce_scatter(h.local_rings, bytes);
  TransferRoute rail = transfer_route(one, p, Transfer{0, 0, true, Bytes(0), {}});
  // Each of the two trees carries half of the rail's shard, still in whole chunks here.
  const double hop = static_cast<double>(chunk) / rail.bandwidth.value();
  double cross =
      rail.latency.value() + 2.0 * chunks * hop + (2 * depth - 1) * (rail.latency.value() + hop);
  double intra = plan_time(one, p, intra_only).value();
  // Reduce-scatter and all-gather inside the node take the same time.
  CHECK(plan_time(one, p, tree).value() == Approx(2 * intra + cross));
}

TEST_CASE("contention emerges: without peer-to-peer, GPUs sharing a switch uplink slow the ring") {
  HardwareProfile p = profile();
  Topology t = Topology::build(machine("rtx4090-8x-pcie"), 1);
  TransferPlan ring = ring_all_reduce(build_rings(t, first(8)), Bytes(std::int64_t{256} << 20));
  double analytic = plan_time(t, p, ring).value();
  double flows = simulate_plan(ring, t, p).value();
  // Two GPUs per switch send through its one uplink at once: about half the rate.
  CHECK(flows > 1.8 * analytic);
}

std::int64_t steps_of(const TransferPlan& plan) {
  std::int64_t steps = 0;
  for (const Transfer& t : plan.transfers)
    steps += t.steps;
  return steps;
}

TEST_CASE("a symmetric cluster simulation gives exactly the full simulation's time") {
  HardwareProfile p = profile();
  MachineSpec m = machine("dgx-h100-cluster");
  const int nodes = 4;
  Topology full = Topology::build(m, nodes);
  Topology one = Topology::build(m, 1, true);
  std::vector<std::vector<int>> all_nodes = cluster(nodes);
  const Bytes bytes(std::int64_t{100} << 20);
  Hierarchy everything{all_nodes, build_rings(full, all_nodes[0]), nodes, false};
  Hierarchy node0{{all_nodes[0]}, build_rings(one, all_nodes[0]), nodes, true};
  const int pieces = hierarchy_pieces(bytes, 8);
  REQUIRE(pieces == 8);
  TransferPlan explicit_plan = hierarchical_all_reduce(everything, bytes, AcrossNodes::ring,
                                                       Bytes(kPipelineChunkBytes), pieces);
  TransferPlan mirrored =
      hierarchical_all_reduce(node0, bytes, AcrossNodes::ring, Bytes(kPipelineChunkBytes), pieces);
  CHECK(mirrored.transfers.size() * nodes < explicit_plan.transfers.size() * 2);
  // Equal but for the rounding of each step's end up to the ns, which the mirror's rail (one
  // transfer of its 2(N-1) steps) does once: at most a nanosecond a step.
  const double rounding = 1e-9 * static_cast<double>(steps_of(mirrored));
  CHECK(simulate_plan(mirrored, one, p).value() <= simulate_plan(explicit_plan, full, p).value());
  CHECK(simulate_plan(mirrored, one, p).value() >=
        simulate_plan(explicit_plan, full, p).value() - rounding);
  CHECK(plan_time(one, p, mirrored).value() == Approx(plan_time(full, p, explicit_plan).value()));
}

TEST_CASE(
    "a ring over every node runs in lockstep: a plan that grows with the nodes, not their square") {
  HardwareProfile p = profile();
  MachineSpec m = machine("dgx-h100-cluster");
  const int nodes = 8;
  Topology full = Topology::build(m, nodes);
  std::vector<int> rail;  // GPU 0 of every node
  for (int k = 0; k < nodes; ++k)
    rail.push_back(8 * k);
  const Bytes bytes(std::int64_t{32} << 20);
  for (Collective c : {Collective::all_reduce, Collective::reduce_scatter}) {
    INFO((c == Collective::all_reduce ? "all-reduce" : "reduce-scatter"));
    const TransferPlan steps = c == Collective::all_reduce
                                   ? ring_all_reduce({Ring{rail}}, bytes)
                                   : ring_reduce_scatter({Ring{rail}}, bytes);
    const TransferPlan lockstep = lockstep_ring(Ring{rail}, bytes, c);
    CHECK(lockstep.transfers.size() == 2 * nodes + 1);
    CHECK(steps.transfers.size() == (c == Collective::all_reduce ? 2 : 1) * (nodes - 1) * nodes);
    CHECK(plan_time(full, p, lockstep).value() == Approx(plan_time(full, p, steps).value()));
    // Flows: each single step's end is rounded up to the ns, each lockstep send's once.
    const double rounding = 1e-9 * static_cast<double>(steps_of(lockstep));
    CHECK(simulate_plan(lockstep, full, p).value() <= simulate_plan(steps, full, p).value());
    CHECK(simulate_plan(lockstep, full, p).value() >=
          simulate_plan(steps, full, p).value() - rounding);
  }
  // A rank's part ends (as collective_ops ends it) with the transfers touching it that no later
  // one touching it waits for; through them every rank waits for every send of the ring, so a
  // slow edge holds them all, even where nothing follows the ring (a reduce-scatter's last
  // stage, or nodes of one GPU).
  const TransferPlan ring = lockstep_ring(Ring{rail}, bytes, Collective::reduce_scatter);
  auto touches = [](const Transfer& t, int rank) { return t.src == rank || t.dst == rank; };
  for (int rank : rail) {
    INFO("rank " << rank);
    std::vector<int> stack;
    for (std::size_t i = 0; i < ring.transfers.size(); ++i) {
      if (!touches(ring.transfers[i], rank)) continue;
      const bool followed =
          std::any_of(ring.transfers.begin(), ring.transfers.end(), [&](const Transfer& later) {
            return touches(later, rank) &&
                   std::count(later.deps.begin(), later.deps.end(), static_cast<int>(i)) > 0;
          });
      if (!followed) stack.push_back(static_cast<int>(i));
    }
    std::set<int> waited;
    while (!stack.empty()) {
      const int i = stack.back();
      stack.pop_back();
      if (!waited.insert(i).second) continue;
      for (int d : ring.transfers[static_cast<std::size_t>(i)].deps)
        stack.push_back(d);
    }
    for (std::size_t i = 0; i < ring.transfers.size(); ++i) {
      if (ring.transfers[i].bytes.value() > 0) CHECK(waited.count(static_cast<int>(i)) == 1);
    }
  }
  // A NIC at half its rate slows every step of the ring, the single steps' and the lockstep's
  // alike: every rank waits for the slow edge.
  Topology slow = Topology::build(m, nodes);
  slow.degrade(slow.nic_link(3, 0), 0.5);
  const TransferPlan steps = ring_all_reduce({Ring{rail}}, bytes);
  const TransferPlan lockstep = lockstep_ring(Ring{rail}, bytes, Collective::all_reduce);
  const double uniform = simulate_plan(steps, full, p).value();
  CHECK(simulate_plan(steps, slow, p).value() > 1.5 * uniform);
  CHECK(
      std::abs(simulate_plan(lockstep, slow, p).value() - simulate_plan(steps, slow, p).value()) <=
      1e-9 * static_cast<double>(steps_of(lockstep)));
  // In the hierarchy, every node's rails each take one transfer per node.
  std::vector<std::vector<int>> all = cluster(nodes);
  Hierarchy everything{all, build_rings(full, all[0]), nodes, false};
  const TransferPlan h =
      hierarchical_all_reduce(everything, bytes, AcrossNodes::ring, Bytes(kPipelineChunkBytes), 1);
  const auto across = std::count_if(h.transfers.begin(), h.transfers.end(), [&](const Transfer& t) {
    return full.node_of(t.src) != full.node_of(t.dst);
  });
  CHECK(across == 8 * nodes);
}

TEST_CASE("a route between two nodes enters no third machine, even around a NIC that is down") {
  MachineSpec m = machine("dgx-h100-cluster");
  Topology t = Topology::build(m, 8);
  t.degrade(t.nic_link(0, 0), 0);
  for (const auto& [a, b] : {std::pair{0, 8}, std::pair{0, 63}, std::pair{17, 42}}) {
    INFO("GPU " << a << " to GPU " << b);
    const Path& path = t.path(a, b);
    REQUIRE(!path.hops.empty());
    for (const Hop& hop : path.hops) {
      const TopologyLink& link = t.links()[static_cast<std::size_t>(hop.link)];
      CHECK_FALSE(link.down);
      for (int v : {link.a, link.b}) {
        const int node = t.vertices()[static_cast<std::size_t>(v)].node;
        CHECK((node < 0 || node == t.node_of(a) || node == t.node_of(b)));
      }
    }
  }
}

TEST_CASE("a non-blocking leaf's uplink is nobody's bottleneck, an oversubscribed one may be") {
  HardwareProfile p = profile();
  for (double oversubscription : {1.0, 4.0}) {
    MachineSpec m = machine("dgx-h100-cluster");
    m.topology.network->nodes_per_leaf = 2;
    m.topology.network->oversubscription = oversubscription;
    Topology t = Topology::build(m, 4);
    MaxMinFairNetwork network("network");
    NetworkMap map(t, p, network);
    INFO("1:" << oversubscription);
    for (int leaf : {0, 1}) {
      REQUIRE(t.leaf_uplink(leaf) >= 0);
      const auto link = static_cast<std::uint32_t>(2 * t.leaf_uplink(leaf));
      CHECK(network.never_binding(link) == (oversubscription == 1));
      CHECK(network.never_binding(link + 1) == (oversubscription == 1));
    }
    CHECK_FALSE(network.never_binding(static_cast<std::uint32_t>(2 * t.nic_link(0, 0))));
  }
}

TEST_CASE("a route asked again is the route it was, whatever the same source asked between") {
  // NetworkMap keeps each source's last route in front of its maps: every way of asking from one
  // GPU (peer, step table, steps, plain copy, mirror, SHARP, NVLink SHARP either way),
  // interleaved, must give what it gave the first time, and each a route of its own.
  HardwareProfile p = profile();
  Topology t = Topology::build(machine("dgx-h100-cluster"), 2, true);
  MaxMinFairNetwork network("network");
  NetworkMap map(t, p, network, protocol_step_tables(p));  // a table per NCCL protocol
  auto ask = [&](int which) -> std::uint32_t {
    switch (which) {
      case 0:
        return map.route(0, 1, 0);
      case 1:
        return map.route(0, 9, 0);  // the other node
      case 2:
        return map.route(0, 1, 1);  // another step table
      case 3:
        return map.route(0, 1, 0, 3);  // three steps
      case 4:
        return map.route(0, 1, -1);  // a plain copy
      case 5:
        return map.mirror_route(0, 0);  // through its NIC
      case 6:
        return map.mirror_route(0, 0, true);
      case 7:
        return map.fabric_route(0, 0, FabricWay::into_switch);  // NVLink SHARP
      case 8:
        return map.fabric_route(0, 0, FabricWay::out_of_switch);
      default:
        return map.route(1, 0, 0);  // another source
    }
  };
  constexpr int kWays = 10;
  std::vector<std::uint32_t> first(kWays);
  for (int w = 0; w < kWays; ++w)
    first[static_cast<std::size_t>(w)] = ask(w);
  std::vector<std::uint32_t> sorted = first;
  std::sort(sorted.begin(), sorted.end());
  CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end());
  for (int round = 0; round < 3; ++round) {
    for (int w = 0; w < kWays; ++w) {
      const int which = (w * 7 + round) % kWays;  // a different order each round
      CHECK(ask(which) == first[static_cast<std::size_t>(which)]);
      CHECK(ask(which) == first[static_cast<std::size_t>(which)]);
    }
  }
}

TEST_CASE("a transfer of several steps costs what a chain of single steps does") {
  HardwareProfile p = profile();
  Topology one = Topology::build(machine("dgx-h100-cluster"), 1, true);
  const Bytes step(1 << 20);
  for (bool mirror : {true, false}) {
    INFO((mirror ? "through the NIC" : "over NVLink"));
    const int dst = mirror ? 0 : 1;
    TransferPlan chain, steps;
    for (int i = 0; i < 5; ++i) {
      Transfer t{0, dst, mirror, step, {}};
      if (i > 0) t.deps = {i - 1};
      chain.add(std::move(t));
    }
    Transfer five{0, dst, mirror, Bytes(5 * step.value()), {}};
    five.steps = 5;
    steps.add(std::move(five));
    CHECK(plan_time(one, p, steps).value() == Approx(plan_time(one, p, chain).value()));
    // Flows: each single step's end is rounded up to the ns, the five steps' once.
    CHECK(std::abs(simulate_plan(steps, one, p).value() - simulate_plan(chain, one, p).value()) <=
          5e-9);
  }
  // So a mirrored ring's plan does not grow with the cluster: the same transfers at 16 nodes
  // as at 16,384.
  auto mirrored_ring = [&](int nodes) {
    CollectiveRequest request{Collective::all_reduce, Bytes(64 << 20), {first(8)}, nodes, true, 0};
    request.architecture = "hopper";  // dgx-h100-cluster's
    request.algorithm = CollectiveAlgorithm::ring;
    return choose_collective(request, one, p).plan.transfers.size();
  };
  CHECK(mirrored_ring(16) == mirrored_ring(16384));
}

TEST_CASE("bus bandwidth follows nccl-tests' factors") {
  const Bytes bytes(1'000'000);
  const Seconds second(1);
  CHECK(bus_bandwidth(Collective::all_reduce, 8, bytes, second) == Approx(1e6 * 2 * 7 / 8.0));
  CHECK(bus_bandwidth(Collective::all_gather, 8, bytes, second) == Approx(1e6 * 7 / 8.0));
  CHECK(bus_bandwidth(Collective::reduce_scatter, 4, bytes, second) == Approx(1e6 * 3 / 4.0));
  CHECK(bus_bandwidth(Collective::broadcast, 8, bytes, second) == Approx(1e6));
}

TEST_CASE("a tree's chunk shrinks as NCCL's does until the pipeline is deep enough") {
  // src/enqueue.cc: from 512 KiB, halved while a channel's data makes fewer than depth x 8 chunks
  // (down to 128 KiB), depth x 4 (64 KiB), depth (32 KiB); depth = ranks / nodes - 1 + log2.
  const std::int64_t kib = 1024;
  // DDP's 25 MiB bucket over 128 nodes of 8 (16 trees): depth 14, 1.6 MB a tree.
  CHECK(tree_chunk(Bytes(25 << 20), 16, 1024, 128).value() == 64 * kib);
  // 1 GiB over two nodes: 128 chunks a tree, deep enough for depth 8 at once.
  CHECK(tree_chunk(Bytes(std::int64_t{1} << 30), 16, 16, 2).value() == 512 * kib);
  // 4 MiB over 16 nodes: 256 KiB a tree, down to the floor.
  CHECK(tree_chunk(Bytes(4 << 20), 16, 128, 16).value() == 32 * kib);
  // 64 MiB over 16 nodes (depth 11): 4 MiB a tree, 64 chunks of 64 KiB reach depth x 4 = 44.
  CHECK(tree_chunk(Bytes(64 << 20), 16, 128, 16).value() == 64 * kib);
  // 256 MiB: 16 MiB a tree, 128 chunks of 128 KiB reach depth x 8 = 88.
  CHECK(tree_chunk(Bytes(256 << 20), 16, 128, 16).value() == 128 * kib);
  // 12 nodes: floor(log2 12) = 3, depth 10; 16 MiB a tree makes 64 chunks of 256 KiB, fewer
  // than 80, and 128 of 128 KiB.
  CHECK(tree_chunk(Bytes(256 << 20), 16, 96, 12).value() == 128 * kib);
  // 4 MiB a tree: 32 chunks of 128 KiB, fewer than depth x 4 = 40, so 64 KiB (64 of them).
  CHECK(tree_chunk(Bytes(64 << 20), 16, 96, 12).value() == 64 * kib);
}

TEST_CASE("a tree's hop carries its chunks in three transfers, and ends after its inputs") {
  const Tree tree{{0, 1, 2, 3, 4, 5, 6}};
  const Bytes chunk(64 << 10);
  for (std::int64_t chunks : {1, 2, 3, 40}) {
    INFO(chunks << " chunks");
    const TransferPlan plan = tree_all_reduce(tree, Bytes(chunks * chunk.value() - 100), chunk);
    const std::size_t segments = static_cast<std::size_t>(std::min<std::int64_t>(chunks, 3));
    // Six hops up and six down, each in that many transfers.
    REQUIRE(plan.transfers.size() == 12 * segments);
    std::int64_t up_from_1 = 0;
    for (const Transfer& t : plan.transfers) {
      if (t.src == 1 && t.dst == 0) up_from_1 += t.bytes.value();
    }
    CHECK(up_from_1 == chunks * chunk.value() - 100);
    // The first chunk pays each hop's step latency; the stream and the last chunk hide theirs
    // behind it, and wait for it.
    for (std::size_t i = 0; i < plan.transfers.size(); ++i) {
      const bool first = i < 12;
      CHECK(plan.transfers[i].pipelined == !first);
      if (!first) {
        const std::size_t before_on_hop = i - 12;
        CHECK(std::find(plan.transfers[i].deps.begin(), plan.transfers[i].deps.end(),
                        static_cast<int>(before_on_hop)) != plan.transfers[i].deps.end());
      }
    }
    // The last transfer of a hop waits for the last of each of its inputs (positions 3 and 4
    // send up to 1) and for the hop's transfer before it.
    const std::size_t last = (segments - 1) * 12;
    const Transfer& last_up_from_1 = plan.transfers[last + 5];
    REQUIRE(last_up_from_1.src == 1);
    std::vector<int> inputs;
    for (int d : last_up_from_1.deps) {
      const Transfer& before = plan.transfers[static_cast<std::size_t>(d)];
      if (static_cast<std::size_t>(d) >= last) {
        CHECK(before.dst == 1);
        inputs.push_back(before.src);
      } else {
        CHECK(static_cast<std::size_t>(d) == last - 12 + 5);
      }
    }
    std::sort(inputs.begin(), inputs.end());
    CHECK(inputs == std::vector<int>{3, 4});
  }
}

TEST_CASE("a symmetric cluster's mirrored tree stays close to the full double binary tree") {
  HardwareProfile p = profile();
  MachineSpec m = machine("dgx-h100-cluster");
  Topology one = Topology::build(m, 1, true);
  for (int nodes : {2, 4, 8, 16}) {
    Topology full = Topology::build(m, nodes);
    std::vector<std::vector<int>> all_nodes = cluster(nodes);
    Hierarchy everything{all_nodes, build_rings(full, all_nodes[0]), nodes, false};
    Hierarchy node0{{all_nodes[0]}, build_rings(one, all_nodes[0]), nodes, true};
    for (std::int64_t mib : {1, 8, 64}) {
      const Bytes bytes(mib << 20), chunk(kPipelineChunkBytes);
      // One piece: the pipeline of chunks across the nodes alone (in pieces, every node's
      // trees restart their fill and drain with each piece, the mirror streams through).
      double every_node =
          simulate_plan(hierarchical_all_reduce(everything, bytes, AcrossNodes::tree, chunk, 1),
                        full, p)
              .value();
      double mirrored =
          simulate_plan(hierarchical_all_reduce(node0, bytes, AcrossNodes::tree, chunk, 1), one, p)
              .value();
      INFO(nodes << " nodes, " << mib << " MiB");
      // Trees are not symmetric (a root, inner nodes, leaves), so the mirror is an estimate:
      // within a few percent where the tuner picks trees (small messages), 15% at worst.
      CHECK(mirrored == Approx(every_node).epsilon(mib == 1 ? 0.03 : 0.15));
    }
  }
}

TEST_CASE("PCIe into a CPU's host bridge is its own kind of link, with its own efficiency") {
  HardwareProfile p = profile();
  const double host_bridge = p.links.efficiency[static_cast<std::size_t>(LinkKind::host_bridge)];
  const double through_switch = p.links.efficiency[static_cast<std::size_t>(LinkKind::pcie)];
  REQUIRE(host_bridge < through_switch);
  // Seed 001's box: the cards hang off the root complex, so peers cross the host bridge (by
  // peer-to-peer where NCCL_P2P_LEVEL allows PHB).
  MachineSpec box = machine("seed001-box");
  box.topology.pcie.nccl_p2p_level = P2pLevel::phb;
  Topology seed = Topology::build(box, 1);
  TransferRoute r = transfer_route(seed, p, Transfer{0, 1, false, Bytes(0), {}});
  CHECK(r.slowest == LinkKind::host_bridge);
  CHECK(r.bandwidth.value() ==
        Approx(seed.links()[static_cast<std::size_t>(r.hops.front().link)].bandwidth.value() *
               host_bridge));
  // Under one PCIe switch the same cards would not touch it: only the switches' uplinks do.
  Topology boxes = Topology::build(machine("pcie-2socket-8gpu"), 1);
  for (const TopologyLink& link : boxes.links()) {
    const VertexKind a = boxes.vertices()[static_cast<std::size_t>(link.a)].kind;
    const VertexKind b = boxes.vertices()[static_cast<std::size_t>(link.b)].kind;
    if (a == VertexKind::gpu || b == VertexKind::gpu) CHECK(link.kind == LinkKind::pcie);
    if (a == VertexKind::cpu && b == VertexKind::pcie_switch)
      CHECK(link.kind == LinkKind::host_bridge);
    if (b == VertexKind::cpu && a == VertexKind::pcie_switch)
      CHECK(link.kind == LinkKind::host_bridge);
  }
  // A profile written before the split gives one PCIe figure for both kinds.
  HardwareProfile old = written_before(p, "host_bridge");
  CHECK(old.links.efficiency[static_cast<std::size_t>(LinkKind::host_bridge)] == through_switch);
  CHECK(old.links.step_latency[static_cast<std::size_t>(LinkKind::host_bridge)] ==
        old.links.step_latency[static_cast<std::size_t>(LinkKind::pcie)]);
}

TEST_CASE("NCCL stages GPU-to-GPU steps through host memory beyond its P2P level") {
  HardwareProfile p = profile();
  const double shm = p.links.efficiency[static_cast<std::size_t>(LinkKind::shm)];
  const double host_bridge = p.links.efficiency[static_cast<std::size_t>(LinkKind::host_bridge)];
  REQUIRE(shm < host_bridge);
  MachineSpec box = machine("seed001-box");
  const double pcie = box.gpu.pcie_bandwidth().value();
  auto route = [&](const MachineSpec& m, int a, int b) {
    return transfer_route(Topology::build(m, 1), p, Transfer{a, b, false, Bytes(0), {}});
  };
  // NCCL's default level, PXB: the host bridge (PHB) is beyond it, so the shared-memory
  // transport at its own efficiency of the narrowest link and PCI's step latency.
  REQUIRE(box.topology.pcie.nccl_p2p_level == P2pLevel::pxb);
  TransferRoute staged = route(box, 0, 1);
  CHECK(staged.slowest == LinkKind::shm);
  CHECK(staged.bandwidth.value() == Approx(pcie * shm));
  CHECK(staged.nominal.value() == Approx(pcie));
  // NCCL_P2P_LEVEL=PHB: peer-to-peer through the host bridge.
  box.topology.pcie.nccl_p2p_level = P2pLevel::phb;
  CHECK(route(box, 0, 1).slowest == LinkKind::host_bridge);
  CHECK(route(box, 0, 1).bandwidth.value() == Approx(pcie * host_bridge));
  // The driver refusing peer-to-peer stages it whatever the level.
  box.topology.pcie.peer_to_peer = false;
  CHECK(route(box, 0, 1).slowest == LinkKind::shm);
  // Two sockets with a PCIe switch each: PIX under one switch, SYS across the sockets.
  MachineSpec two = machine("pcie-2socket-8gpu");
  Topology t = Topology::build(two, 1);
  REQUIRE(t.path_type(0, 1) == PathType::pix);
  REQUIRE(t.path_type(0, 7) == PathType::sys);
  CHECK(t.nccl_peer_to_peer(0, 1));
  CHECK_FALSE(t.nccl_peer_to_peer(0, 7));
  CHECK(route(two, 0, 1).slowest == LinkKind::pcie);
  CHECK(route(two, 0, 7).slowest == LinkKind::shm);
  two.topology.pcie.nccl_p2p_level = P2pLevel::sys;
  CHECK(route(two, 0, 7).slowest != LinkKind::shm);
  two.topology.pcie.nccl_p2p_level = P2pLevel::loc;
  CHECK(route(two, 0, 1).slowest == LinkKind::shm);
  // NVLink is always peer-to-peer.
  Topology dgx = Topology::build(machine("dgx-a100"), 1);
  CHECK(dgx.nccl_peer_to_peer(0, 5));

  // The same ring all-reduce as flows and analytically, staged; and slower than peer-to-peer.
  for (std::int64_t mib : {1, 64}) {
    const Bytes bytes(mib << 20);
    MachineSpec m = machine("seed001-box");
    Topology staged_box = Topology::build(m, 1);
    TransferPlan plan = ring_all_reduce(build_rings(staged_box, {0, 1, 2, 3}), bytes);
    INFO(mib << " MiB");
    CHECK(simulate_plan(plan, staged_box, p).value() ==
          Approx(plan_time(staged_box, p, plan).value()).epsilon(1e-3));
    m.topology.pcie.nccl_p2p_level = P2pLevel::phb;
    Topology direct_box = Topology::build(m, 1);
    CHECK(plan_time(staged_box, p, plan) > plan_time(direct_box, p, plan));
  }

  // A profile written before the shared-memory transport had figures takes the host bridge's.
  HardwareProfile old = written_before(p, "shm");
  CHECK(old.links.efficiency[static_cast<std::size_t>(LinkKind::shm)] == host_bridge);
  CHECK(old.links.step_latency[static_cast<std::size_t>(LinkKind::shm)] ==
        old.links.step_latency[static_cast<std::size_t>(LinkKind::host_bridge)]);
}

TEST_CASE("LL's step and pace take an H100's cycles at another GPU's clock") {
  HardwareProfile p = profile();
  const auto nvswitch = static_cast<std::size_t>(LinkKind::nvswitch);
  const auto pcie = static_cast<std::size_t>(LinkKind::pcie);
  const Topology h100 = Topology::build(machine("dgx-h100"), 1);
  const Topology a100 = Topology::build(machine("dgx-a100"), 1);
  CHECK(ll_clock_scale(h100) == 1.0);
  const double scale = ll_clock_scale(a100);
  CHECK(scale == Approx(1980.0 / 1410.0));
  // The machine's LL step over NVSwitch is NCCL's at the A100's clock; NCCL's tuner keeps its
  // own figure, and a step over PCIe (the links' round trips) keeps NCCL's whatever the clock.
  const double nccl = LinkCosts::kNcclLlStepLatencyUs[nvswitch];
  CHECK(
      protocol_step_latencies(p, Protocol::ll, ProtocolFigures::machine, scale)[nvswitch].value() ==
      Approx(nccl * scale * 1e-6));
  CHECK(protocol_step_latencies(p, Protocol::ll, ProtocolFigures::tuner, scale)[nvswitch].value() ==
        Approx(nccl * 1e-6));
  CHECK(protocol_step_latencies(p, Protocol::ll, ProtocolFigures::machine, scale)[pcie].value() ==
        Approx(LinkCosts::kNcclLlStepLatencyUs[pcie] * 1e-6));
  // A profile's own step is the machine's as measured: not scaled.
  HardwareProfile own = p;
  own.links.ll_step_latency[nvswitch] = microseconds(0.7);
  CHECK(protocol_step_latencies(own, Protocol::ll, ProtocolFigures::machine, scale)[nvswitch]
            .value() == Approx(0.7e-6));
  // A thread's pace: a channel's LL rate at the A100's clock, where llMaxBw does not bind.
  const TransferPlan ring = ring_all_reduce(build_rings(a100, first(8)), Bytes(64 << 10));
  NcclLaunch launch = nccl_launch(ring, a100, Bytes(64 << 10), 8);
  REQUIRE(launch.nvlink);
  CHECK(launch.clock_scale == Approx(scale));
  TransferPlan ll = ring;
  ll.protocol = Protocol::ll;
  const double at_a100 = kernel_rate_limit(ll, launch, p, "ampere", 1);
  launch.clock_scale = 1;
  CHECK(kernel_rate_limit(ll, launch, p, "ampere", 1) == Approx(at_a100 * scale));
  // The rule transfers: checked on H100 tables only, it brings both public 8x A100 tables with
  // a process per GPU (NCCL 2.8.4's, and a recent NCCL's) closer at every size NCCL runs under
  // LL than NCCL's own step and the H100's pace do (the same A100s taken at the H100's clock).
  MachineSpec at_h100_clock = machine("dgx-a100");
  at_h100_clock.gpu.clocks->boost_mhz = kLlReferenceClockMhz;
  for (const char* file :
       {"abci-a-node-a100-all-reduce.csv", "a100-80gb-node-np8-all-reduce.csv"}) {
    double clocked = 0, unscaled = 0;
    int sizes = 0;
    for (const auto& row :
         test::commented_csv_rows(test::source_dir() / "tests/sim/data/nccl-tests" / file)) {
      CollectiveSweep sweep;
      sweep.min_bytes = sweep.max_bytes = std::stoll(row[0]);
      const double measured = std::stod(row[1]) * 1e-6;
      const CollectiveRow now = run_collective_sweep(machine("dgx-a100"), p, sweep)[0];
      if (now.protocol != "ll") continue;
      const CollectiveRow before = run_collective_sweep(at_h100_clock, p, sweep)[0];
      clocked += std::abs(now.seconds / measured - 1);
      unscaled += std::abs(before.seconds / measured - 1);
      ++sizes;
    }
    INFO(file << ": " << sizes << " sizes under LL, mean error " << unscaled / sizes << " -> "
              << clocked / sizes);
    REQUIRE(sizes >= 15);
    CHECK(clocked < unscaled - 0.05 * sizes);
    CHECK(clocked / sizes < 0.25);
  }
}

TEST_CASE("a staged step moves through a root complex at its links' DMA rate, a peer's slower") {
  // NCCL's shared-memory transport writes into host memory and reads back from it: DMA over
  // each GPU's link into the root complex, not peer-to-peer traffic the root complex forwards
  // between its ports (links.efficiency.host_bridge). So a staged step may run faster than the
  // host bridge's peer-to-peer rate, up to the links' own (links.efficiency.pcie), and a peer
  // step through the same root complex keeps that rate.
  HardwareProfile p = profile();
  const auto shm = static_cast<std::size_t>(LinkKind::shm);
  const auto host_bridge = static_cast<std::size_t>(LinkKind::host_bridge);
  const auto pcie = static_cast<std::size_t>(LinkKind::pcie);
  p.links.efficiency[shm] = 0.6;
  REQUIRE(p.links.efficiency[host_bridge] < 0.6);
  REQUIRE(p.links.efficiency[pcie] > 0.6);
  // Eight cards each on a root port of its own, no peer-to-peer (a public table's server).
  const MachineSpec server =
      load_machine(test::source_dir() / "tests/sim/data/nccl-tests/rtx4090-8x-epyc-7542.yaml",
                   bundled_gpu_catalogue());
  const double link = server.gpu.pcie_bandwidth().value();
  Topology t = Topology::build(server, 1);
  REQUIRE_FALSE(t.nccl_peer_to_peer(0, 1));
  const TransferRoute staged = transfer_route(t, p, Transfer{0, 1, false, Bytes(0), {}});
  CHECK(staged.slowest == LinkKind::shm);
  CHECK(staged.bandwidth.value() == Approx(0.6 * link));
  // Above the links' DMA rate the links bound it.
  p.links.efficiency[shm] = 0.95;
  CHECK(transfer_route(t, p, Transfer{0, 1, false, Bytes(0), {}}).bandwidth.value() ==
        Approx(p.links.efficiency[pcie] * link));
  p.links.efficiency[shm] = 0.6;
  // Seed 001's box with NCCL_P2P_LEVEL=PHB: peer to peer through the root complex, at its rate.
  MachineSpec box = machine("seed001-box");
  box.topology.pcie.nccl_p2p_level = P2pLevel::phb;
  const TransferRoute peer =
      transfer_route(Topology::build(box, 1), p, Transfer{0, 1, false, Bytes(0), {}});
  CHECK(peer.slowest == LinkKind::host_bridge);
  CHECK(peer.bandwidth.value() ==
        Approx(box.gpu.pcie_bandwidth().value() * p.links.efficiency[host_bridge]));
  // A plain copy between two of the server's cards: without peer-to-peer the driver stages it
  // through host memory, DMA at the links' rate, where seed 001's box (peer-to-peer allowed)
  // forwards it through the root complex at the host bridge's.
  CHECK(route_rate(t, p, t.path(0, 1), std::nullopt).bandwidth.value() ==
        Approx(p.links.efficiency[pcie] * link));
  Topology seed = Topology::build(box, 1);
  CHECK(route_rate(seed, p, seed.path(0, 1), std::nullopt).bandwidth.value() ==
        Approx(box.gpu.pcie_bandwidth().value() * p.links.efficiency[host_bridge]));
  // The server's ring all-reduce, as flows and analytically: each GPU sends and receives at the
  // staged rate at once, one flow each way on its own link (nccl-tests' bus bandwidth).
  const Bytes bytes(std::int64_t{128} << 20);
  const TransferPlan ring = ring_all_reduce(build_rings(t, first(8)), bytes);
  const double flows = simulate_plan(ring, t, p).value();
  CHECK(flows == Approx(plan_time(t, p, ring).value()).epsilon(1e-3));
  const double busbw = 2.0 * 7 / 8 * static_cast<double>(bytes.value()) / flows;
  CHECK(busbw == Approx(0.6 * link).epsilon(0.02));
}

TEST_CASE("across nodes the stages stream: a large all-reduce runs near its slowest stage") {
  HardwareProfile p = profile();
  Topology one = Topology::build(machine("dgx-h100-cluster"), 1, true);
  const std::vector<Ring> rings = build_rings(one, first(8));
  const Hierarchy h{{first(8)}, rings, 2, true};
  const Bytes bytes(std::int64_t{512} << 20), chunk(kPipelineChunkBytes);
  REQUIRE(hierarchy_pieces(bytes, 8) == kHierarchyPieces);
  CHECK(hierarchy_pieces(Bytes(8 << 20), 8) == 1);  // one chunk per GPU: nothing to stream
  CHECK(hierarchy_pieces(Bytes(std::int64_t{3} * 8 << 20), 8) == 3);
  const double in_turn =
      simulate_plan(hierarchical_all_reduce(h, bytes, AcrossNodes::ring, chunk, 1), one, p).value();
  const double streamed =
      simulate_plan(hierarchical_all_reduce(h, bytes, AcrossNodes::ring, chunk, kHierarchyPieces),
                    one, p)
          .value();
  // The stages alone, as flows: the node's reduce-scatter (its all-gather takes as long) and
  // every rail's cross-node ring at once.
  const double scatter = simulate_plan(ring_reduce_scatter(rings, bytes), one, p).value();
  TransferPlan rails;
  for (int gpu = 0; gpu < 8; ++gpu) {
    for (int step = 0; step < 2; ++step) {
      Transfer t{gpu, gpu, true, Bytes(bytes.value() / 8 / 2), {}};
      if (step > 0) t.deps = {static_cast<int>(rails.transfers.size()) - 1};
      rails.add(std::move(t));
    }
  }
  const double rail = simulate_plan(rails, one, p).value();
  INFO("scatter " << scatter << " s, rails " << rail << " s, in turn " << in_turn << " s, streamed "
                  << streamed << " s");
  CHECK(in_turn == Approx(2 * scatter + rail).epsilon(0.01));
  // Streamed, the node's NVLink ring edges carry one piece's reduce-scatter beside another's
  // all-gather, so the slowest stage here is both of them together (less the step latencies
  // the pieces after the first hide); the first piece's reduce-scatter and the last one's
  // all-gather stick out by an eighth each.
  const double slowest = std::max(2 * scatter, rail);
  CHECK(streamed >= 0.98 * slowest);
  CHECK(streamed < slowest * (1 + 2.0 / kHierarchyPieces) * 1.02);
  CHECK(streamed < 0.75 * in_turn);
}

TEST_CASE("NVLSTree: NVLS inside H100 nodes, trees across them, where NCCL enables it") {
  HardwareProfile p = profile();
  MachineSpec m = machine("dgx-h100-cluster");
  Topology one = Topology::build(m, 1, true);
  // Reduce-scatter and all-gather by NVLS: S into the switch and S/n out of it, or the reverse,
  // each way on its own links, so either takes S at the NVLS rate.
  for (Collective c : {Collective::reduce_scatter, Collective::all_gather}) {
    TransferPlan plan = nvls_collective(c, first(8), Bytes(64 << 20));
    REQUIRE(plan.transfers.size() == 16);
    std::int64_t into = 0, out = 0;
    for (const Transfer& t : plan.transfers) {
      if (t.src != 0) continue;
      (t.fabric == FabricWay::into_switch ? into : out) += t.bytes.value();
    }
    // Two warp groups: the first loop's data (8 MiB: 128 operations of 64 KiB) once more, loops
    // + 1 iterations and one for the collective.
    const NvlsLoop loop = nvls_loop(c, Bytes(64 << 20), 8);
    REQUIRE(loop.loop_bytes == 8 << 20);
    CHECK(into == (c == Collective::reduce_scatter ? 72 << 20 : 9 << 20));
    CHECK(out == (c == Collective::reduce_scatter ? 9 << 20 : 72 << 20));
    const TransferRoute route = transfer_route(one, p, plan.transfers[0]);
    CHECK(route.slowest == LinkKind::nvls);
    CHECK(simulate_plan(plan, one, p).value() ==
          Approx(static_cast<double>(loop.loops + 2) * route.latency.value() +
                 (72 << 20) / route.bandwidth.value())
              .epsilon(1e-3));
  }
  CollectiveRequest request{
      Collective::all_reduce, Bytes(std::int64_t{1} << 30), {first(8)}, 2, true, 0};
  request.architecture = m.gpu.architecture;
  const CollectiveChoice large = choose_collective(request, one, p);
  CHECK(large.plan.algorithm == Algorithm::nvls_tree);
  CHECK(large.channels == kNvlsChannelsHopper);
  CHECK(protocol_base_latency(Algorithm::nvls_tree, Protocol::simple).value() == 0);
  bool inside = false, across = false;
  for (const Transfer& t : large.plan.transfers) {
    inside = inside || t.fabric != FabricWay::none;
    across = across || t.mirror;
  }
  CHECK(inside);
  CHECK(across);
  // Small messages: LL's short steps on rings and trees; NVLS costs a 25 us step at least.
  request.bytes = Bytes(4096);
  CHECK(choose_collective(request, one, p).plan.algorithm != Algorithm::nvls_tree);
  // NCCL_ALGO=NVLSTree forces it; NCCL_ALGO=NVLS across nodes needs CollNet, so without
  // switches that reduce NCCL falls back.
  request.algorithm = CollectiveAlgorithm::nvls_tree;
  CHECK(choose_collective(request, one, p).plan.algorithm == Algorithm::nvls_tree);
  request.algorithm = CollectiveAlgorithm::nvls;
  request.bytes = Bytes(std::int64_t{1} << 30);
  MachineSpec plain = m;
  plain.topology.network->in_network_reduction = false;
  const Algorithm fallback =
      choose_collective(request, Topology::build(plain, 1, true), p).plan.algorithm;
  CHECK((fallback == Algorithm::hierarchical_ring || fallback == Algorithm::hierarchical_tree));
  // Not on A100 nodes (no multicast), not inside one node (NCCL disables it there).
  MachineSpec a100 = machine("dgx-a100");
  Topology a100_one = Topology::build(a100, 1, true);
  request.algorithm = CollectiveAlgorithm::automatic;
  request.architecture = a100.gpu.architecture;
  CHECK(choose_collective(request, a100_one, p).plan.algorithm != Algorithm::nvls_tree);
  request.architecture = m.gpu.architecture;
  request.total_nodes = 1;
  request.symmetric = false;
  request.algorithm = CollectiveAlgorithm::nvls_tree;
  CHECK(choose_collective(request, Topology::build(m, 1), p).plan.algorithm == Algorithm::ring);
  // The multicast's latency is the reduction's (one NVLS step), and a symmetric cluster's
  // NVLSTree equals every node's wherever the trees stream the same (two nodes, one piece).
  std::vector<std::vector<int>> both{first(8), {8, 9, 10, 11, 12, 13, 14, 15}};
  Topology full = Topology::build(m, 2);
  Hierarchy every{both, build_rings(full, both[0]), 2, false, InsideNodes::nvls};
  Hierarchy mirrored{{first(8)}, build_rings(one, first(8)), 2, true, InsideNodes::nvls};
  const Bytes small(std::int64_t{8} << 20);
  CHECK(simulate_plan(hierarchical_all_reduce(mirrored, small, AcrossNodes::tree,
                                              Bytes(kPipelineChunkBytes), 1),
                      one, p)
            .value() ==
        Approx(simulate_plan(hierarchical_all_reduce(every, small, AcrossNodes::tree,
                                                     Bytes(kPipelineChunkBytes), 1),
                             full, p)
                   .value())
            .epsilon(0.10));
}

TEST_CASE("CollNet: the switches reduce each GPU's shard, sent once and returned once") {
  HardwareProfile p = profile();
  const double sharp = p.links.efficiency[static_cast<std::size_t>(LinkKind::sharp)];
  // NCCL's model of it, as the profile cites: the network's efficiency times the 0.85 tuning.cc
  // applies to CollNet Direct, one step of 31 us; a profile written before takes the same.
  check_nccl_model(p, LinkKind::sharp, LinkKind::network, 0.85, 31);

  MachineSpec m = machine("dgx-h100-cluster");
  REQUIRE(m.topology.network->in_network_reduction);
  Topology one = Topology::build(m, 1, true);
  CHECK(one.in_network_reduction());
  CollectiveRequest request{Collective::all_reduce, Bytes(8 << 20), {first(8)}, 16, true, 0};
  request.architecture = m.gpu.architecture;
  // Never the tuner's own choice (NCCL_COLLNET_ENABLE is off by default).
  const Algorithm automatic = choose_collective(request, one, p).plan.algorithm;
  CHECK(automatic != Algorithm::collnet_direct);
  request.algorithm = CollectiveAlgorithm::collnet;
  const CollectiveChoice direct = choose_collective(request, one, p);
  REQUIRE(direct.plan.algorithm == Algorithm::collnet_direct);
  CHECK(direct.plan.protocol == Protocol::simple);
  // One piece (8 MiB over 8 GPUs): direct copies inside, one exchange per GPU with the
  // switches of its 1 MiB shard, direct copies inside again, each stage costed on its own.
  int in_network = 0;
  for (const Transfer& t : direct.plan.transfers) {
    if (!t.in_network) continue;
    ++in_network;
    CHECK(t.mirror);
    CHECK(t.bytes.value() == 1 << 20);
    const TransferRoute route = transfer_route(one, p, t);
    CHECK(route.slowest == LinkKind::sharp);
    CHECK(route.latency.value() == Approx(31e-6));
    CHECK(route.bandwidth.value() == Approx(m.topology.network->nic_bandwidth.value() * sharp));
  }
  CHECK(in_network == 8);
  const double inside = plan_time(one, p, direct_all_to_all(first(8), Bytes(8 << 20))).value();
  const TransferRoute rail = transfer_route(one, p, direct.plan.transfers[56]);
  REQUIRE(direct.plan.transfers[56].in_network);
  CHECK(plan_time(one, p, direct.plan).value() ==
        Approx(2 * inside + rail.latency.value() + (1 << 20) / rail.bandwidth.value()));
  // The exchange is the same for every node: the mirror equals every node simulated.
  std::vector<std::vector<int>> nodes{first(8), {8, 9, 10, 11, 12, 13, 14, 15}};
  Topology full = Topology::build(m, 2);
  const Bytes bytes(std::int64_t{256} << 20), chunk(kPipelineChunkBytes);
  Hierarchy every{nodes, build_rings(full, nodes[0]), 2, false, InsideNodes::direct};
  Hierarchy mirrored{{first(8)}, build_rings(one, first(8)), 2, true, InsideNodes::direct};
  const int pieces = hierarchy_pieces(bytes, 8);
  CHECK(simulate_plan(
            hierarchical_all_reduce(mirrored, bytes, AcrossNodes::in_network, chunk, pieces), one,
            p) ==
        simulate_plan(hierarchical_all_reduce(every, bytes, AcrossNodes::in_network, chunk, pieces),
                      full, p));
  // Across many nodes a NIC carries the shard once each way, against 2(N-1)/N of it for rings.
  request.bytes = Bytes(std::int64_t{1} << 30);
  const double collnet = simulate_plan(choose_collective(request, one, p).plan, one, p).value();
  request.algorithm = CollectiveAlgorithm::ring;
  const double rings = simulate_plan(choose_collective(request, one, p).plan, one, p).value();
  CHECK(collnet < 0.9 * rings);
  // NVLS inside the nodes with the switches reducing across (NCCL_ALGO=NVLS with CollNet).
  request.algorithm = CollectiveAlgorithm::nvls;
  CHECK(choose_collective(request, one, p).plan.algorithm == Algorithm::nvls);
  // Without switches that reduce, NCCL falls back to rings and trees.
  MachineSpec plain = m;
  plain.topology.network->in_network_reduction = false;
  Topology without = Topology::build(plain, 1, true);
  for (CollectiveAlgorithm a : {CollectiveAlgorithm::collnet, CollectiveAlgorithm::nvls}) {
    request.algorithm = a;
    const Algorithm fallback = choose_collective(request, without, p).plan.algorithm;
    CHECK((fallback == Algorithm::hierarchical_ring || fallback == Algorithm::hierarchical_tree));
  }
  // Nodes without an NVSwitch: CollNet Chain, the GPUs to the NIC on rings.
  MachineSpec v100 = machine("dgx1-v100");
  v100.topology.network->in_network_reduction = true;
  Topology v100_one = Topology::build(v100, 1, true);
  request.algorithm = CollectiveAlgorithm::collnet;
  request.architecture = v100.gpu.architecture;
  CHECK(choose_collective(request, v100_one, p).plan.algorithm == Algorithm::collnet_chain);
}

TEST_CASE("across nodes: reduce-scatter and all-gather on rings, all-to-all direct, mirrored") {
  HardwareProfile p = profile();
  MachineSpec m = machine("dgx-h100-cluster");
  const int nodes = 4;
  Topology full = Topology::build(m, nodes);
  Topology one = Topology::build(m, 1, true);
  std::vector<std::vector<int>> all_nodes = cluster(nodes);
  const Bytes bytes(std::int64_t{64} << 20);
  for (Collective c : {Collective::reduce_scatter, Collective::all_gather}) {
    INFO(name_of(c));
    CollectiveRequest mirrored{c, bytes, {first(8)}, nodes, true, 0};
    CollectiveRequest every{c, bytes, all_nodes, nodes, false, 0};
    mirrored.architecture = every.architecture = m.gpu.architecture;
    const CollectiveChoice a = choose_collective(mirrored, one, p);
    const CollectiveChoice b = choose_collective(every, full, p);
    CHECK(a.plan.algorithm == Algorithm::hierarchical_ring);
    // Rings are the same on every node: the mirror is exact.
    // ... but for the rounding of each step's end up to the ns (see the case above).
    CHECK(
        std::abs(simulate_plan(a.plan, one, p).value() - simulate_plan(b.plan, full, p).value()) <=
        1e-9 * static_cast<double>(steps_of(a.plan)));
    // Each GPU's NIC carries (N-1)/N of its node's share S/8 once, one way each.
    std::int64_t nic_bytes = 0;
    for (const Transfer& t : a.plan.transfers) {
      if (t.mirror && t.src == 0) nic_bytes += t.bytes.value();
    }
    CHECK(nic_bytes == bytes.value() / 8 / nodes * (nodes - 1));
  }
  CollectiveRequest mirrored{Collective::all_to_all, bytes, {first(8)}, nodes, true, 0};
  CollectiveRequest every{Collective::all_to_all, bytes, all_nodes, nodes, false, 0};
  mirrored.architecture = every.architecture = m.gpu.architecture;
  const CollectiveChoice a = choose_collective(mirrored, one, p);
  const CollectiveChoice b = choose_collective(every, full, p);
  // Every GPU's shares for the other nodes leave through its NIC: the NICs bound it, so the
  // mirror's one transfer per GPU takes what every node's 24 sends each take.
  CHECK(simulate_plan(a.plan, one, p).value() ==
        Approx(simulate_plan(b.plan, full, p).value()).epsilon(0.05));
  // Point-to-point sends: LL up to 16 KiB each, Simple beyond, as NCCL_P2P_LL_THRESHOLD.
  CHECK(a.plan.protocol == Protocol::simple);
  mirrored.bytes = Bytes(32 * 16384);
  CHECK(choose_collective(mirrored, one, p).plan.protocol == Protocol::ll);
  mirrored.bytes = Bytes(32 * 16384 + 32 * 1024);
  CHECK(choose_collective(mirrored, one, p).plan.protocol == Protocol::simple);
}

TEST_CASE("broadcast and reduce across nodes: a chain through every node, one channel per NIC") {
  HardwareProfile p = profile();
  MachineSpec m = machine("dgx-h100-cluster");
  Topology one = Topology::build(m, 1, true);
  for (int nodes : {2, 4}) {
    Topology full = Topology::build(m, nodes);
    std::vector<std::vector<int>> all_nodes = cluster(nodes);
    for (Collective c : {Collective::broadcast, Collective::reduce}) {
      for (std::int64_t kib : {8, 1024, 256 * 1024}) {
        INFO(nodes << " nodes, " << name_of(c) << ", " << kib << " KiB");
        CollectiveRequest mirrored{c, Bytes(kib << 10), {first(8)}, nodes, true, 0};
        CollectiveRequest every{c, Bytes(kib << 10), all_nodes, nodes, false, 0};
        mirrored.protocol = every.protocol = Protocol::simple;
        const CollectiveChoice a = choose_collective(mirrored, one, p);
        const CollectiveChoice b = choose_collective(every, full, p);
        CHECK(a.plan.algorithm == Algorithm::hierarchical_ring);
        // Eight channels, each through its own NIC.
        CHECK(a.plan.channels == 8);
        std::set<int> nics;
        for (const Transfer& t : a.plan.transfers) {
          if (t.mirror) nics.insert(t.src);
        }
        CHECK(nics.size() == 8);
        // Node 0 stands for every node: the mirror's chain crosses between nodes N - 1 times,
        // where a channel's ring, entered from the root partway along its node's part, crosses
        // N times (once more, back into the root's node). The mirror adds that crossing to the
        // last chunk's hops only; every node's NICs carry a whole channel's share through it,
        // so streaming chains come out up to a sixth shorter in the mirror.
        const double mirror = simulate_plan(a.plan, one, p).value();
        const double every_node = simulate_plan(b.plan, full, p).value();
        CHECK(mirror < every_node * 1.05);
        CHECK(mirror > every_node * 0.83);
        // The analytic cost of both: the same hops at the same cost, each channel's alone (the
        // tuner chooses by it), but the mirror's one more (8N, every node's chain 8N - 1) and the
        // last chunk's crossings after its stream: 4% apart on 2 nodes, 2% on 4. Costing
        // every node's NVLink hops as shared by the seven channels that use each pair put them
        // 61% apart at 1 MiB.
        CHECK(b.time.value() == Approx(a.time.value()).epsilon(0.05));
      }
    }
  }
}

TEST_CASE("a mirrored tree in pieces keeps its fill and drain: time grows with the message") {
  HardwareProfile p = profile();
  MachineSpec m = machine("dgx-h100-cluster");
  Topology one = Topology::build(m, 1, true);
  for (CollectiveAlgorithm a : {CollectiveAlgorithm::tree, CollectiveAlgorithm::nvls_tree}) {
    for (int nodes : {16, 512}) {
      double before = 0;
      for (std::int64_t mib : {4, 8, 16, 32, 64}) {
        CollectiveRequest request{
            Collective::all_reduce, Bytes(mib << 20), {first(8)}, nodes, true, 0};
        request.algorithm = a;
        request.protocol = Protocol::simple;
        request.architecture = m.gpu.architecture;
        const double t = choose_collective(request, one, p).time.value();
        INFO(nodes << " nodes, " << mib << " MiB");
        CHECK(t > before);
        before = t;
      }
    }
  }
  // The drain's 2d - 1 hops pay their latency after the last piece too.
  const Hierarchy h{{first(8)}, build_rings(one, first(8)), 16, true};
  const Bytes bytes(64 << 20), chunk(kPipelineChunkBytes);
  const TransferPlan plan =
      hierarchical_all_reduce(h, bytes, AcrossNodes::tree, chunk, kHierarchyPieces);
  int with_latency = 0;
  for (const Transfer& t : plan.transfers)
    with_latency += t.mirror && !t.pipelined ? t.steps : 0;
  CHECK(with_latency == 8 * (1 + 2 * 4 - 1));  // per rail: the first stream, then the drain
}

TEST_CASE("channels and chunks: one-GPU nodes still hold channels, huge chains stay small") {
  HardwareProfile p = profile();
  MachineSpec m = machine("dgx-h100-cluster");
  Topology one = Topology::build(m, 1, true);
  CollectiveRequest request{Collective::all_reduce, Bytes(1 << 20), {{0}}, 2, true, 0};
  request.architecture = m.gpu.architecture;
  const CollectiveChoice choice = choose_collective(request, one, p);
  CHECK(choice.channels == 2);
  // A 1 TiB broadcast: at most 4096 chunks on each ring's 7 hops.
  const std::vector<Ring> rings = build_rings(one, first(8));
  const TransferPlan chain = ring_broadcast(rings, 0, Bytes(std::int64_t{1} << 40),
                                            ChainChunks{Bytes(kPipelineChunkBytes)});
  CHECK(chain.transfers.size() <= rings.size() * 7 * kMaxChainChunks);
}

TEST_CASE("a chain is cut in the unit its protocol forwards: every node's and the mirror's agree") {
  // NCCL's figures (chain_chunks): Simple a step, 4 MiB over 8; LL 512 threads of 8 data bytes;
  // LL128 640 threads of 8 eight-byte words, in 128-byte lines of which 120 bytes are data.
  CHECK(chain_chunks(Protocol::simple).size.value() == (4 << 20) / 8);
  CHECK(chain_chunks(Protocol::ll).size.value() == 512 * 8);
  CHECK(chain_chunks(Protocol::ll128).size.value() == 640 * 8 * 8 * 120 / 128);
  // A channel's 26 KiB is 7 LL passes, cut in 4 pieces; 1 GiB in 1 MiB pieces, as all chains
  // were before; Simple in steps, or 4,096 larger chunks.
  const auto step = [](std::int64_t share, Protocol protocol) {
    return chain_step(Bytes(share), chain_chunks(protocol)).value();
  };
  CHECK(step(26 * 1024, Protocol::ll) == 26 * 1024 / 4);
  CHECK(step(std::int64_t{1} << 30, Protocol::ll) == 1 << 20);
  CHECK(step(std::int64_t{1} << 30, Protocol::ll128) == 1 << 20);
  CHECK(step(1, Protocol::ll128) == 640 * 8 * 8 * 120 / 128);
  CHECK(step(26 * 1024, Protocol::simple) == (4 << 20) / 8);
  CHECK(step(std::int64_t{4} << 30, Protocol::simple) == (std::int64_t{4} << 30) / 4096);
  CHECK_THROWS_AS(chain_step(Bytes(1), ChainChunks{Bytes(0)}), std::logic_error);
  HardwareProfile p = profile();
  MachineSpec m = machine("dgx-h100-cluster");
  Topology one = Topology::build(m, 1, true);
  for (int nodes : {32, 128}) {
    Topology full = Topology::build(m, nodes);
    for (std::int64_t kib : {1, 208, 1024}) {
      INFO(nodes << " nodes, " << kib << " KiB");
      CollectiveRequest mirrored{
          Collective::broadcast, Bytes(kib << 10), {first(8)}, nodes, true, 0};
      CollectiveRequest every{
          Collective::broadcast, Bytes(kib << 10), cluster(nodes), nodes, false, 0};
      mirrored.architecture = every.architecture = m.gpu.architecture;  // LL128 enabled
      // Each protocol's own chain: each channel's share in its units, each crossing all
      // 8N - 1 hops.
      const std::int64_t share = (kib << 10) / 8;
      for (Protocol protocol : {Protocol::simple, Protocol::ll, Protocol::ll128}) {
        INFO(name_of(protocol));
        CollectiveRequest forced = every;
        forced.protocol = protocol;
        const std::int64_t piece = step(share, protocol);
        const std::int64_t chunks = (share + piece - 1) / piece;
        CHECK(choose_collective(forced, full, p).plan.transfers.size() ==
              static_cast<std::size_t>(8 * chunks * (8 * nodes - 1)));
      }
      const CollectiveChoice a = choose_collective(mirrored, one, p);
      const CollectiveChoice b = choose_collective(every, full, p);
      CHECK(a.plan.protocol == b.plan.protocol);
      // Every node's channels all leave the root at once and meet on the NVSwitch ports, the
      // mirror's each start on a GPU of its own: a whole chunk a hop (1 MiB, before), that
      // was 13% at 208 KiB; pieces of a few KiB meet for a few ns, of 32 KiB (1 MiB: a
      // channel's 128 KiB in 4) for longer.
      const double mirror = simulate_plan(a.plan, one, p).value();
      const double every_node = simulate_plan(b.plan, full, p).value();
      CHECK(every_node == Approx(mirror).epsilon(kib < 1024 ? 0.03 : 0.07));
      CHECK(b.time.value() == Approx(a.time.value()).epsilon(0.01));
    }
  }
}

TEST_CASE("one thread launching eight GPUs' collectives each iteration sets a floor of its own") {
  // nccl-tests' -g 8: the thread launches the eight kernels in turn every iteration and queues
  // the iterations back to back, so an iteration takes the collective's time or the eight
  // launches', whichever is longer; a process per GPU launches one; a CUDA graph none.
  const MachineSpec m = machine("dgx-a100");
  const HardwareProfile p = profile();
  CollectiveSweep sweep;
  sweep.min_bytes = 8;
  sweep.max_bytes = 1LL << 30;
  sweep.factor = 8;
  const std::vector<CollectiveRow> alone = run_collective_sweep(m, p, sweep);
  sweep.launches_per_iteration = 8;
  const std::vector<CollectiveRow> threaded = run_collective_sweep(m, p, sweep);
  sweep.launches_per_iteration = 0;
  const std::vector<CollectiveRow> graph = run_collective_sweep(m, p, sweep);
  REQUIRE(threaded.size() == alone.size());
  int bound = 0;
  for (std::size_t i = 0; i < alone.size(); ++i) {
    INFO(alone[i].bytes << " B");
    // The collective itself, and the algorithm and protocol NCCL picks for it, do not change.
    CHECK(threaded[i].collective_seconds == alone[i].collective_seconds);
    CHECK(threaded[i].algorithm == alone[i].algorithm);
    CHECK(threaded[i].protocol == alone[i].protocol);
    CHECK(threaded[i].seconds ==
          std::max(alone[i].collective_seconds, 8 * p.links.nccl_launch_or_default().value()));
    CHECK(threaded[i].launch_bound == (threaded[i].seconds > alone[i].collective_seconds));
    CHECK(graph[i].seconds == alone[i].collective_seconds);
    // A process per GPU: no NCCL collective over 8 GPUs is quicker than one launch.
    CHECK(alone[i].seconds == alone[i].collective_seconds);
    CHECK_FALSE(alone[i].launch_bound);
    bound += threaded[i].launch_bound ? 1 : 0;
  }
  // The small sizes wait on the thread (32 us), the large ones on the links.
  CHECK(threaded.front().launch_bound);
  CHECK(threaded.front().seconds == Approx(32e-6));
  CHECK_FALSE(threaded.back().launch_bound);
  CHECK(bound >= 3);
}

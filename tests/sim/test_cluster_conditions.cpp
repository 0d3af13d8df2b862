// Stragglers, jitter and link faults (`stragglers:`, `faults:`): what a synchronous step must
// show, exactness of the steady-state shortcut under jitter, and the results saying so.
#include <algorithm>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "core/spec/scenario_spec.h"
#include "sim/network/topology.h"
#include "sim/predict/cluster_conditions.h"
#include "sim/predict/predict.h"
#include "sim/report/report.h"
#include "support/paths.h"

using namespace epochcast;
using namespace epochcast::sim;

namespace {

// Two DGX H100 nodes, DDP ResNet-50 at 64 images per GPU: compute-bound with the all-reduce
// mostly hidden behind backward.
const char* kCluster = R"(kind: scenario
name: conditions
model: resnet-50
hardware: {base: dgx-h100-cluster, nodes: 4}
dataset: {name: imagenet, train_samples: 16384, classes: 1000}
loader: {workers: 16, pin_memory: true, sample_cpu_us: 10}
training: {strategy: ddp, optimizer: momentum, precision: amp_bf16}
sweep: {gpus: [16], batch: [64], batch_is: per_gpu}
)";

ScenarioSpec cluster(const std::string& extra = "",
                     const std::vector<yaml::Override>& overrides = {}) {
  return load_scenario_from_string(std::string(kCluster) + extra, "conditions.yaml",
                                   test::source_dir(), overrides);
}

PointResult point_of(const ScenarioSpec& s, const PredictOptions& options = {}) {
  return predict_point(s, expand_sweep(s).front(), options);
}

}  // namespace

TEST_CASE("one GPU at 80% speed slows a synchronous step as if every GPU were that slow") {
  const PointResult even = point_of(cluster());
  const PointResult one = point_of(cluster("stragglers: {gpus: [{gpu: 11, speed: 0.8}]}\n"));
  const PointResult all =
      point_of(cluster("stragglers: {nodes: [{node: 0, speed: 0.8}, {node: 1, speed: 0.8}]}\n"));
  // Every rank waits for rank 11 at each all-reduce: the step runs at its pace.
  CHECK(one.epoch_seconds > 1.15 * even.epoch_seconds);
  CHECK(one.epoch_seconds == Approx(all.epoch_seconds).epsilon(0.03));
  CHECK(one.epoch_seconds <= all.epoch_seconds);
  // The straggler makes the nodes differ: every rank simulated, and the results say why.
  CHECK(even.ranks_simulated == "node 0 mirrored");
  CHECK(one.ranks_simulated == "every rank");
  REQUIRE(one.conditions.size() == 1);
  CHECK(one.conditions.front() == "GPU 11 at 80% speed");
  const ScenarioSpec s = cluster("stragglers: {gpus: [{gpu: 11, speed: 0.8}]}\n");
  const std::string table = render_table(s, {one});
  CHECK_THAT(table, Catch::Contains("Simulated: every rank at 16 GPUs (the scenario's stragglers "
                                    "or faults make the nodes differ, so node 0 cannot stand for "
                                    "every node)."));
  CHECK_THAT(table, Catch::Contains("Conditions at 16 GPUs: GPU 11 at 80% speed."));
}

TEST_CASE("a straggler outside a point's ranks leaves the point alone") {
  const ScenarioSpec s = cluster("stragglers: {gpus: [{gpu: 20, speed: 0.5}]}\n");
  const PointResult r = point_of(s);
  CHECK(r.conditions.empty());
  CHECK(r.ranks_simulated == "node 0 mirrored");
  CHECK(r.epoch_seconds == point_of(cluster()).epoch_seconds);
}

TEST_CASE("per-step jitter: seeded, slower with a wider spread, and skipped periods stay exact") {
  const std::string narrow = "stragglers: {jitter: {spread: 0.03, seed: 7, steps: 4}}\n";
  const std::string wide = "stragglers: {jitter: {spread: 0.1, seed: 7, steps: 4}}\n";
  const PointResult even = point_of(cluster());
  const PointResult a = point_of(cluster(narrow));
  const PointResult b = point_of(cluster(wide));
  CHECK(a.epoch_seconds == point_of(cluster(narrow)).epoch_seconds);  // deterministic
  // A synchronous step pays the slowest of 16 draws: about spread x 1.77 (E[max of 16 normals]).
  CHECK(a.epoch_seconds > even.epoch_seconds);
  CHECK(b.epoch_seconds > a.epoch_seconds);
  CHECK(b.epoch_seconds / even.epoch_seconds < 1 + 0.1 * 3);
  CHECK(a.ranks_simulated == "every rank");
  // The shortcut skips whole cycles of draws: the same epoch as simulating every iteration.
  // (An epoch of 96 iterations: 24 cycles of 4 draws.)
  const ScenarioSpec longer = cluster(narrow, {{"dataset.train_samples", "98304", ""}});
  PredictOptions exact;
  exact.steady_state_shortcut = false;
  const PointResult quick = point_of(longer);
  const PointResult full = point_of(longer, exact);
  CHECK(quick.stats.simulated_iterations < full.stats.simulated_iterations / 2);
  CHECK(quick.epoch_seconds == full.epoch_seconds);
  // Another seed, other draws.
  CHECK(point_of(cluster("stragglers: {jitter: {spread: 0.03, seed: 8, steps: 4}}\n"))
            .epoch_seconds != a.epoch_seconds);
}

TEST_CASE("a NIC at half its rate slows the all-reduce, and one down is routed around") {
  // Bandwidth-bound: a large model's gradients over 400 Gb/s NICs.
  const std::string ring =
      "training: {strategy: ddp, optimizer: momentum, precision: amp_bf16, "
      "collective_algorithm: ring}\n";
  auto with = [&](const std::string& faults) {
    std::string text = kCluster;
    text.replace(text.find("training:"), text.find("sweep:") - text.find("training:"), ring);
    return point_of(load_scenario_from_string(text + faults, "faults.yaml", test::source_dir()));
  };
  const PointResult even = with("");
  const PointResult half = with("faults: {links: [{node: 1, nic: 3, bandwidth: 0.5}]}\n");
  const PointResult down = with("faults: {links: [{node: 1, nic: 3, down: true}]}\n");
  CHECK(half.communication_seconds > even.communication_seconds);
  CHECK(half.conditions.front() == "node 1's NIC 3 at 50%");
  CHECK(down.communication_seconds > even.communication_seconds);
  CHECK(down.conditions.front() == "node 1's NIC 3 down (routed around)");
  CHECK(down.ranks_simulated == "every rank");
}

TEST_CASE("a link fault changes the topology's routes, and a disconnecting one is refused") {
  const ScenarioSpec s = cluster("faults: {links: [{node: 1, nic: 0, down: true}]}\n");
  Topology t = Topology::build(s.machine, 2);
  const int nic = t.nic_link(1, 0);
  REQUIRE(nic >= 0);
  Topology faulty = Topology::build(s.machine, 2);
  apply_link_faults(s, faulty);
  // GPU 8 (node 1, rail 0) reaches node 0 through another NIC of its node.
  auto uses = [](const Path& p, int link) {
    return std::any_of(p.hops.begin(), p.hops.end(), [&](const Hop& h) { return h.link == link; });
  };
  CHECK(uses(t.path(8, 0), nic));
  CHECK_FALSE(uses(faulty.path(8, 0), nic));
  CHECK(faulty.gpus_connected());
  // A degraded link keeps its routes, however slow: only a link down is avoided.
  const ScenarioSpec slow = cluster("faults: {links: [{node: 1, nic: 0, bandwidth: 0.1}]}\n");
  Topology degraded = Topology::build(slow.machine, 2);
  apply_link_faults(slow, degraded);
  CHECK(uses(degraded.path(8, 0), nic));
  CHECK(degraded.path(8, 0).bottleneck.value() == Approx(0.1 * t.path(8, 0).bottleneck.value()));
  // A mirror transfer (the network's switches reducing) leaves through another NIC of the node.
  Topology mirrored = Topology::build(s.machine, 2);
  apply_link_faults(s, mirrored);
  CHECK(uses(t.mirror_path(8), nic));
  CHECK_FALSE(uses(mirrored.mirror_path(8), nic));
  // A leaf's uplink: the path between leaves runs at its rate.
  ScenarioSpec leaves = cluster();
  leaves.machine.topology.network->nodes_per_leaf = 1;
  leaves.conditions.links = {LinkFault{-1, -1, 1, 0.05}};  // 400 GB/s of 8 NICs -> 20
  Topology fabric = Topology::build(leaves.machine, 2);
  const double before = fabric.path(8, 0).bottleneck.value();
  Topology fabric_faulty = Topology::build(leaves.machine, 2);
  apply_link_faults(leaves, fabric_faulty);
  CHECK(uses(fabric_faulty.path(8, 0), fabric_faulty.leaf_uplink(1)));
  CHECK(fabric_faulty.path(8, 0).bottleneck.value() == Approx(0.05 * 8 * before));
  // Every NIC of node 1 down: node 1 is cut off.
  std::string all = "faults: {links: [";
  for (int i = 0; i < 8; ++i)
    all += fmt::format("{}{{node: 1, nic: {}, down: true}}", i ? ", " : "", i);
  const ScenarioSpec cut = cluster(all + "]}\n");
  Topology isolated = Topology::build(cut.machine, 2);
  CHECK_THROWS_WITH(apply_link_faults(cut, isolated),
                    Catch::Contains("leave some of the 16 GPUs unable to reach the others"));
}

TEST_CASE("stragglers and faults are checked against the machine") {
  auto error = [](const std::string& extra) {
    try {
      cluster(extra);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(error("stragglers: {gpus: [{gpu: 32, speed: 0.8}]}\n"),
             Catch::Contains("expected an integer from 0 to 31"));
  CHECK_THAT(error("stragglers: {gpus: [{gpu: 3, speed: 1.5}]}\n"), Catch::Contains("speed"));
  CHECK_THAT(error("stragglers: {jiter: {spread: 0.1}}\n"),
             Catch::Contains("did you mean 'jitter'"));
  CHECK_THAT(error("faults: {links: [{node: 1, nic: 8, down: true}]}\n"),
             Catch::Contains("expected an integer from 0 to 7"));
  CHECK_THAT(error("faults: {links: [{node: 1, nic: 2, down: true, bandwidth: 0.5}]}\n"),
             Catch::Contains("either a `bandwidth`"));
  CHECK_THAT(error("faults: {links: [{leaf: 0, bandwidth: 0.5}]}\n"),
             Catch::Contains("no leaf uplink"));
  CHECK_THAT(error("stragglers: {gpus: [{gpu: 3, speed: 0.8}, {gpu: 3, speed: 0.9}]}\n"),
             Catch::Contains("GPU 3 is listed twice"));
  CHECK_THAT(error("faults: {links: [{node: 1, nic: 2, down: true}, {node: 1, nic: 2, "
                   "bandwidth: 0.5}]}\n"),
             Catch::Contains("listed twice"));
  // Empty lists are no conditions (what --set stragglers.gpus=[] leaves).
  CHECK(error("stragglers: {gpus: [], nodes: []}\nfaults: {links: []}\n") == "no error");
  CHECK_FALSE(cluster("stragglers: {gpus: []}\n").conditions.any());
}

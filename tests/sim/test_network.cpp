// The fluid network against closed forms: one flow alone, flows sharing a link, a flow speeding
// up when its competitor ends, and max-min fairness across links of different capacity.
#include <cmath>

#include <catch2/catch.hpp>

#include "sim/engine/engine.h"
#include "sim/engine/fifo_server.h"
#include "sim/network/max_min_fair.h"

using namespace epochcast;
using namespace epochcast::sim;

namespace {

struct Net {
  Engine engine;
  MaxMinFairNetwork* network = nullptr;
  ResourceId id = 0;
  std::vector<FinishedTask> done;
  Net() {
    auto owned = std::make_unique<MaxMinFairNetwork>("net");
    network = owned.get();
    id = engine.add_resource(std::move(owned));
    engine.set_observer([this](const FinishedTask& t) { done.push_back(t); });
  }
  SimTime end_of(std::uint64_t tag) const {
    for (const FinishedTask& t : done) {
      if (t.tag == tag) return t.end;
    }
    return SimTime::max();
  }
};

constexpr double kGB = 1e9;
SimTime ns(double seconds) {
  return SimTime::from_ns(static_cast<std::int64_t>(std::ceil(seconds * 1e9)));
}

}  // namespace

TEST_CASE("one flow alone takes latency + bytes / bottleneck bandwidth") {
  Net n;
  std::uint32_t fast = n.network->add_link("fast", BytesPerSecond(50 * kGB));
  std::uint32_t slow = n.network->add_link("slow", BytesPerSecond(12 * kGB));
  const SimTime latency = SimTime::from_ns(1500);
  std::uint32_t route = n.network->add_route({fast, slow, fast}, latency);
  const std::int64_t bytes = 300'000'000;
  n.engine.add_task(n.id, bytes, 1, {}, route);
  n.engine.run();
  CHECK(n.end_of(1) == latency + ns(bytes / (12 * kGB)));
}

TEST_CASE("two flows through one link get half of it each") {
  Net n;
  std::uint32_t link = n.network->add_link("shared", BytesPerSecond(10 * kGB));
  std::uint32_t route = n.network->add_route({link}, SimTime());
  const std::int64_t bytes = 1'000'000'000;
  n.engine.add_task(n.id, bytes, 1, {}, route);
  n.engine.add_task(n.id, bytes, 2, {}, route);
  n.engine.run();
  CHECK(n.end_of(1) == ns(bytes / (5 * kGB)));
  CHECK(n.end_of(2) == ns(bytes / (5 * kGB)));
}

TEST_CASE("a flow's rate rises when its competitor finishes") {
  Net n;
  std::uint32_t link = n.network->add_link("shared", BytesPerSecond(10 * kGB));
  std::uint32_t route = n.network->add_route({link}, SimTime());
  const double small = 1e9, large = 3e9;
  n.engine.add_task(n.id, static_cast<std::int64_t>(small), 1, {}, route);
  n.engine.add_task(n.id, static_cast<std::int64_t>(large), 2, {}, route);
  n.engine.run();
  // Both at 5 GB/s until the small one ends; then the large one alone at 10 GB/s.
  double first = small / (5 * kGB);
  double second = first + (large - small) / (10 * kGB);
  CHECK(n.end_of(1) == ns(first));
  CHECK(static_cast<double>(n.end_of(2).ns()) == Approx(second * 1e9).margin(2));
}

TEST_CASE("max-min fairness: a flow limited elsewhere leaves its share to the others") {
  // A and B share link X (10 GB/s); B also crosses link Y (2 GB/s). B is held to 2 GB/s by Y,
  // so A gets the 8 GB/s of X that B cannot use.
  Net n;
  std::uint32_t x = n.network->add_link("x", BytesPerSecond(10 * kGB));
  std::uint32_t y = n.network->add_link("y", BytesPerSecond(2 * kGB));
  std::uint32_t a = n.network->add_route({x}, SimTime());
  std::uint32_t b = n.network->add_route({x, y}, SimTime());
  n.engine.add_task(n.id, 8'000'000'000, 1, {}, a);
  n.engine.add_task(n.id, 2'000'000'000, 2, {}, b);
  n.engine.run();
  CHECK(n.end_of(1) == ns(8e9 / (8 * kGB)));
  CHECK(n.end_of(2) == ns(2e9 / (2 * kGB)));
  CHECK(n.network->bytes_carried(x) == Approx(10e9));
}

TEST_CASE("a flow released later joins and splits the link from then on") {
  Net n;
  std::uint32_t link = n.network->add_link("l", BytesPerSecond(1 * kGB));
  std::uint32_t route = n.network->add_route({link}, SimTime());
  ResourceId cpu = n.engine.add_resource(std::make_unique<FifoServer>("cpu"));
  n.engine.add_task(n.id, 1'000'000'000, 1, {}, route);  // alone for 0.5 s, then shares
  TaskHandle wait = n.engine.add_task(cpu, 500'000'000, 9);
  TaskHandle after[] = {wait};
  n.engine.add_task(n.id, 250'000'000, 2, after, route);
  n.engine.run();
  // Flow 1: 0.5 GB alone, then 0.25 GB at 0.5 GB/s with flow 2 (0.5 s), then 0.25 GB alone.
  CHECK(n.end_of(2) == SimTime::from_ns(1'000'000'000));
  CHECK(n.end_of(1) == SimTime::from_ns(1'250'000'000));
}

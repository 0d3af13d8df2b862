// The fluid network against closed forms: one flow alone, flows sharing a link, a flow speeding
// up when its competitor ends, and max-min fairness across links of different capacity; and the
// incremental allocation against a whole-network refill on random networks.
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "sim/engine/delay_server.h"
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

namespace {

// A reference for the incremental allocation: the fluid model simulated in double seconds,
// every rate recomputed for the whole network at every arrival and end by textbook progressive
// filling (Bertsekas & Gallager, Data Networks, 6.5.2).
struct ReferenceFlow {
  double arrival = 0;
  double bytes = 0;
  std::vector<std::uint32_t> links;
};

std::vector<double> reference_finish_times(const std::vector<double>& capacity,
                                           const std::vector<ReferenceFlow>& flows) {
  const std::size_t n = flows.size();
  std::vector<double> remaining(n), finish(n, -1), rate(n, 0);
  for (std::size_t i = 0; i < n; ++i)
    remaining[i] = flows[i].bytes;
  double now = 0;
  for (;;) {
    std::vector<std::size_t> active;
    for (std::size_t i = 0; i < n; ++i) {
      if (finish[i] < 0 && flows[i].arrival <= now) active.push_back(i);
    }
    // Progressive filling over the active flows.
    std::vector<double> left = capacity;
    std::vector<bool> frozen(n, false);
    std::size_t unfrozen_flows = active.size();
    while (unfrozen_flows > 0) {
      double share = std::numeric_limits<double>::infinity();
      std::size_t bottleneck = 0;
      for (std::size_t l = 0; l < capacity.size(); ++l) {
        int users = 0;
        for (std::size_t i : active) {
          if (frozen[i]) continue;
          users += static_cast<int>(std::count(flows[i].links.begin(), flows[i].links.end(), l));
        }
        if (users > 0 && left[l] / users < share) {
          share = left[l] / users;
          bottleneck = l;
        }
      }
      for (std::size_t i : active) {
        const auto& route = flows[i].links;
        if (frozen[i] || std::find(route.begin(), route.end(), bottleneck) == route.end()) continue;
        frozen[i] = true;
        rate[i] = share;
        --unfrozen_flows;
        for (std::uint32_t l : route)
          left[l] = std::max(0.0, left[l] - share);
      }
    }
    // The next arrival or end.
    double next = std::numeric_limits<double>::infinity();
    for (std::size_t i = 0; i < n; ++i) {
      if (finish[i] >= 0) continue;
      if (flows[i].arrival > now) next = std::min(next, flows[i].arrival);
    }
    for (std::size_t i : active)
      next = std::min(next, now + remaining[i] / rate[i]);
    if (std::isinf(next)) return finish;
    for (std::size_t i : active) {
      remaining[i] -= rate[i] * (next - now);
      if (remaining[i] <= 1e-6 * flows[i].bytes) finish[i] = next;
    }
    now = next;
  }
}

}  // namespace

TEST_CASE("the incremental max-min allocation finishes flows when a whole-network refill does") {
  // Random networks where flows share links in every pattern: alone, one bottleneck, flows
  // limited elsewhere, links crossed twice, arrivals while others run, many ending at once.
  for (std::uint32_t seed = 1; seed <= 30; ++seed) {
    std::mt19937 random(seed);
    auto uniform = [&](int lo, int hi) {
      return std::uniform_int_distribution<int>(lo, hi)(random);
    };
    Net n;
    ResourceId wait = n.engine.add_resource(std::make_unique<DelayServer>("arrivals"));
    std::vector<double> capacity;
    const int links = uniform(1, 12);
    for (int l = 0; l < links; ++l) {
      capacity.push_back(uniform(1, 8) * 1e9);
      n.network->add_link(fmt::format("l{}", l), BytesPerSecond(capacity.back()));
    }
    std::vector<ReferenceFlow> flows;
    const int count = uniform(1, 60);
    for (int f = 0; f < count; ++f) {
      ReferenceFlow flow;
      flow.arrival = uniform(0, 20) * 0.05;  // whole 50 ms steps: many arrive together
      flow.bytes = uniform(1, 40) * 25e6;
      const int hops = uniform(1, 4);
      for (int h = 0; h < hops; ++h)
        flow.links.push_back(static_cast<std::uint32_t>(uniform(0, links - 1)));
      const std::uint32_t route = n.network->add_route(flow.links, SimTime());
      TaskHandle arrive = n.engine.add_task(
          wait, static_cast<std::int64_t>(std::llround(flow.arrival * 1e9)), 1000 + f);
      TaskHandle after[] = {arrive};
      n.engine.add_task(n.id, static_cast<std::int64_t>(flow.bytes), f, after, route);
      flows.push_back(flow);
    }
    n.engine.run();
    const std::vector<double> expected = reference_finish_times(capacity, flows);
    for (int f = 0; f < count; ++f) {
      INFO("seed " << seed << ", flow " << f);
      // Whole nanoseconds, rounded up at each change of rate.
      CHECK(n.end_of(static_cast<std::uint64_t>(f)).seconds() ==
            Approx(expected[static_cast<std::size_t>(f)]).margin(2e-9 * count));
    }
    CHECK(n.network->active_flows() == 0);
  }
}

TEST_CASE("a link its flows can never fill is left out of the allocation, which stays the same") {
  // Four 10 GB/s NIC links into a 40 GB/s uplink, out through four more: however the flows come
  // and go, the uplink carries at most what the NICs feed it.
  auto finishes = [](bool mark) {
    Net n;
    std::vector<std::uint32_t> in, out;
    for (int i = 0; i < 4; ++i) {
      in.push_back(n.network->add_link(fmt::format("nic{}", i), BytesPerSecond(10 * kGB)));
      out.push_back(n.network->add_link(fmt::format("down{}", i), BytesPerSecond(10 * kGB)));
    }
    const std::uint32_t uplink = n.network->add_link("uplink", BytesPerSecond(40 * kGB));
    if (mark) n.network->set_never_binding(uplink);
    ResourceId delay = n.engine.add_resource(std::make_unique<DelayServer>("delay"));
    for (int f = 0; f < 12; ++f) {
      // Flows 0-3 all into down0 (which binds), the others spread, arriving 0.1 ms apart.
      const auto i = static_cast<std::size_t>(f % 4);
      const auto o = static_cast<std::size_t>(f < 4 ? 0 : (f + 1) % 4);
      const std::uint32_t route = n.network->add_route({in[i], uplink, out[o]}, SimTime{});
      TaskHandle wait = n.engine.add_task(delay, 100'000 * f, 1000 + static_cast<std::uint64_t>(f));
      n.engine.add_task(n.id, 50'000'000 + 7'000'000 * f, static_cast<std::uint64_t>(f), {&wait, 1},
                        route);
    }
    n.engine.run();
    std::vector<SimTime> ends;
    for (int f = 0; f < 12; ++f)
      ends.push_back(n.end_of(static_cast<std::uint64_t>(f)));
    return std::pair{ends, n.network->bytes_carried(uplink)};
  };
  const auto [kept, carried_kept] = finishes(false);
  const auto [left_out, carried_left_out] = finishes(true);
  for (std::size_t f = 0; f < kept.size(); ++f) {
    INFO("flow " << f);
    CHECK(std::abs((left_out[f] - kept[f]).ns()) <= 1);
  }
  // Its rate is still followed, for statistics.
  CHECK(carried_left_out == Approx(carried_kept).epsilon(1e-9));

  Net n;
  const std::uint32_t a = n.network->add_link("a", BytesPerSecond(kGB));
  const std::uint32_t b = n.network->add_link("b", BytesPerSecond(kGB));
  n.network->set_never_binding(b);
  CHECK_THROWS_AS(n.network->add_route({b}, SimTime{}), std::logic_error);
  n.network->add_route({a, b}, SimTime{});
  CHECK_THROWS_AS(n.network->set_never_binding(a), std::logic_error);
}

// The engine's contract: dependency release, FIFO order, (time, sequence) ordering, exact
// integer time, and a snapshot/shift that reproduces a run exactly.
#include <algorithm>
#include <array>
#include <deque>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "sim/engine/delay_server.h"
#include "sim/engine/engine.h"
#include "sim/engine/fifo_server.h"
#include "sim/engine/monotone_queue.h"
#include "sim/engine/ring_queue.h"
#include "sim/network/max_min_fair.h"
#include "sim/predict/epoch_simulator.h"

using namespace epochcast::sim;

namespace {

struct Recorder {
  std::vector<FinishedTask> finished;
  void attach(Engine& engine) {
    engine.set_observer([this](const FinishedTask& t) { finished.push_back(t); });
  }
  const FinishedTask& by_tag(std::uint64_t tag) const {
    for (const FinishedTask& t : finished) {
      if (t.tag == tag) return t;
    }
    FAIL("no task with tag " << tag);
    return finished.front();
  }
};

}  // namespace

TEST_CASE("a FIFO server runs tasks back to back in arrival order") {
  Engine engine;
  Recorder rec;
  rec.attach(engine);
  ResourceId cpu = engine.add_resource(std::make_unique<FifoServer>("cpu"));
  engine.add_task(cpu, 300, 1);
  engine.add_task(cpu, 200, 2);
  engine.add_task(cpu, 0, 3);
  engine.run();
  CHECK(rec.by_tag(1).end.ns() == 300);
  CHECK(rec.by_tag(2).start.ns() == 300);
  CHECK(rec.by_tag(2).end.ns() == 500);
  CHECK(rec.by_tag(3).end.ns() == 500);
}

TEST_CASE("a FIFO server's queue keeps arrival order as it wraps and grows") {
  // Against std::deque, through growth from empty, wrapping at every capacity, and emptying.
  RingQueue<int> ring;
  std::deque<int> reference;
  CHECK(ring.empty());
  int next = 0;
  for (int round = 0; round < 200; ++round) {
    const int pushes = round % 7 + 1, pops = round % 5 + (round % 11 == 0 ? 9 : 0);
    for (int i = 0; i < pushes; ++i) {
      ring.push_back(next);
      reference.push_back(next++);
    }
    for (int i = 0; i < pops && !reference.empty(); ++i) {
      REQUIRE(ring.front() == reference.front());
      ring.pop_front();
      reference.pop_front();
    }
    REQUIRE(ring.size() == reference.size());
    for (std::size_t i = 0; i < reference.size(); ++i)
      REQUIRE(ring[i] == reference[i]);
  }
  while (!reference.empty()) {
    REQUIRE(ring.front() == reference.front());
    ring.pop_front();
    reference.pop_front();
  }
  CHECK(ring.empty());
  CHECK_THROWS_AS(ring.front(), std::logic_error);
  CHECK_THROWS_AS(RingQueue<int>().pop_front(), std::logic_error);
}

TEST_CASE("an idle resource completes never, and no sum of instants reaches never") {
  // The engine reads SimTime::never() as "nothing to schedule", so a real instant must never
  // equal it.
  CHECK(FifoServer("cpu").next_completion() == SimTime::never());
  CHECK(DelayServer("wire").next_completion() == SimTime::never());
  CHECK(MaxMinFairNetwork("network").next_completion() == SimTime::never());
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  CHECK((SimTime::from_ns(kMax - 6) + SimTime::from_ns(5)).ns() == kMax - 1);
  CHECK_THROWS_AS(SimTime::from_ns(kMax - 5) + SimTime::from_ns(5), TimeOverflow);
  CHECK_THROWS_AS(SimTime::from_ns(kMax - 5) + SimTime::from_ns(6), TimeOverflow);
}

TEST_CASE("a monotone queue pops what a sorted reference holds, stale items dropped, shifted") {
  // Against a multiset of (time, id): random pushes at or after the last instant popped
  // (bursts at one instant, near ones and far ones, negative times included), pops up to random
  // instants, items held marked stale (the earliest among them, often) and dropped from the
  // front or all at once, and shifts both ways, the first before anything was popped.
  struct Item {
    SimTime time;
    int id = 0;
  };
  MonotoneQueue<Item> queue;
  std::multimap<std::int64_t, int> reference;
  std::vector<bool> stale_ids;
  std::mt19937_64 random(7);
  std::int64_t now = -5'000;
  auto stale = [&](const Item& item) { return stale_ids[static_cast<std::size_t>(item.id)]; };
  auto stale_entry = [&](const auto& entry) {
    return stale_ids[static_cast<std::size_t>(entry.second)];
  };
  auto drop_stale_front = [&] {
    while (!reference.empty() && stale_entry(*reference.begin()))
      reference.erase(reference.begin());
  };
  auto check_front = [&] {
    if (reference.empty()) return;
    REQUIRE(!queue.empty());
    REQUIRE(queue.min_time().ns() == reference.begin()->first);
  };
  auto shift = [&](std::int64_t delta) {
    queue.shift(SimTime::from_ns(delta));
    std::multimap<std::int64_t, int> moved;
    for (const auto& [time, id] : reference)
      moved.emplace(time + delta, id);
    reference = std::move(moved);
    now += delta;
  };
  auto push = [&](std::int64_t time) {
    const int id = static_cast<int>(stale_ids.size());
    stale_ids.push_back(false);
    queue.push({SimTime::from_ns(time), id});
    reference.emplace(time, id);
  };
  for (std::int64_t ahead : {0, 3, 70, 4'000})
    push(now + ahead);
  shift(-2'500);  // before the first pop
  check_front();
  for (int round = 0; round < 3'000; ++round) {
    const int pushes = static_cast<int>(random() % 6);
    for (int p = 0; p < pushes; ++p) {
      push(now + std::array<std::int64_t, 4>{
                     0, static_cast<std::int64_t>(random() % 8),
                     static_cast<std::int64_t>(random() % 5'000),
                     static_cast<std::int64_t>(random() % 4'000'000'000)}[random() % 4]);
    }
    switch (random() % 5) {
      case 0: {  // mark items held stale, the earliest one half the time; drop from the front
        for (int k = 0; k < 3 && !reference.empty(); ++k) {
          auto entry = reference.begin();
          if (random() % 2 == 0) {
            std::advance(entry, static_cast<std::ptrdiff_t>(random() % reference.size()));
          }
          stale_ids[static_cast<std::size_t>(entry->second)] = true;
        }
        queue.drop_stale_front(stale);
        drop_stale_front();
        check_front();
        break;
      }
      case 1: {  // drop every stale item; the earliest time is then right without more
        queue.erase_if(stale);
        std::erase_if(reference, stale_entry);
        REQUIRE(queue.size() == reference.size());
        check_front();
        break;
      }
      case 2: {  // a shift, forward or back, of everything not yet popped
        if (random() % 8 == 0) shift(static_cast<std::int64_t>(random() % 10'000) - 3'000);
        break;
      }
      default: {  // pop up to the earliest item, or a little past it
        queue.drop_stale_front(stale);
        drop_stale_front();
        check_front();
        if (reference.empty()) break;
        now = queue.min_time().ns() + static_cast<std::int64_t>(random() % 3) * 1'000;
        std::vector<std::pair<std::int64_t, int>> popped;
        // Stale items popped are ignored, as the network ignores them.
        queue.pop_until(SimTime::from_ns(now), [&](const Item& item) {
          if (!stale(item)) popped.emplace_back(item.time.ns(), item.id);
        });
        std::vector<std::pair<std::int64_t, int>> expected;
        while (!reference.empty() && reference.begin()->first <= now) {
          if (!stale_entry(*reference.begin())) expected.emplace_back(*reference.begin());
          reference.erase(reference.begin());
        }
        std::sort(popped.begin(), popped.end());
        std::sort(expected.begin(), expected.end());
        REQUIRE(popped == expected);
        break;
      }
    }
  }
  // Pushing before the last instant popped is a programming error.
  if (!queue.empty()) {
    queue.pop_until(queue.min_time(), [](const Item&) {});
  }
  CHECK_THROWS_AS(queue.push({SimTime::from_ns(now - 1'000'000), 0}), std::logic_error);
  CHECK_THROWS_AS(MonotoneQueue<Item>().min_time(), std::logic_error);

  // Instants at both ends of SimTime's range keep their order.
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
  MonotoneQueue<Item> extremes;
  for (std::int64_t time : {kMax - 1, kMin, -1L, kMin + 1, 0L, kMax - 2})
    extremes.push({SimTime::from_ns(time), 0});
  std::vector<std::int64_t> order;
  while (!extremes.empty()) {
    extremes.pop_until(extremes.min_time(),
                       [&](const Item& item) { order.push_back(item.time.ns()); });
  }
  CHECK(order == std::vector<std::int64_t>{kMin, kMin + 1, -1, 0, kMax - 2, kMax - 1});
}

TEST_CASE("a FIFO server slowed mid-task finishes the rest of its work at the new speed") {
  Engine engine;
  ResourceId gpu = engine.add_resource(std::make_unique<FifoServer>("gpu"));
  ResourceId other = engine.add_resource(std::make_unique<FifoServer>("other"));
  std::vector<FinishedTask> finished;
  // When the other server's task ends at 100 ns, the GPU's goes to half speed; at 300 back.
  engine.set_observer([&](const FinishedTask& t) {
    finished.push_back(t);
    if (t.tag == 10 || t.tag == 11) {
      auto& server = static_cast<FifoServer&>(engine.resource_for_change(gpu));
      server.set_speed(engine.now(), t.tag == 10 ? 0.5 : 1.0);
      engine.changed(gpu);
    }
  });
  engine.add_task(gpu, 400, 1);
  engine.add_task(gpu, 100, 2);
  engine.add_task(other, 100, 10);
  engine.add_task(other, 200, 11);
  engine.run();
  auto end = [&](std::uint64_t tag) {
    for (const FinishedTask& t : finished) {
      if (t.tag == tag) return t.end.ns();
    }
    return std::int64_t{-1};
  };
  // 100 ns of work at full speed, 100 more in the 200 ns at half, the last 200 at full.
  CHECK(end(1) == 500);
  CHECK(end(2) == 600);
}

TEST_CASE("a task is released when its last dependency finishes") {
  Engine engine;
  Recorder rec;
  rec.attach(engine);
  ResourceId cpu = engine.add_resource(std::make_unique<FifoServer>("cpu"));
  ResourceId gpu = engine.add_resource(std::make_unique<FifoServer>("gpu"));
  TaskHandle a = engine.add_task(cpu, 100, 1);
  TaskHandle b = engine.add_task(gpu, 250, 2);
  TaskHandle deps[] = {a, b};
  engine.add_task(cpu, 10, 3, deps);
  engine.run();
  CHECK(rec.by_tag(3).ready.ns() == 250);
  CHECK(rec.by_tag(3).end.ns() == 260);
  CHECK(engine.finished(a));
}

TEST_CASE("a dependency that already finished counts as satisfied") {
  Engine engine;
  ResourceId cpu = engine.add_resource(std::make_unique<FifoServer>("cpu"));
  TaskHandle a = engine.add_task(cpu, 5, 1);
  engine.run();
  TaskHandle deps[] = {a};
  engine.add_task(cpu, 7, 2, deps);
  engine.run();
  CHECK(engine.now().ns() == 12);
}

TEST_CASE("recycled slots never confuse an old handle with a new task") {
  Engine engine;
  ResourceId cpu = engine.add_resource(std::make_unique<FifoServer>("cpu"));
  TaskHandle old = engine.add_task(cpu, 5, 1);
  engine.run();
  TaskHandle reused = engine.add_task(cpu, 5, 2);
  CHECK(reused.index == old.index);
  CHECK(engine.finished(old));
  CHECK_FALSE(engine.finished(reused));
}

TEST_CASE("simultaneous completions are processed in the order they were scheduled") {
  Engine engine;
  std::vector<std::uint64_t> order;
  engine.set_observer([&](const FinishedTask& t) { order.push_back(t.tag); });
  ResourceId a = engine.add_resource(std::make_unique<FifoServer>("a"));
  ResourceId b = engine.add_resource(std::make_unique<FifoServer>("b"));
  engine.add_task(b, 100, 20);
  engine.add_task(a, 100, 10);
  engine.run();
  CHECK(order == std::vector<std::uint64_t>{20, 10});
}

TEST_CASE("a delay server overlaps its tasks") {
  Engine engine;
  Recorder rec;
  rec.attach(engine);
  ResourceId link = engine.add_resource(std::make_unique<DelayServer>("latency"));
  engine.add_task(link, 1000, 1);
  engine.add_task(link, 400, 2);
  engine.run();
  CHECK(rec.by_tag(1).end.ns() == 1000);
  CHECK(rec.by_tag(2).end.ns() == 400);
}

TEST_CASE("events a resource left behind, rescheduled, do not pile up") {
  // Each task finishes before the one added before it, so every addition moves the delay
  // server's next completion earlier and leaves its previous event stale: 20,000 of them, where
  // a loader of 511 workers left 385,000 events in the heap over 4,122 resources.
  Engine engine;
  Recorder rec;
  rec.attach(engine);
  ResourceId delays = engine.add_resource(std::make_unique<DelayServer>("delays"));
  constexpr int kTasks = 20000;
  for (int i = 0; i < kTasks; ++i)
    engine.add_task(delays, kTasks - i, static_cast<std::uint64_t>(i));
  CHECK(engine.events_held() <= 2 * 1 + 1024);  // one live event
  engine.run();
  REQUIRE(rec.finished.size() == kTasks);
  for (std::size_t i = 0; i < rec.finished.size(); ++i) {  // earliest end first
    CHECK(rec.finished[i].end.ns() == static_cast<std::int64_t>(i) + 1);
    CHECK(rec.finished[i].tag == kTasks - 1 - i);
  }
  CHECK(engine.events_processed() == kTasks);
}

TEST_CASE("dropping stale events keeps every live one, in (time, sequence) order") {
  // Fifty resources hold an event each, in pairs due at the same instant (the earlier scheduled
  // goes first), while one more is rescheduled 3,000 times: the purges rebuild a heap of 51.
  Engine engine;
  Recorder rec;
  rec.attach(engine);
  std::vector<std::pair<std::int64_t, std::uint64_t>> expected;  // (end, tag)
  for (int i = 0; i < 50; ++i) {
    ResourceId r = engine.add_resource(std::make_unique<DelayServer>("r" + std::to_string(i)));
    const std::int64_t end = 1000 + 2 * (i / 2);
    engine.add_task(r, end, static_cast<std::uint64_t>(i));
    expected.emplace_back(end, i);
  }
  ResourceId churn = engine.add_resource(std::make_unique<DelayServer>("churn"));
  constexpr int kChurn = 3000;
  for (int k = 0; k < kChurn; ++k) {  // each ends before the last: odd instants, never a tie
    const std::int64_t end = 2 * (kChurn - k) + 1;
    engine.add_task(churn, end, static_cast<std::uint64_t>(1000 + k));
    expected.emplace_back(end, 1000 + k);
  }
  CHECK(engine.events_held() <= 2 * 51 + 1024);
  std::sort(expected.begin(), expected.end());
  engine.run();
  REQUIRE(rec.finished.size() == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    INFO("finished #" << i);
    CHECK(rec.finished[i].end.ns() == expected[i].first);
    CHECK(rec.finished[i].tag == expected[i].second);
  }
}

TEST_CASE("an observer can stop the run and extend the graph") {
  Engine engine;
  ResourceId cpu = engine.add_resource(std::make_unique<FifoServer>("cpu"));
  int generated = 0;
  engine.set_observer([&](const FinishedTask& t) {
    if (generated < 3) {
      ++generated;
      engine.add_task(cpu, 10, t.tag + 1);
    }
    if (t.tag == 2) engine.request_stop();
  });
  engine.add_task(cpu, 10, 0);
  CHECK(engine.run());  // stopped at tag 2
  CHECK(engine.now().ns() == 30);
  CHECK_FALSE(engine.run());
  CHECK(engine.now().ns() == 40);
}

TEST_CASE("time converts from seconds by rounding to the nanosecond") {
  CHECK(SimTime::from_seconds(epochcast::Seconds(1.5e-6)).ns() == 1500);
  CHECK(SimTime::from_seconds(epochcast::Seconds(2.4e-9)).ns() == 2);
  CHECK(SimTime::from_seconds(epochcast::Seconds(2.6e-9)).ns() == 3);
}

// A periodic pipeline driven the way the epoch simulator drives the engine: iteration i has a
// load on one worker and a compute that needs it; tasks are generated one iteration ahead.
// Tags are 100 * iteration + role.
class PipelineDriver {
 public:
  PipelineDriver(int iterations, int skip_periods) : iterations_(iterations), skip_(skip_periods) {
    worker_ = engine_.add_resource(std::make_unique<FifoServer>("worker"));
    gpu_ = engine_.add_resource(std::make_unique<FifoServer>("gpu"));
    engine_.set_observer([this](const FinishedTask& t) {
      if (t.tag % 100 == 2) {
        boundary_ = t.tag / 100 + 1;
        engine_.request_stop();
      }
    });
  }

  SimTime run() {
    build(0);
    build(1);
    std::vector<std::int64_t> previous;
    SimTime previous_time;
    while (engine_.run()) {
      if (boundary_ + 1 < static_cast<std::uint64_t>(iterations_)) build(boundary_ + 1);
      auto relative = [this](std::uint64_t tag) {
        return static_cast<std::int64_t>(tag) - static_cast<std::int64_t>(100 * boundary_);
      };
      std::vector<std::int64_t> snap = engine_.snapshot(relative);
      if (skip_ > 0 && snap == previous) {
        SimTime period = engine_.now() - previous_time;
        std::uint64_t n = static_cast<std::uint64_t>(skip_);
        engine_.shift(period * skip_, [n](std::uint64_t tag) { return tag + 100 * n; });
        boundary_ += n;
        skip_ = 0;
        snapshots_equal_ = true;
      }
      previous = snap;
      previous_time = engine_.now();
    }
    return engine_.now();
  }
  bool snapshots_equal() const { return snapshots_equal_; }

 private:
  void build(std::uint64_t iteration) {
    TaskHandle load = engine_.add_task(worker_, 70, 100 * iteration + 1);
    TaskHandle deps[] = {load, last_compute_};
    last_compute_ = engine_.add_task(gpu_, 50, 100 * iteration + 2, deps);
  }

  Engine engine_;
  ResourceId worker_ = 0, gpu_ = 0;
  TaskHandle last_compute_{};
  std::uint64_t boundary_ = 0;
  int iterations_;
  int skip_;
  bool snapshots_equal_ = false;
};

TEST_CASE("equal states give equal snapshots, and shifting reproduces the run exactly") {
  // The worker (70 per load) is the bottleneck; computes take 50 after their load.
  const int iterations = 10;
  const std::int64_t expected_end = 70 * iterations + 50;
  CHECK(PipelineDriver(iterations, 0).run().ns() == expected_end);
  PipelineDriver skipping(iterations, 5);
  CHECK(skipping.run().ns() == expected_end);
  CHECK(skipping.snapshots_equal());
}

namespace {

// An epoch of `iterations` iterations, each one `plan` (the last included), a sample apiece.
EpochInput every_iteration(const IterationPlan& plan, std::int64_t iterations) {
  EpochInput input;
  input.train.plans = {plan};
  input.train.cycle = {0};
  input.train.last = plan;
  input.train.iterations = iterations;
  input.train.full_batch = input.train.last_batch = 1;
  return input;
}

}  // namespace

TEST_CASE("an iteration plan of more than a million ops is simulated, not refused") {
  // Tags once held an op in 20 bits, so plans beyond ~1.04 M ops (every rank of a large
  // cluster) were refused; the field now widens with the plan.
  constexpr std::int64_t kOps = (std::int64_t{1} << 20) + 10;
  IterationPlan plan;
  plan.samples = 1;
  for (std::int64_t i = 0; i < kOps; ++i) {
    PlanOp op;
    op.lane = Lane{LaneKind::cpu, 0};
    op.work = 1;
    plan.add(op);
  }
  const EpochInput input = every_iteration(plan, 2);
  EpochOptions exact;
  exact.steady_state_shortcut = false;
  EpochSimulator simulator(input, exact);
  const EpochStats stats = simulator.run();
  CHECK(stats.epoch.ns() == 2 * kOps);  // two iterations of back-to-back 1 ns ops
}

TEST_CASE("an iteration with a GPU op that waits for no CPU op is added at the boundary") {
  // Iteration g+1 is added only once a CPU thread finishes g, unless some op of g+1 could start
  // earlier: here a kernel with no dependency but its stream's order. Each iteration: the main
  // thread 10 ns, the kernel 100 ns, then a 10 ns sync after the kernel.
  for (bool led_by_cpu : {false, true}) {
    IterationPlan plan;
    plan.samples = 1;
    PlanOp step;
    step.lane = Lane{LaneKind::cpu, 0};
    step.work = 10;
    const std::int32_t first = plan.add(step, "step");
    PlanOp kernel;
    kernel.lane = Lane{LaneKind::compute, 0};
    kernel.work = 100;
    if (led_by_cpu) kernel.deps = {first};
    const std::int32_t ran = plan.add(kernel, "kernel");
    PlanOp sync = step;
    sync.deps = {ran};
    plan.add(sync, "sync");
    const EpochInput input = every_iteration(plan, 3);
    EpochOptions exact;
    exact.steady_state_shortcut = false;
    EpochSimulator simulator(input, exact);
    // Added at the boundary, the next kernel follows the last at once: 3 kernels, then a sync.
    // Led by the CPU thread, every iteration is step, kernel, sync.
    const std::int64_t expected = led_by_cpu ? 3 * (10 + 100 + 10) : 3 * 100 + 10;
    CHECK(simulator.run().epoch.ns() == expected);
  }
}

TEST_CASE(
    "a rank whose thread runs ahead starts the next iteration no sooner than rank 0 starts this "
    "one") {
  // Two ranks and no collective (a validation pass): rank 0's kernel takes 1000 ns, rank 1's
  // 100. Rank 1 finishes each iteration long before rank 0; the next iteration is still added
  // only at rank 0's boundary, so rank 1 stays at most one iteration ahead (its loader keeps
  // 4 batches ahead, as it would have to) and rank 0's steps decide the epoch: 12 x 1020 ns.
  IterationPlan plan;
  plan.samples = 2;
  for (int rank = 0; rank < 2; ++rank) {
    PlanOp fetch;
    fetch.lane = Lane{LaneKind::cpu, rank};
    fetch.work = 10;
    fetch.consumes_loader = rank;
    const std::int32_t fetched = plan.add(fetch, "fetch");
    PlanOp kernel;
    kernel.lane = Lane{LaneKind::compute, rank};
    kernel.work = rank == 0 ? 1000 : 100;
    kernel.deps = {fetched};
    const std::int32_t ran = plan.add(kernel, "kernel");
    PlanOp sync = fetch;
    sync.consumes_loader = -1;
    sync.deps = {ran};
    plan.add(sync, "sync");
  }
  EpochInput input = every_iteration(plan, 12);
  input.loader.workers = 2;
  input.loader.prefetch_factor = 2;
  input.loaders = 2;
  for (bool shortcut : {false, true}) {
    EpochOptions options;
    options.steady_state_shortcut = shortcut;
    EpochSimulator simulator(input, options);
    CHECK(simulator.run().epoch.ns() == 12 * (10 + 1000 + 10));
  }
}

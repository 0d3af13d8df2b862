// The epoch driver: lazy instantiation of iteration plans, the data loader, statistics, and
// exact steady-state skipping.
#include "sim/predict/epoch_simulator.h"

#include <algorithm>
#include <deque>
#include <map>
#include <stdexcept>

#include <fmt/format.h>

#include "sim/engine/delay_server.h"
#include "sim/engine/engine.h"
#include "sim/engine/fifo_server.h"

namespace epochcast::sim {

SimTime EpochStats::gpu_busy_total() const {
  SimTime total;
  for (SimTime t : gpu_busy)
    total += t;
  return total;
}

EpochStats& EpochStats::operator+=(const EpochStats& other) {
  epoch += other.epoch;
  for (std::size_t c = 0; c < kCategoryCount; ++c) {
    gpu_busy[c] += other.gpu_busy[c];
    gpu_idle[c] += other.gpu_idle[c];
    cpu_busy[c] += other.cpu_busy[c];
  }
  gpu_idle_other += other.gpu_idle_other;
  kernels += other.kernels;
  iterations += other.iterations;
  simulated_iterations += other.simulated_iterations;
  simulated_tasks += other.simulated_tasks;
  return *this;
}

namespace {

// Counters accumulated between two boundaries, scaled by a number of skipped periods.
EpochStats period_times(const EpochStats& now, const EpochStats& then, std::int64_t periods) {
  EpochStats d;
  for (std::size_t c = 0; c < kCategoryCount; ++c) {
    d.gpu_busy[c] = (now.gpu_busy[c] - then.gpu_busy[c]) * periods;
    d.gpu_idle[c] = (now.gpu_idle[c] - then.gpu_idle[c]) * periods;
    d.cpu_busy[c] = (now.cpu_busy[c] - then.cpu_busy[c]) * periods;
  }
  d.gpu_idle_other = (now.gpu_idle_other - then.gpu_idle_other) * periods;
  d.kernels = (now.kernels - then.kernels) * periods;
  return d;
}

// Which activity of the host a GPU idle interval is charged to.
Category idle_cause(Category host_activity) {
  switch (host_activity) {
    case Category::data:
    case Category::h2d:
    case Category::communication:
      return host_activity;
    default:
      return Category::host;
  }
}

constexpr int kOpBits = 20;
constexpr std::uint64_t kOpMask = (std::uint64_t{1} << kOpBits) - 1;
constexpr std::uint64_t kLoaderOp = kOpMask;  // tags loader tasks

std::uint64_t make_tag(std::int64_t iteration, std::uint64_t op) {
  return (static_cast<std::uint64_t>(iteration) << kOpBits) | op;
}
std::int64_t tag_iteration(std::uint64_t tag) {
  return static_cast<std::int64_t>(tag >> kOpBits);
}
std::uint64_t tag_op(std::uint64_t tag) {
  return tag & kOpMask;
}

struct PlanIndex {
  std::int32_t boundary_op = -1;  // the first op of the main CPU thread
  std::int32_t consume_op = -1;
};

PlanIndex index_plan(const IterationPlan& plan) {
  PlanIndex index;
  for (std::size_t i = 0; i < plan.ops.size(); ++i) {
    const PlanOp& op = plan.ops[i];
    if (index.boundary_op < 0 && op.lane == Lane{LaneKind::cpu, 0}) {
      index.boundary_op = static_cast<std::int32_t>(i);
    }
    if (op.consumes_batch) index.consume_op = static_cast<std::int32_t>(i);
  }
  if (index.boundary_op < 0) throw std::logic_error("an iteration plan without a main-thread op");
  if (plan.ops.size() >= kLoaderOp) throw std::logic_error("an iteration plan with too many ops");
  return index;
}

std::string lane_name(const Lane& lane) {
  switch (lane.kind) {
    case LaneKind::cpu:
      return lane.index == 0 ? "CPU main thread" : fmt::format("CPU thread {}", lane.index);
    case LaneKind::compute:
      return fmt::format("GPU {} compute stream", lane.index);
    case LaneKind::copy:
      return fmt::format("GPU {} copy engine", lane.index);
    case LaneKind::comm:
      return fmt::format("GPU {} communication stream", lane.index);
  }
  return "lane";
}

}  // namespace

struct EpochSimulator::Impl {
  Impl(const EpochInput& in, const EpochOptions& options, std::vector<TraceEvent>& events)
      : input(in), opt(options), trace(events) {
    total_iterations = in.train.iterations + in.validation.iterations;
    train_full = index_plan(in.train.full);
    train_last = index_plan(in.train.last);
    if (in.validation.iterations > 0) {
      val_full = index_plan(in.validation.full);
      val_last = index_plan(in.validation.last);
    }
    engine.set_observer([this](const FinishedTask& t) { observe(t); });
  }

  const EpochInput& input;
  EpochOptions opt;
  std::vector<TraceEvent>& trace;
  Engine engine;
  std::int64_t total_iterations = 0;
  PlanIndex train_full, train_last, val_full, val_last;

  struct ResourceInfo {
    Lane lane;
    bool is_lane = false;  // false for loader workers
  };
  std::map<Lane, ResourceId> lanes;
  std::vector<ResourceInfo> resources;
  std::vector<ResourceId> train_workers, validation_workers;
  std::map<Lane, TaskHandle> lane_last;
  std::map<int, std::deque<TaskHandle>> launch_queue;  // per GPU: kernels launched, oldest first
  std::map<std::int64_t, TaskHandle> loader_tasks;     // by batch (= iteration), not yet consumed

  EpochStats stats;
  SimTime gpu_busy_until;
  struct Segment {
    SimTime begin, end;
    Category category;
  };
  std::deque<Segment> cpu_segments;  // main-thread activity not yet matched against GPU idling
  SimTime cpu_last_end;

  std::int64_t boundary = -1;
  struct Seen {
    std::int64_t iteration;
    SimTime time;
    EpochStats stats;
  };
  std::map<std::vector<std::int64_t>, Seen> seen;

  bool in_validation(std::int64_t g) const { return g >= input.train.iterations; }
  const Phase& phase(std::int64_t g) const {
    return in_validation(g) ? input.validation : input.train;
  }
  std::int64_t phase_start(std::int64_t g) const {
    return in_validation(g) ? input.train.iterations : 0;
  }
  std::int64_t phase_end(std::int64_t g) const {
    return in_validation(g) ? total_iterations : input.train.iterations;
  }
  bool is_last(std::int64_t g) const { return g == phase_end(g) - 1; }
  const IterationPlan& plan(std::int64_t g) const {
    return is_last(g) ? phase(g).last : phase(g).full;
  }
  const PlanIndex& index(std::int64_t g) const {
    if (in_validation(g)) return is_last(g) ? val_last : val_full;
    return is_last(g) ? train_last : train_full;
  }
  std::int64_t loader_depth() const {
    return static_cast<std::int64_t>(input.loader.workers) * input.loader.prefetch_factor;
  }

  ResourceId lane_resource(const Lane& lane) {
    auto found = lanes.find(lane);
    if (found != lanes.end()) return found->second;
    ResourceId id = engine.add_resource(std::make_unique<FifoServer>(lane_name(lane)));
    resources.push_back({lane, true});
    lanes.emplace(lane, id);
    return id;
  }

  ResourceId worker(std::int64_t batch) {
    bool validation = in_validation(batch);
    std::vector<ResourceId>& pool = validation ? validation_workers : train_workers;
    if (pool.empty()) {
      for (int w = 0; w < input.loader.workers; ++w) {
        pool.push_back(engine.add_resource(std::make_unique<FifoServer>(
            fmt::format("{}loader worker {}", validation ? "validation " : "", w))));
        resources.push_back({Lane{}, false});
      }
    }
    // A DataLoader hands batches to its workers round-robin, starting with worker 0.
    return pool[static_cast<std::size_t>((batch - phase_start(batch)) % input.loader.workers)];
  }

  void create_loader_task(std::int64_t batch, std::span<const TaskHandle> deps) {
    std::int64_t samples = is_last(batch) ? phase(batch).last_batch : phase(batch).full_batch;
    SimTime work = SimTime::from_seconds(
        Seconds(input.loader.sample_cpu.value() * static_cast<double>(samples)));
    loader_tasks[batch] =
        engine.add_task(worker(batch), work.ns(), make_tag(batch, kLoaderOp), deps);
  }

  void start_loader(std::int64_t first_batch, std::span<const TaskHandle> deps) {
    std::int64_t end = std::min(phase_end(first_batch), first_batch + loader_depth());
    for (std::int64_t b = first_batch; b < end; ++b)
      create_loader_task(b, deps);
  }

  void instantiate(std::int64_t g) {
    const IterationPlan& p = plan(g);
    std::vector<TaskHandle> handles(p.ops.size());
    std::vector<TaskHandle> deps;
    for (std::size_t j = 0; j < p.ops.size(); ++j) {
      const PlanOp& op = p.ops[j];
      deps.clear();
      for (std::int32_t d : op.deps)
        deps.push_back(handles[static_cast<std::size_t>(d)]);
      if (op.after_lane) {
        auto last = lane_last.find(*op.after_lane);
        if (last != lane_last.end()) deps.push_back(last->second);
      }
      auto previous = lane_last.find(op.lane);
      if (previous != lane_last.end()) deps.push_back(previous->second);
      if (op.consumes_batch) {
        auto batch = loader_tasks.find(g);
        if (batch == loader_tasks.end()) throw std::logic_error("a batch consumed twice");
        deps.push_back(batch->second);
        loader_tasks.erase(batch);
      }
      if (op.launches_on_gpu >= 0) {
        const std::deque<TaskHandle>& queue = launch_queue[op.launches_on_gpu];
        if (static_cast<int>(queue.size()) >= input.launch_queue_depth)
          deps.push_back(queue.front());
      }
      TaskHandle h = engine.add_task(lane_resource(op.lane), op.work_ns,
                                     make_tag(g, static_cast<std::uint64_t>(j)), deps);
      if (op.lane.kind != LaneKind::cpu) {
        std::deque<TaskHandle>& queue = launch_queue[op.lane.index];
        queue.push_back(h);
        if (static_cast<int>(queue.size()) > input.launch_queue_depth) queue.pop_front();
      }
      lane_last[op.lane] = h;
      handles[j] = h;
    }
    // The validation loader starts when the training loop is done.
    if (g == input.train.iterations - 1 && input.validation.iterations > 0 &&
        input.loader.workers > 0) {
      TaskHandle end_of_training[] = {lane_last[Lane{LaneKind::cpu, 0}]};
      start_loader(input.train.iterations, end_of_training);
    }
  }

  void gpu_activity(SimTime start, SimTime end, Category category) {
    if (start > gpu_busy_until) attribute_idle(gpu_busy_until, start);
    SimTime from = std::max(start, gpu_busy_until);
    if (end > from) stats.gpu_busy[static_cast<std::size_t>(category)] += end - from;
    gpu_busy_until = std::max(gpu_busy_until, end);
  }

  // Charges GPU idle time in [from, to) to what the main CPU thread was doing then.
  void attribute_idle(SimTime from, SimTime to) {
    SimTime covered;
    for (const Segment& s : cpu_segments) {
      SimTime a = std::max(s.begin, from);
      SimTime b = std::min(s.end, to);
      if (b > a) {
        stats.gpu_idle[static_cast<std::size_t>(idle_cause(s.category))] += b - a;
        covered += b - a;
      }
    }
    stats.gpu_idle_other += (to - from) - covered;
    while (!cpu_segments.empty() && cpu_segments.front().end <= to)
      cpu_segments.pop_front();
  }

  void observe(const FinishedTask& t) {
    std::int64_t g = tag_iteration(t.tag);
    std::uint64_t op_index = tag_op(t.tag);
    const ResourceInfo& info = resources[t.resource];
    if (op_index == kLoaderOp) {
      if (g < opt.trace_iterations) record(t, "load batch", Category::data);
      return;
    }
    const IterationPlan& p = plan(g);
    const PlanOp& op = p.ops[op_index];
    if (info.is_lane && info.lane.kind != LaneKind::cpu) {
      ++stats.kernels;
      if (info.lane.index == 0) gpu_activity(t.start, t.end, op.category);
    }
    if (info.is_lane && info.lane == Lane{LaneKind::cpu, 0}) {
      if (t.start > cpu_last_end) cpu_segments.push_back({cpu_last_end, t.start, op.category});
      cpu_segments.push_back({t.start, t.end, op.category});
      stats.cpu_busy[static_cast<std::size_t>(op.category)] += t.end - t.start;
      cpu_last_end = t.end;
    }
    if (g < opt.trace_iterations) record(t, op.name, op.category);

    const PlanIndex& idx = index(g);
    if (static_cast<std::int32_t>(op_index) == idx.consume_op) {
      std::int64_t next = g + loader_depth();
      if (next < phase_end(g)) create_loader_task(next, {});
    }
    if (static_cast<std::int32_t>(op_index) == idx.boundary_op) {
      boundary = g;
      ++stats.simulated_iterations;
      if (g + 1 < total_iterations) instantiate(g + 1);
      engine.request_stop();
    }
  }

  void record(const FinishedTask& t, const std::string& name, Category category) {
    trace.push_back({engine.resource(t.resource).name(), name, category, t.start, t.end});
  }

  // The driver's part of the state, relative to the boundary, appended to the engine's.
  std::vector<std::int64_t> snapshot() const {
    auto relative = [this](std::uint64_t tag) {
      return (tag_iteration(tag) - boundary) * (std::int64_t{1} << kOpBits) +
             static_cast<std::int64_t>(tag_op(tag));
    };
    auto handle = [&](TaskHandle h) -> std::int64_t {
      return engine.finished(h) ? -1 : relative(engine.tag(h));
    };
    std::vector<std::int64_t> s = engine.snapshot(relative);
    SimTime now = engine.now();
    if (input.loader.workers > 0)
      s.push_back((boundary - phase_start(boundary)) % input.loader.workers);
    for (const auto& [lane, h] : lane_last)
      s.push_back(handle(h));
    for (const auto& [gpu, queue] : launch_queue) {
      s.push_back(static_cast<std::int64_t>(queue.size()));
      for (TaskHandle h : queue)
        s.push_back(handle(h));
    }
    for (const auto& [batch, h] : loader_tasks) {
      s.push_back(batch - boundary);
      s.push_back(handle(h));
    }
    s.push_back((gpu_busy_until - now).ns());
    s.push_back((cpu_last_end - now).ns());
    for (const Segment& seg : cpu_segments) {
      s.push_back((seg.begin - now).ns());
      s.push_back((seg.end - now).ns());
      s.push_back(static_cast<std::int64_t>(seg.category));
    }
    return s;
  }

  // The last iteration (exclusive) up to which iteration g's phase instantiates plain, full
  // iterations: the last batch differs, and the end of training also starts the validation
  // loader.
  std::int64_t uniform_end(std::int64_t g) const { return phase_end(g) - 1; }

  void shift_driver(SimTime delta, std::int64_t iterations) {
    std::map<std::int64_t, TaskHandle> moved;
    for (const auto& [batch, h] : loader_tasks)
      moved.emplace(batch + iterations, h);
    loader_tasks = std::move(moved);
    for (Segment& s : cpu_segments) {
      s.begin += delta;
      s.end += delta;
    }
    cpu_last_end += delta;
    gpu_busy_until += delta;
    boundary += iterations;
  }

  void at_boundary() {
    if (!opt.steady_state_shortcut || boundary < opt.trace_iterations) return;
    std::int64_t margin = loader_depth() + 2;
    if (boundary + margin >= uniform_end(boundary)) {
      seen.clear();
      return;
    }
    std::vector<std::int64_t> key = snapshot();
    auto found = seen.find(key);
    if (found == seen.end()) {
      constexpr std::size_t kMaxRemembered = 512;
      if (seen.size() >= kMaxRemembered) seen.clear();
      seen.emplace(std::move(key), Seen{boundary, engine.now(), stats});
      return;
    }
    const Seen& then = found->second;
    std::int64_t period = boundary - then.iteration;
    std::int64_t periods = (uniform_end(boundary) - margin - boundary) / period;
    if (periods < 1) return;
    SimTime delta = (engine.now() - then.time) * periods;
    stats += period_times(stats, then.stats, periods);
    std::int64_t skipped = period * periods;
    engine.shift(delta, [skipped](std::uint64_t tag) {
      return tag + (static_cast<std::uint64_t>(skipped) << kOpBits);
    });
    shift_driver(delta, skipped);
    seen.clear();
  }

  EpochStats run() {
    if (input.loader.workers > 0) start_loader(0, {});
    instantiate(0);
    while (engine.run())
      at_boundary();
    SimTime end = engine.now();
    if (end > gpu_busy_until) attribute_idle(gpu_busy_until, end);
    stats.epoch = end;
    stats.iterations = total_iterations;
    stats.simulated_tasks = engine.tasks_finished();
    if (!loader_tasks.empty()) throw std::logic_error("loader batches left unconsumed");
    return stats;
  }
};

EpochSimulator::EpochSimulator(const EpochInput& input, const EpochOptions& options)
    : input_(input), options_(options) {}

EpochStats EpochSimulator::run() {
  Impl impl(input_, options_, trace_);
  return impl.run();
}

}  // namespace epochcast::sim

// The epoch driver: lazy instantiation of iteration plans, data loaders, flows, statistics, and
// exact steady-state skipping.
#include "sim/predict/epoch_simulator.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>

#include "sim/collectives/protocols.h"
#include "sim/engine/delay_server.h"
#include "sim/engine/engine.h"
#include "sim/engine/fifo_server.h"
#include "sim/network/max_min_fair.h"
#include "sim/network/network_map.h"

namespace epochcast::sim {

void Trace::add(std::string_view track, std::string_view name, Category category, SimTime start,
                SimTime end) {
  events.push_back({intern(tracks, track_index_, track), intern(names, name_index_, name), category,
                    start, end});
}

void Trace::add_counter(std::string_view link, SimTime time, double utilisation) {
  counters.push_back({intern(tracks, track_index_, link), time, utilisation});
}

std::uint32_t Trace::intern(std::vector<std::string>& held, NameIndex& index,
                            std::string_view text) {
  if (auto found = index.find(text); found != index.end()) return found->second;
  const auto id = static_cast<std::uint32_t>(held.size());
  index.emplace(std::string(text), id);
  held.emplace_back(text);
  return id;
}

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
  communication += other.communication;
  collective_bytes = checked_sum(collective_bytes, other.collective_bytes);
  collectives = checked_sum(collectives, other.collectives);
  kernels = checked_sum(kernels, other.kernels);
  iterations = checked_sum(iterations, other.iterations);
  simulated_iterations = checked_sum(simulated_iterations, other.simulated_iterations);
  simulated_tasks = checked_sum(simulated_tasks, other.simulated_tasks);
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
  d.communication = (now.communication - then.communication) * periods;
  d.collective_bytes = checked_product(now.collective_bytes - then.collective_bytes, periods);
  d.collectives = checked_product(now.collectives - then.collectives, periods);
  d.kernels = checked_product(now.kernels - then.kernels, periods);
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

// A task's tag: its global iteration in the high bits, its op in the plan (or, for loader tasks,
// kLoaderOps above the plans' ops: base + loader index) in the low ones. The op field is as wide
// as the largest plan needs (at least 20 bits), so no plan size is refused; the iteration keeps
// the rest (44 bits at 20).
constexpr std::uint64_t kLoaderOps = 4096;

struct TagLayout {
  int op_bits = 20;
  explicit TagLayout(std::size_t largest_plan) {
    while ((std::uint64_t{1} << op_bits) - 1 - kLoaderOps <= largest_plan)
      ++op_bits;
    if (op_bits > 40) throw std::logic_error("an iteration plan with more than 2^40 ops");
  }
  std::uint64_t op_mask() const { return (std::uint64_t{1} << op_bits) - 1; }
  std::uint64_t loader_base() const { return op_mask() - kLoaderOps; }
  std::uint64_t tag(std::int64_t iteration, std::uint64_t op) const {
    return (static_cast<std::uint64_t>(iteration) << op_bits) | op;
  }
  std::int64_t iteration(std::uint64_t tag) const {
    return static_cast<std::int64_t>(tag >> op_bits);
  }
  std::uint64_t op(std::uint64_t tag) const { return tag & op_mask(); }
};

std::size_t largest_plan(const EpochInput& in) {
  std::size_t largest = in.train.last.size();
  for (const IterationPlan& p : in.train.plans)
    largest = std::max(largest, p.size());
  if (in.validation.iterations > 0) {
    largest = std::max(largest, in.validation.last.size());
    for (const IterationPlan& p : in.validation.plans)
      largest = std::max(largest, p.size());
  }
  return largest;
}

// What a finished task tells the observer by itself (FinishedTask::note): most ops of every rank
// are a kernel or its launch, which the observer counts without looking the op up (with every
// rank of a large cluster, a cache miss apiece).
constexpr std::uint8_t kKernelNote = 1;     // on a compute stream or copy engine
constexpr std::uint8_t kLookNote = 2;       // the observer needs the op itself
constexpr std::uint8_t kThreadEndNote = 4;  // the last op of a CPU thread in its iteration

std::uint8_t note_of(const PlanEntry& op) {
  const bool kernel = op.lane.kind == LaneKind::compute || op.lane.kind == LaneKind::copy;
  const bool look = op.marker != Marker::none || op.consumes_loader >= 0 ||
                    op.lane == Lane{LaneKind::cpu, 0} || (kernel && op.lane.index == 0);
  return static_cast<std::uint8_t>((kernel ? kKernelNote : 0) | (look ? kLookNote : 0));
}

struct PlanIndex {
  std::int32_t boundary_op = -1;  // the first op of the main CPU thread
  // Dependency edges an instance adds at most: the plan's own, and per op the lane's last op
  // and the loader's batch.
  std::size_t edges = 0;
  // By stored op (IterationPlan::for_each_op), each network op's route, found the first time
  // the plan is instantiated (in op order, as the routes are registered); every later instance
  // reads it here.
  std::vector<std::uint32_t> routes;
  // By op, whether it is the last of its CPU thread in the plan; and those threads, in order.
  std::vector<bool> ends_cpu_thread;
  std::vector<int> cpu_threads;
  // Whether every op waits within the plan, directly or not, for an op of a CPU thread (or is
  // one): an instance then has nothing to do before some CPU thread has finished its part of
  // the iteration before (see Impl::defers).
  bool led_by_cpu = true;
};

PlanIndex index_plan(const IterationPlan& plan) {
  PlanIndex index;
  index.ends_cpu_thread.assign(plan.size(), false);
  std::vector<std::int64_t> last_on_thread;  // by CPU thread, its last op (-1: none)
  // By lane kind and number: whether the lane's latest op so far waits for a CPU thread.
  std::array<std::vector<char>, static_cast<std::size_t>(LaneKind::delay) + 1> lane_led;
  std::vector<char> led(plan.size(), 0);
  plan.for_each_op(
      [&](std::size_t i, std::size_t, const PlanEntry& op, std::span<const std::int32_t> deps) {
        index.edges += op.dep_count + 2;
        if (index.boundary_op < 0 && op.lane == Lane{LaneKind::cpu, 0}) {
          index.boundary_op = static_cast<std::int32_t>(i);
        }
        const auto lane = static_cast<std::size_t>(op.lane.index);
        std::vector<char>& kind_led = lane_led[static_cast<std::size_t>(op.lane.kind)];
        if (kind_led.size() <= lane) kind_led.resize(lane + 1, 0);
        if (op.lane.kind == LaneKind::cpu) {
          if (last_on_thread.size() <= lane) last_on_thread.resize(lane + 1, -1);
          last_on_thread[lane] = static_cast<std::int64_t>(i);
          led[i] = 1;
        } else {
          // A lane that runs in order waits for its op before; network and delay ops do not.
          const bool ordered_lane =
              op.lane.kind != LaneKind::network && op.lane.kind != LaneKind::delay;
          led[i] = ordered_lane && kind_led[lane] != 0;
          for (std::int32_t d : deps)
            led[i] = led[i] || led[static_cast<std::size_t>(d)] != 0;
        }
        kind_led[lane] = led[i];
        index.led_by_cpu = index.led_by_cpu && led[i] != 0;
      });
  if (index.boundary_op < 0) throw std::logic_error("an iteration plan without a main-thread op");
  for (std::size_t thread = 0; thread < last_on_thread.size(); ++thread) {
    if (last_on_thread[thread] < 0) continue;
    index.ends_cpu_thread[static_cast<std::size_t>(last_on_thread[thread])] = true;
    index.cpu_threads.push_back(static_cast<int>(thread));
  }
  return index;
}

// Values by lane, as one vector per lane kind indexed by the lane's number: instantiating a plan
// looks lanes up for every op of every iteration, which in a tree of the thousands of lanes of
// every rank of a cluster was a chain of cache misses. Visits lanes in Lane order (kind, then
// number), as a std::map<Lane, T> would.
template <typename T>
class LaneMap {
 public:
  T* find(const Lane& lane) {
    std::vector<std::optional<T>>& values = of(lane.kind);
    const auto i = static_cast<std::size_t>(checked_index(lane));
    return i < values.size() && values[i] ? &*values[i] : nullptr;
  }
  // The lane's value, default-constructed if it had none.
  T& operator[](const Lane& lane) {
    std::vector<std::optional<T>>& values = of(lane.kind);
    const auto i = static_cast<std::size_t>(checked_index(lane));
    if (i >= values.size()) values.resize(i + 1);
    if (!values[i]) values[i].emplace();
    return *values[i];
  }
  template <typename F>
  void for_each(F&& visit) const {
    for (std::size_t k = 0; k < values_.size(); ++k) {
      for (std::size_t i = 0; i < values_[k].size(); ++i) {
        if (values_[k][i])
          visit(Lane{static_cast<LaneKind>(k), static_cast<int>(i)}, *values_[k][i]);
      }
    }
  }

 private:
  static constexpr std::size_t kLaneKinds = static_cast<std::size_t>(LaneKind::delay) + 1;
  std::vector<std::optional<T>>& of(LaneKind kind) {
    return values_[static_cast<std::size_t>(kind)];
  }
  static int checked_index(const Lane& lane) {
    if (lane.index < 0) throw std::logic_error("a lane with a negative number");
    return lane.index;
  }
  std::array<std::vector<std::optional<T>>, kLaneKinds> values_;
};

bool ordered(LaneKind kind) {
  return kind != LaneKind::network && kind != LaneKind::delay;
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
    case LaneKind::network:
      return "network";
    case LaneKind::delay:
      return "collectives (analytic)";
  }
  return "lane";
}

}  // namespace

struct EpochSimulator::Impl {
  Impl(const EpochInput& in, const EpochOptions& options, Trace& events)
      : input(in), opt(options), trace(events), tags(largest_plan(in)) {
    total_iterations = in.train.iterations + in.validation.iterations;
    plan_ops = static_cast<std::int64_t>(largest_plan(in));
    budget = std::max(opt.simulation_budget, checked_product(kBudgetIterations, plan_ops));
    for (const IterationPlan& p : in.train.plans)
      train_cycle.push_back(index_plan(p));
    train_last = index_plan(in.train.last);
    if (in.validation.iterations > 0) {
      for (const IterationPlan& p : in.validation.plans)
        validation_cycle.push_back(index_plan(p));
      validation_last = index_plan(in.validation.last);
    }
    engine.set_observer([this](const FinishedTask& t) { observe(t); });
    if (input.cpu_cores_per_node > 0) {
      engine.set_start_observer([this](TaskHandle, ResourceId id) { cpu_started(id); });
    }
  }

  const EpochInput& input;
  EpochOptions opt;
  Trace& trace;
  const TagLayout tags;
  Engine engine;
  std::int64_t total_iterations = 0;
  std::vector<PlanIndex> train_cycle, validation_cycle;  // per distinct plan of each phase
  PlanIndex train_last, validation_last;

  struct ResourceInfo {
    Lane lane;
    bool is_lane = false;  // false for loader workers, the network and the delay server
    int cpu_node = -1;     // a CPU thread or loader worker: the node whose cores it shares
    int busy_slot = -1;    // its place in the node's busy list while it runs a task
  };
  LaneMap<ResourceId> lanes;
  std::vector<ResourceInfo> resources;
  std::map<std::pair<bool, int>, std::vector<ResourceId>> workers;  // (validation, loader)
  // Which worker of a pool takes a phase's batch b: (b - phase start + rotation) mod workers.
  // The workers of a pool are interchangeable, so a skipped span need not be a multiple of
  // their number: skipping rotates the assignment instead (see shift_driver).
  std::array<std::int64_t, 2> rotation{0, 0};  // training, validation
  MaxMinFairNetwork* network = nullptr;
  std::unique_ptr<NetworkMap> routes;
  ResourceId network_id = 0;
  ResourceId delay_id = 0;
  bool has_delay = false;
  LaneMap<TaskHandle> lane_last;
  std::vector<TaskHandle> instance_handles, instance_deps;  // scratch of instantiate()
  // Per GPU (by its compute lane): kernels launched, oldest first.
  LaneMap<std::deque<TaskHandle>> launch_queue;
  std::map<std::pair<int, std::int64_t>, TaskHandle> loader_tasks;  // (loader, batch)
  std::array<std::int64_t, 2> loader_tasks_created{0, 0};           // training, validation

  EpochStats stats;
  SimTime gpu_busy_until;
  struct Segment {
    SimTime begin, end;
    Category category;
  };
  std::deque<Segment> cpu_segments;  // main-thread activity not yet matched against GPU idling
  SimTime cpu_last_end;
  std::deque<SimTime> open_collectives;  // begins of GPU 0's collectives still in flight
  std::deque<std::pair<SimTime, SimTime>> comm_intervals;  // closed, for idle attribution
  SimTime comm_covered_until;                              // communication counted up to here
  std::map<Lane, std::deque<SimTime>> trace_open;          // traced collective begins per lane

  std::int64_t boundary = -1;
  std::int64_t instantiated = -1;  // the last iteration added to the engine
  std::int64_t thread_ended = -1;  // the last iteration a CPU thread has finished its part of
  std::map<std::pair<const PlanIndex*, const PlanIndex*>, bool> deferral;  // see defers()
  // Period detection after Brent: one remembered boundary, moved to the current one after 1,
  // 2, 4, ... further boundaries, so a period of any length is found once the checkpoint lies
  // in the repeating part, with a single snapshot held (a loop whose input pipeline hands out
  // batches in bursts repeats only after a whole round of workers).
  struct Checkpoint {
    std::vector<std::int64_t> snapshot;
    std::uint64_t hash = 0;
    std::int64_t iteration = 0;
    SimTime time;
    EpochStats stats;
  };
  std::optional<Checkpoint> checkpoint;
  std::int64_t spent = 0;             // snapshot values written, for the simulation budget
  std::int64_t budget = 0;            // the options' budget, or kBudgetIterations iterations' work
  std::int64_t plan_ops = 0;          // ops of the largest plan
  std::int64_t checkpoint_span = 1;   // boundaries until the checkpoint moves on
  std::int64_t since_checkpoint = 0;  // boundaries compared against it so far

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
  std::size_t cycle_position(std::int64_t g) const {
    return static_cast<std::size_t>((g - phase_start(g)) %
                                    static_cast<std::int64_t>(phase(g).cycle.size()));
  }
  // The jitter step of iteration g (0 without per-rank speeds).
  std::size_t speed_step(std::int64_t g) const {
    if (input.gpu_speeds.empty()) return 0;
    return static_cast<std::size_t>((g - phase_start(g)) %
                                    static_cast<std::int64_t>(input.gpu_speeds.size()));
  }
  const IterationPlan& plan(std::int64_t g) const {
    return is_last(g) ? phase(g).last : phase(g).plans[phase(g).cycle[cycle_position(g)]];
  }
  PlanIndex& index(std::int64_t g) {
    if (in_validation(g)) {
      return is_last(g) ? validation_last
                        : validation_cycle[input.validation.cycle[cycle_position(g)]];
    }
    return is_last(g) ? train_last : train_cycle[input.train.cycle[cycle_position(g)]];
  }
  std::int64_t loader_depth() const {
    return static_cast<std::int64_t>(input.loader.workers) * input.loader.prefetch_factor;
  }

  ResourceId lane_resource(const Lane& lane) {
    if (lane.kind == LaneKind::network) return network_resource();
    if (lane.kind == LaneKind::delay) {
      if (!has_delay) {
        delay_id = engine.add_resource(std::make_unique<DelayServer>(lane_name(lane)));
        resources.push_back({lane, false});
        has_delay = true;
      }
      return delay_id;
    }
    if (const ResourceId* found = lanes.find(lane)) return *found;
    ResourceId id = engine.add_resource(std::make_unique<FifoServer>(lane_name(lane)));
    resources.push_back({lane, true});
    if (lane.kind == LaneKind::cpu) add_cpu(id, lane.index);
    lanes[lane] = id;
    return id;
  }

  // CPU threads and loader workers share their node's cores (EpochInput::cpu_cores_per_node):
  // each busy one runs at min(1, cores / busy) of its speed, recomputed as they start and stop.
  struct CoreShare {
    std::vector<ResourceId> busy;  // in the order they started
    double speed = 1;
  };
  std::map<int, CoreShare> core_shares;  // by node
  void add_cpu(ResourceId id, int rank) {
    if (input.cpu_cores_per_node <= 0) return;
    const int node = rank / std::max(1, input.gpus_per_node);
    resources[id].cpu_node = node;
  }
  FifoServer& cpu_server(ResourceId id) {
    return static_cast<FifoServer&>(engine.resource_for_change(id));
  }
  void set_cpu_speed(ResourceId id, double speed) {
    cpu_server(id).set_speed(engine.now(), speed);
    engine.changed(id);
  }
  void reshare(CoreShare& share) {
    const auto busy = static_cast<std::int64_t>(share.busy.size());
    const double speed =
        busy > input.cpu_cores_per_node
            ? static_cast<double>(input.cpu_cores_per_node) / static_cast<double>(busy)
            : 1.0;
    // Re-timing every busy thread costs as much as running a task each, so thousands of
    // oversubscribed workers re-time only when their share moved by more than 1% (or back to a
    // core each): their speeds are then within 1% of a fair share.
    constexpr double kSpeedTolerance = 0.01;
    if (speed == share.speed) return;
    if (speed != 1 && std::abs(speed - share.speed) <= kSpeedTolerance * share.speed) return;
    share.speed = speed;
    // And it counts against the simulation budget, like the tasks run.
    spent = checked_sum(spent, busy);
    if (opt.steady_state_shortcut && checked_sum(spent, engine.tasks_finished()) > budget) {
      throw SimulationTooLong(stats.simulated_iterations, total_iterations);
    }
    for (ResourceId member : share.busy)
      set_cpu_speed(member, speed);
  }
  void cpu_started(ResourceId id) {
    ResourceInfo& info = resources[id];
    if (info.cpu_node < 0 || info.busy_slot >= 0) return;
    CoreShare& share = core_shares[info.cpu_node];
    info.busy_slot = static_cast<int>(share.busy.size());
    share.busy.push_back(id);
    set_cpu_speed(id, share.speed);
    reshare(share);
  }
  void cpu_finished(ResourceId id) {
    ResourceInfo& info = resources[id];
    if (info.cpu_node < 0 || info.busy_slot < 0 || cpu_server(id).busy()) return;
    CoreShare& share = core_shares[info.cpu_node];
    // Out of the busy list: the last one takes its place.
    const ResourceId last = share.busy.back();
    share.busy[static_cast<std::size_t>(info.busy_slot)] = last;
    resources[last].busy_slot = info.busy_slot;
    share.busy.pop_back();
    info.busy_slot = -1;
    set_cpu_speed(id, 1);  // idle servers all read alike in snapshots
    reshare(share);
  }

  ResourceId network_resource() {
    if (network != nullptr) return network_id;
    if (input.topology == nullptr || input.profile == nullptr) {
      throw std::logic_error("a plan with flows needs a topology and a profile");
    }
    auto owned = std::make_unique<MaxMinFairNetwork>("network");
    network = owned.get();
    network_id = engine.add_resource(std::move(owned));
    resources.push_back({Lane{LaneKind::network, 0}, false});
    routes = std::make_unique<NetworkMap>(*input.topology, *input.profile, *network,
                                          protocol_step_tables(*input.profile));
    if (opt.trace_iterations > 0) {
      network->set_rate_listener([this](SimTime when, std::uint32_t link, double rate) {
        if (boundary >= opt.trace_iterations) return;
        double capacity = network->link_capacity(link).value();
        trace.add_counter(network->link_name(link), when, rate / capacity);
      });
    }
    return network_id;
  }

  ResourceId worker(int loader, std::int64_t batch) {
    bool validation = in_validation(batch);
    std::vector<ResourceId>& pool = workers[{validation, loader}];
    if (pool.empty()) {
      for (int w = 0; w < input.loader.workers; ++w) {
        std::string owner = input.loaders > 1 ? fmt::format("rank {} ", loader) : "";
        pool.push_back(engine.add_resource(std::make_unique<FifoServer>(
            fmt::format("{}{}loader worker {}", owner, validation ? "validation " : "", w))));
        resources.push_back({Lane{}, false});
        add_cpu(pool.back(), loader);
      }
    }
    // A DataLoader hands batches to its workers round-robin, starting with worker 0.
    return pool[static_cast<std::size_t>(worker_index(batch - phase_start(batch), validation))];
  }

  // The pool position that takes the phase's batch `relative_batch`.
  std::int64_t worker_index(std::int64_t relative_batch, bool validation) const {
    const std::int64_t n = input.loader.workers;
    return ((relative_batch + rotation[validation ? 1 : 0]) % n + n) % n;
  }

  void create_loader_task(int loader, std::int64_t batch, std::span<const TaskHandle> deps) {
    std::int64_t samples = is_last(batch) ? phase(batch).last_batch : phase(batch).full_batch;
    SimTime work = SimTime::from_seconds(
        Seconds(input.loader.sample_cpu.value() * static_cast<double>(samples)));
    ++loader_tasks_created[in_validation(batch) ? 1 : 0];
    loader_tasks[{loader, batch}] = engine.add_task(
        worker(loader, batch), work.ns(),
        tags.tag(batch, tags.loader_base() + static_cast<std::uint64_t>(loader)), deps);
  }

  void start_loaders(std::int64_t first_batch, std::span<const TaskHandle> deps) {
    std::int64_t end = std::min(phase_end(first_batch), first_batch + loader_depth());
    for (int l = 0; l < input.loaders; ++l) {
      for (std::int64_t b = first_batch; b < end; ++b)
        create_loader_task(l, b, deps);
    }
  }

  // Iteration g+1 is added to the engine at g's boundary or, if it defers (below), once the
  // first CPU thread has finished its part of g, if that is later; from there on it is
  // simulated as if it had been there all along. With every rank of a large cluster an
  // instance is tens of millions of tasks: added at the boundary, two iterations' tasks would
  // be held at once. Never before the boundary: a rank whose thread ran ahead of rank 0's (a
  // validation pass, which no collective holds together) starts g+1 no sooner than rank 0
  // starts g, as ever.
  void instantiate_after(std::int64_t g) {
    if (instantiated != g || g + 1 >= total_iterations) return;
    instantiate(g + 1);
  }
  // Whether iteration g+1 may wait to be added until a CPU thread has finished iteration g:
  // so when every op of g+1 waits for one of its CPU threads' ops, and each of those threads
  // has an op in g to finish first (the op before it on the thread). No op of g+1 can then start
  // before the first thread finishes g.
  bool defers(std::int64_t g) {
    if (g + 1 >= total_iterations) return false;
    const PlanIndex& now = index(g);
    const PlanIndex& next = index(g + 1);
    const auto key = std::make_pair(&now, &next);
    auto found = deferral.find(key);
    if (found == deferral.end()) {
      const bool defer =
          next.led_by_cpu && std::includes(now.cpu_threads.begin(), now.cpu_threads.end(),
                                           next.cpu_threads.begin(), next.cpu_threads.end());
      found = deferral.emplace(key, defer).first;
    }
    return found->second;
  }

  void instantiate(std::int64_t g) {
    instantiated = g;
    const IterationPlan& p = plan(g);
    PlanIndex& idx = index(g);
    // Written op by op before any later op reads it: no need to clear what the last plan left.
    std::vector<TaskHandle>& handles = instance_handles;
    handles.resize(p.size());
    std::vector<TaskHandle>& deps = instance_deps;
    const bool routed = !idx.routes.empty();
    if (!routed) idx.routes.assign(p.stored_size(), 0);
    engine.reserve(p.size(), idx.edges);
    p.for_each_op([&](std::size_t j, std::size_t stored, const PlanEntry& op,
                      std::span<const std::int32_t> plan_deps) {
      deps.clear();
      for (std::int32_t d : plan_deps)
        deps.push_back(handles[static_cast<std::size_t>(d)]);
      if (op.after_lane) {
        if (const TaskHandle* last = lane_last.find(*op.after_lane)) deps.push_back(*last);
      }
      if (ordered(op.lane.kind)) {
        if (const TaskHandle* previous = lane_last.find(op.lane)) deps.push_back(*previous);
      }
      if (op.consumes_loader >= 0) {
        auto batch = loader_tasks.find({op.consumes_loader, g});
        if (batch == loader_tasks.end()) throw std::logic_error("a batch consumed twice");
        deps.push_back(batch->second);
        loader_tasks.erase(batch);
      }
      if (op.launches_on_gpu >= 0) {
        const std::deque<TaskHandle>& queue =
            launch_queue[Lane{LaneKind::compute, op.launches_on_gpu}];
        if (static_cast<int>(queue.size()) >= input.launch_queue_depth)
          deps.push_back(queue.front());
      }
      std::uint32_t detail = 0;
      std::int64_t work = op.work_ns;
      if (op.lane.kind == LaneKind::network) {
        network_resource();
        if (!routed) {
          idx.routes[stored] =
              op.fabric != FabricWay::none
                  ? routes->fabric_route(op.src_gpu, op.step_protocol, op.fabric, op.steps)
              : op.mirror
                  ? routes->mirror_route(op.src_gpu, op.step_protocol, op.in_network, op.steps)
                  : routes->route(op.src_gpu, op.dst_gpu, op.step_protocol, op.steps);
        }
        detail = idx.routes[stored];
        // A step NCCL stages through host memory moves slower than its links: its flow
        // carries proportionally more.
        const double factor = routes->data_factor(detail);
        if (factor != 1) {
          work = static_cast<std::int64_t>(std::ceil(static_cast<double>(work) * factor));
        }
      }
      if (op.lane.kind == LaneKind::compute && !input.gpu_speeds.empty()) {
        const std::vector<double>& speeds = input.gpu_speeds[speed_step(g)];
        const double speed = speeds.at(static_cast<std::size_t>(op.lane.index));
        if (speed != 1) {
          work = static_cast<std::int64_t>(std::ceil(static_cast<double>(work) / speed));
        }
      }
      TaskHandle h = engine.add_task(
          lane_resource(op.lane), work, tags.tag(g, static_cast<std::uint64_t>(j)), deps, detail,
          static_cast<std::uint8_t>(note_of(op) | (idx.ends_cpu_thread[j] ? kThreadEndNote : 0)));
      if (op.lane.kind == LaneKind::compute || op.lane.kind == LaneKind::copy ||
          op.lane.kind == LaneKind::comm) {
        std::deque<TaskHandle>& queue = launch_queue[Lane{LaneKind::compute, op.lane.index}];
        queue.push_back(h);
        if (static_cast<int>(queue.size()) > input.launch_queue_depth) queue.pop_front();
      }
      if (ordered(op.lane.kind)) lane_last[op.lane] = h;
      handles[j] = h;
    });
    // The validation loaders start when the training loop is done.
    if (g == input.train.iterations - 1 && input.validation.iterations > 0 &&
        input.loader.workers > 0) {
      TaskHandle end_of_training[] = {lane_last[Lane{LaneKind::cpu, 0}]};
      start_loaders(input.train.iterations, end_of_training);
    }
  }

  void gpu_activity(SimTime start, SimTime end, Category category) {
    if (start > gpu_busy_until) attribute_idle(gpu_busy_until, start);
    SimTime from = std::max(start, gpu_busy_until);
    if (end > from) stats.gpu_busy[static_cast<std::size_t>(category)] += end - from;
    gpu_busy_until = std::max(gpu_busy_until, end);
  }

  // Charges GPU idle time in [from, to): to communication while a collective of GPU 0 is in
  // flight, otherwise to what the main CPU thread was doing then.
  void attribute_idle(SimTime from, SimTime to) {
    std::vector<std::pair<SimTime, SimTime>> comm;
    for (const auto& [b, e] : comm_intervals)
      comm.emplace_back(b, e);
    for (SimTime b : open_collectives)
      comm.emplace_back(b, SimTime::max());
    std::sort(comm.begin(), comm.end());
    SimTime cursor = from;
    auto charge_host = [&](SimTime a, SimTime b) {
      SimTime covered;
      for (const Segment& s : cpu_segments) {
        SimTime x = std::max(s.begin, a);
        SimTime y = std::min(s.end, b);
        if (y > x) {
          const Category cause = idle_cause(s.category);
          stats.gpu_idle[static_cast<std::size_t>(cause)] += y - x;
          // Waiting while the host drives communication outside a collective (DataParallel's
          // scatter and peer copies) is communication time too.
          if (cause == Category::communication) stats.communication += y - x;
          covered += y - x;
        }
      }
      stats.gpu_idle_other += (b - a) - covered;
    };
    for (const auto& [b, e] : comm) {
      if (e <= cursor || b >= to) continue;
      if (b > cursor) charge_host(cursor, b);
      SimTime stop = std::min(e, to);
      SimTime start = std::max(b, cursor);
      stats.gpu_idle[static_cast<std::size_t>(Category::communication)] += stop - start;
      cursor = stop;
      if (cursor >= to) break;
    }
    if (cursor < to) charge_host(cursor, to);
    while (!cpu_segments.empty() && cpu_segments.front().end <= to)
      cpu_segments.pop_front();
    while (!comm_intervals.empty() && comm_intervals.front().second <= to)
      comm_intervals.pop_front();
  }

  void observe(const FinishedTask& t) {
    std::int64_t g = tags.iteration(t.tag);
    // First, as the engine would have released the next iteration's first op of this thread
    // had it been added already (before the thread's core is given up, below).
    if ((t.note & kThreadEndNote) != 0 && defers(g) && thread_ended < g) {
      thread_ended = g;
      if (boundary >= g) instantiate_after(g);
    }
    cpu_finished(t.resource);
    std::uint64_t op_index = tags.op(t.tag);
    const ResourceInfo& info = resources[t.resource];
    bool traced = g < opt.trace_iterations;
    if (op_index >= tags.loader_base()) {
      if (traced) record(engine.resource(t.resource).name(), "load batch", Category::data, t);
      return;
    }
    // A kernel or launch of a rank but the first, outside a trace: counted, nothing more.
    if (!traced && (t.note & kLookNote) == 0) {
      if ((t.note & kKernelNote) != 0 && info.is_lane) ++stats.kernels;
      return;
    }
    const IterationPlan& p = plan(g);
    const PlanIndex& idx = index(g);
    const PlanEntry op = p.op(op_index);
    if (info.is_lane && (op.lane.kind == LaneKind::compute || op.lane.kind == LaneKind::copy)) {
      ++stats.kernels;
      if (op.lane.index == 0) gpu_activity(t.start, t.end, op.category);
    }
    if (op.marker != Marker::none && info.is_lane) on_marker(p, op, t, traced);
    if (info.is_lane && op.lane == Lane{LaneKind::cpu, 0}) {
      if (t.start > cpu_last_end) cpu_segments.push_back({cpu_last_end, t.start, op.category});
      cpu_segments.push_back({t.start, t.end, op.category});
      stats.cpu_busy[static_cast<std::size_t>(op.category)] += t.end - t.start;
      cpu_last_end = t.end;
    }
    // Flows show as link counters, analytic collectives as the ranks' communication spans.
    if (traced && op.marker == Marker::none && op.lane.kind != LaneKind::network &&
        op.lane.kind != LaneKind::delay) {
      record(engine.resource(t.resource).name(), p.name(op), op.category, t);
    }

    if (op.consumes_loader >= 0) {
      std::int64_t next = g + loader_depth();
      if (next < phase_end(g)) create_loader_task(op.consumes_loader, next, {});
    }
    if (static_cast<std::int32_t>(op_index) == idx.boundary_op) {
      boundary = g;
      ++stats.simulated_iterations;
      if (!defers(g) || thread_ended >= g) instantiate_after(g);
      engine.request_stop();
    }
  }

  // While a collective runs on GPU g's communication stream, its compute stream runs at the
  // collective's compute_speed (NCCL's kernel holds some SMs). The stream runs its collectives
  // one after another, so each end restores the full speed.
  void slow_compute_beside(const PlanEntry& op) {
    if (op.lane.kind != LaneKind::comm) return;
    const double speed = op.marker == Marker::collective_begin ? op.compute_speed : 1.0;
    const ResourceId compute = lane_resource(Lane{LaneKind::compute, op.lane.index});
    auto& stream = static_cast<FifoServer&>(engine.resource_for_change(compute));
    stream.set_speed(engine.now(), speed);
    engine.changed(compute);
  }

  void on_marker(const IterationPlan& p, const PlanEntry& op, const FinishedTask& t, bool traced) {
    slow_compute_beside(op);
    if (traced) {
      std::deque<SimTime>& open = trace_open[op.lane];
      if (op.marker == Marker::collective_begin) {
        open.push_back(t.end);
      } else if (!open.empty()) {
        FinishedTask span = t;
        span.start = open.front();
        open.pop_front();
        record(fmt::format("GPU {} communication", op.lane.index), p.name(op),
               Category::communication, span);
      }
    }
    if (op.lane.index != 0) return;
    if (op.marker == Marker::collective_begin) {
      open_collectives.push_back(t.end);
      ++stats.collectives;
      stats.collective_bytes += op.collective_bytes;
      return;
    }
    if (open_collectives.empty()) throw std::logic_error("a collective ended that never began");
    SimTime begin = open_collectives.front();
    open_collectives.pop_front();
    comm_intervals.emplace_back(begin, t.end);
    // Communication time is the union of GPU 0's collectives in flight.
    SimTime from = std::max(begin, comm_covered_until);
    if (t.end > from) stats.communication += t.end - from;
    comm_covered_until = std::max(comm_covered_until, t.end);
  }

  void record(std::string_view track, std::string_view name, Category category,
              const FinishedTask& t) {
    trace.add(track, name, category, t.start, t.end);
  }

  // The driver's part of the state, relative to the boundary, appended to the engine's.
  std::vector<std::int64_t> snapshot() const {
    auto relative = [this](std::uint64_t tag) {
      return (tags.iteration(tag) - boundary) * (std::int64_t{1} << tags.op_bits) +
             static_cast<std::int64_t>(tags.op(tag));
    };
    auto handle = [&](TaskHandle h) -> std::int64_t {
      return engine.finished(h) ? -1 : relative(engine.tag(h));
    };
    std::vector<std::int64_t> s = engine.snapshot(relative, canonical_resource_order());
    SimTime now = engine.now();
    s.push_back(static_cast<std::int64_t>(cycle_position(boundary)));
    s.push_back(static_cast<std::int64_t>(speed_step(boundary)));
    s.push_back(instantiated - boundary);
    // Whether a thread has finished the boundary's iteration matters only until the next is
    // added; before the boundary, only that it has not.
    s.push_back(thread_ended >= boundary ? thread_ended - boundary : -1);
    lane_last.for_each([&](const Lane&, TaskHandle h) { s.push_back(handle(h)); });
    // A dispatch waits for the kernel launched `depth` launches before it, so only unfinished
    // kernels matter, by how recent they are: finished ones, or a queue not yet full, impose
    // nothing.
    launch_queue.for_each([&](const Lane&, const std::deque<TaskHandle>& queue) {
      for (std::size_t i = 0; i < queue.size(); ++i) {
        if (engine.finished(queue[i])) continue;
        s.push_back(static_cast<std::int64_t>(queue.size() - 1 - i));
        s.push_back(handle(queue[i]));
      }
      s.push_back(-5);
    });
    // Once the loaders have every batch of the phase, only those still being loaded differ: one
    // already loaded imposes nothing, and how many are left shows in the iterations left.
    const bool handed_all = loaders_handed_all();
    if (handed_all) s.push_back(-6);
    for (const auto& [key, h] : loader_tasks) {
      if (handed_all && engine.finished(h)) continue;
      s.push_back(key.first);
      s.push_back(key.second - boundary);
      s.push_back(handle(h));
    }
    s.push_back((gpu_busy_until - now).ns());
    s.push_back((cpu_last_end - now).ns());
    // How far communication is already counted matters only against collectives still open;
    // without any, a horizon in the past is the same as none.
    bool horizon_matters = !open_collectives.empty() || comm_covered_until > now;
    s.push_back(horizon_matters ? (comm_covered_until - now).ns() : 0);
    for (const Segment& seg : cpu_segments) {
      s.push_back((seg.begin - now).ns());
      s.push_back((seg.end - now).ns());
      s.push_back(static_cast<std::int64_t>(seg.category));
    }
    s.push_back(-3);
    for (SimTime b : open_collectives)
      s.push_back((b - now).ns());
    s.push_back(-4);
    for (const auto& [b, e] : comm_intervals) {
      s.push_back((b - now).ns());
      s.push_back((e - now).ns());
    }
    return s;
  }

  // Every resource once, with each loader pool listed from the worker that takes the next batch
  // of its phase: two boundaries whose pools differ only by a rotation then snapshot equally.
  std::vector<ResourceId> canonical_resource_order() const {
    std::vector<ResourceId> order(engine.resource_count());
    for (ResourceId r = 0; r < order.size(); ++r)
      order[r] = r;
    for (const auto& [key, pool] : workers) {
      const bool validation = key.first;
      const std::int64_t start = validation ? input.train.iterations : 0;
      const std::int64_t next = worker_index(boundary - start, validation);
      const std::size_t n = pool.size();
      // The pool's ids are consecutive (created together), so its positions are too.
      for (std::size_t k = 0; k < n; ++k)
        order[pool[0] + k] = pool[(k + static_cast<std::size_t>(next)) % n];
    }
    return order;
  }

  // The last iteration (exclusive) up to which iteration g's phase instantiates plain, cyclic
  // iterations: the last batch differs, and the end of training also starts the validation
  // loaders.
  std::int64_t uniform_end(std::int64_t g) const { return phase_end(g) - 1; }

  // Whether the loaders of the boundary's phase have been given every batch of it: consuming a
  // batch hands them the batch loader_depth() on only while the phase has one, so from here on
  // the iterations differ only in how many batches are left.
  bool loaders_handed_all() const {
    if (input.loader.workers <= 0) return false;
    const std::int64_t batches = phase_end(boundary) - phase_start(boundary);
    return loader_tasks_created[in_validation(boundary) ? 1 : 0] ==
           checked_product(static_cast<std::int64_t>(input.loaders), batches);
  }
  // Whether a loader task of the boundary's phase is still running or waiting.
  bool loaders_busy() const {
    const bool validation = in_validation(boundary);
    return std::any_of(loader_tasks.begin(), loader_tasks.end(), [&](const auto& entry) {
      return in_validation(entry.first.second) == validation && !engine.finished(entry.second);
    });
  }

  void shift_driver(SimTime delta, std::int64_t iterations) {
    std::map<std::pair<int, std::int64_t>, TaskHandle> moved;
    if (loaders_handed_all()) {
      // Every batch loaded (at_boundary skips only then): each loader has its batches from the
      // first it has left to the phase's end, and after the skip those `iterations` on, all
      // loaded.
      std::map<int, std::int64_t> first_left;
      for (const auto& [key, h] : loader_tasks)
        first_left.emplace(key.first, key.second);
      for (const auto& [loader, first] : first_left) {
        for (std::int64_t b = first + iterations; b < phase_end(boundary); ++b)
          moved.emplace(std::make_pair(loader, b), Engine::done_handle());
      }
    } else {
      for (const auto& [key, h] : loader_tasks)
        moved.emplace(std::make_pair(key.first, key.second + iterations), h);
      // The skipped iterations handed each loader as many batches.
      loader_tasks_created[in_validation(boundary) ? 1 : 0] +=
          checked_product(static_cast<std::int64_t>(input.loaders), iterations);
    }
    loader_tasks = std::move(moved);
    for (Segment& s : cpu_segments) {
      s.begin += delta;
      s.end += delta;
    }
    for (SimTime& b : open_collectives)
      b += delta;
    for (auto& [b, e] : comm_intervals) {
      b += delta;
      e += delta;
    }
    cpu_last_end += delta;
    gpu_busy_until += delta;
    comm_covered_until += delta;
    // The state kept is that of `iterations` earlier with its workers' roles rotated by as
    // many batches; assigning the next batches with the opposite rotation continues it exactly.
    if (input.loader.workers > 0) {
      std::int64_t& r = rotation[in_validation(boundary) ? 1 : 0];
      r = ((r - iterations) % input.loader.workers + input.loader.workers) % input.loader.workers;
    }
    boundary += iterations;
    instantiated += iterations;
    thread_ended += iterations;
  }

  void at_boundary() {
    if (!opt.steady_state_shortcut || boundary < opt.trace_iterations) return;
    // A skipped span must hand the loaders their batches as the simulation would: it ends
    // loader_depth() batches before the phase's, unless they have already been given every
    // batch and have loaded them all (an epoch of fewer iterations than the loaders keep
    // ahead is then skipped too).
    const bool handed_all = loaders_handed_all();
    if (handed_all && loaders_busy()) return;
    std::int64_t margin = handed_all ? 2 : loader_depth() + 2;
    if (boundary + margin >= uniform_end(boundary)) {
      forget_checkpoint();
      return;
    }
    // Periods are whole cycles of micro-batch plans: comparing only at the start of a cycle
    // lets the remembered snapshots span up to that many cycles, whatever the cycle's length.
    // What detection costs is the tasks run and the snapshots written; a loop that has not
    // repeated within the budget is given up rather than left to run for minutes.
    if (checked_sum(spent, engine.tasks_finished()) > budget) {
      throw SimulationTooLong(stats.simulated_iterations, total_iterations);
    }
    if (cycle_position(boundary) != 0 || speed_step(boundary) != 0) return;
    std::vector<std::int64_t> key = snapshot();
    spent = checked_sum(spent, static_cast<std::int64_t>(key.size()));
    // Every rank of a large cluster runs millions of tasks an iteration and writes as many
    // snapshot values, and its loop repeats after as many iterations as a small cluster's: the
    // budget is at least kBudgetIterations iterations of that work, so that a plan's size alone
    // never makes its point unsettled.
    budget = std::max(
        budget, checked_product(kBudgetIterations,
                                checked_sum(plan_ops, static_cast<std::int64_t>(key.size()))));
    std::uint64_t hash = 1469598103934665603ull;  // FNV-1a over the values
    for (std::int64_t v : key)
      hash = (hash ^ static_cast<std::uint64_t>(v)) * 1099511628211ull;
    if (!checkpoint || checkpoint->hash != hash || checkpoint->snapshot != key) {
      if (!checkpoint || ++since_checkpoint >= checkpoint_span) {
        if (checkpoint) checkpoint_span *= 2;
        since_checkpoint = 0;
        checkpoint = Checkpoint{std::move(key), hash, boundary, engine.now(), stats};
      }
      return;
    }
    const Checkpoint& then = *checkpoint;
    std::int64_t period = boundary - then.iteration;
    std::int64_t periods = (uniform_end(boundary) - margin - boundary) / period;
    if (periods < 1) return;
    SimTime delta = (engine.now() - then.time) * periods;
    stats += period_times(stats, then.stats, periods);
    std::int64_t skipped = period * periods;
    engine.shift(delta, [skipped, bits = tags.op_bits](std::uint64_t tag) {
      return tag + (static_cast<std::uint64_t>(skipped) << bits);
    });
    shift_driver(delta, skipped);
    forget_checkpoint();
  }

  void forget_checkpoint() {
    checkpoint.reset();
    checkpoint_span = 1;
    since_checkpoint = 0;
  }

  EpochStats run() {
    if (input.loader.workers > 0) start_loaders(0, {});
    instantiate(0);
    while (engine.run())
      at_boundary();
    SimTime end = engine.now();
    if (end > gpu_busy_until) attribute_idle(gpu_busy_until, end);
    stats.epoch = end;
    stats.iterations = total_iterations;
    stats.simulated_tasks = engine.tasks_finished();
    if (!loader_tasks.empty()) throw std::logic_error("loader batches left unconsumed");
    if (!open_collectives.empty()) throw std::logic_error("a collective never ended");
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

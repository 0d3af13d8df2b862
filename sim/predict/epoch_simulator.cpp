// The epoch driver: lazy instantiation of iteration plans into the engine, their flows and
// analytic collectives, and exact steady-state skipping. Its parts live in sim/predict/epoch/:
// plan_index (task tags, per-plan indexes, values by lane), phases (training then validation),
// loader_pools (DataLoader workers), core_sharing (threads sharing a node's cores), accounting
// (GPU-idle attribution and counters), period_detector (Brent's method over snapshots).
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
#include "sim/predict/epoch/accounting.h"
#include "sim/predict/epoch/core_sharing.h"
#include "sim/predict/epoch/loader_pools.h"
#include "sim/predict/epoch/period_detector.h"
#include "sim/predict/epoch/phases.h"
#include "sim/predict/epoch/plan_index.h"

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

using namespace epoch;  // the driver's parts

struct EpochSimulator::Impl {
  Impl(const EpochInput& in, const EpochOptions& options, Trace& events)
      : input(in), opt(options), trace(events), tags(largest_plan(in)), phases(in) {
    total_iterations = phases.total();
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
      engine.set_start_observer(
          [this](TaskHandle, ResourceId id) { count_retimed(cores.started(id)); });
    }
  }

  const EpochInput& input;
  EpochOptions opt;
  Trace& trace;
  const TagLayout tags;
  const Phases phases;
  Engine engine;
  std::int64_t total_iterations = 0;
  std::vector<PlanIndex> train_cycle, validation_cycle;  // per distinct plan of each phase
  PlanIndex train_last, validation_last;

  CoreSharing cores{engine, input.cpu_cores_per_node, input.gpus_per_node};
  LoaderPools loaders{input, phases, tags, engine, cores};
  LaneMap<ResourceId> lanes;
  // By resource: whether it is a lane's FIFO server (not a loader worker, the network or the
  // delay server). Resources past its end are not.
  std::vector<char> is_lane;
  MaxMinFairNetwork* network = nullptr;
  std::unique_ptr<NetworkMap> routes;
  ResourceId network_id = 0;
  ResourceId delay_id = 0;
  bool has_delay = false;
  LaneMap<TaskHandle> lane_last;
  std::vector<TaskHandle> instance_handles, instance_deps;  // scratch of instantiate()
  // Per GPU (by its compute lane): kernels launched, oldest first.
  LaneMap<std::deque<TaskHandle>> launch_queue;

  Accounting accounting;
  EpochStats& stats = accounting.stats;
  std::map<Lane, std::deque<SimTime>> trace_open;  // traced collective begins per lane

  std::int64_t boundary = -1;
  std::int64_t instantiated = -1;  // the last iteration added to the engine
  std::int64_t thread_ended = -1;  // the last iteration a CPU thread has finished its part of
  std::map<std::pair<const PlanIndex*, const PlanIndex*>, bool> deferral;  // see defers()
  PeriodDetector periods;
  std::int64_t spent = 0;     // snapshot values written, for the simulation budget
  std::int64_t budget = 0;    // the options' budget, or kBudgetIterations iterations' work
  std::int64_t plan_ops = 0;  // ops of the largest plan

  // The jitter step of iteration g (0 without per-rank speeds).
  std::size_t speed_step(std::int64_t g) const {
    if (input.gpu_speeds.empty()) return 0;
    return static_cast<std::size_t>((g - phases.start(g)) %
                                    static_cast<std::int64_t>(input.gpu_speeds.size()));
  }
  const IterationPlan& plan(std::int64_t g) const {
    const Phase& phase = phases.phase(g);
    return phases.is_last(g) ? phase.last : phase.plans[phase.cycle[phases.cycle_position(g)]];
  }
  PlanIndex& index(std::int64_t g) {
    const std::size_t at = phases.cycle_position(g);
    if (phases.in_validation(g)) {
      return phases.is_last(g) ? validation_last : validation_cycle[input.validation.cycle[at]];
    }
    return phases.is_last(g) ? train_last : train_cycle[input.train.cycle[at]];
  }
  void add_resource_info(ResourceId id, bool lane) {
    if (is_lane.size() <= id) is_lane.resize(id + 1, 0);
    is_lane[id] = lane ? 1 : 0;
  }

  ResourceId lane_resource(const Lane& lane) {
    if (lane.kind == LaneKind::network) return network_resource();
    if (lane.kind == LaneKind::delay) {
      if (!has_delay) {
        delay_id = engine.add_resource(std::make_unique<DelayServer>(lane_name(lane)));
        add_resource_info(delay_id, false);
        has_delay = true;
      }
      return delay_id;
    }
    if (const ResourceId* found = lanes.find(lane)) return *found;
    ResourceId id = engine.add_resource(std::make_unique<FifoServer>(lane_name(lane)));
    add_resource_info(id, true);
    if (lane.kind == LaneKind::cpu) cores.add(id, lane.index);
    lanes[lane] = id;
    return id;
  }

  // Threads re-timed as cores are shared count against the simulation budget, like tasks run.
  void count_retimed(std::int64_t retimed) {
    if (retimed == CoreSharing::kUnchanged) return;
    spent = checked_sum(spent, retimed);
    if (opt.steady_state_shortcut && checked_sum(spent, engine.tasks_finished()) > budget) {
      throw SimulationTooLong(stats.simulated_iterations, total_iterations);
    }
  }

  ResourceId network_resource() {
    if (network != nullptr) return network_id;
    if (input.topology == nullptr || input.profile == nullptr) {
      throw std::logic_error("a plan with flows needs a topology and a profile");
    }
    auto owned = std::make_unique<MaxMinFairNetwork>("network");
    network = owned.get();
    network_id = engine.add_resource(std::move(owned));
    add_resource_info(network_id, false);
    routes = std::make_unique<NetworkMap>(
        *input.topology, *input.profile, *network,
        protocol_step_tables(*input.profile, ll_clock_scale(*input.topology)));
    if (opt.trace_iterations > 0) {
      network->set_rate_listener([this](SimTime when, std::uint32_t link, double rate) {
        if (boundary >= opt.trace_iterations) return;
        double capacity = network->link_capacity(link).value();
        trace.add_counter(network->link_name(link), when, rate / capacity);
      });
    }
    return network_id;
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
      if (op.consumes_loader >= 0) deps.push_back(loaders.take(op.consumes_loader, g));
      if (op.launches_on_gpu >= 0) {
        const std::deque<TaskHandle>& queue =
            launch_queue[Lane{LaneKind::compute, op.launches_on_gpu}];
        if (static_cast<int>(queue.size()) >= input.launch_queue_depth)
          deps.push_back(queue.front());
      }
      std::uint32_t detail = 0;
      std::int64_t work = op.work;
      if (op.lane.kind == LaneKind::network) {
        network_resource();
        if (!routed) {
          idx.routes[stored] =
              op.fabric != FabricWay::none
                  ? routes->fabric_route(op.src_gpu, op.step_protocol, op.fabric, op.steps)
              : op.mirror ? routes->mirror_route(op.src_gpu, op.step_protocol, op.in_network,
                                                 op.steps, op.kernel_rate)
                          : routes->route(op.src_gpu, op.dst_gpu, op.step_protocol, op.steps,
                                          op.kernel_rate);
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
      loaders.start(input.train.iterations, end_of_training);
    }
  }

  void observe(const FinishedTask& t) {
    std::int64_t g = tags.iteration(t.tag);
    // First, as the engine would have released the next iteration's first op of this thread
    // had it been added already (before the thread's core is given up, below).
    if ((t.note & kThreadEndNote) != 0 && defers(g) && thread_ended < g) {
      thread_ended = g;
      if (boundary >= g) instantiate_after(g);
    }
    count_retimed(cores.finished(t.resource));
    std::uint64_t op_index = tags.op(t.tag);
    const bool on_lane = t.resource < is_lane.size() && is_lane[t.resource] != 0;
    bool traced = g < opt.trace_iterations;
    if (op_index >= tags.loader_base()) {
      if (traced) record(engine.resource(t.resource).name(), "load batch", Category::data, t);
      return;
    }
    // A kernel or launch of a rank but the first, outside a trace: counted, nothing more.
    if (!traced && (t.note & kLookNote) == 0) {
      if ((t.note & kKernelNote) != 0 && on_lane) ++stats.kernels;
      return;
    }
    const IterationPlan& p = plan(g);
    const PlanIndex& idx = index(g);
    const PlanEntry op = p.op(op_index);
    if (on_lane && (op.lane.kind == LaneKind::compute || op.lane.kind == LaneKind::copy)) {
      ++stats.kernels;
      if (op.lane.index == 0) accounting.gpu_activity(t.start, t.end, op.category);
    }
    if (op.marker != Marker::none && on_lane) on_marker(p, op, t, traced);
    if (on_lane && op.lane == Lane{LaneKind::cpu, 0})
      accounting.cpu_activity(t.start, t.end, op.category);
    // Flows show as link counters, analytic collectives as the ranks' communication spans.
    if (traced && op.marker == Marker::none && op.lane.kind != LaneKind::network &&
        op.lane.kind != LaneKind::delay) {
      record(engine.resource(t.resource).name(), p.name(op), op.category, t);
    }

    if (op.consumes_loader >= 0) loaders.consumed(op.consumes_loader, g);
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
      accounting.collective_begin(t.end, op.collective_bytes);
    } else {
      accounting.collective_end(t.end);
    }
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
    s.push_back(static_cast<std::int64_t>(phases.cycle_position(boundary)));
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
    loaders.append_snapshot(s, boundary, handle);
    accounting.append_snapshot(s, now);
    return s;
  }

  // Every resource once, with each loader pool listed from the worker that takes the next batch
  // of its phase: two boundaries whose pools differ only by a rotation then snapshot equally.
  std::vector<ResourceId> canonical_resource_order() const {
    std::vector<ResourceId> order(engine.resource_count());
    for (ResourceId r = 0; r < order.size(); ++r)
      order[r] = r;
    loaders.rotate_pools(order, boundary);
    return order;
  }

  // The last iteration (exclusive) up to which iteration g's phase instantiates plain, cyclic
  // iterations: the last batch differs, and the end of training also starts the validation
  // loaders.
  std::int64_t uniform_end(std::int64_t g) const { return phases.end(g) - 1; }

  void shift_driver(SimTime delta, std::int64_t iterations) {
    loaders.shift(boundary, iterations);
    accounting.shift(delta);
    boundary += iterations;
    instantiated += iterations;
    thread_ended += iterations;
  }

  void at_boundary() {
    if (!opt.steady_state_shortcut || boundary < opt.trace_iterations) return;
    // A skipped span must hand the loaders their batches as the simulation would: it ends
    // the loaders' depth in batches before the phase's, unless they have already been given every
    // batch and have loaded them all (an epoch of fewer iterations than the loaders keep
    // ahead is then skipped too).
    const bool handed_all = loaders.handed_all(boundary);
    if (handed_all && loaders.busy(boundary)) return;
    std::int64_t margin = handed_all ? 2 : loaders.depth() + 2;
    if (boundary + margin >= uniform_end(boundary)) {
      periods.forget();
      return;
    }
    // Periods are whole cycles of micro-batch plans: comparing only at the start of a cycle
    // lets the remembered snapshots span up to that many cycles, whatever the cycle's length.
    // What detection costs is the tasks run and the snapshots written; a loop that has not
    // repeated within the budget is given up rather than left to run for minutes.
    if (checked_sum(spent, engine.tasks_finished()) > budget) {
      throw SimulationTooLong(stats.simulated_iterations, total_iterations);
    }
    if (phases.cycle_position(boundary) != 0 || speed_step(boundary) != 0) return;
    std::vector<std::int64_t> key = snapshot();
    spent = checked_sum(spent, static_cast<std::int64_t>(key.size()));
    // Every rank of a large cluster runs millions of tasks an iteration and writes as many
    // snapshot values, and its loop repeats after as many iterations as a small cluster's: the
    // budget is at least kBudgetIterations iterations of that work, so that a plan's size alone
    // never makes its point unsettled.
    budget = std::max(
        budget, checked_product(kBudgetIterations,
                                checked_sum(plan_ops, static_cast<std::int64_t>(key.size()))));
    const PeriodDetector::Checkpoint* then =
        periods.offer(std::move(key), boundary, engine.now(), stats);
    if (then == nullptr) return;
    std::int64_t period = boundary - then->iteration;
    std::int64_t repeats = (uniform_end(boundary) - margin - boundary) / period;
    if (repeats < 1) return;
    SimTime delta = (engine.now() - then->time) * repeats;
    stats += period_times(stats, then->stats, repeats);
    std::int64_t skipped = period * repeats;
    engine.shift(delta, [skipped, bits = tags.op_bits](std::uint64_t tag) {
      return tag + (static_cast<std::uint64_t>(skipped) << bits);
    });
    shift_driver(delta, skipped);
    periods.forget();
  }

  EpochStats run() {
    if (input.loader.workers > 0) loaders.start(0, {});
    instantiate(0);
    while (engine.run())
      at_boundary();
    accounting.finish(engine.now());
    stats.iterations = total_iterations;
    stats.simulated_tasks = engine.tasks_finished();
    if (!loaders.empty()) throw std::logic_error("loader batches left unconsumed");
    if (accounting.collectives_open()) throw std::logic_error("a collective never ended");
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

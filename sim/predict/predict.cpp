// From a sweep point to a predicted epoch: build the step plans, simulate, explain.
#include "sim/predict/predict.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <algorithm>
#include <future>
#include <map>
#include <mutex>
#include <new>
#include <optional>
#include <system_error>

#include <fmt/format.h>

#include "core/input_error.h"
#include "core/spec/rank_share.h"
#include "core/yaml/strict_yaml.h"
#include "sim/compute/device_model.h"
#include "sim/engine/engine.h"
#include "sim/network/topology.h"
#include "sim/predict/cluster_conditions.h"
#include "sim/predict/point_pool.h"
#include "sim/predict/stragglers.h"
#include "sim/strategy/multi_gpu.h"
#include "sim/strategy/step_builder.h"
#include "sim/strategy/strategy.h"

namespace epochcast::sim {

namespace {

// A point whose every-rank simulation would take more memory than allowed, found before
// building it.
class EveryRankTooLarge : public std::runtime_error {
 public:
  EveryRankTooLarge(double bytes, double operations_per_rank)
      : std::runtime_error("a point too large to simulate every rank"),
        bytes_(bytes),
        operations_per_rank_(operations_per_rank) {}
  double bytes() const { return bytes_; }
  double operations_per_rank() const { return operations_per_rank_; }

 private:
  double bytes_;
  double operations_per_rank_;
};

// Iterations and batch sizes of one pass over a rank's share of `samples` (core/spec/rank_share.h).
Phase make_phase(std::int64_t samples, int ranks, std::int64_t batch, bool drop_last) {
  const RankShare share = rank_share(samples, ranks, batch, drop_last);
  Phase phase;
  phase.full_batch = batch;
  phase.iterations = share.iterations;
  phase.last_batch = share.last_batch;
  return phase;
}

double seconds(SimTime t) {
  return t.seconds();
}
std::string percent(double fraction) {
  return fmt::format("{:.0f}%", 100.0 * fraction);
}

// How the traffic between GPU 0 and GPU 1 travels, in words.
std::string path_words(const Topology& topology, int gpus) {
  if (gpus < 2) return "";
  switch (topology.path_type(0, 1)) {
    case PathType::nvlink:
      return "NVLink";
    case PathType::pix:
      return "a PCIe switch";
    case PathType::pxb:
      return "several PCIe switches";
    case PathType::phb:
      return topology.nccl_peer_to_peer(0, 1) ? "the shared PCIe host bridge"
                                              : "host memory, through the shared PCIe host bridge";
    case PathType::sys:
      return topology.nccl_peer_to_peer(0, 1) ? "the link between CPU sockets"
                                              : "host memory, across the link between CPU sockets";
    case PathType::net:
      return "the network";
    case PathType::self:
      break;
  }
  return "";
}

struct Explanation {
  std::string crossing;  // path_words for multi-GPU points
  const IterationPlan* step = nullptr;
};

void explain(PointResult& r, const ScenarioSpec& s, const Explanation& x) {
  const EpochStats& st = r.stats;
  const Breakdown& b = r.breakdown;
  double epoch = r.epoch_seconds;
  double compute = b.forward + b.backward + b.optimizer;
  struct Candidate {
    double share;
    const char* word;
  };
  std::vector<Candidate> candidates = {{compute / epoch, "compute"},
                                       {b.host / epoch, "host"},
                                       {b.data / epoch, "input"},
                                       {b.h2d / epoch, "copy"},
                                       {b.communication / epoch, "communication"}};
  auto top =
      std::max_element(candidates.begin(), candidates.end(),
                       [](const Candidate& p, const Candidate& q) { return p.share < q.share; });
  r.bottleneck = top->word;
  std::int64_t steps = std::max<std::int64_t>(r.train_iterations + r.validation_iterations, 1);
  double host_per_step = seconds(st.cpu_busy[static_cast<std::size_t>(Category::forward)] +
                                 st.cpu_busy[static_cast<std::size_t>(Category::backward)] +
                                 st.cpu_busy[static_cast<std::size_t>(Category::optimizer)] +
                                 st.cpu_busy[static_cast<std::size_t>(Category::host)] +
                                 st.cpu_busy[static_cast<std::size_t>(Category::communication)]) /
                         static_cast<double>(steps);
  if (r.bottleneck == std::string("compute")) {
    const char* part = b.backward >= b.forward && b.backward >= b.optimizer ? "the backward pass"
                       : b.forward >= b.optimizer                           ? "the forward pass"
                                                                            : "the optimizer step";
    double part_time = std::max({b.forward, b.backward, b.optimizer});
    r.diagnosis =
        fmt::format("compute-bound: the GPU is busy {} of the epoch, most of it in {} ({})",
                    percent(r.gpu_busy_fraction), part, percent(part_time / epoch));
  } else if (r.bottleneck == std::string("host") &&
             seconds(st.cpu_busy[static_cast<std::size_t>(Category::optimizer)]) /
                     static_cast<double>(steps) >
                 0.5 * host_per_step) {
    // Most of the host's work is the optimizer's own (torch.optim on the CPU under offload, or
    // its per-tensor dispatch).
    const bool offload = s.training.fsdp.cpu_offload && (s.training.strategy == Strategy::zero2 ||
                                                         s.training.strategy == Strategy::fsdp);
    r.diagnosis = fmt::format(
        "host-bound: the GPU waits {} of the epoch while the CPU works {:.2f} ms a step, {:.2f} "
        "ms of it in the optimizer step{}; larger batches take fewer steps",
        percent(b.host / epoch), host_per_step * 1e3,
        seconds(st.cpu_busy[static_cast<std::size_t>(Category::optimizer)]) /
            static_cast<double>(steps) * 1e3,
        offload ? " on the CPU (training.fsdp.cpu_offload)" : "");
  } else if (r.bottleneck == std::string("host")) {
    r.diagnosis = fmt::format(
        "host-bound: the GPU waits {} of the epoch while the CPU dispatches {} kernels per step "
        "({:.2f} ms of host work per step); larger batches or fewer, fused kernels help",
        percent(b.host / epoch), x.step->kernels, host_per_step * 1e3);
  } else if (r.bottleneck == std::string("input")) {
    const LoaderSpec& loader = s.loader;
    // One process loads global batches; a process per GPU loads its own share.
    const std::int64_t loaded = strategy_model(s.training.strategy).loader_batch(r.point);
    double batch_load = loader.batch_load_cpu(loaded).value();
    r.diagnosis = fmt::format(
        "input-bound: the GPU waits {} of the epoch for data; a batch takes {:.1f} ms of CPU to "
        "load {}",
        percent(b.data / epoch), batch_load * 1e3,
        loader.workers == 0 ? std::string("in the training thread (workers: 0)")
                            : fmt::format("on each of {} workers", loader.workers));
  } else if (r.bottleneck == std::string("copy")) {
    r.diagnosis = fmt::format(
        "copy-bound: host-to-device copies take {} of the epoch over PCIe "
        "{}.0 x{} ({} memory)",
        percent(b.h2d / epoch), s.machine.gpu.pcie_generation, s.machine.gpu.pcie_lanes,
        s.loader.pin_memory ? "pinned" : "pageable");
  } else {
    double per_step = static_cast<double>(st.collective_bytes) / static_cast<double>(steps) / kMiB;
    const std::string what = strategy_model(s.training.strategy).collective_words();
    r.diagnosis = fmt::format(
        "communication-bound: the GPU waits {} of the epoch for collectives; {:.1f} MiB {} cross "
        "{} every step",
        percent(b.communication / epoch), per_step, what, x.crossing);
  }
  // A second share close behind changes what to try next (a compute-bound epoch that also
  // waits a third of its time for input wants loader workers as much as a faster GPU), so it
  // is named too.
  constexpr double kRunnerUpShare = 0.25;
  const Candidate* second = nullptr;
  for (const Candidate& c : candidates) {
    if (&c == &*top) continue;
    if (second == nullptr || c.share > second->share) second = &c;
  }
  if (second != nullptr && second->share >= kRunnerUpShare) {
    r.diagnosis += fmt::format("; next: {}, {} of the epoch", second->word, percent(second->share));
  }
}

std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}

// The machine as a job on a shared system sees it: its share of the SMs (so wave quantisation
// saturates at a smaller batch), of the peak rates and of the memory bandwidth, and host work
// that takes longer by the CPU it does not get.
// The GPU's peak rates and memory bandwidth times `factor`.
void scale_gpu_rates(GpuSpec& g, double factor) {
  for (auto& [precision, peak] : g.peak)
    peak = FlopsPerSecond(peak.value() * factor);
  g.memory_bandwidth = BytesPerSecond(g.memory_bandwidth.value() * factor);
}

ScenarioSpec under_contention(const ScenarioSpec& scenario) {
  ScenarioSpec s = scenario;
  const double gpu = s.contention.gpu_share;
  const double cpu = s.contention.cpu_share;
  GpuSpec& g = s.machine.gpu;
  g.sm_count = std::max(1, static_cast<int>(std::lround(g.sm_count * gpu)));
  scale_gpu_rates(g, gpu);
  HostCosts& h = s.profile.host;
  for (Seconds* cost :
       {&h.forward_op, &h.backward_op, &h.optimizer_op, &h.step_overhead, &h.sync, &h.batch_fetch,
        &s.profile.links.collective_launch, &s.loader.sample_cpu, &s.loader.batch_cpu}) {
    *cost = Seconds(cost->value() / cpu);
  }
  s.contention = ContentionSpec{};
  return s;
}

// The GPUs of a synchronous data-parallel step as the step sees them: at the pace of the
// slowest of them (sim/predict/stragglers.h). In a symmetric simulation every rank stands for
// that slowest one; the faster ranks' waits for it are the same time spent idle.
bool waits_for_slowest(const ScenarioSpec& s, const SweepPoint& point) {
  return s.training.wait_for_slowest_gpu && point.gpus > 1 &&
         s.training.strategy != Strategy::single;
}
ScenarioSpec at_slowest_gpu(const ScenarioSpec& scenario, int gpus) {
  ScenarioSpec s = scenario;
  scale_gpu_rates(s.machine.gpu,
                  1 / slowest_gpu_factor(gpus, s.profile.gpu.speed_spread_or_default()));
  return s;
}

PointResult simulate_point(const ScenarioSpec& scenario, const SweepPoint& point,
                           const PredictOptions& options) {
  PointResult r;
  r.point = point;
  const TrainingSpec& training = scenario.training;
  const MachineSpec& machine = scenario.machine;
  DeviceModel device(machine.gpu, scenario.profile, training.precision, training.convolution);
  ModelAnalysis analysis = analyze_model(scenario.model, cost_options(training.precision));
  StepContext context{scenario, analysis, device};
  const bool multi = point.gpus > 1 && training.strategy != Strategy::single;
  const StrategyModel& strategy = strategy_model(training.strategy);
  r.memory = strategy.memory(context, point);

  EpochInput input;
  input.loader = scenario.loader;
  input.cpu_cores_per_node = training.share_cpu_cores ? machine.host.cores : 0;
  input.gpus_per_node = machine.gpus_per_node;
  // A process per GPU loads its share of the data set; one process loads global batches of all
  // of it.
  const int loading_processes = strategy.loading_processes(point);
  const std::int64_t loader_batch = strategy.loader_batch(point);
  input.train = make_phase(scenario.dataset.train_samples, loading_processes, loader_batch,
                           training.drop_last);
  input.validation =
      make_phase(scenario.dataset.validation_samples, loading_processes, loader_batch, false);
  r.train_iterations = input.train.iterations;
  r.validation_iterations = input.validation.iterations;
  if (!r.memory.fits) {
    r.bottleneck = "memory";
    r.diagnosis = fmt::format(
        "out of memory: a per-GPU batch of {} needs {:.2f} GiB of the GPU's {:.2f} GiB; the "
        "largest batch that fits is {}",
        point.per_gpu_batch, to_gib(r.memory.peak), to_gib(r.memory.capacity),
        r.memory.largest_batch);
    return r;
  }

  // The machine graph and the GPUs simulated: every GPU of a node, or of node 0 standing for
  // identical nodes across a cluster.
  const int nodes = static_cast<int>(ceil_div(point.gpus, machine.gpus_per_node));
  PointConditions conditions = point_conditions(scenario, point.gpus);
  const bool symmetric = nodes > 1 && options.symmetric_clusters && !training.every_rank &&
                         every_rank_reason(scenario, point.gpus).empty();
  if (!symmetric && nodes > 1 && options.memory_limit_bytes > 0) {
    // Every rank's operations are live engine tasks for at least the two iterations the
    // steady-state search compares: a lower bound of the memory simulating every rank takes,
    // known before any of it is built.
    const auto per_rank =
        static_cast<double>(single_device_training_step(context, point.per_gpu_batch).size());
    const double at_least =
        2 * static_cast<double>(point.gpus) * per_rank * static_cast<double>(Engine::task_bytes());
    if (at_least > static_cast<double>(options.memory_limit_bytes)) {
      throw EveryRankTooLarge(at_least, per_rank);
    }
  }
  Topology topology = Topology::build(machine, symmetric ? 1 : nodes, symmetric);
  if (!symmetric) apply_link_faults(scenario, topology);
  if (nodes > 1) r.ranks_simulated = symmetric ? "node 0 mirrored" : "every rank";
  r.conditions = conditions.applied;
  input.gpu_speeds = std::move(conditions.gpu_speeds);
  std::map<std::tuple<int, std::int64_t, int>, CollectiveChoice> cache;
  MultiGpuContext multi_context{context, topology, scenario.profile, training.analytic_collectives,
                                {},      nodes,    symmetric,        &cache};
  for (int n = 0; n < (symmetric ? 1 : nodes); ++n) {
    std::vector<int> gpus;
    int in_node = std::min(machine.gpus_per_node, point.gpus);
    for (int g = 0; g < in_node; ++g)
      gpus.push_back(n * machine.gpus_per_node + g);
    multi_context.nodes.push_back(gpus);
  }

  auto train_step = [&](std::int64_t batch, MicroStep micro) {
    return strategy.training_step(multi_context, point, batch, micro);
  };
  auto validation_step = [&](std::int64_t batch) {
    return strategy.validation_step(multi_context, point, batch);
  };
  const int cycle = strategy.accumulation_cycle(training);
  // The epoch's last micro-batch always completes its step (and zeroes the gradients where it
  // is also the first of its cycle).
  const int last_micro = static_cast<int>((input.train.iterations - 1) % cycle);
  auto last_step = [&] {
    return train_step(input.train.last_batch, MicroStep{last_micro == 0, true});
  };
  // With every rank of a large cluster, building a plan takes seconds: the last one is built
  // on a thread of its own meanwhile (the same plan; the collectives it shares with the others
  // are chosen once, under the cache's lock). Where no thread can be had, after the others.
  std::mutex cache_mutex;
  std::future<IterationPlan> last_plan;
  if (strategy.process_per_gpu() && !symmetric &&
      multi_context.ranks().size() >= static_cast<std::size_t>(kRanksWorthAThread)) {
    multi_context.cache_mutex = &cache_mutex;
    try {
      last_plan = std::async(std::launch::async, last_step);
    } catch (const std::system_error&) {
    }
  }
  // Micro-batches between the first and the last of a cycle have one plan: at most three are
  // built, whatever the cycle's length.
  for (int micro = 0; micro < cycle; ++micro) {
    const bool between = micro > 0 && micro < cycle - 1;
    if (!between || micro == 1) {
      input.train.plans.push_back(
          train_step(input.train.full_batch, MicroStep{micro == 0, micro == cycle - 1}));
    }
    input.train.cycle.push_back(between ? 1 : input.train.plans.size() - 1);
  }
  input.train.last = last_plan.valid() ? last_plan.get() : last_step();
  if (input.validation.iterations > 0) {
    input.validation.plans = {validation_step(input.validation.full_batch)};
    input.validation.cycle = {0};
    input.validation.last = validation_step(input.validation.last_batch);
  }
  // The plans hold what they need of the collectives chosen: with every rank of a large
  // cluster, the choices' transfer plans are as large as a plan. Their memory goes back to the
  // system before the simulation's peak (glibc keeps what threads freed, in their own arenas,
  // for them alone: the candidates built meanwhile, see choose_collective).
  cache.clear();
#ifdef __GLIBC__
  if (!symmetric && nodes > 1) malloc_trim(0);
#endif
  input.loaders = strategy.process_per_gpu() ? static_cast<int>(multi_context.ranks().size()) : 1;
  input.topology = &topology;
  input.profile = &scenario.profile;

  EpochOptions epoch_options;
  epoch_options.steady_state_shortcut = options.steady_state_shortcut;
  epoch_options.trace_iterations = options.trace_iterations;
  epoch_options.simulation_budget = options.simulation_budget;
  EpochSimulator simulator(input, epoch_options);
  r.stats = simulator.run();
  r.trace = simulator.trace();
  r.simulated = true;

  const EpochStats& st = r.stats;
  auto busy = [&](Category c) { return seconds(st.gpu_busy[static_cast<std::size_t>(c)]); };
  auto idle = [&](Category c) { return seconds(st.gpu_idle[static_cast<std::size_t>(c)]); };
  r.epoch_seconds = seconds(st.epoch);
  // Waiting for batches, and decoding them on the GPU (loader.gpu_decode_us).
  r.breakdown.data = idle(Category::data) + busy(Category::data);
  r.breakdown.h2d = busy(Category::h2d) + idle(Category::h2d);
  r.breakdown.forward = busy(Category::forward);
  r.breakdown.backward = busy(Category::backward);
  r.breakdown.optimizer = busy(Category::optimizer);
  r.breakdown.communication = busy(Category::communication) + idle(Category::communication);
  r.breakdown.host = idle(Category::host) + busy(Category::host) + busy(Category::sync);
  r.breakdown.other = seconds(st.gpu_idle_other);
  // Collectives in flight on GPU 0, plus the communication kernels of its compute stream
  // (flattening into buffers, accumulating reduced ones): the exposed share is idle time during
  // the former and the latter's busy time, so it never exceeds this.
  r.communication_seconds = seconds(st.communication) + busy(Category::communication);
  r.gpu_busy_fraction = seconds(st.gpu_busy_total()) / r.epoch_seconds;
  const std::int64_t trained =
      (loader_batch * (input.train.iterations - 1) + input.train.last_batch) * loading_processes;
  r.samples_per_second =
      static_cast<double>(std::min(trained, scenario.dataset.train_samples)) / r.epoch_seconds;
  r.iteration_seconds = r.epoch_seconds / static_cast<double>(r.train_iterations);
  explain(r, scenario,
          Explanation{multi ? path_words(topology, point.gpus) : "", &input.train.plans.back()});
  return r;
}

}  // namespace

std::string mirror_not_exact(const MachineSpec& machine, int gpus) {
  const int nodes = static_cast<int>(ceil_div(gpus, machine.gpus_per_node));
  const std::optional<NetworkTopology>& network = machine.topology.network;
  if (nodes <= 1 || !network || network->nodes_per_leaf <= 0 || nodes <= network->nodes_per_leaf)
    return "";
  if (network->oversubscription > 1) {
    return fmt::format(
        "the leaves' uplinks are oversubscribed 1:{:g}: {} nodes span {} leaves whose traffic "
        "contends in the spine",
        network->oversubscription, nodes, ceil_div(nodes, network->nodes_per_leaf));
  }
  // Without oversubscription a leaf's uplinks carry a full leaf's NICs (topology.cpp), so even
  // unevenly filled leaves never contend in the spine: node 0 still stands for every node.
  return "";
}

namespace {

// What to do about a point whose every rank takes too much memory: drop the flag that asked
// for it, or, where the simulator chose it, say why and what is left.
std::string every_rank_advice(const ScenarioSpec& scenario, int gpus) {
  const std::string why = every_rank_reason(scenario, gpus);
  if (scenario.training.every_rank && why.empty()) {
    return "simulating every rank takes memory in proportion to the ranks: let node 0 stand for "
           "identical nodes (drop --every-rank or training.every_rank), or simulate fewer GPUs";
  }
  return fmt::format(
      "every rank is simulated here because {}; simulate fewer GPUs, or allow more "
      "with --max-memory",
      why);
}

}  // namespace

std::string every_rank_reason(const ScenarioSpec& scenario, int gpus) {
  if (std::string why = mirror_not_exact(scenario.machine, gpus); !why.empty()) return why;
  if (ceil_div(gpus, scenario.machine.gpus_per_node) <= 1) return "";
  if (conditions_applied(scenario, gpus).empty()) return "";
  return "the scenario's stragglers or faults make the nodes differ";
}

namespace {

// The point as the scenario's adjustments have it: the training loop's host costs, the node's
// shared cores, the slowest GPU's pace.
PointResult simulate_adjusted(const ScenarioSpec& scenario, const SweepPoint& point,
                              const PredictOptions& options) {
  const bool libtorch_costs =
      scenario.training.loop == TrainingLoop::libtorch && scenario.profile.host_libtorch;
  if (!scenario.contention.shared() && !waits_for_slowest(scenario, point) && !libtorch_costs)
    return simulate_point(scenario, point, options);
  ScenarioSpec adjusted = scenario;
  if (libtorch_costs) adjusted.profile.host = loop_host_costs(scenario);
  if (scenario.contention.shared()) adjusted = under_contention(adjusted);
  if (waits_for_slowest(scenario, point)) adjusted = at_slowest_gpu(adjusted, point.gpus);
  return simulate_point(adjusted, point, options);
}

// The runs ScalingLoss takes its stragglers and contention from (EvenRuns); `as_given` is the
// point's own result, whose figures stand in where a run would remove nothing.
EvenRuns even_runs(const ScenarioSpec& scenario, const SweepPoint& point,
                   const PredictOptions& options, const PointResult& as_given) {
  PredictOptions plain = options;
  plain.trace_iterations = 0;
  auto figures = [](const PointResult& r) { return std::pair{r.epoch_seconds, r.breakdown}; };
  ScenarioSpec even = scenario;
  even.training.wait_for_slowest_gpu = false;
  even.conditions.slow_gpus.clear();
  even.conditions.slow_nodes.clear();
  even.conditions.jitter = StepJitter{};
  const ClusterConditions& given = scenario.conditions;
  const bool uneven = waits_for_slowest(scenario, point) || !given.slow_gpus.empty() ||
                      !given.slow_nodes.empty() || given.jitter.spread > 0;
  const auto at_even_speed =
      uneven ? figures(simulate_adjusted(even, point, plain)) : figures(as_given);
  ScenarioSpec uncontended = even;
  uncontended.training.nccl_sm_contention = false;
  uncontended.training.nccl_memory_contention = false;
  const bool contended =
      scenario.training.nccl_sm_contention || scenario.training.nccl_memory_contention;
  const auto without_contention =
      contended ? figures(simulate_adjusted(uncontended, point, plain)) : at_even_speed;
  return EvenRuns{.even_speed_epoch = at_even_speed.first,
                  .uncontended_epoch = without_contention.first,
                  .uncontended = without_contention.second};
}

}  // namespace

PointResult predict_point(const ScenarioSpec& scenario, const SweepPoint& point,
                          const PredictOptions& options) {
  if (std::string problem = point_problem(scenario, point); !problem.empty()) {
    throw InputError(SourceMark{scenario.source_file, 0, 0}, "sweep",
                     fmt::format("the point {} GPU{}, global batch {} cannot run: {}", point.gpus,
                                 point.gpus == 1 ? "" : "s", point.global_batch, problem));
  }
  try {
    PointResult result = simulate_adjusted(scenario, point, options);
    if (result.simulated && point.gpus > 1 &&
        strategy_model(scenario.training.strategy).process_per_gpu()) {
      result.even_runs = even_runs(scenario, point, options, result);
    }
    return result;
  } catch (const SimulationTooLong& slow) {
    throw InputError(
        SourceMark{scenario.source_file, 0, 0}, "sweep",
        fmt::format("the point {} GPU{}, global batch {} did not settle into a repeating state "
                    "within the simulation budget ({} of its {} iterations simulated): its loop "
                    "is too irregular to predict quickly. Input pipelines that deliver in bursts "
                    "settle slowly, more so with many loader workers ({}) and long gradient "
                    "accumulation cycles ({}); fewer workers or a shorter cycle settle sooner",
                    point.gpus, point.gpus == 1 ? "" : "s", point.global_batch,
                    yaml::readable_integer(slow.simulated_iterations()),
                    yaml::readable_integer(slow.iterations()), scenario.loader.workers,
                    scenario.training.gradient_accumulation));
  } catch (const EveryRankTooLarge& estimate) {
    throw InputError(
        SourceMark{scenario.source_file, 0, 0}, "sweep",
        fmt::format("the point {} GPUs, global batch {} needs at least {:.1f} GiB to simulate "
                    "every rank ({} ranks x {:.0f} operations an iteration, two iterations held "
                    "at once), more than --max-memory allows ({:.1f} GiB): {}",
                    point.gpus, point.global_batch, estimate.bytes() / 1073741824.0,
                    yaml::readable_integer(point.gpus), estimate.operations_per_rank(),
                    static_cast<double>(options.memory_limit_bytes) / 1073741824.0,
                    every_rank_advice(scenario, point.gpus)));
  } catch (const std::bad_alloc&) {
    // Its structures (every rank's plans, a long trace) outgrew what the process may take.
    const double gib = static_cast<double>(options.memory_limit_bytes) / 1073741824.0;
    const bool every_rank =
        ceil_div(point.gpus, scenario.machine.gpus_per_node) > 1 &&
        (scenario.training.every_rank || !every_rank_reason(scenario, point.gpus).empty());
    throw InputError(
        SourceMark{scenario.source_file, 0, 0}, "sweep",
        fmt::format("the point {} GPU{}, global batch {} needs more memory to simulate than {}; "
                    "{}",
                    point.gpus, point.gpus == 1 ? "" : "s", point.global_batch,
                    options.memory_limit_bytes > 0
                        ? fmt::format("--max-memory allows ({:.1f} GiB)", gib)
                        : std::string("this machine has"),
                    every_rank ? every_rank_advice(scenario, point.gpus)
                               : "simulate fewer GPUs or fewer traced iterations, or allow more "
                                 "with --max-memory"));
  } catch (const SimulationOverflow&) {
    // Nothing is wrapped: the point is refused with what to look at.
    throw InputError(
        SourceMark{scenario.source_file, 0, 0}, "sweep",
        fmt::format("the point {} GPU{}, global batch {} does not fit the simulator: its epoch "
                    "would last longer than the clock holds (292 years of simulated time) or "
                    "count more than 2^63 of something; check the sizes and rates that make it "
                    "long (dataset.train_samples, contention shares, the GPU's and links' "
                    "figures)",
                    point.gpus, point.gpus == 1 ? "" : "s", point.global_batch));
  }
}

OneGpuComparison::OneGpuComparison(const ScenarioSpec& scenario, const PredictOptions& options,
                                   const std::vector<SweepPoint>& sweep)
    : scenario_(scenario), plain_(options), sweep_(sweep), plain_training_(scenario) {
  plain_.trace_iterations = 0;
  plain_training_.training.strategy = Strategy::single;
  for (const SweepPoint& p : sweep) {
    if (p.gpus == 1) in_sweep_.insert(p.global_batch);
  }
}

void OneGpuComparison::offer(const PointResult& result) {
  if (result.point.gpus == 1) one_gpu_.emplace(result.point.global_batch, result);
}

std::vector<std::int64_t> OneGpuComparison::references(const SweepPoint& point) const {
  // Strong scaling for a sweep of global batches, weak scaling for per-GPU batches; and one GPU
  // at the same global batch, which may be faster.
  std::vector<std::int64_t> batches = {
      scenario_.sweep.batch_is == BatchMeaning::per_gpu ? point.per_gpu_batch : point.global_batch};
  if (point.gpus > 1) batches.push_back(point.global_batch);
  // The scaling loss of a process per GPU: each rank's work on one GPU.
  if (point.gpus > 1 && strategy_model(scenario_.training.strategy).process_per_gpu())
    batches.push_back(point.per_gpu_batch);
  return batches;
}

void OneGpuComparison::prepare(int jobs) {
  // (batch, plain training): the strategy's references, then plain training's for the
  // scaling loss of a process per GPU.
  std::vector<std::pair<std::int64_t, bool>> missing;
  auto want = [&](std::int64_t batch, bool plain) {
    const bool have = plain ? plain_one_gpu_.contains(batch)
                            : in_sweep_.contains(batch) || one_gpu_.contains(batch);
    if (!have &&
        std::find(missing.begin(), missing.end(), std::pair{batch, plain}) == missing.end()) {
      missing.emplace_back(batch, plain);
    }
  };
  for (const SweepPoint& point : sweep_) {
    const std::vector<std::int64_t> batches = references(point);
    for (std::int64_t batch : batches)
      want(batch, false);
    if (batches.size() > 2) want(batches[2], true);
  }
  // A reference that fails to simulate is left out: apply() tries it again, and fails, only
  // for a point that needs it (one that fits), as the lazy path does.
  std::vector<std::optional<PointResult>> simulated(missing.size());
  simulate_points(missing.size(), jobs, [&](std::size_t i) -> PointResult {
    const auto [batch, plain] = missing[i];
    if (batch > scenario_.dataset.train_samples) {
      simulated[i] = PointResult{};
    } else {
      try {
        simulated[i] =
            predict_point(plain ? plain_training_ : scenario_, SweepPoint{1, batch, batch}, plain_);
      } catch (const std::exception&) {
        simulated[i].reset();
      }
    }
    return PointResult{};
  });
  for (std::size_t i = 0; i < missing.size(); ++i) {
    if (!simulated[i]) continue;
    const auto [batch, plain] = missing[i];
    (plain ? plain_one_gpu_ : one_gpu_).emplace(batch, std::move(*simulated[i]));
  }
}

bool OneGpuComparison::ready(const PointResult& result) const {
  if (!result.simulated) return true;
  for (std::int64_t batch : references(result.point)) {
    if (in_sweep_.contains(batch) && !one_gpu_.contains(batch)) return false;
  }
  return true;
}

ScalingLoss scaling_loss(const PointResult& point, const PointResult& one_gpu,
                         const PointResult& plain_one_gpu) {
  const double n = point.point.gpus;
  const EvenRuns runs = point.even_runs.value_or(EvenRuns{.even_speed_epoch = point.epoch_seconds,
                                                          .uncontended_epoch = point.epoch_seconds,
                                                          .uncontended = point.breakdown});
  const Breakdown& a = runs.uncontended;
  const Breakdown& b = one_gpu.breakdown;
  ScalingLoss loss;
  loss.reference_batch = one_gpu.point.global_batch;
  loss.ideal_epoch = plain_one_gpu.epoch_seconds / n;
  loss.loss = point.epoch_seconds - loss.ideal_epoch;
  loss.strategy = (one_gpu.epoch_seconds - plain_one_gpu.epoch_seconds) / n;
  loss.stragglers = point.epoch_seconds - runs.even_speed_epoch;
  loss.contention = runs.even_speed_epoch - runs.uncontended_epoch;
  loss.communication = a.communication - b.communication / n;
  loss.compute =
      (a.forward + a.backward + a.optimizer) - (b.forward + b.backward + b.optimizer) / n;
  loss.input = (a.data + a.h2d) - (b.data + b.h2d) / n;
  loss.host = a.host - b.host / n;
  loss.other = a.other - b.other / n;
  return loss;
}

const PointResult& OneGpuComparison::plain_reference(std::int64_t batch) {
  auto found = plain_one_gpu_.find(batch);
  if (found != plain_one_gpu_.end()) return found->second;
  // Plain training is a reference only: where it cannot be simulated the strategy on one GPU
  // stands in (apply), as prepare() leaves it.
  PointResult plain;
  try {
    plain = predict_point(plain_training_, SweepPoint{1, batch, batch}, plain_);
  } catch (const std::exception&) {
    plain = PointResult{};
  }
  return plain_one_gpu_.emplace(batch, std::move(plain)).first->second;
}

const PointResult& OneGpuComparison::reference(std::int64_t batch) {
  auto found = one_gpu_.find(batch);
  if (found != one_gpu_.end()) return found->second;
  if (batch > scenario_.dataset.train_samples)
    return one_gpu_.emplace(batch, PointResult{}).first->second;
  return one_gpu_.emplace(batch, predict_point(scenario_, SweepPoint{1, batch, batch}, plain_))
      .first->second;
}

void OneGpuComparison::apply(PointResult& r) {
  if (!r.simulated) return;
  const std::vector<std::int64_t> batches = references(r.point);
  const PointResult& base = reference(batches[0]);
  if (base.simulated) {
    r.speedup = r.samples_per_second / base.samples_per_second;
    r.scaling_efficiency = r.speedup / r.point.gpus;
  }
  if (r.point.gpus == 1) return;
  if (batches.size() > 2) {
    const PointResult& rank_work = reference(batches[2]);
    if (rank_work.simulated) {
      const PointResult& plain_work = plain_reference(batches[2]);
      r.scaling_loss = scaling_loss(r, rank_work, plain_work.simulated ? plain_work : rank_work);
    }
  }
  const PointResult& same_batch = reference(batches[1]);
  if (same_batch.simulated && same_batch.epoch_seconds < r.epoch_seconds) {
    r.one_gpu_faster = true;
    r.diagnosis += fmt::format("; 1 GPU is faster at this batch ({:.3f} s against {:.3f} s)",
                               same_batch.epoch_seconds, r.epoch_seconds);
  }
}

void compare_with_one_gpu(const ScenarioSpec& scenario, std::vector<PointResult>& results,
                          const PredictOptions& options) {
  std::vector<SweepPoint> sweep;
  for (const PointResult& r : results)
    sweep.push_back(r.point);
  OneGpuComparison comparison(scenario, options, sweep);
  // A one-GPU reference is taken as the sweep gave it, before any comparison changes it.
  for (const PointResult& r : results)
    comparison.offer(r);
  for (PointResult& r : results)
    comparison.apply(r);
}

std::vector<PointResult> predict(const ScenarioSpec& scenario, const PredictOptions& options) {
  std::vector<PointResult> results;
  for (const SweepPoint& point : expand_sweep(scenario)) {
    results.push_back(predict_point(scenario, point, options));
  }
  compare_with_one_gpu(scenario, results, options);
  return results;
}

}  // namespace epochcast::sim

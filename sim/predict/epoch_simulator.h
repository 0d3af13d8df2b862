// Simulates one epoch — training iterations, then an optional validation pass — on the engine,
// with data loaders feeding batches, and reports where the time went.
//
// Iterations are instantiated from their plans one step ahead — once the first CPU thread has
// finished its part of the iteration before, where nothing of the next could start earlier —
// and loader batches as slots free up, so the engine holds little more than one iteration. At every
// iteration boundary the simulator can take a snapshot of the whole state relative to that instant;
// when a snapshot repeats, the iterations in between form a period, and whole periods are skipped
// by shifting time and counters. Because the engine is deterministic and the snapshot covers
// everything that decides the future (resources, live tasks, pending events, flows, loader and
// attribution state), the result is exactly that of simulating every iteration; tests compare
// the two.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/spec/profile_spec.h"
#include "core/spec/scenario_spec.h"
#include "sim/engine/sim_time.h"
#include "sim/network/topology.h"
#include "sim/strategy/iteration_plan.h"

namespace epochcast::sim {

// Iterations of one loop over a data set (training or validation).
struct Phase {
  // The distinct plans of full batches, and which one each position of the cycle uses, in
  // turn: with gradient accumulation a cycle of k micro-batches has at most three plans (the
  // first also zeroes gradients, the last also communicates and steps, those between only
  // accumulate), however long it is.
  std::vector<IterationPlan> plans;
  std::vector<std::size_t> cycle;
  IterationPlan last;  // the last iteration (its batch may be smaller)
  std::int64_t iterations = 0;
  std::int64_t full_batch = 0;  // samples each loader batch holds
  std::int64_t last_batch = 0;
};

struct EpochInput {
  Phase train;
  Phase validation;  // iterations == 0 for none
  LoaderSpec loader;
  int loaders = 1;                // data loaders (one per process)
  int launch_queue_depth = 1024;  // kernels a GPU may have pending before launches block
  // For plans with network ops: the machine graph and the profile's link efficiencies.
  const Topology* topology = nullptr;
  const HardwareProfile* profile = nullptr;
  // The CPU cores of a node that its processes' threads share (the main threads and loader
  // workers of its ranks): when more are busy than there are cores, each runs at cores / busy
  // of its speed, as a fair scheduler shares them. 0: every thread has a core of its own.
  int cpu_cores_per_node = 0;
  int gpus_per_node = 1;  // to find a rank's node (CPU lanes and loaders are numbered by rank)
  // Stragglers and jitter (sim/predict/cluster_conditions.h): [step][rank], the speed of each
  // rank's compute kernels in an iteration of that step; iteration i of a phase takes step
  // i mod steps. Empty: every GPU at speed 1.
  std::vector<std::vector<double>> gpu_speeds;
};

// What simulating one epoch may cost before it is given up: tasks run plus state snapshot
// values written. 2^26 of them is seconds of one core, and some thirty times what the largest
// epoch among the bundled scenarios needs (docs/performance.md has the timings); an epoch that
// has not settled into a repeating state by then is pathological (see SimulationTooLong).
inline constexpr std::int64_t kDefaultSimulationBudget = std::int64_t{1} << 26;
// ...or, where that is more, this many iterations' work: the largest plan's ops and one state
// snapshot's values (every rank of 1,024 GPUs: about a million ops and 15 million values).
// A cluster simulated rank by rank can take a few tens of iterations to repeat exactly.
inline constexpr std::int64_t kBudgetIterations = 64;

struct EpochOptions {
  bool steady_state_shortcut = true;
  int trace_iterations = 0;  // record the first N training iterations for a trace
  // With the shortcut on, the work allowed (see kDefaultSimulationBudget), or kBudgetIterations
  // iterations' work where that is more: a small budget still lets a large plan settle. --exact
  // simulates every iteration, however long that takes.
  std::int64_t simulation_budget = kDefaultSimulationBudget;
};

// An epoch that did not reach a repeating state within its simulation budget: what was spent
// and how far it got, for the message that names the point.
class SimulationTooLong : public std::runtime_error {
 public:
  SimulationTooLong(std::int64_t simulated_iterations, std::int64_t iterations)
      : std::runtime_error("the epoch did not settle into a repeating state"),
        simulated_iterations_(simulated_iterations),
        iterations_(iterations) {}
  std::int64_t simulated_iterations() const { return simulated_iterations_; }
  std::int64_t iterations() const { return iterations_; }

 private:
  std::int64_t simulated_iterations_;
  std::int64_t iterations_;
};

// The first iterations of a point, for a Chrome trace. Traces of thousands of iterations run to
// millions of events, so names are held once each and events and counters refer to them by
// index (32 bytes an event).
struct Trace {
  struct Event {              // one executed operation
    std::uint32_t track = 0;  // into `tracks`: the resource (CPU thread, GPU stream, ...)
    std::uint32_t name = 0;   // into `names`
    Category category = Category::host;
    SimTime start;
    SimTime end;
  };
  struct Counter {           // a link's utilisation from `time` on (0 to 1)
    std::uint32_t link = 0;  // into `tracks`
    SimTime time;
    double utilisation = 0;
  };
  std::vector<std::string> tracks;
  std::vector<std::string> names;
  std::vector<Event> events;
  std::vector<Counter> counters;

  // Recording (names are looked up among those held; a decoded trace is read, not added to).
  void add(std::string_view track, std::string_view name, Category category, SimTime start,
           SimTime end);
  void add_counter(std::string_view link, SimTime time, double utilisation);
  bool empty() const { return events.empty() && counters.empty(); }

 private:
  // Looked up by string_view: a name already held costs no allocation.
  struct NameHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view text) const {
      return std::hash<std::string_view>{}(text);
    }
  };
  using NameIndex = std::unordered_map<std::string, std::uint32_t, NameHash, std::equal_to<>>;
  std::uint32_t intern(std::vector<std::string>& held, NameIndex& index, std::string_view text);
  NameIndex track_index_, name_index_;
};

// Where GPU 0's time went over the epoch: busy time by what it ran, and idle time by what kept
// it waiting — a collective in flight, else what the main CPU thread was doing. Together they
// add up to the epoch.
struct EpochStats {
  SimTime epoch;
  std::array<SimTime, kCategoryCount> gpu_busy{};
  std::array<SimTime, kCategoryCount> gpu_idle{};  // keyed by what starved it
  SimTime gpu_idle_other;                          // idle with the host idle too
  std::array<SimTime, kCategoryCount> cpu_busy{};  // main CPU thread, by category
  SimTime communication;  // GPU 0 with a collective in flight, or idle while the host drives one
  std::int64_t collective_bytes = 0;  // data its collectives moved
  std::int64_t collectives = 0;
  std::int64_t kernels = 0;  // GPU operations run in the epoch
  std::int64_t iterations = 0;
  std::int64_t simulated_iterations = 0;  // the rest were skipped as exact periods
  std::int64_t simulated_tasks = 0;

  SimTime gpu_busy_total() const;
  EpochStats& operator+=(const EpochStats& other);
};

class EpochSimulator {
 public:
  EpochSimulator(const EpochInput& input, const EpochOptions& options);
  EpochStats run();
  const Trace& trace() const { return trace_; }

 private:
  struct Impl;
  const EpochInput& input_;
  EpochOptions options_;
  Trace trace_;
};

}  // namespace epochcast::sim

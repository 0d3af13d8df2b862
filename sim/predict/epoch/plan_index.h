// How the epoch driver (sim/predict/epoch_simulator.cpp) reads iteration plans: the tag each
// task carries, what a finished task tells the observer by itself, what the driver indexes per
// plan once, and values kept by lane.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/predict/epoch_simulator.h"

namespace epochcast::sim::epoch {

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

// The most ops of any plan of the epoch.
std::size_t largest_plan(const EpochInput& in);

// What a finished task tells the observer by itself (FinishedTask::note): most ops of every rank
// are a kernel or its launch, which the observer counts without looking the op up (with every
// rank of a large cluster, a cache miss apiece).
constexpr std::uint8_t kKernelNote = 1;     // on a compute stream or copy engine
constexpr std::uint8_t kLookNote = 2;       // the observer needs the op itself
constexpr std::uint8_t kThreadEndNote = 4;  // the last op of a CPU thread in its iteration

std::uint8_t note_of(const PlanEntry& op);

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

PlanIndex index_plan(const IterationPlan& plan);

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

// Whether a lane runs its ops in order (network and delay ops do not wait for each other).
bool ordered(LaneKind kind);

// The lane's resource name ("GPU 3 compute stream").
std::string lane_name(const Lane& lane);

}  // namespace epochcast::sim::epoch

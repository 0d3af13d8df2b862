// One iteration as a small graph of operations on lanes (CPU threads, GPU streams and engines),
// built once per batch size and instantiated into the engine for every iteration.
//
// Order within a lane is implicit (a CPU thread issues in program order; a stream runs its
// work in issue order); a plan states only the dependencies that cross lanes.
#pragma once

#include <compare>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/enum_name.h"
#include "sim/network/fabric_way.h"

namespace epochcast::sim {

// What an operation is spent on; the breakdown of results is by category.
enum class Category : std::uint8_t {
  data,  // loading or waiting for a batch
  h2d,   // host-to-device copies
  forward,
  backward,
  optimizer,      // optimizer step, zero_grad, gradient scaling
  sync,           // the host waiting for the device (loss.item())
  host,           // per-step framework overhead
  communication,  // collectives and peer copies
};
inline constexpr std::string_view kCategoryNames[] = {
    "data", "h2d", "forward", "backward", "optimizer", "sync", "host", "communication"};
inline std::string_view name_of(Category value) {
  return enum_name(kCategoryNames, value);
}
inline constexpr std::size_t kCategoryCount = 8;

// cpu, compute, copy and comm lanes run their ops in order. `network` ops are flows of
// PlanOp::work bytes between GPUs on the shared network; `delay` ops last PlanOp::work
// nanoseconds regardless of anything else (a collective costed analytically). Neither is
// ordered like a lane.
enum class LaneKind : std::uint8_t { cpu, compute, copy, comm, network, delay };

// Zero-length ops that open and close a collective on one GPU's lane; the time between them
// is that GPU's communication time.
enum class Marker : std::uint8_t { none, collective_begin, collective_end };

struct Lane {
  LaneKind kind = LaneKind::cpu;
  int index = 0;  // CPU thread number, or GPU number for streams and engines
  friend auto operator<=>(const Lane&, const Lane&) = default;
};

struct PlanOp {
  std::string name;
  Category category = Category::host;
  Lane lane;
  // How much the op does, in its lane's unit: bytes for a `network` flow, nanoseconds at full
  // speed for every other lane (a lane slowed by contention takes longer).
  std::int64_t work = 0;
  std::vector<std::int32_t> deps;  // earlier ops of this plan, on other lanes
  std::optional<Lane> after_lane;  // also wait for the last op issued on that lane (stream order)
  int consumes_loader = -1;        // takes this iteration's batch from that rank's loader
  int launches_on_gpu = -1;        // a CPU op enqueueing GPU work there (bounded launch queue)
  // network ops: the GPUs a flow goes between, or a mirror of `src_gpu` (see Transfer), and
  // which NCCL protocol's per-step software latency it pays (sim/collectives/protocols.h, in
  // Protocol order, then kPipelinedStepTable for a step whose latency is hidden; -1: none, a
  // plain copy).
  int src_gpu = -1;
  int dst_gpu = -1;
  bool mirror = false;
  FabricWay fabric = FabricWay::none;  // src_gpu's exchange with its NVSwitch fabric (NVLS)
  bool in_network = false;             // a mirror step the network's switches reduce (SHARP)
  std::int8_t step_protocol = -1;
  int steps = 1;  // the hop made that many times back to back (Transfer::steps)
  // network ops of a collective whose kernel paces its sends (TransferPlan::rank_rate_limit):
  // that pace in the bytes the flow carries, shared by the GPU's flows at the same pace; 0: none.
  double kernel_rate = 0;
  Marker marker = Marker::none;
  std::int64_t collective_bytes = 0;  // on collective_begin: the data the collective moves
  // On a comm lane's collective_begin: the speed of that GPU's compute stream until the
  // collective ends (NCCL's kernels hold some of its SMs).
  float compute_speed = 1.0f;
};

// An op as the plan gives it (IterationPlan::op): PlanOp's fields but its name, which the plan
// holds (IterationPlan::name), and its dependencies (IterationPlan::deps).
struct PlanEntry {
  std::int64_t work = 0;  // PlanOp::work
  std::int64_t collective_bytes = 0;
  std::uint32_t name = 0;  // IterationPlan::name
  std::uint32_t dep_count = 0;
  Lane lane;
  std::optional<Lane> after_lane;
  int consumes_loader = -1;
  int launches_on_gpu = -1;
  int src_gpu = -1;
  int dst_gpu = -1;
  int steps = 1;
  float compute_speed = 1.0f;
  double kernel_rate = 0;
  Category category = Category::host;
  Marker marker = Marker::none;
  FabricWay fabric = FabricWay::none;
  bool mirror = false;
  bool in_network = false;
  std::int8_t step_protocol = -1;
};

// One rank's part of a step, for a plan that repeats its ops for every rank (see
// IterationPlan::begin_replicas): the CPU thread it runs on, its GPU and its loader.
struct Replica {
  int cpu = 0;
  int gpu = 0;
  int loader = -1;  // -1: its ops take no batch
  friend bool operator==(const Replica&, const Replica&) = default;
};

// The ops of one iteration, indexed from 0 in the order they were added.
//
// With every rank of a large cluster, most ops are the ranks' own (their launches and kernels),
// the same for every rank but for its lanes: a block of them is stored once and repeated for
// each rank (begin_replicas, end_replicas), so that a plan of 16,384 ranks holds one rank's ops
// and the collectives between them. Indices count every repetition, so a plan reads the same
// whether its blocks were repeated or added rank by rank.
class IterationPlan {
 public:
  std::int64_t samples = 0;  // samples this iteration takes from the loader
  std::int64_t kernels = 0;  // GPU operations it launches

  // Adds an op and returns its index.
  std::int32_t add(const PlanOp& op);
  // The same, named `name` (op.name is ignored): a builder that names many ops alike need not
  // make a string for each, and may reuse one PlanOp for them.
  std::int32_t add(const PlanOp& op, std::string_view name);
  // Sets the loader whose batch an op takes (after it was added).
  void set_consumes_loader(std::int32_t op, int loader);

  // Ops added between these two calls are `first`'s part of a step, repeated for every replica
  // (replicas[0] == first) with that replica's CPU thread, GPU and loader in place of first's:
  // replica r's copy of op i is replica_op(i, r), and comes after replica r-1's. Every op of
  // the block must be on first's CPU thread or one of its GPU's streams (no network or delay
  // op), and depend only on ops of first's blocks (earlier ones included, repeated for the same
  // replicas: replica r then depends on its own copies) or on per_replica() lists. Every
  // replica has a loader where first has one. Blocks do not nest, and a plan is walked only
  // once its block is closed.
  void begin_replicas(Replica first);
  void end_replicas(std::vector<Replica> replicas);
  std::int32_t replica_op(std::int32_t op, std::size_t replica) const;
  // A dependency, for an op of the open block, on ops[r] in replica r's copy: what each rank
  // waits for outside its own ops (its end of a collective).
  std::int32_t per_replica(std::vector<std::int32_t> ops);

  // Ops, every repetition counted.
  std::size_t size() const { return static_cast<std::size_t>(size_); }
  // The op at `index` as it runs (a replica's copy with that replica's lanes).
  PlanEntry op(std::size_t index) const;
  // Its dependencies, as indices of this plan.
  std::vector<std::int32_t> deps(std::size_t index) const;
  // Visits every op in order, as op() and deps() give it, with its stored op (below): what a
  // driver that
  // walks a whole plan uses (with every rank of a large cluster, tens of millions of ops, and
  // finding each one's block was much of the walk).
  using OpVisitor = std::function<void(std::size_t index, std::size_t stored, const PlanEntry& op,
                                       std::span<const std::int32_t> deps)>;
  void for_each_op(const OpVisitor& visit) const;
  std::string_view name(const PlanEntry& op) const { return names_[op.name]; }
  // Ops as stored, one per block op however many replicas it has, numbered below this (the same
  // number for every copy of a block op, a distinct one for every other op): for per-op caches
  // of what only ops outside blocks have, such as the network's routes.
  std::size_t stored_size() const { return entries_.size(); }

 private:
  // A run of ops: stored as they are (replicas < 0) or a block repeated for each of
  // replica_sets_[replicas].
  struct Segment {
    std::int32_t first = 0;  // the index of its first op
    std::uint32_t stored_first = 0;
    std::uint32_t stored_count = 0;  // ops of one copy
    std::int32_t replicas = -1;
  };
  static constexpr std::int32_t kOpenBlock = -2;
  const Segment& segment_of(std::int32_t index) const;
  Segment& tail(bool block);
  // An op as stored: what every op has, and the flows' fields (most stored ops, with every rank
  // of a large cluster, are flows); the rest, which few ops have, in `rare_`. With tens of
  // millions of flows a plan's memory is mostly these.
  struct StoredOp {
    std::int64_t work = 0;
    std::uint32_t name = 0;
    std::uint32_t first_dep = 0;  // in deps_
    std::uint32_t dep_count = 0;
    std::uint32_t rare = kNoRare;  // in rare_
    int lane_index = 0;
    int src_gpu = -1;
    int dst_gpu = -1;
    int steps = 1;
    LaneKind lane_kind = LaneKind::cpu;
    Category category = Category::host;
    Marker marker = Marker::none;
    FabricWay fabric = FabricWay::none;
    bool mirror = false;
    bool in_network = false;
    std::int8_t step_protocol = -1;
  };
  struct RareFields {
    std::int64_t collective_bytes = 0;
    std::optional<Lane> after_lane;
    int consumes_loader = -1;
    int launches_on_gpu = -1;
    float compute_speed = 1.0f;
    double kernel_rate = 0;
    friend bool operator==(const RareFields&, const RareFields&) = default;
  };
  static constexpr std::uint32_t kNoRare = 0xffffffffu;
  PlanEntry entry(const StoredOp& stored) const;
  PlanEntry replicated(const PlanEntry& entry, const Replica& replica) const;
  // Dependency `d` of a block op, in replica r's copy: its per_replica list's entry, or the
  // replica's copy of d, `stride` (the stored ops of d's block) further per replica.
  std::int32_t replica_dep(std::int32_t d, std::size_t r, std::uint32_t stride) const;

  std::vector<StoredOp> entries_;
  std::vector<RareFields> rare_;
  std::vector<Segment> segments_;
  std::vector<std::vector<Replica>> replica_sets_;
  std::vector<std::vector<std::int32_t>> per_replica_;  // per_replica's lists
  std::int32_t size_ = 0;
  Replica open_first_;                      // the open block's first replica
  std::int64_t open_kernels_ = 0;           // kernels its ops launch
  std::size_t open_lists_ = 0;              // per_replica lists from before it opened
  std::vector<std::int32_t> open_sources_;  // replica sets of the blocks its ops depend on

  // Names are looked up by string_view, without making a string.
  struct NameHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view name) const {
      return std::hash<std::string_view>{}(name);
    }
  };
  // Names once each (a plan repeats its ops' names on every rank), and every op's
  // dependencies one after another (a block op's as first's: see deps()).
  std::vector<std::string> names_;
  std::unordered_map<std::string, std::uint32_t, NameHash, std::equal_to<>> name_ids_;
  std::vector<std::int32_t> deps_;
};

}  // namespace epochcast::sim

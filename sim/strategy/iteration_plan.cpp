// Plans keep their ops compact: names interned, dependencies in one list, and the ranks' own ops
// stored once per block however many ranks repeat them.
#include "sim/strategy/iteration_plan.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace epochcast::sim {

namespace {

void require(bool condition, const char* what) {
  if (!condition) throw std::logic_error(std::string("iteration plan: ") + what);
}

bool on_gpu(LaneKind kind) {
  return kind == LaneKind::compute || kind == LaneKind::copy || kind == LaneKind::comm;
}

// Whether a lane of a block's op belongs to the block's first replica (its CPU thread or a
// stream of its GPU), so that each replica has its own.
bool replica_lane(const Lane& lane, const Replica& first) {
  if (lane.kind == LaneKind::cpu) return lane.index == first.cpu;
  return on_gpu(lane.kind) && lane.index == first.gpu;
}

Lane moved(const Lane& lane, const Replica& to) {
  return Lane{lane.kind, lane.kind == LaneKind::cpu ? to.cpu : to.gpu};
}

}  // namespace

std::int32_t IterationPlan::add(const PlanOp& op) {
  return add(op, op.name);
}

std::int32_t IterationPlan::add(const PlanOp& op, std::string_view name) {
  if (size_ == std::numeric_limits<std::int32_t>::max() ||
      deps_.size() + op.deps.size() > std::numeric_limits<std::uint32_t>::max()) {
    throw std::logic_error("an iteration plan with more than 2^31 ops or 2^32 dependencies");
  }
  const bool block = !segments_.empty() && segments_.back().replicas == kOpenBlock;
  if (block) {
    require(replica_lane(op.lane, open_first_) &&
                (!op.after_lane || replica_lane(*op.after_lane, open_first_)),
            "a replicated op on another rank's lane, the network or the delay server");
    require(op.consumes_loader < 0 || op.consumes_loader == open_first_.loader,
            "a replicated op taking another rank's batch");
    require(op.launches_on_gpu < 0 || op.launches_on_gpu == open_first_.gpu,
            "a replicated op launching on another rank's GPU");
    for (std::int32_t d : op.deps) {
      if (d < 0) {
        require(static_cast<std::size_t>(-d - 1) >= open_lists_ &&
                    static_cast<std::size_t>(-d - 1) < per_replica_.size(),
                "a replicated op on another block's per_replica list");
        continue;
      }
      require(d < size_, "a dependency on a later op");
      const Segment& s = segment_of(d);
      // Only the first replica's ops have a copy in every replica to depend on.
      require(s.replicas != -1 && static_cast<std::uint32_t>(d - s.first) < s.stored_count,
              "a replicated op depending on an op outside the first replica's blocks");
      // ...and the same replicas must repeat both blocks (checked as this one closes).
      if (s.replicas >= 0) open_sources_.push_back(s.replicas);
    }
  } else {
    for (std::int32_t d : op.deps)
      require(d >= 0 && d < size_,
              "a dependency on a later op, or a per_replica list outside a block");
  }
  if (op.lane.kind == LaneKind::compute || op.lane.kind == LaneKind::copy) {
    ++kernels;
    if (block) ++open_kernels_;
  }
  auto found = name_ids_.find(name);
  if (found == name_ids_.end()) {
    found = name_ids_.emplace(std::string(name), static_cast<std::uint32_t>(names_.size())).first;
    names_.emplace_back(name);
  }
  StoredOp stored;
  stored.work = op.work;
  stored.name = found->second;
  stored.first_dep = static_cast<std::uint32_t>(deps_.size());
  stored.dep_count = static_cast<std::uint32_t>(op.deps.size());
  deps_.insert(deps_.end(), op.deps.begin(), op.deps.end());
  stored.lane_index = op.lane.index;
  stored.lane_kind = op.lane.kind;
  stored.src_gpu = op.src_gpu;
  stored.dst_gpu = op.dst_gpu;
  stored.steps = op.steps;
  stored.category = op.category;
  stored.marker = op.marker;
  stored.fabric = op.fabric;
  stored.mirror = op.mirror;
  stored.in_network = op.in_network;
  stored.step_protocol = op.step_protocol;
  const RareFields rare{op.collective_bytes, op.after_lane,    op.consumes_loader,
                        op.launches_on_gpu,  op.compute_speed, op.kernel_rate};
  if (!(rare == RareFields{})) {
    stored.rare = static_cast<std::uint32_t>(rare_.size());
    rare_.push_back(rare);
  }
  tail(block).stored_count++;  // before the op joins entries_: a new segment starts at it
  entries_.push_back(stored);
  return size_++;
}

IterationPlan::Segment& IterationPlan::tail(bool block) {
  if (block) return segments_.back();
  if (segments_.empty() || segments_.back().replicas != -1) {
    segments_.push_back(Segment{size_, static_cast<std::uint32_t>(entries_.size()), 0, -1});
  }
  return segments_.back();
}

void IterationPlan::set_consumes_loader(std::int32_t op, int loader) {
  require(op >= 0 && op < size_, "no such op");
  const Segment& s = segment_of(op);
  require(s.replicas == -1 || s.replicas == kOpenBlock, "setting the loader of a repeated op");
  require(s.replicas == -1 || loader == open_first_.loader,
          "a replicated op taking another rank's batch");
  StoredOp& stored = entries_[s.stored_first + static_cast<std::uint32_t>(op - s.first)];
  if (stored.rare == kNoRare) {
    stored.rare = static_cast<std::uint32_t>(rare_.size());
    rare_.emplace_back();
  }
  rare_[stored.rare].consumes_loader = loader;
}

void IterationPlan::begin_replicas(Replica first) {
  require(segments_.empty() || segments_.back().replicas != kOpenBlock, "nested blocks");
  segments_.push_back(Segment{size_, static_cast<std::uint32_t>(entries_.size()), 0, kOpenBlock});
  open_first_ = first;
  open_kernels_ = 0;
  open_lists_ = per_replica_.size();
  open_sources_.clear();
}

void IterationPlan::end_replicas(std::vector<Replica> replicas) {
  require(!segments_.empty() && segments_.back().replicas == kOpenBlock, "no open block");
  require(!replicas.empty() && replicas.front().cpu == open_first_.cpu &&
              replicas.front().gpu == open_first_.gpu &&
              replicas.front().loader == open_first_.loader,
          "a block's replicas that do not start with its first");
  for (std::size_t l = open_lists_; l < per_replica_.size(); ++l)
    require(per_replica_[l].size() == replicas.size(), "a per_replica list of another length");
  for (std::int32_t source : open_sources_) {
    require(replica_sets_[static_cast<std::size_t>(source)] == replicas,
            "a block depending on a block of other replicas");
  }
  for (const Replica& r : replicas) {
    require(r.cpu >= 0 && r.gpu >= 0 && (r.loader >= 0) == (open_first_.loader >= 0),
            "a replica without a CPU thread or GPU, or taking batches where the first does not");
  }
  Segment& s = segments_.back();
  const std::int64_t total =
      std::int64_t{s.stored_count} * static_cast<std::int64_t>(replicas.size());
  if (s.first + total > std::numeric_limits<std::int32_t>::max()) {
    throw std::logic_error("an iteration plan with more than 2^31 ops or 2^32 dependencies");
  }
  size_ = static_cast<std::int32_t>(s.first + total);
  kernels += open_kernels_ * static_cast<std::int64_t>(replicas.size() - 1);
  s.replicas = static_cast<std::int32_t>(replica_sets_.size());
  replica_sets_.push_back(std::move(replicas));
}

std::int32_t IterationPlan::replica_op(std::int32_t op, std::size_t replica) const {
  require(op >= 0 && op < size_, "no such op");
  const Segment& s = segment_of(op);
  require(s.replicas >= 0 && static_cast<std::uint32_t>(op - s.first) < s.stored_count &&
              replica < replica_sets_[static_cast<std::size_t>(s.replicas)].size(),
          "replica_op of an op outside a closed block's first replica");
  return op + static_cast<std::int32_t>(replica * s.stored_count);
}

std::int32_t IterationPlan::per_replica(std::vector<std::int32_t> ops) {
  require(!segments_.empty() && segments_.back().replicas == kOpenBlock,
          "a per_replica list outside a block");
  for (std::int32_t d : ops)
    require(d >= 0 && d < segments_.back().first, "a per_replica op inside or after its block");
  per_replica_.push_back(std::move(ops));
  return -static_cast<std::int32_t>(per_replica_.size());
}

const IterationPlan::Segment& IterationPlan::segment_of(std::int32_t index) const {
  auto after = std::upper_bound(segments_.begin(), segments_.end(), index,
                                [](std::int32_t i, const Segment& s) { return i < s.first; });
  return *(after - 1);
}

PlanEntry IterationPlan::entry(const StoredOp& stored) const {
  PlanEntry out;
  out.work = stored.work;
  out.name = stored.name;
  out.dep_count = stored.dep_count;
  out.lane = Lane{stored.lane_kind, stored.lane_index};
  out.src_gpu = stored.src_gpu;
  out.dst_gpu = stored.dst_gpu;
  out.steps = stored.steps;
  out.category = stored.category;
  out.marker = stored.marker;
  out.fabric = stored.fabric;
  out.mirror = stored.mirror;
  out.in_network = stored.in_network;
  out.step_protocol = stored.step_protocol;
  if (stored.rare != kNoRare) {
    const RareFields& rare = rare_[stored.rare];
    out.collective_bytes = rare.collective_bytes;
    out.after_lane = rare.after_lane;
    out.consumes_loader = rare.consumes_loader;
    out.launches_on_gpu = rare.launches_on_gpu;
    out.compute_speed = rare.compute_speed;
    out.kernel_rate = rare.kernel_rate;
  }
  return out;
}

PlanEntry IterationPlan::replicated(const PlanEntry& entry, const Replica& replica) const {
  PlanEntry out = entry;
  out.lane = moved(entry.lane, replica);
  if (entry.after_lane) out.after_lane = moved(*entry.after_lane, replica);
  if (entry.consumes_loader >= 0) out.consumes_loader = replica.loader;
  if (entry.launches_on_gpu >= 0) out.launches_on_gpu = replica.gpu;
  return out;
}

PlanEntry IterationPlan::op(std::size_t index) const {
  require(index < size(), "no such op");
  const auto i = static_cast<std::int32_t>(index);
  const Segment& s = segment_of(i);
  const auto offset = static_cast<std::uint32_t>(i - s.first);
  if (s.replicas < 0) return entry(entries_[s.stored_first + offset]);
  return replicated(entry(entries_[s.stored_first + offset % s.stored_count]),
                    replica_sets_[static_cast<std::size_t>(s.replicas)][offset / s.stored_count]);
}

std::int32_t IterationPlan::replica_dep(std::int32_t d, std::size_t r, std::uint32_t stride) const {
  if (d < 0) return per_replica_[static_cast<std::size_t>(-d - 1)][r];
  return d + static_cast<std::int32_t>(r * stride);
}

std::vector<std::int32_t> IterationPlan::deps(std::size_t index) const {
  require(index < size(), "no such op");
  const auto i = static_cast<std::int32_t>(index);
  const Segment& s = segment_of(i);
  const auto offset = static_cast<std::uint32_t>(i - s.first);
  const StoredOp& stored =
      entries_[s.stored_first + (s.replicas < 0 ? offset : offset % s.stored_count)];
  const std::int32_t* first = deps_.data() + stored.first_dep;
  std::vector<std::int32_t> out(first, first + stored.dep_count);
  if (s.replicas < 0) {
    require(s.replicas != kOpenBlock ||
                std::none_of(out.begin(), out.end(), [](std::int32_t d) { return d < 0; }),
            "a block left open");
    return out;
  }
  const std::uint32_t replica = offset / s.stored_count;
  for (std::int32_t& d : out)
    d = replica_dep(d, replica, d < 0 ? 0 : segment_of(d).stored_count);
  return out;
}

void IterationPlan::for_each_op(const OpVisitor& visit) const {
  std::size_t index = 0;
  std::vector<PlanEntry> first;            // a block's ops, as its first replica has them
  std::vector<std::uint32_t> dep_strides;  // per dependency of theirs, what a replica adds
  std::vector<std::int32_t> deps;          // one op's, for the visitor
  for (const Segment& s : segments_) {
    require(s.replicas != kOpenBlock, "a block left open");
    if (s.replicas < 0) {
      for (std::uint32_t k = 0; k < s.stored_count; ++k) {
        const StoredOp& stored = entries_[s.stored_first + k];
        visit(index++, s.stored_first + k, entry(stored),
              {deps_.data() + stored.first_dep, stored.dep_count});
      }
      continue;
    }
    first.clear();
    dep_strides.clear();
    for (std::uint32_t k = 0; k < s.stored_count; ++k) {
      const StoredOp& stored = entries_[s.stored_first + k];
      first.push_back(entry(stored));
      for (std::uint32_t m = 0; m < stored.dep_count; ++m) {
        const std::int32_t d = deps_[stored.first_dep + m];
        dep_strides.push_back(d < 0 ? 0 : segment_of(d).stored_count);
      }
    }
    const std::vector<Replica>& replicas = replica_sets_[static_cast<std::size_t>(s.replicas)];
    for (std::size_t r = 0; r < replicas.size(); ++r) {
      std::size_t stride = 0;
      for (std::uint32_t k = 0; k < s.stored_count; ++k) {
        const StoredOp& stored = entries_[s.stored_first + k];
        deps.clear();
        for (std::uint32_t m = 0; m < stored.dep_count; ++m, ++stride) {
          deps.push_back(replica_dep(deps_[stored.first_dep + m], r, dep_strides[stride]));
        }
        visit(index++, s.stored_first + k, replicated(first[k], replicas[r]), deps);
      }
    }
  }
}

}  // namespace epochcast::sim

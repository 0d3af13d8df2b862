// Event loop, task bookkeeping, and the snapshot/shift used for exact steady-state skipping.
#include "sim/engine/engine.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace epochcast::sim {

namespace {

// Broken invariants are programming errors: always checked, never compiled out.
void require(bool condition, const char* what) {
  if (!condition) throw std::logic_error(std::string("engine invariant violated: ") + what);
}

}  // namespace

std::size_t Engine::task_bytes() {
  return sizeof(Slot);
}

ResourceId Engine::add_resource(std::unique_ptr<Resource> resource) {
  resources_.push_back(std::move(resource));
  schedules_.emplace_back();
  return static_cast<ResourceId>(resources_.size() - 1);
}

std::uint32_t Engine::allocate_slot() {
  if (!free_slots_.empty()) {
    std::uint32_t index = free_slots_.back();
    free_slots_.pop_back();
    return index;
  }
  slots_.emplace_back();
  return static_cast<std::uint32_t>(slots_.size() - 1);
}

namespace {

// Rewrites a free list (unique indices below `size`) so that it hands out the lowest index
// first. Linear, not a sort: it runs before every plan.
void lowest_first(std::vector<std::uint32_t>& free, std::size_t size) {
  std::vector<bool> is_free(size, false);
  for (std::uint32_t i : free)
    is_free[i] = true;
  free.clear();
  for (std::size_t i = size; i-- > 0;) {
    if (is_free[i]) free.push_back(static_cast<std::uint32_t>(i));
  }
}

}  // namespace

void Engine::reserve(std::size_t tasks, std::size_t edges) {
  slots_.reserve(slots_.size() - free_slots_.size() + tasks);
  edges_.reserve(edges_.size() - free_edges_.size() + edges);
  // Freed slots come back in the order tasks finished, scattered over memory; a plan added in
  // one go then has its tasks, and the edges between them, in plan order, next to the tasks
  // they release (a rank's next op), not a cache miss away.
  lowest_first(free_slots_, slots_.size());
  lowest_first(free_edges_, edges_.size());
}

std::uint32_t Engine::allocate_edge() {
  if (!free_edges_.empty()) {
    std::uint32_t index = free_edges_.back();
    free_edges_.pop_back();
    return index;
  }
  edges_.emplace_back();
  return static_cast<std::uint32_t>(edges_.size() - 1);
}

void Engine::extra_successors(const Slot& slot, std::vector<std::uint32_t>& out) const {
  out.clear();
  for (std::uint32_t e = slot.extra_successors; e != kNone; e = edges_[e].next)
    out.push_back(edges_[e].to);
  std::reverse(out.begin(), out.end());
}

bool Engine::finished(TaskHandle task) const {
  return task.index >= slots_.size() || !slots_[task.index].live ||
         slots_[task.index].generation != task.generation;
}

std::uint64_t Engine::tag(TaskHandle task) const {
  require(!finished(task), "tag of a finished task");
  return slots_[task.index].tag;
}

TaskHandle Engine::add_task(ResourceId resource, std::int64_t work, std::uint64_t tag,
                            std::span<const TaskHandle> dependencies, std::uint32_t detail,
                            std::uint8_t note) {
  require(resource < resources_.size(), "task on an unknown resource");
  require(work >= 0, "negative work");
  std::uint32_t index = allocate_slot();
  Slot& slot = slots_[index];
  slot.generation++;
  slot.live = true;
  slot.released = false;
  slot.resource = resource;
  slot.work = work;
  slot.tag = tag;
  slot.detail = detail;
  slot.note = note;
  slot.pending = 0;
  slot.inline_successors = 0;
  slot.extra_successors = kNone;
  TaskHandle handle{index, slot.generation};
  for (TaskHandle dependency : dependencies) {
    if (finished(dependency)) continue;
    require(dependency.index != index, "a task depending on itself");
    Slot& before = slots_[dependency.index];
    if (before.inline_successors < kInlineSuccessors) {
      before.successors[before.inline_successors++] = index;
    } else {
      std::uint32_t edge = allocate_edge();
      edges_[edge] = Edge{index, before.extra_successors};
      before.extra_successors = edge;
    }
    slots_[index].pending++;
  }
  if (slots_[index].pending == 0) release(index);
  return handle;
}

void Engine::release(std::uint32_t index) {
  Slot& slot = slots_[index];
  slot.released = true;
  slot.ready = now_;
  resources_[slot.resource]->enqueue(TaskHandle{index, slot.generation}, slot.work, slot.detail,
                                     now_, *this);
  reschedule(slot.resource);
}

void Engine::task_started(TaskHandle task, SimTime when) {
  const Slot& slot = slots_[task.index];
  // The successors are touched when this task finishes, many events from now; their slots
  // were last touched when the plan was added, so fetch them while the task runs.
  for (std::uint8_t i = 0; i < slot.inline_successors; ++i)
    __builtin_prefetch(&slots_[slot.successors[i]].pending);
  slots_[task.index].start = when;
  if (start_observer_) start_observer_(task, slots_[task.index].resource);
}

void Engine::reschedule(ResourceId resource) {
  const SimTime next = resources_[resource]->next_completion();
  Schedule& schedule = schedules_[resource];
  if (next == SimTime::never()) {
    if (schedule.scheduled) --live_events_;
    schedule.scheduled = false;
    return;
  }
  if (schedule.scheduled && schedule.time == next) return;  // the pending event still holds
  if (!schedule.scheduled) ++live_events_;
  schedule.scheduled = true;
  schedule.time = next;
  schedule.sequence = next_sequence_++;
  events_.push_back(
      Event{next, schedule.sequence, resource, resources_[resource]->next_finishing_slot()});
  std::push_heap(events_.begin(), events_.end(), std::greater<>{});
  if (events_.size() > 2 * live_events_ + 1024) purge_stale_events();
}

void Engine::purge_stale_events() {
  // Events are ordered by (time, sequence), unique, so the heap rebuilt pops the live ones in
  // the order the old one would have.
  std::erase_if(events_, [this](const Event& event) { return stale(event); });
  require(events_.size() == live_events_, "a resource's scheduled event went missing");
  std::make_heap(events_.begin(), events_.end(), std::greater<>{});
}

void Engine::finish(TaskHandle task) {
  Slot& slot = slots_[task.index];
  require(slot.live && slot.generation == task.generation, "finishing a task twice");
  FinishedTask record{task, slot.tag, slot.resource, slot.ready, slot.start, now_, slot.note};
  // Free the slot before releasing successors, so handles to this task read as finished.
  slot.live = false;
  free_slots_.push_back(task.index);
  ++tasks_finished_;
  // Successors in the order they were added (inline first), as the edge list alone had them.
  auto release_one = [this](std::uint32_t to) {
    require(slots_[to].pending > 0, "successor with no pending dependency");
    if (--slots_[to].pending == 0) release(to);
  };
  const std::uint8_t inline_count = slot.inline_successors;
  const std::array<std::uint32_t, kInlineSuccessors> inline_successors = slot.successors;
  successor_buffer_.clear();
  for (std::uint32_t edge = slot.extra_successors; edge != kNone;) {
    successor_buffer_.push_back(edges_[edge].to);
    const std::uint32_t next = edges_[edge].next;
    free_edges_.push_back(edge);
    edge = next;
  }
  for (std::uint8_t i = 0; i < inline_count; ++i)
    release_one(inline_successors[i]);
  for (auto to = successor_buffer_.rbegin(); to != successor_buffer_.rend(); ++to)
    release_one(*to);
  if (observer_) observer_(record);
}

bool Engine::run() {
  stop_requested_ = false;
  while (!events_.empty()) {
    std::pop_heap(events_.begin(), events_.end(), std::greater<>{});
    const Event event = events_.back();
    events_.pop_back();
    if (stale(event)) continue;
    Schedule& schedule = schedules_[event.resource];
    // The next event's finishing task, fetched while this one is handled.
    if (!events_.empty() && events_.front().slot_hint < slots_.size())
      __builtin_prefetch(&slots_[events_.front().slot_hint]);
    require(event.time >= now_, "time went backwards");
    now_ = event.time;
    schedule.scheduled = false;
    --live_events_;
    ++events_processed_;
    finished_buffer_.clear();
    resources_[event.resource]->advance(now_, finished_buffer_, *this);
    // Observers may add tasks, but nothing they call advances a resource, so the buffer is
    // stable while it is walked.
    for (TaskHandle task : finished_buffer_)
      finish(task);
    reschedule(event.resource);
    if (stop_requested_) return true;
  }
  require(live_events_ == 0, "a resource left scheduled without an event");
  return false;
}

namespace {

class VectorWriter final : public SnapshotWriter {
 public:
  explicit VectorWriter(std::function<void(TaskHandle, std::vector<std::int64_t>&)> describe)
      : describe_(std::move(describe)) {}
  void write(std::int64_t value) override { out.push_back(value); }
  void write_task(TaskHandle task) override { describe_(task, out); }
  std::vector<std::int64_t> out;

 private:
  std::function<void(TaskHandle, std::vector<std::int64_t>&)> describe_;
};

}  // namespace

std::vector<std::int64_t> Engine::snapshot(
    const std::function<std::int64_t(std::uint64_t)>& relative_tag,
    std::span<const ResourceId> order) const {
  if (!order.empty() && order.size() != resources_.size()) {
    throw std::logic_error("a snapshot order must list every resource");
  }
  std::vector<std::int64_t> label(resources_.size());
  for (ResourceId r = 0; r < resources_.size(); ++r)
    label[order.empty() ? r : order[r]] = static_cast<std::int64_t>(r);
  // A task is described by its relative identity, its pending dependencies and its
  // successors' identities; the graph ahead is then fixed by the state.
  auto describe = [&](TaskHandle task, std::vector<std::int64_t>& out) {
    const Slot& slot = slots_[task.index];
    out.push_back(relative_tag(slot.tag));
    out.push_back(slot.work);
    out.push_back(slot.detail);
    out.push_back(slot.pending);
    out.push_back(slot.released ? (now_ - slot.ready).ns() : -1);
    for (std::uint8_t i = 0; i < slot.inline_successors; ++i)
      out.push_back(relative_tag(slots_[slot.successors[i]].tag));
    std::vector<std::uint32_t> extra;
    extra_successors(slot, extra);
    for (std::uint32_t to : extra)
      out.push_back(relative_tag(slots_[to].tag));
    out.push_back(-2);  // end of successors
  };
  VectorWriter writer(describe);
  for (ResourceId position = 0; position < resources_.size(); ++position) {
    writer.write(static_cast<std::int64_t>(position));
    resources_[order.empty() ? position : order[position]]->snapshot(now_, writer);
  }
  // Tasks still waiting for dependencies, in a canonical order.
  std::vector<std::pair<std::int64_t, std::uint32_t>> waiting;
  for (std::uint32_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].live && !slots_[i].released) waiting.emplace_back(relative_tag(slots_[i].tag), i);
  }
  std::sort(waiting.begin(), waiting.end());
  writer.write(static_cast<std::int64_t>(waiting.size()));
  for (const auto& [rel, index] : waiting)
    describe(TaskHandle{index, slots_[index].generation}, writer.out);
  // Pending events in the order they will fire.
  std::vector<std::pair<std::pair<SimTime, std::uint64_t>, ResourceId>> pending;
  for (ResourceId r = 0; r < schedules_.size(); ++r) {
    if (schedules_[r].scheduled)
      pending.push_back({{schedules_[r].time, schedules_[r].sequence}, r});
  }
  std::sort(pending.begin(), pending.end());
  for (const auto& [key, r] : pending) {
    writer.write((key.first - now_).ns());
    writer.write(label[r]);
  }
  return std::move(writer.out);
}

void Engine::shift(SimTime delta, const std::function<std::uint64_t(std::uint64_t)>& retag) {
  now_ += delta;
  for (Slot& slot : slots_) {
    if (!slot.live) continue;
    slot.tag = retag(slot.tag);
    slot.ready += delta;
    slot.start += delta;
  }
  for (auto& resource : resources_)
    resource->shift(delta);
  // The stale events go; a uniform shift keeps the live ones' order.
  purge_stale_events();
  for (Event& event : events_)
    event.time += delta;
  for (Schedule& schedule : schedules_) {
    if (schedule.scheduled) schedule.time += delta;
  }
}

}  // namespace epochcast::sim

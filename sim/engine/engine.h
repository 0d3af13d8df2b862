// The discrete-event engine: tasks on resources, released when their dependencies finish.
//
// Events are ordered by (time, insertion sequence), so equal inputs give identical runs. The
// engine holds no wall clock and no randomness. Task slots are recycled once a task finishes;
// handles carry a generation so that a stale handle reads as "finished".
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "sim/engine/huge_page_allocator.h"
#include "sim/engine/resource.h"
#include "sim/engine/sim_time.h"

namespace epochcast::sim {

struct FinishedTask {
  TaskHandle task;
  std::uint64_t tag = 0;  // opaque to the engine; the driver's (iteration, role) encoding
  ResourceId resource = 0;
  SimTime ready;  // when its dependencies were all done
  SimTime start;  // when its resource began it
  SimTime end;
  std::uint8_t note = 0;  // opaque to the engine, as add_task was given it
};

class Engine final : private StartListener {
 public:
  Engine() = default;
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  ResourceId add_resource(std::unique_ptr<Resource> resource);
  const Resource& resource(ResourceId id) const { return *resources_[id]; }
  // For an observer that changes a resource's state (its speed): change it through this, then
  // call changed() so its next completion is rescheduled.
  Resource& resource_for_change(ResourceId id) { return *resources_[id]; }
  void changed(ResourceId id) { reschedule(id); }
  std::size_t resource_count() const { return resources_.size(); }

  // Creates a task; it is released to its resource when every dependency has finished
  // (immediately, at now(), if they all have).
  // `note`: a byte the observer gets back with the finished task (what the driver needs to know
  // of it without looking the task up, a cache miss with every rank of a large cluster).
  TaskHandle add_task(ResourceId resource, std::int64_t work, std::uint64_t tag,
                      std::span<const TaskHandle> dependencies = {}, std::uint32_t detail = 0,
                      std::uint8_t note = 0);
  // Room for this many more tasks and dependency edges, for a driver that adds a whole plan
  // at once (saves the copies of growing), and slots handed out in memory order from here.
  void reserve(std::size_t tasks, std::size_t edges);
  bool finished(TaskHandle task) const;
  // A handle that always reads as finished (no slot has its index): what a driver keeps for
  // work it knows is done without a task of its own (a batch loaded during a skipped span).
  static constexpr TaskHandle done_handle() { return TaskHandle{kNone, 0}; }
  // The memory a live task takes (its slot), for estimates made before building a plan.
  static std::size_t task_bytes();
  std::uint64_t tag(TaskHandle task) const;

  // Called for every task as it finishes, in event order. The observer may add tasks and may
  // call request_stop().
  void set_observer(std::function<void(const FinishedTask&)> observer) {
    observer_ = std::move(observer);
  }
  // Called as a resource begins a task (with the task's resource); it may change resources'
  // speeds (resource_for_change, then changed) but not add tasks.
  void set_start_observer(std::function<void(TaskHandle, ResourceId)> observer) {
    start_observer_ = std::move(observer);
  }
  // Makes run() return once the current event's finished tasks have been processed.
  void request_stop() { stop_requested_ = true; }
  // Processes events until none remain or a stop is requested. Returns true if stopped early.
  bool run();

  SimTime now() const { return now_; }
  std::int64_t events_processed() const { return events_processed_; }
  // Events held, stale ones included (what a pop's depth depends on).
  std::size_t events_held() const { return events_.size(); }
  std::int64_t tasks_finished() const { return tasks_finished_; }

  // Steady-state support. `relative_tag` maps a live task's tag to its identity relative to
  // the driver's current iteration. The snapshot covers every resource, every live task and
  // the order of pending events, relative to now(). `order`, when given, lists every resource
  // once, in the order (and so under the label, its position) the snapshot writes them: a
  // driver whose resources are interchangeable (a pool of identical workers served in turn)
  // lists them by role rather than by id, so states that differ only by which worker plays
  // which role compare equal.
  std::vector<std::int64_t> snapshot(const std::function<std::int64_t(std::uint64_t)>& relative_tag,
                                     std::span<const ResourceId> order = {}) const;
  // Moves every instant forward by `delta` and rewrites the tags of live tasks, as if the
  // skipped span had been simulated.
  void shift(SimTime delta, const std::function<std::uint64_t(std::uint64_t)>& retag);

 private:
  static constexpr std::uint32_t kNone = 0xffffffffu;

  // A task's first kInlineSuccessors successors live in its slot, the rest in a list of
  // edges: most tasks have one or two, and a finished task then releases them without a trip
  // to memory elsewhere (what that trip cost with every rank of a large cluster:
  // docs/performance.md).
  static constexpr std::uint8_t kInlineSuccessors = 2;
  // One cache line: a slot is touched as its task is added, released, started and finished,
  // each time a miss with every rank of a large cluster, and a slot across two lines makes
  // each miss two.
  struct alignas(64) Slot {
    std::uint32_t generation = 0;
    bool live = false;
    bool released = false;
    std::uint8_t inline_successors = 0;
    std::uint8_t note = 0;
    ResourceId resource = 0;
    std::uint32_t detail = 0;
    std::uint32_t pending = 0;
    std::array<std::uint32_t, kInlineSuccessors> successors{};
    // Beyond the inline ones, newest first (the engine walks them back to front, in the order
    // they were added).
    std::uint32_t extra_successors = kNone;
    std::int64_t work = 0;
    std::uint64_t tag = 0;
    SimTime ready;
    SimTime start;
  };
  static_assert(sizeof(Slot) == 64);
  struct Edge {
    std::uint32_t to = 0;
    std::uint32_t next = kNone;
  };
  // 24 bytes: with every rank of 16,384 GPUs the heap's sift-down was half of the event loop's
  // samples (perf), most of them misses. An event is stale once its resource has gone
  // idle (not scheduled) or been rescheduled, which gives the resource a new sequence number.
  struct Event {
    SimTime time;
    std::uint64_t sequence = 0;
    ResourceId resource = 0;
    std::uint32_t slot_hint = 0;  // Resource::next_finishing_slot() when scheduled
    friend bool operator>(const Event& a, const Event& b) {
      return a.time != b.time ? a.time > b.time : a.sequence > b.sequence;
    }
  };
  static_assert(sizeof(Event) == 24);
  struct Schedule {
    bool scheduled = false;
    SimTime time;
    std::uint64_t sequence = 0;
  };

  void task_started(TaskHandle task, SimTime when) override;
  void release(std::uint32_t index);
  void reschedule(ResourceId resource);
  bool stale(const Event& event) const {
    return !schedules_[event.resource].scheduled ||
           event.sequence != schedules_[event.resource].sequence;
  }
  void purge_stale_events();

  void finish(TaskHandle task);
  std::uint32_t allocate_slot();
  std::uint32_t allocate_edge();
  // The successors of a slot beyond its inline ones, in the order they were added.
  void extra_successors(const Slot& slot, std::vector<std::uint32_t>& out) const;

  std::vector<std::unique_ptr<Resource>> resources_;
  std::vector<Schedule> schedules_;
  std::vector<Slot, HugePageAllocator<Slot>> slots_;
  std::vector<std::uint32_t> free_slots_;
  std::vector<Edge, HugePageAllocator<Edge>> edges_;
  std::vector<std::uint32_t> free_edges_;
  // A min-heap (std::greater) of events. A resource rescheduled leaves its old event behind,
  // stale; once stale events outnumber the live ones by 1,024 they are dropped in one pass, or a
  // loader's far-future completions, rescheduled again and again, made the heap a hundred times
  // larger than the resources (385,000 events over 4,122 resources, every pop 18 levels deep).
  std::vector<Event> events_;
  std::size_t live_events_ = 0;  // resources with a scheduled event
  std::uint64_t next_sequence_ = 0;
  std::vector<TaskHandle> finished_buffer_;
  std::vector<std::uint32_t> successor_buffer_;  // scratch of finish()
  std::function<void(TaskHandle, ResourceId)> start_observer_;
  std::function<void(const FinishedTask&)> observer_;
  SimTime now_;
  bool stop_requested_ = false;
  std::int64_t events_processed_ = 0;
  std::int64_t tasks_finished_ = 0;
};

}  // namespace epochcast::sim

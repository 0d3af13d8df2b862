// The contract between the engine and the models of things that execute tasks.
//
// The engine knows time, events and order only. A resource model receives released tasks,
// answers "when does your next activity finish?" and is advanced to that instant, reporting
// which tasks finished. Models are named after the rule they implement (fifo_server,
// delay_server, max_min_fair for network links).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/engine/sim_time.h"

namespace epochcast::sim {

// A task reference that stays safe after the task finishes: the slot may be reused, but the
// generation then differs, and the engine treats the old handle as finished.
struct TaskHandle {
  std::uint32_t index = 0;
  std::uint32_t generation = 0;
  friend bool operator==(TaskHandle, TaskHandle) = default;
};

using ResourceId = std::uint32_t;

// Where a resource reports that a task began executing (for traces and statistics).
class StartListener {
 public:
  virtual void task_started(TaskHandle task, SimTime when) = 0;

 protected:
  ~StartListener() = default;
};

// Serialises state relative to an instant, for steady-state detection: two states that
// serialise equally evolve identically, shifted in time.
class SnapshotWriter {
 public:
  virtual void write(std::int64_t value) = 0;
  // The task's identity relative to the current iteration (supplied by the driver).
  virtual void write_task(TaskHandle task) = 0;

 protected:
  ~SnapshotWriter() = default;
};

class Resource {
 public:
  virtual ~Resource() = default;

  virtual const std::string& name() const = 0;
  // A released task arrives with its work (nanoseconds for servers, bytes for network flows)
  // and the `detail` it was created with (a route for network flows; 0 for servers).
  virtual void enqueue(TaskHandle task, std::int64_t work, std::uint32_t detail, SimTime now,
                       StartListener& starts) = 0;
  // The earliest instant at which an activity in progress finishes; SimTime::never() when idle.
  // (Not an optional: GCC builds a returned std::optional<SimTime> on the stack and reads it
  // back whole, a stalled store forward on every release: docs/performance.md.)
  virtual SimTime next_completion() const = 0;
  // The slot index (TaskHandle::index) of a task that finishes at next_completion(), if the
  // model knows one cheaply; the engine fetches that task's slot into the cache before the
  // event (a miss there was most of finishing a task). Only a hint: any value is safe.
  virtual std::uint32_t next_finishing_slot() const { return 0; }
  // Moves the model to `now` (never past next_completion()) and appends the tasks that finish
  // at `now` to `finished`, in a deterministic order.
  virtual void advance(SimTime now, std::vector<TaskHandle>& finished, StartListener& starts) = 0;
  // Adds `delta` to every instant the model holds (steady-state skipping).
  virtual void shift(SimTime delta) = 0;
  // Writes the model's state relative to `now`.
  virtual void snapshot(SimTime now, SnapshotWriter& out) const = 0;
};

}  // namespace epochcast::sim

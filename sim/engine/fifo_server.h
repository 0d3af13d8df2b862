// fifo_server: one task at a time, in arrival order, each taking its work in nanoseconds at the
// server's speed (1 unless set: a GPU stream that shares its SMs with another's kernels).
// Models a CPU thread, a GPU stream, a copy engine, a data-loader worker.
#pragma once

#include "sim/engine/resource.h"
#include "sim/engine/ring_queue.h"

namespace epochcast::sim {

class FifoServer final : public Resource {
 public:
  explicit FifoServer(std::string name) : name_(std::move(name)) {}

  const std::string& name() const override { return name_; }
  void enqueue(TaskHandle task, std::int64_t work, std::uint32_t detail, SimTime now,
               StartListener& starts) override;
  SimTime next_completion() const override;
  std::uint32_t next_finishing_slot() const override {
    return busy_ ? queue_.front().task.index : 0;
  }
  void advance(SimTime now, std::vector<TaskHandle>& finished, StartListener& starts) override;
  void shift(SimTime delta) override;
  void snapshot(SimTime now, SnapshotWriter& out) const override;
  // From `now` on, work progresses at `speed` (0 < speed <= 1); the running task's remaining
  // work finishes accordingly. The owner reschedules the server with the engine.
  void set_speed(SimTime now, double speed);
  bool busy() const { return busy_; }

 private:
  struct Entry {
    TaskHandle task;
    std::int64_t work_ns;
  };
  void start_head(SimTime now, StartListener& starts);

  std::string name_;
  RingQueue<Entry> queue_;  // front is running when busy_
  bool busy_ = false;
  SimTime finish_;
  double speed_ = 1;
};

}  // namespace epochcast::sim

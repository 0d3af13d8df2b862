// First-in first-out server.
#include "sim/engine/fifo_server.h"

namespace epochcast::sim {

void FifoServer::enqueue(TaskHandle task, std::int64_t work, std::uint32_t, SimTime now,
                         StartListener& starts) {
  queue_.push_back({task, work});
  if (!busy_) start_head(now, starts);
}

void FifoServer::start_head(SimTime now, StartListener& starts) {
  busy_ = true;
  finish_ = now + SimTime::from_ns(queue_.front().work_ns);
  starts.task_started(queue_.front().task, now);
}

std::optional<SimTime> FifoServer::next_completion() const {
  if (!busy_) return std::nullopt;
  return finish_;
}

void FifoServer::advance(SimTime now, std::vector<TaskHandle>& finished, StartListener& starts) {
  // Zero-work tasks queued behind each other all finish at this same instant.
  while (busy_ && finish_ == now) {
    finished.push_back(queue_.front().task);
    queue_.pop_front();
    busy_ = false;
    if (!queue_.empty()) start_head(now, starts);
  }
}

void FifoServer::shift(SimTime delta) {
  finish_ += delta;
}

void FifoServer::snapshot(SimTime now, SnapshotWriter& out) const {
  out.write(static_cast<std::int64_t>(queue_.size()));
  out.write(busy_ ? (finish_ - now).ns() : -1);
  for (const Entry& entry : queue_) {
    out.write_task(entry.task);
    out.write(entry.work_ns);
  }
}

}  // namespace epochcast::sim

// First-in first-out server.
#include "sim/engine/fifo_server.h"

#include <cmath>

namespace epochcast::sim {

void FifoServer::enqueue(TaskHandle task, std::int64_t work, std::uint32_t, SimTime now,
                         StartListener& starts) {
  queue_.push_back({task, work});
  if (!busy_) start_head(now, starts);
}

namespace {

// Nanoseconds to do `work` at `speed`, rounded up so no task finishes early.
std::int64_t at_speed(double work, double speed) {
  return speed == 1 ? static_cast<std::int64_t>(work)
                    : static_cast<std::int64_t>(std::ceil(work / speed));
}

}  // namespace

void FifoServer::start_head(SimTime now, StartListener& starts) {
  busy_ = true;
  finish_ = now + SimTime::from_ns(at_speed(static_cast<double>(queue_.front().work_ns), speed_));
  starts.task_started(queue_.front().task, now);
}

void FifoServer::set_speed(SimTime now, double speed) {
  if (speed == speed_) return;
  if (busy_) {
    const double remaining = static_cast<double>((finish_ - now).ns()) * speed_;
    finish_ = now + SimTime::from_ns(at_speed(remaining, speed));
  }
  speed_ = speed;
}

SimTime FifoServer::next_completion() const {
  if (!busy_) return SimTime::never();
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
  out.write(static_cast<std::int64_t>(std::llround(speed_ * 1e9)));
  out.write(busy_ ? (finish_ - now).ns() : -1);
  for (std::size_t i = 0; i < queue_.size(); ++i) {
    out.write_task(queue_[i].task);
    out.write(queue_[i].work_ns);
  }
}

}  // namespace epochcast::sim

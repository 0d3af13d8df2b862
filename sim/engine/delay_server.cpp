// Infinite server with a fixed delay per task.
#include "sim/engine/delay_server.h"

namespace epochcast::sim {

void DelayServer::enqueue(TaskHandle task, std::int64_t work, std::uint32_t, SimTime now,
                          StartListener& starts) {
  pending_.emplace(std::make_pair(now + SimTime::from_ns(work), arrivals_++), task);
  starts.task_started(task, now);
}

SimTime DelayServer::next_completion() const {
  if (pending_.empty()) return SimTime::never();
  return pending_.begin()->first.first;
}

void DelayServer::advance(SimTime now, std::vector<TaskHandle>& finished, StartListener&) {
  while (!pending_.empty() && pending_.begin()->first.first == now) {
    finished.push_back(pending_.begin()->second);
    pending_.erase(pending_.begin());
  }
}

void DelayServer::shift(SimTime delta) {
  std::map<std::pair<SimTime, std::uint64_t>, TaskHandle> shifted;
  for (const auto& [key, task] : pending_)
    shifted.emplace(std::make_pair(key.first + delta, key.second), task);
  pending_ = std::move(shifted);
}

void DelayServer::snapshot(SimTime now, SnapshotWriter& out) const {
  out.write(static_cast<std::int64_t>(pending_.size()));
  for (const auto& [key, task] : pending_) {
    out.write((key.first - now).ns());
    out.write_task(task);
  }
}

}  // namespace epochcast::sim

// delay_server: an infinite server; every task finishes `work` nanoseconds after it arrives,
// independently of the others. Models fixed latencies and zero-time synchronisation markers.
#pragma once

#include <map>
#include <utility>

#include "sim/engine/resource.h"

namespace epochcast::sim {

class DelayServer final : public Resource {
 public:
  explicit DelayServer(std::string name) : name_(std::move(name)) {}

  const std::string& name() const override { return name_; }
  void enqueue(TaskHandle task, std::int64_t work, std::uint32_t detail, SimTime now,
               StartListener& starts) override;
  SimTime next_completion() const override;
  void advance(SimTime now, std::vector<TaskHandle>& finished, StartListener& starts) override;
  void shift(SimTime delta) override;
  void snapshot(SimTime now, SnapshotWriter& out) const override;

 private:
  std::string name_;
  // Keyed by (finish time, arrival sequence) so equal finish times keep arrival order.
  std::map<std::pair<SimTime, std::uint64_t>, TaskHandle> pending_;
  std::uint64_t arrivals_ = 0;
};

}  // namespace epochcast::sim

// max_min_fair: data transfers as flows along routes of directed links, sharing every link's
// capacity max-min fairly (a fluid model computed by progressive filling). A flow first waits
// its route's latency (the sum of per-hop latencies), then moves its bytes at its fair rate,
// which is recomputed whenever a flow starts or ends; so contention emerges from the topology
// instead of being assumed. Used for interconnects inside a machine and between machines.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/units.h"
#include "sim/engine/resource.h"

namespace epochcast::sim {

class MaxMinFairNetwork final : public Resource {
 public:
  explicit MaxMinFairNetwork(std::string name) : name_(std::move(name)) {}

  // A link in one direction; returns its id.
  std::uint32_t add_link(std::string name, BytesPerSecond capacity);
  // A route over directed links; returns its id, which tasks pass as their `detail`.
  std::uint32_t add_route(std::vector<std::uint32_t> links, SimTime latency);

  const std::string& name() const override { return name_; }
  void enqueue(TaskHandle task, std::int64_t bytes, std::uint32_t route, SimTime now,
               StartListener& starts) override;
  std::optional<SimTime> next_completion() const override;
  void advance(SimTime now, std::vector<TaskHandle>& finished, StartListener& starts) override;
  void shift(SimTime delta) override;
  void snapshot(SimTime now, SnapshotWriter& out) const override;

  std::size_t link_count() const { return links_.size(); }
  const std::string& link_name(std::uint32_t link) const { return links_[link].name; }
  BytesPerSecond link_capacity(std::uint32_t link) const {
    return BytesPerSecond(links_[link].capacity);
  }
  // Bytes carried by a link so far (for utilisation statistics).
  double bytes_carried(std::uint32_t link) const { return links_[link].carried; }
  // Called with (time, link, total rate on the link in bytes/s) whenever rates change; for
  // link-utilisation counter tracks in traces.
  void set_rate_listener(std::function<void(SimTime, std::uint32_t, double)> listener) {
    rate_listener_ = std::move(listener);
  }

 private:
  struct Link {
    std::string name;
    double capacity = 0;  // bytes per second
    double carried = 0;
    double rate = 0;  // current total rate of its flows
  };
  struct Route {
    std::vector<std::uint32_t> links;
    SimTime latency;
  };
  struct Flow {
    TaskHandle task;
    std::uint32_t route = 0;
    double remaining = 0;  // bytes
    double rate = 0;       // bytes per second, while transferring
    bool transferring = false;
    SimTime transfer_start;  // when the latency has passed
    SimTime finish;          // when the transfer ends at the current rate
  };

  void progress(SimTime now);
  void recompute_rates(SimTime now);

  std::string name_;
  std::vector<Link> links_;
  std::vector<Route> routes_;
  std::vector<Flow> flows_;  // in arrival order
  SimTime last_update_;
  std::function<void(SimTime, std::uint32_t, double)> rate_listener_;
};

}  // namespace epochcast::sim

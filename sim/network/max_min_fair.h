// max_min_fair: data transfers as flows along routes of directed links, sharing every link's
// capacity max-min fairly (a fluid model computed by progressive filling). A flow first waits
// its route's latency (the sum of per-hop latencies), then moves its bytes at its fair rate,
// which is recomputed whenever a flow starts or ends; so contention emerges from the topology
// instead of being assumed. Used for interconnects inside a machine and between machines.
//
// The allocation is incremental. A flow that starts over links with capacity to spare, or ends
// without having filled any of its links, changes no other flow's fair rate (every flow's
// bottleneck is a filled link), and is handled on its own route. Otherwise the allocation is
// refilled, but only in the connected component of the graph of flows and links that the change
// touches: a max-min fair allocation splits into those components, so the others keep their
// rates and finish times. A flow's bytes are brought up to date only when its rate changes.
// Every link keeps the list of its flows, so filling needs no search, and the bottleneck of each
// round comes from a heap of (share, link) — the order of a whole-network refill. Rates are those
// of a whole-network refill up to the rounding of sums (ulps).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/units.h"
#include "sim/engine/monotone_queue.h"
#include "sim/engine/resource.h"

namespace epochcast::sim {

class MaxMinFairNetwork final : public Resource {
 public:
  explicit MaxMinFairNetwork(std::string name) : name_(std::move(name)) {}

  // A link in one direction; returns its id.
  std::uint32_t add_link(std::string name, BytesPerSecond capacity);
  // Marks a link whose flows' rates can never sum past its capacity (a switch's uplink as wide
  // as all its other links together): it is nobody's bottleneck, so the allocation leaves it
  // out — refills neither reach across it nor fill it, which with every rank of a cluster kept
  // every flow through the spine in one component. Its rate is still kept, for statistics.
  // Before any route over it is added.
  void set_never_binding(std::uint32_t link);
  bool never_binding(std::uint32_t link) const { return links_[link].never_binding; }
  // A route over directed links; returns its id, which tasks pass as their `detail`.
  std::uint32_t add_route(std::vector<std::uint32_t> links, SimTime latency);

  const std::string& name() const override { return name_; }
  void enqueue(TaskHandle task, std::int64_t bytes, std::uint32_t route, SimTime now,
               StartListener& starts) override;
  SimTime next_completion() const override;
  void advance(SimTime now, std::vector<TaskHandle>& finished, StartListener& starts) override;
  void shift(SimTime delta) override;
  void snapshot(SimTime now, SnapshotWriter& out) const override;

  std::size_t link_count() const { return links_.size(); }
  const std::string& link_name(std::uint32_t link) const { return links_[link].name; }
  BytesPerSecond link_capacity(std::uint32_t link) const {
    return BytesPerSecond(links_[link].capacity);
  }
  // Bytes carried by a link up to its last change of rate (all of them once it is idle; for
  // utilisation statistics).
  double bytes_carried(std::uint32_t link) const { return links_[link].carried; }
  // Flows in the network (waiting out their latency or transferring).
  std::size_t active_flows() const { return active_; }
  // Called with (time, link, total rate on the link in bytes/s) whenever a link's rate changes;
  // for link-utilisation counter tracks in traces.
  void set_rate_listener(std::function<void(SimTime, std::uint32_t, double)> listener) {
    rate_listener_ = std::move(listener);
  }

 private:
  // What a refill reads and writes of a link comes first, in one cache line: the refills of an
  // epoch with every rank reach millions of links, most of them a cache miss, and the name's 32
  // bytes ahead put those fields across two lines.
  struct alignas(64) Link {
    std::vector<std::uint32_t> flows;  // transferring flows that cross it (flow slots)
    double capacity = 0;               // bytes per second
    double rate = 0;                   // current total rate of its flows
    // Scratch of a refill.
    double left = 0;          // capacity not yet given to frozen flows
    std::uint64_t visit = 0;  // refill (or filling round) that reached it
    std::uint32_t unfrozen = 0;
    bool never_binding = false;  // set_never_binding
    // Statistics and the name: a refill updates these only for the links whose rate changed.
    double carried = 0;  // bytes, up to `since`
    SimTime since;       // when `rate` took effect
    std::string name;
  };
  struct Route {
    std::vector<std::uint32_t> links;
    SimTime latency;
    bool crosses_twice = false;  // a link appears twice in it
  };
  // As Link: what a refill touches first, in one cache line.
  struct alignas(64) Flow {
    std::uint64_t visit = 0;  // refill that reached it
    double rate = 0;          // bytes per second, while transferring
    double new_rate = 0;      // scratch of a refill
    std::uint32_t route = 0;
    bool frozen = false;  // scratch of a refill
    bool live = false;    // false: a free slot
    bool transferring = false;
    std::uint32_t version = 0;  // of its pending event (counts on across the slot's flows)
    std::uint64_t arrival = 0;  // order of arrival: ties and snapshots follow it
    double remaining = 0;       // bytes at `since`
    SimTime since;
    TaskHandle task;
    SimTime transfer_start;  // when the latency has passed
    SimTime finish;          // when the transfer ends at the current rate
    // Where the flow sits in each of its route's links' lists (same order as the route).
    std::vector<std::uint32_t> positions;
  };
  // A flow's latency ending or its transfer ending. Events due at the same instant are put in
  // arrival order when they are taken, so the queue orders by time alone.
  struct Event {
    SimTime time;
    std::uint32_t flow = 0;
    std::uint32_t version = 0;
  };

  void schedule(std::uint32_t flow, SimTime when);
  void drop_stale_events();
  void attach(std::uint32_t flow);
  void detach(std::uint32_t flow);
  // A transferring flow's rate from `now` on: its bytes moved so far at the old rate are taken
  // off, and its end is rescheduled.
  void change_rate(std::uint32_t flow, double rate, SimTime now);
  bool saturated(std::uint32_t link) const;
  // Starts a transferring flow without a refill when that keeps the allocation max-min fair;
  // false (nothing changed) when it would not.
  bool join_unsaturated(std::uint32_t flow, SimTime now);
  void set_link_rate(std::uint32_t link, double rate, SimTime now);
  // Max-min fair rates (Flow::new_rate) for the flows of component_flows_ over
  // component_links_.
  void fill_component();
  // Refills the components of the links in `seeds` (links whose flows changed).
  void refill(const std::vector<std::uint32_t>& seeds, SimTime now);

  std::string name_;
  std::vector<Link> links_;
  std::vector<Route> routes_;
  std::vector<Flow> flows_;  // slots, reused
  std::vector<std::uint32_t> free_slots_;
  std::size_t active_ = 0;
  MonotoneQueue<Event> events_;  // entries of changed flows are stale
  std::uint64_t next_arrival_ = 0;
  std::uint64_t visit_ = 0;
  std::function<void(SimTime, std::uint32_t, double)> rate_listener_;
  // Scratch of advance() and refill(), kept to avoid allocations.
  std::vector<std::uint32_t> due_, seeds_, component_links_, component_flows_, touched_, followers_;
  std::vector<std::pair<double, std::uint32_t>> heap_;
};

}  // namespace epochcast::sim

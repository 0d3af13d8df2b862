// Max-min fair sharing of links by flows (progressive filling).
#include "sim/network/max_min_fair.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace epochcast::sim {

std::uint32_t MaxMinFairNetwork::add_link(std::string name, BytesPerSecond capacity) {
  if (!(capacity.value() > 0)) throw std::logic_error("a network link needs a positive capacity");
  links_.push_back({std::move(name), capacity.value(), 0, 0});
  return static_cast<std::uint32_t>(links_.size() - 1);
}

std::uint32_t MaxMinFairNetwork::add_route(std::vector<std::uint32_t> links, SimTime latency) {
  for (std::uint32_t l : links) {
    if (l >= links_.size()) throw std::logic_error("a route over an unknown link");
  }
  routes_.push_back({std::move(links), latency});
  return static_cast<std::uint32_t>(routes_.size() - 1);
}

void MaxMinFairNetwork::enqueue(TaskHandle task, std::int64_t bytes, std::uint32_t route,
                                SimTime now, StartListener& starts) {
  if (route >= routes_.size()) throw std::logic_error("a flow on an unknown route");
  progress(now);
  Flow flow;
  flow.task = task;
  flow.route = route;
  flow.remaining = static_cast<double>(bytes);
  flow.transfer_start = now + routes_[route].latency;
  flow.finish = flow.transfer_start;
  flows_.push_back(flow);
  starts.task_started(task, now);
  recompute_rates(now);
}

std::optional<SimTime> MaxMinFairNetwork::next_completion() const {
  std::optional<SimTime> next;
  for (const Flow& f : flows_) {
    SimTime t = f.transferring ? f.finish : f.transfer_start;
    if (!next || t < *next) next = t;
  }
  return next;
}

void MaxMinFairNetwork::progress(SimTime now) {
  if (now <= last_update_) {
    last_update_ = std::max(last_update_, now);
    return;
  }
  double dt = static_cast<double>((now - last_update_).ns()) * 1e-9;
  for (Flow& f : flows_) {
    if (!f.transferring) continue;
    double moved = std::min(f.remaining, f.rate * dt);
    f.remaining -= moved;
    for (std::uint32_t l : routes_[f.route].links)
      links_[l].carried += moved;
  }
  last_update_ = now;
}

void MaxMinFairNetwork::advance(SimTime now, std::vector<TaskHandle>& finished, StartListener&) {
  progress(now);
  bool changed = false;
  // Transfers end at their computed finish time (any sub-byte residue is rounding); then flows
  // whose latency has passed begin to transfer.
  std::vector<Flow> kept;
  kept.reserve(flows_.size());
  for (const Flow& f : flows_) {
    if (f.transferring && f.finish <= now) {
      finished.push_back(f.task);
      changed = true;
    } else {
      kept.push_back(f);
    }
  }
  flows_ = std::move(kept);
  for (Flow& f : flows_) {
    if (!f.transferring && f.transfer_start <= now) {
      f.transferring = true;
      changed = true;
    }
  }
  if (changed) recompute_rates(now);
}

void MaxMinFairNetwork::recompute_rates(SimTime now) {
  // Progressive filling: repeatedly find the link whose remaining capacity divided among its
  // unfrozen flows is smallest, give those flows that share, and remove it from their links.
  std::vector<double> capacity(links_.size());
  std::vector<int> unfrozen(links_.size(), 0);
  for (std::size_t l = 0; l < links_.size(); ++l)
    capacity[l] = links_[l].capacity;
  std::vector<bool> frozen(flows_.size(), false);
  std::size_t remaining_flows = 0;
  for (std::size_t i = 0; i < flows_.size(); ++i) {
    Flow& f = flows_[i];
    f.rate = 0;
    if (!f.transferring) {
      frozen[i] = true;
      continue;
    }
    if (routes_[f.route].links.empty()) {  // a local copy: no link limits it
      f.rate = std::numeric_limits<double>::infinity();
      frozen[i] = true;
      continue;
    }
    for (std::uint32_t l : routes_[f.route].links)
      ++unfrozen[l];
    ++remaining_flows;
  }
  while (remaining_flows > 0) {
    std::size_t bottleneck = links_.size();
    double share = std::numeric_limits<double>::infinity();
    for (std::size_t l = 0; l < links_.size(); ++l) {
      if (unfrozen[l] == 0) continue;
      double s = capacity[l] / unfrozen[l];
      if (s < share) {
        share = s;
        bottleneck = l;
      }
    }
    for (std::size_t i = 0; i < flows_.size(); ++i) {
      if (frozen[i]) continue;
      const std::vector<std::uint32_t>& route = routes_[flows_[i].route].links;
      if (std::find(route.begin(), route.end(), bottleneck) == route.end()) continue;
      flows_[i].rate = share;
      frozen[i] = true;
      --remaining_flows;
      for (std::uint32_t l : route) {
        capacity[l] = std::max(0.0, capacity[l] - share);
        --unfrozen[l];
      }
    }
  }
  for (Link& link : links_)
    link.rate = 0;
  for (Flow& f : flows_) {
    if (!f.transferring) continue;
    if (std::isinf(f.rate)) {
      f.finish = now;
      continue;
    }
    for (std::uint32_t l : routes_[f.route].links)
      links_[l].rate += f.rate;
    double seconds = f.remaining / f.rate;
    f.finish = now + SimTime::from_ns_rounded_up(seconds * 1e9);
  }
  if (rate_listener_) {
    for (std::uint32_t l = 0; l < links_.size(); ++l)
      rate_listener_(now, l, links_[l].rate);
  }
}

void MaxMinFairNetwork::shift(SimTime delta) {
  last_update_ += delta;
  for (Flow& f : flows_) {
    f.transfer_start += delta;
    f.finish += delta;
  }
}

void MaxMinFairNetwork::snapshot(SimTime now, SnapshotWriter& out) const {
  // Without flows, when the network last progressed decides nothing (progress() only moves
  // that mark forward), so an idle network is the same state at any time: a validation pass,
  // which has no collectives, then repeats and is skipped like training.
  out.write(flows_.empty() ? 0 : (last_update_ - now).ns());
  out.write(static_cast<std::int64_t>(flows_.size()));
  for (const Flow& f : flows_) {
    out.write_task(f.task);
    out.write(f.route);
    out.write(std::bit_cast<std::int64_t>(f.remaining));
    out.write(f.transferring ? 1 : 0);
    out.write((f.transfer_start - now).ns());
    out.write((f.finish - now).ns());
  }
}

}  // namespace epochcast::sim

// Max-min fair sharing of links by flows (progressive filling, refilled per component).
#include "sim/network/max_min_fair.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <utility>

namespace epochcast::sim {

std::uint32_t MaxMinFairNetwork::add_link(std::string name, BytesPerSecond capacity) {
  if (!(capacity.value() > 0)) throw std::logic_error("a network link needs a positive capacity");
  Link link;
  link.name = std::move(name);
  link.capacity = capacity.value();
  links_.push_back(std::move(link));
  return static_cast<std::uint32_t>(links_.size() - 1);
}

void MaxMinFairNetwork::set_never_binding(std::uint32_t link) {
  if (link >= links_.size() || !routes_.empty()) {
    throw std::logic_error("a link marked never binding after routes, or an unknown one");
  }
  links_[link].never_binding = true;
}

std::uint32_t MaxMinFairNetwork::add_route(std::vector<std::uint32_t> links, SimTime latency) {
  for (std::uint32_t l : links) {
    if (l >= links_.size()) throw std::logic_error("a route over an unknown link");
  }
  if (!links.empty() &&
      std::all_of(links.begin(), links.end(), [&](std::uint32_t l) { return never_binding(l); })) {
    throw std::logic_error("a route whose links are all never binding");
  }
  std::vector<std::uint32_t> sorted = links;
  std::sort(sorted.begin(), sorted.end());
  const bool crosses_twice = std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end();
  routes_.push_back({std::move(links), latency, crosses_twice});
  return static_cast<std::uint32_t>(routes_.size() - 1);
}

void MaxMinFairNetwork::schedule(std::uint32_t flow, SimTime when) {
  Flow& f = flows_[flow];
  ++f.version;  // the flow's earlier events are stale
  events_.push({when, flow, f.version});
}

void MaxMinFairNetwork::drop_stale_events() {
  auto stale = [&](const Event& e) {
    return !flows_[e.flow].live || flows_[e.flow].version != e.version;
  };
  // Rescheduled flows leave their old events behind; once they outnumber the live ones, one
  // pass over the queue drops them, which is cheaper than meeting them one by one later.
  if (events_.size() > 2 * active_ + 64) events_.erase_if(stale);
  events_.drop_stale_front(stale);
}

void MaxMinFairNetwork::enqueue(TaskHandle task, std::int64_t bytes, std::uint32_t route,
                                SimTime now, StartListener& starts) {
  if (route >= routes_.size()) throw std::logic_error("a flow on an unknown route");
  std::uint32_t slot;
  if (free_slots_.empty()) {
    slot = static_cast<std::uint32_t>(flows_.size());
    flows_.emplace_back();
  } else {
    slot = free_slots_.back();
    free_slots_.pop_back();
  }
  Flow& f = flows_[slot];
  f.task = task;
  f.route = route;
  f.arrival = next_arrival_++;
  f.live = true;
  f.remaining = static_cast<double>(bytes);
  f.rate = 0;
  f.transferring = false;
  f.transfer_start = now + routes_[route].latency;
  f.finish = f.transfer_start;
  f.since = f.transfer_start;
  ++active_;
  schedule(slot, f.transfer_start);
  starts.task_started(task, now);
}

SimTime MaxMinFairNetwork::next_completion() const {
  if (events_.empty()) return SimTime::never();
  return events_.min_time();
}

void MaxMinFairNetwork::attach(std::uint32_t flow) {
  Flow& f = flows_[flow];
  const std::vector<std::uint32_t>& route = routes_[f.route].links;
  f.positions.resize(route.size());
  for (std::size_t hop = 0; hop < route.size(); ++hop) {
    std::vector<std::uint32_t>& list = links_[route[hop]].flows;
    f.positions[hop] = static_cast<std::uint32_t>(list.size());
    list.push_back(flow);
  }
}

void MaxMinFairNetwork::detach(std::uint32_t flow) {
  const Flow& f = flows_[flow];
  const std::vector<std::uint32_t>& route = routes_[f.route].links;
  for (std::size_t hop = 0; hop < route.size(); ++hop) {
    const std::uint32_t l = route[hop];
    std::vector<std::uint32_t>& list = links_[l].flows;
    const std::uint32_t position = f.positions[hop];
    const auto last = static_cast<std::uint32_t>(list.size() - 1);
    const std::uint32_t moved = list[last];
    list[position] = moved;
    list.pop_back();
    if (position == last) continue;
    // The flow moved into the hole records its new place (the hop of its route that held the
    // last place of this link: a route may cross a link twice).
    Flow& m = flows_[moved];
    const std::vector<std::uint32_t>& moved_route = routes_[m.route].links;
    for (std::size_t h = 0; h < moved_route.size(); ++h) {
      if (moved_route[h] == l && m.positions[h] == last) {
        m.positions[h] = position;
        break;
      }
    }
  }
}

void MaxMinFairNetwork::advance(SimTime now, std::vector<TaskHandle>& finished, StartListener&) {
  due_.clear();
  events_.pop_until(now, [&](const Event& e) {
    if (flows_[e.flow].live && flows_[e.flow].version == e.version) due_.push_back(e.flow);
  });
  std::sort(due_.begin(), due_.end(), [&](std::uint32_t a, std::uint32_t b) {
    return flows_[a].arrival < flows_[b].arrival;
  });
  seeds_.clear();
  // Transfers end at their computed finish time (any sub-byte residue is rounding); then flows
  // whose latency has passed begin to transfer.
  for (std::uint32_t slot : due_) {
    Flow& f = flows_[slot];
    if (!f.transferring) continue;
    finished.push_back(f.task);
    const Route& route = routes_[f.route];
    detach(slot);
    // Another flow can gain only where this one filled a link they share: a link it filled
    // alone (its own NIC, say) was nobody else's bottleneck.
    if (route.crosses_twice ||
        std::any_of(route.links.begin(), route.links.end(),
                    [&](std::uint32_t l) { return saturated(l) && !links_[l].flows.empty(); })) {
      seeds_.insert(seeds_.end(), route.links.begin(), route.links.end());
    } else {
      // No other flow has its bottleneck on these links, so none gains from this one's end.
      for (std::uint32_t l : route.links)
        set_link_rate(l, links_[l].flows.empty() ? 0 : links_[l].rate - f.rate, now);
    }
    f.live = false;
    f.transferring = false;
    free_slots_.push_back(slot);
    --active_;
  }
  for (std::uint32_t slot : due_) {
    Flow& f = flows_[slot];
    if (!f.live || f.transferring) continue;
    f.transferring = true;
    f.since = now;
    const std::vector<std::uint32_t>& route = routes_[f.route].links;
    if (route.empty()) {  // a local copy: no link limits it
      f.rate = std::numeric_limits<double>::infinity();
      f.finish = now;
      schedule(slot, now);
      continue;
    }
    if (seeds_.empty() && join_unsaturated(slot, now)) continue;
    attach(slot);
    seeds_.insert(seeds_.end(), route.begin(), route.end());
  }
  if (!seeds_.empty()) refill(seeds_, now);
  drop_stale_events();
}

bool MaxMinFairNetwork::saturated(std::uint32_t link) const {
  // Rates are sums of doubles: a link filled by the allocation reads within a few ulps of its
  // capacity, an unsaturated one far below.
  constexpr double kFilled = 1 - 1e-9;
  return !links_[link].never_binding && links_[link].rate >= links_[link].capacity * kFilled;
}

bool MaxMinFairNetwork::join_unsaturated(std::uint32_t slot, SimTime now) {
  // A new flow over links that all have capacity to spare takes the least spare capacity of its
  // route. That is the max-min fair allocation if, on a link where it is the least, no other
  // flow runs faster (that link is then the new flow's bottleneck) — and the other flows keep
  // theirs, all on saturated links, which the new flow does not cross. Otherwise the caller
  // refills the component.
  Flow& f = flows_[slot];
  const Route& route = routes_[f.route];
  if (route.crosses_twice) return false;
  double rate = std::numeric_limits<double>::infinity();
  for (std::uint32_t l : route.links) {
    if (saturated(l)) return false;
    if (!links_[l].never_binding) rate = std::min(rate, links_[l].capacity - links_[l].rate);
  }
  bool bottleneck = false;
  for (std::uint32_t l : route.links) {
    const Link& link = links_[l];
    if (link.never_binding || link.capacity - link.rate != rate) continue;
    bottleneck = std::all_of(link.flows.begin(), link.flows.end(),
                             [&](std::uint32_t other) { return flows_[other].rate <= rate; });
    if (bottleneck) break;
  }
  if (!bottleneck) return false;
  attach(slot);
  change_rate(slot, rate, now);
  for (std::uint32_t l : route.links)
    set_link_rate(l, links_[l].rate + rate, now);
  return true;
}

void MaxMinFairNetwork::change_rate(std::uint32_t slot, double rate, SimTime now) {
  Flow& f = flows_[slot];
  const double elapsed = static_cast<double>((now - f.since).ns()) * 1e-9;
  f.remaining = std::max(0.0, f.remaining - f.rate * elapsed);
  f.since = now;
  f.rate = rate;
  f.finish = now + SimTime::from_ns_rounded_up(f.remaining / rate * 1e9);
  schedule(slot, f.finish);
}

void MaxMinFairNetwork::set_link_rate(std::uint32_t link, double rate, SimTime now) {
  Link& l = links_[link];
  if (rate == l.rate) return;
  l.carried += l.rate * static_cast<double>((now - l.since).ns()) * 1e-9;
  l.since = now;
  l.rate = rate;
  if (rate_listener_) rate_listener_(now, link, rate);
}

void MaxMinFairNetwork::fill_component() {
  // Progressive filling: repeatedly take the link whose remaining capacity divided among its
  // unfrozen flows is smallest (the lowest id among equals), give those flows that share, and
  // take it from their links. Links come from a min-heap of (share, link); an entry whose share
  // is no longer the link's is stale (every change pushes the new one).
  using Key = std::pair<double, std::uint32_t>;
  heap_.clear();
  for (std::uint32_t l : component_links_) {
    Link& link = links_[l];
    link.left = link.capacity;
    link.unfrozen = static_cast<std::uint32_t>(link.flows.size());
    if (link.unfrozen > 0) heap_.emplace_back(link.left / link.unfrozen, l);
  }
  std::make_heap(heap_.begin(), heap_.end(), std::greater<Key>{});
  // Once every flow has its rate, what the heap still holds is stale (links whose flows are all
  // frozen): most of it, since every link of the component entered it, and popping it all was
  // a sixth of the filling's instructions over a 256-GPU epoch with every rank (cachegrind,
  // BM_ImagenetEpochEveryRank/256: 6.64 -> 5.50 G).
  std::size_t unfrozen_flows = component_flows_.size();
  while (!heap_.empty() && unfrozen_flows > 0) {
    std::pop_heap(heap_.begin(), heap_.end(), std::greater<Key>{});
    const auto [share, bottleneck] = heap_.back();
    heap_.pop_back();
    const Link& b = links_[bottleneck];
    if (b.unfrozen == 0 || b.left / b.unfrozen != share) continue;
    const std::uint64_t round = ++visit_;
    touched_.clear();
    for (std::uint32_t slot : b.flows) {
      Flow& f = flows_[slot];
      if (f.frozen) continue;
      f.frozen = true;
      f.new_rate = share;
      --unfrozen_flows;
      for (std::uint32_t l : routes_[f.route].links) {
        Link& link = links_[l];
        if (link.never_binding) continue;
        link.left = std::max(0.0, link.left - share);
        --link.unfrozen;
        if (link.visit != round) {
          link.visit = round;
          touched_.push_back(l);
        }
      }
    }
    for (std::uint32_t l : touched_) {
      const Link& link = links_[l];
      if (link.unfrozen == 0) continue;
      heap_.emplace_back(link.left / link.unfrozen, l);
      std::push_heap(heap_.begin(), heap_.end(), std::greater<Key>{});
    }
  }
}

void MaxMinFairNetwork::refill(const std::vector<std::uint32_t>& seeds, SimTime now) {
  // The component: links and flows reachable from the changed links through shared flows.
  ++visit_;
  component_links_.clear();
  component_flows_.clear();
  // Links never binding in the seeds (a flow that ended crossed them) and those a changed flow
  // crosses: left out of the filling, their rates then follow (for statistics).
  followers_.clear();
  for (std::uint32_t l : seeds) {
    if (links_[l].visit == visit_) continue;
    links_[l].visit = visit_;
    (links_[l].never_binding ? followers_ : component_links_).push_back(l);
  }
  for (std::size_t next = 0; next < component_links_.size(); ++next) {
    for (std::uint32_t slot : links_[component_links_[next]].flows) {
      Flow& f = flows_[slot];
      if (f.visit == visit_) continue;
      f.visit = visit_;
      f.frozen = false;
      component_flows_.push_back(slot);
      for (std::uint32_t l : routes_[f.route].links) {
        if (links_[l].visit == visit_ || links_[l].never_binding) continue;
        links_[l].visit = visit_;
        component_links_.push_back(l);
      }
    }
  }

  if (component_flows_.size() == 1) {
    // Alone on its links (the common case of rings and trees): filling's one round gives the
    // flow its tightest link's capacity (half of it on a link the route crosses twice).
    Flow& f = flows_[component_flows_.front()];
    f.new_rate = std::numeric_limits<double>::infinity();
    for (std::uint32_t l : component_links_) {
      const Link& link = links_[l];
      f.new_rate = std::min(f.new_rate, link.capacity / static_cast<double>(link.flows.size()));
    }
  } else {
    fill_component();
  }

  // A flow whose rate changed moves its bytes up to now at the old rate and is rescheduled;
  // the others keep their finish times.
  // Filling moved visit_ on: the followers found so far are marked afresh.
  const std::uint64_t followed = ++visit_;
  for (std::uint32_t l : followers_)
    links_[l].visit = followed;
  for (std::uint32_t slot : component_flows_) {
    Flow& f = flows_[slot];
    if (f.new_rate == f.rate) continue;
    change_rate(slot, f.new_rate, now);
    for (std::uint32_t l : routes_[f.route].links) {
      if (!links_[l].never_binding || links_[l].visit == followed) continue;
      links_[l].visit = followed;
      followers_.push_back(l);
    }
  }
  for (const std::vector<std::uint32_t>* list : {&component_links_, &followers_}) {
    for (std::uint32_t l : *list) {
      double rate = 0;
      for (std::uint32_t slot : links_[l].flows)
        rate += flows_[slot].rate;
      set_link_rate(l, rate, now);
    }
  }
}

void MaxMinFairNetwork::shift(SimTime delta) {
  for (Flow& f : flows_) {
    if (!f.live) continue;
    f.transfer_start += delta;
    f.finish += delta;
    f.since += delta;
  }
  for (Link& l : links_)
    l.since += delta;
  events_.shift(delta);
}

void MaxMinFairNetwork::snapshot(SimTime now, SnapshotWriter& out) const {
  // Flows in arrival order, each relative to now. An idle network writes the same at any time:
  // a validation pass, which has no collectives, then repeats and is skipped like training.
  std::vector<std::uint32_t> live;
  live.reserve(active_);
  for (std::uint32_t slot = 0; slot < flows_.size(); ++slot) {
    if (flows_[slot].live) live.push_back(slot);
  }
  std::sort(live.begin(), live.end(), [&](std::uint32_t a, std::uint32_t b) {
    return flows_[a].arrival < flows_[b].arrival;
  });
  out.write(static_cast<std::int64_t>(live.size()));
  for (std::uint32_t slot : live) {
    const Flow& f = flows_[slot];
    out.write_task(f.task);
    out.write(f.route);
    out.write(std::bit_cast<std::int64_t>(f.remaining));
    out.write(f.transferring ? 1 : 0);
    out.write(f.transferring ? std::bit_cast<std::int64_t>(f.rate) : 0);
    out.write(f.transferring ? (f.since - now).ns() : 0);
    out.write((f.transfer_start - now).ns());
    out.write((f.finish - now).ns());
  }
  // Busy links' total rates: a flow joining takes a link's spare capacity, which depends on the
  // rounding its rate's history left.
  if (live.empty()) return;
  for (std::uint32_t l = 0; l < links_.size(); ++l) {
    if (links_[l].flows.empty() || links_[l].never_binding) continue;
    out.write(l);
    out.write(std::bit_cast<std::int64_t>(links_[l].rate));
  }
  out.write(-1);
}

}  // namespace epochcast::sim

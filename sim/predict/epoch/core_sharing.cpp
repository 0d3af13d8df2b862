// Cores shared by a node's threads (see core_sharing.h).
#include "sim/predict/epoch/core_sharing.h"

#include <algorithm>
#include <cmath>

#include "sim/engine/fifo_server.h"

namespace epochcast::sim::epoch {

CoreSharing::CoreSharing(Engine& engine, int cores_per_node, int gpus_per_node)
    : engine_(engine), cores_per_node_(cores_per_node), gpus_per_node_(gpus_per_node) {}

void CoreSharing::add(ResourceId id, int rank) {
  if (cores_per_node_ <= 0) return;
  if (members_.size() <= id) members_.resize(id + 1);
  members_[id].node = rank / std::max(1, gpus_per_node_);
}

void CoreSharing::set_speed(ResourceId id, double speed) {
  static_cast<FifoServer&>(engine_.resource_for_change(id)).set_speed(engine_.now(), speed);
  engine_.changed(id);
}

std::int64_t CoreSharing::reshare(Share& share) {
  const auto busy = static_cast<std::int64_t>(share.busy.size());
  const double speed = busy > cores_per_node_
                           ? static_cast<double>(cores_per_node_) / static_cast<double>(busy)
                           : 1.0;
  // Re-timing every busy thread costs as much as running a task each, so thousands of
  // oversubscribed workers re-time only when their share moved by more than 1% (or back to a
  // core each): their speeds are then within 1% of a fair share.
  constexpr double kSpeedTolerance = 0.01;
  if (speed == share.speed) return kUnchanged;
  if (speed != 1 && std::abs(speed - share.speed) <= kSpeedTolerance * share.speed) {
    return kUnchanged;
  }
  share.speed = speed;
  for (ResourceId member : share.busy)
    set_speed(member, speed);
  return busy;
}

std::int64_t CoreSharing::start_busy(ResourceId id) {
  Member& member = members_[id];
  Share& share = shares_[member.node];
  member.busy_slot = static_cast<int>(share.busy.size());
  share.busy.push_back(id);
  set_speed(id, share.speed);
  return reshare(share);
}

std::int64_t CoreSharing::stop_busy(ResourceId id) {
  if (static_cast<const FifoServer&>(engine_.resource(id)).busy()) return kUnchanged;
  Member& member = members_[id];
  Share& share = shares_[member.node];
  // Out of the busy list: the last one takes its place.
  const ResourceId last = share.busy.back();
  share.busy[static_cast<std::size_t>(member.busy_slot)] = last;
  members_[last].busy_slot = member.busy_slot;
  share.busy.pop_back();
  member.busy_slot = -1;
  set_speed(id, 1);  // idle servers all read alike in snapshots
  return reshare(share);
}

}  // namespace epochcast::sim::epoch

// CPU threads and loader workers share their node's cores (EpochInput::cpu_cores_per_node):
// each busy one runs at min(1, cores / busy) of its speed, recomputed as they start and stop.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "sim/engine/engine.h"

namespace epochcast::sim::epoch {

class CoreSharing {
 public:
  // `cores_per_node` 0: nothing is shared (every call below does nothing).
  CoreSharing(Engine& engine, int cores_per_node, int gpus_per_node);

  // A CPU thread or loader worker of `rank`: it shares the cores of the rank's node.
  void add(ResourceId id, int rank);
  // A task started or finished on resource `id`. Each returns how many threads it re-timed (work
  // the driver counts against its simulation budget), or kUnchanged where the node's share did
  // not move.
  static constexpr std::int64_t kUnchanged = -1;
  // Called for every task: the test for a thread that shares nothing stays inline.
  std::int64_t started(ResourceId id) {
    return shares(id) && members_[id].busy_slot < 0 ? start_busy(id) : kUnchanged;
  }
  std::int64_t finished(ResourceId id) {
    return shares(id) && members_[id].busy_slot >= 0 ? stop_busy(id) : kUnchanged;
  }

 private:
  struct Share {
    std::vector<ResourceId> busy;  // in the order they started
    double speed = 1;
  };
  struct Member {
    int node = -1;       // the node whose cores it shares (-1: not a CPU thread)
    int busy_slot = -1;  // its place in the node's busy list while it runs a task
  };
  bool shares(ResourceId id) const { return id < members_.size() && members_[id].node >= 0; }
  std::int64_t start_busy(ResourceId id);
  std::int64_t stop_busy(ResourceId id);
  std::int64_t reshare(Share& share);
  void set_speed(ResourceId id, double speed);

  Engine& engine_;
  int cores_per_node_;
  int gpus_per_node_;
  std::vector<Member> members_;  // by resource
  std::map<int, Share> shares_;  // by node
};

}  // namespace epochcast::sim::epoch

// The data loaders of an epoch as the driver runs them: one DataLoader per loading process, its
// workers handed batches round-robin from worker 0, each loader keeping workers x
// prefetch_factor batches in flight ahead of the training loop; the validation phase has pools
// of its own, started when training ends.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <utility>
#include <vector>

#include "sim/engine/engine.h"
#include "sim/predict/epoch/core_sharing.h"
#include "sim/predict/epoch/phases.h"
#include "sim/predict/epoch/plan_index.h"

namespace epochcast::sim::epoch {

class LoaderPools {
 public:
  LoaderPools(const EpochInput& in, const Phases& phases, const TagLayout& tags, Engine& engine,
              CoreSharing& cores);

  // Batches a loader keeps in flight (0: batches are made on the training thread).
  std::int64_t depth() const;
  // Every loader's batches from `first_batch` to depth() on (within its phase), after `deps`.
  void start(std::int64_t first_batch, std::span<const TaskHandle> deps);
  // The task that loads batch g of `loader`, for the op that consumes it (once).
  TaskHandle take(int loader, std::int64_t g);
  // Batch g of `loader` was consumed: the loader is handed the batch depth() on, if its phase
  // has one.
  void consumed(int loader, std::int64_t g);
  // No batch left unconsumed.
  bool empty() const { return tasks_.empty(); }

  // Whether the loaders of the boundary's phase have been given every batch of it: from there on
  // the iterations differ only in how many batches are left.
  bool handed_all(std::int64_t boundary) const;
  // Whether a loader task of the boundary's phase is still running or waiting.
  bool busy(std::int64_t boundary) const;
  // The driver skipped `iterations` from `boundary` on: the loaders continue from there.
  void shift(std::int64_t boundary, std::int64_t iterations);
  // Their state at `boundary`, as values relative to it (`handle`: an unfinished task's tag,
  // relative to the boundary, or -1), appended to a snapshot.
  void append_snapshot(std::vector<std::int64_t>& s, std::int64_t boundary,
                       const std::function<std::int64_t(TaskHandle)>& handle) const;
  // Lists each pool in `order` (every resource once) from the worker that takes the next batch of
  // its phase: two boundaries whose pools differ only by a rotation then snapshot equally.
  void rotate_pools(std::vector<ResourceId>& order, std::int64_t boundary) const;

 private:
  ResourceId worker(int loader, std::int64_t batch);
  // The pool position that takes the phase's batch `relative_batch`.
  std::int64_t worker_index(std::int64_t relative_batch, bool validation) const;
  void create(int loader, std::int64_t batch, std::span<const TaskHandle> deps);

  const EpochInput& in_;
  const Phases& phases_;
  const TagLayout& tags_;
  Engine& engine_;
  CoreSharing& cores_;
  std::map<std::pair<bool, int>, std::vector<ResourceId>> workers_;  // (validation, loader)
  // Which worker of a pool takes a phase's batch b: (b - phase start + rotation) mod workers.
  // The workers of a pool are interchangeable, so a skipped span need not be a multiple of
  // their number: skipping rotates the assignment instead (see shift).
  std::array<std::int64_t, 2> rotation_{0, 0};                // training, validation
  std::map<std::pair<int, std::int64_t>, TaskHandle> tasks_;  // (loader, batch)
  std::array<std::int64_t, 2> created_{0, 0};                 // training, validation
};

}  // namespace epochcast::sim::epoch

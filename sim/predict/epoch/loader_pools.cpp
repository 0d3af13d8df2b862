// Loader worker pools of the epoch driver (see loader_pools.h).
#include "sim/predict/epoch/loader_pools.h"

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "sim/engine/fifo_server.h"

namespace epochcast::sim::epoch {

LoaderPools::LoaderPools(const EpochInput& in, const Phases& phases, const TagLayout& tags,
                         Engine& engine, CoreSharing& cores)
    : in_(in), phases_(phases), tags_(tags), engine_(engine), cores_(cores) {}

std::int64_t LoaderPools::depth() const {
  return static_cast<std::int64_t>(in_.loader.workers) * in_.loader.prefetch_factor;
}

ResourceId LoaderPools::worker(int loader, std::int64_t batch) {
  bool validation = phases_.in_validation(batch);
  std::vector<ResourceId>& pool = workers_[{validation, loader}];
  if (pool.empty()) {
    for (int w = 0; w < in_.loader.workers; ++w) {
      std::string owner = in_.loaders > 1 ? fmt::format("rank {} ", loader) : "";
      pool.push_back(engine_.add_resource(std::make_unique<FifoServer>(
          fmt::format("{}{}loader worker {}", owner, validation ? "validation " : "", w))));
      cores_.add(pool.back(), loader);
    }
  }
  // A DataLoader hands batches to its workers round-robin, starting with worker 0.
  return pool[static_cast<std::size_t>(worker_index(batch - phases_.start(batch), validation))];
}

std::int64_t LoaderPools::worker_index(std::int64_t relative_batch, bool validation) const {
  const std::int64_t n = in_.loader.workers;
  return ((relative_batch + rotation_[validation ? 1 : 0]) % n + n) % n;
}

void LoaderPools::create(int loader, std::int64_t batch, std::span<const TaskHandle> deps) {
  const Phase& phase = phases_.phase(batch);
  std::int64_t samples = phases_.is_last(batch) ? phase.last_batch : phase.full_batch;
  SimTime work = SimTime::from_seconds(in_.loader.batch_load_cpu(samples));
  ++created_[phases_.in_validation(batch) ? 1 : 0];
  tasks_[{loader, batch}] = engine_.add_task(
      worker(loader, batch), work.ns(),
      tags_.tag(batch, tags_.loader_base() + static_cast<std::uint64_t>(loader)), deps);
}

void LoaderPools::start(std::int64_t first_batch, std::span<const TaskHandle> deps) {
  std::int64_t end = std::min(phases_.end(first_batch), first_batch + depth());
  for (int l = 0; l < in_.loaders; ++l) {
    for (std::int64_t b = first_batch; b < end; ++b)
      create(l, b, deps);
  }
}

TaskHandle LoaderPools::take(int loader, std::int64_t g) {
  auto batch = tasks_.find({loader, g});
  if (batch == tasks_.end()) throw std::logic_error("a batch consumed twice");
  const TaskHandle task = batch->second;
  tasks_.erase(batch);
  return task;
}

void LoaderPools::consumed(int loader, std::int64_t g) {
  std::int64_t next = g + depth();
  if (next < phases_.end(g)) create(loader, next, {});
}

bool LoaderPools::handed_all(std::int64_t boundary) const {
  if (in_.loader.workers <= 0) return false;
  // Consuming a batch hands the loaders the batch depth() on only while the phase has one.
  const std::int64_t batches = phases_.end(boundary) - phases_.start(boundary);
  return created_[phases_.in_validation(boundary) ? 1 : 0] ==
         checked_product(static_cast<std::int64_t>(in_.loaders), batches);
}

bool LoaderPools::busy(std::int64_t boundary) const {
  const bool validation = phases_.in_validation(boundary);
  return std::any_of(tasks_.begin(), tasks_.end(), [&](const auto& entry) {
    return phases_.in_validation(entry.first.second) == validation &&
           !engine_.finished(entry.second);
  });
}

void LoaderPools::shift(std::int64_t boundary, std::int64_t iterations) {
  std::map<std::pair<int, std::int64_t>, TaskHandle> moved;
  if (handed_all(boundary)) {
    // Every batch loaded (the driver skips only then): each loader has its batches from the
    // first it has left to the phase's end, and after the skip those `iterations` on, all
    // loaded.
    std::map<int, std::int64_t> first_left;
    for (const auto& [key, h] : tasks_)
      first_left.emplace(key.first, key.second);
    for (const auto& [loader, first] : first_left) {
      for (std::int64_t b = first + iterations; b < phases_.end(boundary); ++b)
        moved.emplace(std::make_pair(loader, b), Engine::done_handle());
    }
  } else {
    for (const auto& [key, h] : tasks_)
      moved.emplace(std::make_pair(key.first, key.second + iterations), h);
    // The skipped iterations handed each loader as many batches.
    created_[phases_.in_validation(boundary) ? 1 : 0] +=
        checked_product(static_cast<std::int64_t>(in_.loaders), iterations);
  }
  tasks_ = std::move(moved);
  // The state kept is that of `iterations` earlier with its workers' roles rotated by as many
  // batches; assigning the next batches with the opposite rotation continues it exactly.
  if (in_.loader.workers > 0) {
    std::int64_t& r = rotation_[phases_.in_validation(boundary) ? 1 : 0];
    r = ((r - iterations) % in_.loader.workers + in_.loader.workers) % in_.loader.workers;
  }
}

void LoaderPools::append_snapshot(std::vector<std::int64_t>& s, std::int64_t boundary,
                                  const std::function<std::int64_t(TaskHandle)>& handle) const {
  // Once the loaders have every batch of the phase, only those still being loaded differ: one
  // already loaded imposes nothing, and how many are left shows in the iterations left.
  const bool all = handed_all(boundary);
  if (all) s.push_back(-6);
  for (const auto& [key, h] : tasks_) {
    if (all && engine_.finished(h)) continue;
    s.push_back(key.first);
    s.push_back(key.second - boundary);
    s.push_back(handle(h));
  }
}

void LoaderPools::rotate_pools(std::vector<ResourceId>& order, std::int64_t boundary) const {
  for (const auto& [key, pool] : workers_) {
    const bool validation = key.first;
    const std::int64_t start = validation ? in_.train.iterations : 0;
    const std::int64_t next = worker_index(boundary - start, validation);
    const std::size_t n = pool.size();
    // The pool's ids are consecutive (created together), so its positions are too.
    for (std::size_t k = 0; k < n; ++k)
      order[pool[0] + k] = pool[(k + static_cast<std::size_t>(next)) % n];
  }
}

}  // namespace epochcast::sim::epoch

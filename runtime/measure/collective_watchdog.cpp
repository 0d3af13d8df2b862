// The collectives' watchdog (see collective_watchdog.h).
#include "runtime/measure/collective_watchdog.h"

#include <fmt/format.h>

#include "runtime/measure/watchdog.h"

namespace epochcast::runtime {

CollectiveWatchdog::CollectiveWatchdog(double timeout_s, std::function<std::string()> health,
                                       std::function<void()> abort, double poll_s)
    : timeout_s_(timeout_s), poll_s_(poll_s), health_(std::move(health)), abort_(std::move(abort)) {
  thread_ = thread_deaf_to_stop_signals([this] { loop(); });
}

CollectiveWatchdog::~CollectiveWatchdog() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void CollectiveWatchdog::watch(std::string what, std::function<bool()> finished) {
  std::lock_guard lock(mutex_);
  works_.push_back({std::move(what), std::move(finished), std::chrono::steady_clock::now()});
}

std::optional<std::string> CollectiveWatchdog::failure() const {
  std::lock_guard lock(mutex_);
  return failure_;
}

std::size_t CollectiveWatchdog::in_flight() const {
  std::lock_guard lock(mutex_);
  return works_.size();
}

void CollectiveWatchdog::loop() {
  std::unique_lock lock(mutex_);
  while (!stopping_ && !failure_) {
    wake_.wait_for(lock, std::chrono::duration<double>(poll_s_), [&] { return stopping_; });
    if (stopping_) return;
    // Finished collectives leave the list, in any order (several streams may hold them).
    std::erase_if(works_, [](const Work& w) { return w.finished(); });
    std::string why;
    const auto now = std::chrono::steady_clock::now();
    for (const Work& w : works_) {
      const double running = std::chrono::duration<double>(now - w.launched).count();
      if (running > timeout_s_) {
        why = fmt::format(
            "NCCL: {} did not finish within {:g} s (a peer that stopped or hung); the "
            "watchdog aborted the communicator",
            w.what, timeout_s_);
        break;
      }
    }
    if (why.empty()) why = health_();
    if (why.empty()) continue;
    failure_ = why;
    works_.clear();
    // Outside the lock: aborting may wait for the communicator's own lock, held by a training
    // thread that is itself only launching work.
    lock.unlock();
    abort_();
    return;
  }
}

}  // namespace epochcast::runtime

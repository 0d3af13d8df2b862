// The hard bound on work that may never return (a hung collective, a deadlocked driver): the
// campaign's soft timeout is checked between iterations, so an iteration stuck inside NCCL or
// the driver is caught here instead, as are microbenchmarks stuck the same way. On expiry it
// runs `on_expiry` (which says why and saves what is known) and ends the process with exit
// code 124, as timeout(1) does.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace epochcast::runtime {

// A thread that never runs the SIGINT/SIGTERM handler: the signal is left to the main thread,
// whose loop acts on it, and the thread's own waits are never interrupted by it.
std::thread thread_deaf_to_stop_signals(std::function<void()> body);

class Watchdog {
 public:
  Watchdog();
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // From now, `seconds` until `on_expiry` runs and the process ends (re-arming replaces both).
  void arm(double seconds, std::function<void()> on_expiry);
  void disarm();

 private:
  void loop();

  std::mutex mutex_;
  std::condition_variable wake_;
  std::chrono::steady_clock::time_point deadline_;
  std::function<void()> on_expiry_;
  bool armed_ = false;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace epochcast::runtime

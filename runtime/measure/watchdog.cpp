// The watchdog's thread, deaf to the stop signals.
#include "runtime/measure/watchdog.h"

#include <csignal>
#include <cstdlib>

#include <pthread.h>

namespace epochcast::runtime {

std::thread thread_deaf_to_stop_signals(std::function<void()> body) {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  sigset_t previous;
  pthread_sigmask(SIG_BLOCK, &stop_signals, &previous);  // inherited by the new thread
  struct Restore {
    const sigset_t& mask;
    ~Restore() { pthread_sigmask(SIG_SETMASK, &mask, nullptr); }
  } restore{previous};
  return std::thread(std::move(body));
}

Watchdog::Watchdog() : thread_(thread_deaf_to_stop_signals([this] { loop(); })) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void Watchdog::arm(double seconds, std::function<void()> on_expiry) {
  std::lock_guard lock(mutex_);
  deadline_ = std::chrono::steady_clock::now() +
              std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                  std::chrono::duration<double>(seconds));
  on_expiry_ = std::move(on_expiry);
  armed_ = true;
  wake_.notify_all();
}

void Watchdog::disarm() {
  std::lock_guard lock(mutex_);
  armed_ = false;
}

void Watchdog::loop() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    if (!armed_) {
      wake_.wait(lock);
      continue;
    }
    if (wake_.wait_until(lock, deadline_) == std::cv_status::timeout && armed_ && !stopping_ &&
        std::chrono::steady_clock::now() >= deadline_) {
      on_expiry_();
      std::_Exit(124);
    }
  }
}

}  // namespace epochcast::runtime

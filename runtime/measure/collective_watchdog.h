// Watches collectives in flight from a thread of its own, as PyTorch's ProcessGroupNCCL watchdog
// does: each collective launched is registered with a way to ask whether it has finished (an
// event recorded after it on NCCL's stream). One still running `timeout_s` after its launch, or
// an asynchronous failure the health check reports (a peer gone), makes the watchdog abort the
// communicator once (ncclCommAbort: the kernels waiting for a dead peer return, later calls
// fail) and remember why. The training thread, blocked behind the hung kernel until then, reads
// failure() between iterations and stops the point with the reason; between iterations alone it
// could never see a collective that does not end.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace epochcast::runtime {

class CollectiveWatchdog {
 public:
  // `health` returns a failure's reason, or "" while the communicator is well; `abort` is
  // called once, from the watchdog's thread. Both must be safe to call from it.
  CollectiveWatchdog(double timeout_s, std::function<std::string()> health,
                     std::function<void()> abort, double poll_s = 0.1);
  ~CollectiveWatchdog();  // stops and joins the thread
  CollectiveWatchdog(const CollectiveWatchdog&) = delete;
  CollectiveWatchdog& operator=(const CollectiveWatchdog&) = delete;

  // A collective just launched; `finished` is asked from the watchdog's thread until it says so.
  void watch(std::string what, std::function<bool()> finished);
  // Why the communicator was aborted; nullopt while it has not been.
  std::optional<std::string> failure() const;
  std::size_t in_flight() const;

 private:
  struct Work {
    std::string what;
    std::function<bool()> finished;
    std::chrono::steady_clock::time_point launched;
  };
  void loop();

  const double timeout_s_;
  const double poll_s_;
  std::function<std::string()> health_;
  std::function<void()> abort_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<Work> works_;
  std::optional<std::string> failure_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace epochcast::runtime

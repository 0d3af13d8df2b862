// Progress of a long run over sweep points, on standard error, so that no command works for
// minutes in silence. Quick work prints nothing; once a run has taken a few seconds, it warns if
// the whole is estimated to take long (from the pace so far) and then reports progress every
// few seconds. Only standard error sees the wall clock: results never depend on it.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

namespace epochcast::cli {

class SweepProgress {
 public:
  // `what` names the work in messages ("predict"); `total` is the number of points.
  SweepProgress(std::string what, std::size_t total);
  SweepProgress(const SweepProgress&) = delete;
  SweepProgress& operator=(const SweepProgress&) = delete;
  ~SweepProgress();

  // Call after each point.
  void point_done();

 private:
  using Clock = std::chrono::steady_clock;
  void report(bool last);

  std::string what_;
  std::size_t total_;
  std::size_t done_ = 0;
  Clock::time_point start_;
  Clock::time_point last_report_;
  bool warned_ = false;
  bool reported_ = false;
  bool terminal_ = false;
};

// "1 h 05 min", "3 min 20 s", "12 s".
std::string duration_words(double seconds);

}  // namespace epochcast::cli

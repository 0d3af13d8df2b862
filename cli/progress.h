// Progress of a long run over sweep points (or through the stages of a fit), on standard
// error, so that no command works for minutes in silence. Quick work prints nothing. On a terminal,
// once a run has taken a couple of seconds, a line shows the points done, the time elapsed and an
// estimate of the time left, redrawn in place twice a second; pipes and files get none of that,
// only the warning (a line of its own, anywhere) that the whole is estimated to take long. Only
// standard error sees the wall clock: results never depend on it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>

namespace epochcast::cli {

class SweepProgress {
 public:
  // `what` names the work in messages ("predict"); `total` is the number of points, or 0 for
  // work told in stages (stage()), such as a calibration's fit.
  SweepProgress(std::string what, std::size_t total);
  SweepProgress(const SweepProgress&) = delete;
  SweepProgress& operator=(const SweepProgress&) = delete;
  ~SweepProgress();

  // Call after each point (from any thread).
  void point_done();
  // Work without points: what it is doing now and about how much is done (0 to 1).
  void stage(const std::string& detail, double fraction);
  // Prints `text` to `out` (a table row) without garbling the progress line: on a terminal the
  // line is cleared first and drawn again below it.
  void above(const std::string& text, std::FILE* out);
  // Takes the progress line off the terminal (the work is done and its output says so).
  void clear();

 private:
  using Clock = std::chrono::steady_clock;
  double elapsed() const;
  // Seconds the points not yet done should take: each as long as the finished took on average,
  // less the time the current ones have run since the last finished.
  double left() const;
  // Draws the line (the caller holds mutex_); `last`: without an estimate of what is left.
  void draw(bool last);
  void erase();  // the line, if drawn (the caller holds mutex_)

  std::string what_;
  std::size_t total_;
  std::size_t done_ = 0;
  std::string stage_;    // stage(): what the work is doing
  double fraction_ = 0;  // stage(): how much of it is done
  Clock::time_point start_;
  Clock::time_point last_done_;  // when the latest point finished
  bool warned_ = false;
  bool terminal_ = false;
  std::string line_;  // the progress line on the terminal now
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread ticker_;  // redraws the line on a terminal (elapsed time moves between points)
};

// "1 h 05 min", "3 min 20 s", "12 s".
std::string duration_words(double seconds);

}  // namespace epochcast::cli

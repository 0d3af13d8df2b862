// Progress lines for long sweeps.
#include "cli/progress.h"

#include <cmath>
#include <cstdint>
#include <cstdio>

#include <fmt/format.h>
#include <unistd.h>

#include "core/yaml/strict_yaml.h"

namespace epochcast::cli {

namespace {

// Work shorter than this is never reported; a run estimated longer than kLongRun is warned of.
constexpr double kQuietSeconds = 3;
constexpr double kLongRun = 60;
constexpr double kReportEvery = 5;
// A sweep this large is announced before the first point: its size alone makes it slow.
constexpr std::size_t kManyPoints = 100'000;

std::string points(std::size_t count) {
  return yaml::readable_integer(static_cast<std::int64_t>(count));
}

}  // namespace

std::string duration_words(double seconds) {
  if (!(seconds < 1e12)) return "forever";
  auto s = static_cast<std::int64_t>(std::llround(seconds));
  if (s >= 86400) return fmt::format("{} d {:02} h", s / 86400, s % 86400 / 3600);
  if (s >= 3600) return fmt::format("{} h {:02} min", s / 3600, s % 3600 / 60);
  if (s >= 60) return fmt::format("{} min {:02} s", s / 60, s % 60);
  return fmt::format("{} s", s);
}

SweepProgress::SweepProgress(std::string what, std::size_t total)
    : what_(std::move(what)),
      total_(total),
      start_(Clock::now()),
      last_report_(start_),
      terminal_(::isatty(STDERR_FILENO) != 0) {
  if (total_ >= kManyPoints) {
    fmt::print(stderr, "{}: the sweep has {} points; this may take a long time (Ctrl-C stops)\n",
               what_, points(total_));
    warned_ = true;
  }
}

SweepProgress::~SweepProgress() {
  if (reported_ && terminal_) std::fputs("\n", stderr);
}

void SweepProgress::point_done() {
  ++done_;
  Clock::time_point now = Clock::now();
  double elapsed = std::chrono::duration<double>(now - start_).count();
  if (elapsed < kQuietSeconds || done_ >= total_) {
    if (reported_ && done_ >= total_) report(true);
    return;
  }
  double left = elapsed / static_cast<double>(done_) * static_cast<double>(total_ - done_);
  if (!warned_ && elapsed + left > kLongRun) {
    fmt::print(stderr, "{}: {} points will take about {} at this pace (Ctrl-C stops)\n", what_,
               points(total_), duration_words(elapsed + left));
    warned_ = true;
  }
  if (!reported_ || std::chrono::duration<double>(now - last_report_).count() >= kReportEvery) {
    report(false);
    last_report_ = now;
  }
}

void SweepProgress::report(bool last) {
  double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
  double left =
      done_ > 0 ? elapsed / static_cast<double>(done_) * static_cast<double>(total_ - done_) : 0;
  std::string line = fmt::format("{}: {} of {} points, {} elapsed{}", what_, points(done_),
                                 points(total_), duration_words(elapsed),
                                 last ? "" : fmt::format(", about {} left", duration_words(left)));
  // On a terminal the line is rewritten in place; in a log, each report is a line of its own.
  if (terminal_) {
    fmt::print(stderr, "\r{:<78}", line);
  } else {
    fmt::print(stderr, "{}\n", line);
  }
  std::fflush(stderr);
  reported_ = true;
}

}  // namespace epochcast::cli

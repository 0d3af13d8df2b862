// Progress lines for long sweeps.
#include "cli/progress.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>

#include <fmt/format.h>
#include <unistd.h>

#include "cli/terminal.h"
#include "core/yaml/strict_yaml.h"

namespace epochcast::cli {

namespace {

// Work shorter than this is never reported; a run estimated longer than kLongRun is warned of
// (in logs too: the warnings are lines of their own, the progress line is for a terminal only).
constexpr double kQuietSeconds = 2;
constexpr double kLongRun = 60;
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
      terminal_(::isatty(STDERR_FILENO) != 0) {
  if (total_ >= kManyPoints) {
    fmt::print(stderr, "{}: the sweep has {} points; this may take a long time (Ctrl-C stops)\n",
               what_, points(total_));
    warned_ = true;
  }
  if (!terminal_) return;
  ticker_ = std::thread([this] {
    std::unique_lock lock(mutex_);
    constexpr auto kRedraw = std::chrono::milliseconds(500);
    while (!wake_.wait_for(lock, kRedraw, [this] { return stopping_; })) {
      const bool working = total_ == 0 ? !stage_.empty() : done_ < total_;
      if (elapsed() >= kQuietSeconds && working) draw(false);
    }
  });
}

SweepProgress::~SweepProgress() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (ticker_.joinable()) ticker_.join();
  // A sweep's last count stays on screen; a stage means nothing once the work has stopped (an
  // error follows, say).
  if (total_ == 0) {
    erase();
  } else if (!line_.empty()) {
    std::fputs("\n", stderr);
  }
}

double SweepProgress::elapsed() const {
  return std::chrono::duration<double>(Clock::now() - start_).count();
}

double SweepProgress::left() const {
  if (done_ == 0) return 0;
  const double per_point =
      std::chrono::duration<double>(last_done_ - start_).count() / static_cast<double>(done_);
  const double since = std::chrono::duration<double>(Clock::now() - last_done_).count();
  return std::max(0.0, per_point * static_cast<double>(total_ - done_) - since);
}

void SweepProgress::erase() {
  if (line_.empty()) return;
  const std::size_t width = output_width(stderr);
  fmt::print(stderr, "\r{:<{}}\r", "",
             width > 1 ? std::min(line_.size(), width - 1) : line_.size());
  std::fflush(stderr);
}

void SweepProgress::clear() {
  std::lock_guard lock(mutex_);
  erase();
  line_.clear();
  stage_.clear();  // the ticker draws nothing more
}

void SweepProgress::above(const std::string& text, std::FILE* out) {
  std::lock_guard lock(mutex_);
  erase();
  fmt::print(out, "{}", text);
  std::fflush(out);
  if (!line_.empty()) {
    fmt::print(stderr, "{}", line_);
    std::fflush(stderr);
  }
}

void SweepProgress::point_done() {
  std::lock_guard lock(mutex_);
  ++done_;
  last_done_ = Clock::now();
  const double spent = elapsed();
  if (spent < kQuietSeconds) return;
  if (!warned_ && done_ < total_ && spent + left() > kLongRun) {
    erase();
    fmt::print(stderr, "{}: {} points will take about {} at this pace (Ctrl-C stops)\n", what_,
               points(total_), duration_words(spent + left()));
    std::fflush(stderr);
    line_.clear();
    warned_ = true;
  }
  if (terminal_) draw(done_ >= total_);
}

void SweepProgress::stage(const std::string& detail, double fraction) {
  std::lock_guard lock(mutex_);
  stage_ = detail;
  fraction_ = fraction;
  if (terminal_ && elapsed() >= kQuietSeconds) draw(false);
}

void SweepProgress::draw(bool last) {
  const double spent = elapsed();
  std::string line;
  if (total_ == 0) {
    line = fmt::format("{}: {}, {} elapsed", what_, stage_, duration_words(spent));
    // The fraction is a rough guide: no estimate until a tenth is done.
    if (fraction_ >= 0.1 && fraction_ < 1) {
      line += fmt::format(", about {} left", duration_words(spent * (1 - fraction_) / fraction_));
    }
  } else {
    line = fmt::format("{}: {} of {} points, {} elapsed", what_, points(done_), points(total_),
                       duration_words(spent));
    if (!last && done_ > 0) line += fmt::format(", about {} left", duration_words(left()));
  }
  // Within the terminal: a line that wraps cannot be redrawn in place.
  const std::size_t width = output_width(stderr);
  if (width > 1 && line.size() >= width) line.resize(width - 1);
  std::size_t pad = std::max(line.size(), line_.size());
  if (width > 1) pad = std::min(pad, width - 1);
  fmt::print(stderr, "\r{:<{}}", line, pad);
  std::fflush(stderr);
  line_ = line;
}

}  // namespace epochcast::cli

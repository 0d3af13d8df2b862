// GPU-idle attribution and the epoch's counters (see accounting.h).
#include "sim/predict/epoch/accounting.h"

#include <algorithm>
#include <stdexcept>

namespace epochcast::sim::epoch {

namespace {

// Which activity of the host a GPU idle interval is charged to.
Category idle_cause(Category host_activity) {
  switch (host_activity) {
    case Category::data:
    case Category::h2d:
    case Category::communication:
      return host_activity;
    default:
      return Category::host;
  }
}

}  // namespace

void Accounting::collective_begin(SimTime at, std::int64_t bytes) {
  open_collectives_.push_back(at);
  ++stats.collectives;
  stats.collective_bytes += bytes;
}

void Accounting::collective_end(SimTime at) {
  if (open_collectives_.empty()) throw std::logic_error("a collective ended that never began");
  SimTime begin = open_collectives_.front();
  open_collectives_.pop_front();
  comm_intervals_.emplace_back(begin, at);
  // Communication time is the union of GPU 0's collectives in flight.
  SimTime from = std::max(begin, comm_covered_until_);
  if (at > from) stats.communication += at - from;
  comm_covered_until_ = std::max(comm_covered_until_, at);
}

void Accounting::finish(SimTime end) {
  if (end > gpu_busy_until_) attribute_idle(gpu_busy_until_, end);
  stats.epoch = end;
}

// Charges GPU idle time in [from, to): to communication while a collective of GPU 0 is in
// flight, otherwise to what the main CPU thread was doing then.
void Accounting::attribute_idle(SimTime from, SimTime to) {
  std::vector<std::pair<SimTime, SimTime>> comm;
  for (const auto& [b, e] : comm_intervals_)
    comm.emplace_back(b, e);
  for (SimTime b : open_collectives_)
    comm.emplace_back(b, SimTime::max());
  std::sort(comm.begin(), comm.end());
  SimTime cursor = from;
  auto charge_host = [&](SimTime a, SimTime b) {
    SimTime covered;
    for (const Segment& s : cpu_segments_) {
      SimTime x = std::max(s.begin, a);
      SimTime y = std::min(s.end, b);
      if (y > x) {
        const Category cause = idle_cause(s.category);
        stats.gpu_idle[static_cast<std::size_t>(cause)] += y - x;
        // Waiting while the host drives communication outside a collective (DataParallel's
        // scatter and peer copies) is communication time too.
        if (cause == Category::communication) stats.communication += y - x;
        covered += y - x;
      }
    }
    stats.gpu_idle_other += (b - a) - covered;
  };
  for (const auto& [b, e] : comm) {
    if (e <= cursor || b >= to) continue;
    if (b > cursor) charge_host(cursor, b);
    SimTime stop = std::min(e, to);
    SimTime start = std::max(b, cursor);
    stats.gpu_idle[static_cast<std::size_t>(Category::communication)] += stop - start;
    cursor = stop;
    if (cursor >= to) break;
  }
  if (cursor < to) charge_host(cursor, to);
  while (!cpu_segments_.empty() && cpu_segments_.front().end <= to)
    cpu_segments_.pop_front();
  while (!comm_intervals_.empty() && comm_intervals_.front().second <= to)
    comm_intervals_.pop_front();
}

void Accounting::shift(SimTime delta) {
  for (Segment& s : cpu_segments_) {
    s.begin += delta;
    s.end += delta;
  }
  for (SimTime& b : open_collectives_)
    b += delta;
  for (auto& [b, e] : comm_intervals_) {
    b += delta;
    e += delta;
  }
  cpu_last_end_ += delta;
  gpu_busy_until_ += delta;
  comm_covered_until_ += delta;
}

void Accounting::append_snapshot(std::vector<std::int64_t>& s, SimTime now) const {
  s.push_back((gpu_busy_until_ - now).ns());
  s.push_back((cpu_last_end_ - now).ns());
  // How far communication is already counted matters only against collectives still open;
  // without any, a horizon in the past is the same as none.
  bool horizon_matters = !open_collectives_.empty() || comm_covered_until_ > now;
  s.push_back(horizon_matters ? (comm_covered_until_ - now).ns() : 0);
  for (const Segment& seg : cpu_segments_) {
    s.push_back((seg.begin - now).ns());
    s.push_back((seg.end - now).ns());
    s.push_back(static_cast<std::int64_t>(seg.category));
  }
  s.push_back(-3);
  for (SimTime b : open_collectives_)
    s.push_back((b - now).ns());
  s.push_back(-4);
  for (const auto& [b, e] : comm_intervals_) {
    s.push_back((b - now).ns());
    s.push_back((e - now).ns());
  }
}

EpochStats period_times(const EpochStats& now, const EpochStats& then, std::int64_t periods) {
  EpochStats d;
  for (std::size_t c = 0; c < kCategoryCount; ++c) {
    d.gpu_busy[c] = (now.gpu_busy[c] - then.gpu_busy[c]) * periods;
    d.gpu_idle[c] = (now.gpu_idle[c] - then.gpu_idle[c]) * periods;
    d.cpu_busy[c] = (now.cpu_busy[c] - then.cpu_busy[c]) * periods;
  }
  d.gpu_idle_other = (now.gpu_idle_other - then.gpu_idle_other) * periods;
  d.communication = (now.communication - then.communication) * periods;
  d.collective_bytes = checked_product(now.collective_bytes - then.collective_bytes, periods);
  d.collectives = checked_product(now.collectives - then.collectives, periods);
  d.kernels = checked_product(now.kernels - then.kernels, periods);
  return d;
}

}  // namespace epochcast::sim::epoch

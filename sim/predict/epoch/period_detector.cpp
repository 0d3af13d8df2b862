// Brent's period detection over snapshots (see period_detector.h).
#include "sim/predict/epoch/period_detector.h"

#include <utility>

namespace epochcast::sim::epoch {

const PeriodDetector::Checkpoint* PeriodDetector::offer(std::vector<std::int64_t> snapshot,
                                                        std::int64_t iteration, SimTime time,
                                                        const EpochStats& stats) {
  std::uint64_t hash = 1469598103934665603ull;  // FNV-1a over the values
  for (std::int64_t v : snapshot)
    hash = (hash ^ static_cast<std::uint64_t>(v)) * 1099511628211ull;
  if (checkpoint_ && checkpoint_->hash == hash && checkpoint_->snapshot == snapshot) {
    return &*checkpoint_;
  }
  if (!checkpoint_ || ++since_ >= span_) {
    if (checkpoint_) span_ *= 2;
    since_ = 0;
    checkpoint_ = Checkpoint{std::move(snapshot), hash, iteration, time, stats};
  }
  return nullptr;
}

void PeriodDetector::forget() {
  checkpoint_.reset();
  span_ = 1;
  since_ = 0;
}

}  // namespace epochcast::sim::epoch

// A sweep's points simulated on several threads: each point is independent (its own topology,
// engine and caches), so the results are the serial run's, in sweep order, whatever the thread
// count or timing. Used by predict and compare (--jobs).
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "sim/predict/predict.h"

namespace epochcast::sim {

// The threads a sweep of `points` gets by default: the cores this process may run on (its CPU
// affinity: mpirun binds processes to cores), at most one a point.
int default_jobs(std::size_t points);

using PointDone = std::function<void(std::size_t index, const PointResult& result)>;

// simulate(i) for every i below `count` on up to `jobs` threads; results[i] is simulate(i).
// `done(i, result)` is called once per finished point, one call at a time, in the order they
// finish (a progress line, rows printed as they come). When points
// throw, the lowest-numbered point's exception is rethrown after every thread has stopped
// (points not yet started are skipped), so a bad sweep fails as the serial run would.
std::vector<PointResult> simulate_points(std::size_t count, int jobs,
                                         const std::function<PointResult(std::size_t)>& simulate,
                                         const PointDone& done = {});

}  // namespace epochcast::sim

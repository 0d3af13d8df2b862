// Points on threads (see point_pool.h).
#include "sim/predict/point_pool.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>

#include <sched.h>

namespace epochcast::sim {

int default_jobs(std::size_t points) {
  // The cores this process may run on (mpirun, taskset and containers bind processes to some),
  // else every core of the machine.
  unsigned cores = std::max(1U, std::thread::hardware_concurrency());
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) == 0 && CPU_COUNT(&allowed) > 0)
    cores = static_cast<unsigned>(CPU_COUNT(&allowed));
  return static_cast<int>(std::max<std::size_t>(1, std::min<std::size_t>(cores, points)));
}

std::vector<PointResult> simulate_points(std::size_t count, int jobs,
                                         const std::function<PointResult(std::size_t)>& simulate,
                                         const PointDone& done) {
  std::vector<PointResult> results(count);
  std::vector<std::exception_ptr> errors(count);
  std::atomic<std::size_t> next{0};
  // The lowest point that failed so far: points below it still run (one of them may fail too,
  // and the serial run would have reported that one), points above it are skipped.
  std::atomic<std::size_t> first_failed{count};
  std::mutex done_mutex;
  auto work = [&] {
    for (std::size_t i = next++; i < first_failed.load(); i = next++) {
      try {
        results[i] = simulate(i);
        if (done) {
          std::lock_guard lock(done_mutex);
          done(i, results[i]);
        }
      } catch (...) {
        errors[i] = std::current_exception();
        std::size_t lowest = first_failed.load();
        while (i < lowest && !first_failed.compare_exchange_weak(lowest, i)) {
        }
      }
    }
  };
  const int threads = std::clamp<int>(jobs, 1, static_cast<int>(std::max<std::size_t>(count, 1)));
  std::vector<std::thread> pool;
  pool.reserve(static_cast<std::size_t>(threads - 1));
  try {
    for (int t = 1; t < threads; ++t)
      pool.emplace_back(work);
  } catch (const std::system_error&) {
    // No more threads to be had (a process or thread limit): go on with those started.
  }
  work();  // this thread is one of them
  for (std::thread& thread : pool)
    thread.join();
  for (const std::exception_ptr& error : errors) {
    if (error) std::rethrow_exception(error);
  }
  return results;
}

}  // namespace epochcast::sim

// Sweeps across processes: under `mpirun -np N epochcast predict|compare ...` process r
// simulates points r, r + N, r + 2N, ... (each on its own threads, --jobs), and process 0
// gathers every result, in sweep order, and alone writes the table and the output files — the
// serial run's output, byte for byte. Without MPI in the build, or run without mpirun, one
// process simulates everything.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "sim/predict/point_pool.h"
#include "sim/predict/predict.h"

namespace epochcast::cli {

class SweepProcesses {
 public:
  // Joins the MPI job when the process was started by mpirun with others beside it.
  SweepProcesses();
  SweepProcesses(const SweepProcesses&) = delete;
  SweepProcesses& operator=(const SweepProcesses&) = delete;
  ~SweepProcesses();

  int rank() const { return rank_; }
  int size() const { return size_; }
  // Whether this process writes the output (process 0, or the only one).
  bool writes_output() const { return rank_ == 0; }
  // How many of `count` points this process simulates.
  std::size_t share(std::size_t count) const;

  // simulate(i) for every point of this process's share, on up to `jobs` threads; then the
  // results of every process, in sweep order, for process 0 (the others get none). A point that
  // fails anywhere fails the sweep as the serial run would: the lowest-numbered failure is
  // rethrown on process 0 (an InputError as itself).
  std::vector<sim::PointResult> simulate(std::size_t count, int jobs,
                                         const std::function<sim::PointResult(std::size_t)>& point,
                                         const sim::PointDone& done = {});

 private:
  // Every process calls this at the same steps (the start and the end of each simulate, and
  // once more on leaving): true when every process is at the same step and says ok. A process
  // that fails calls it on its way out, so the others learn of it instead of waiting for it.
  enum class Step { enter_sweep = 1, end_sweep = 2, leave = 3 };
  bool agree(Step step, bool ok);

  int rank_ = 0;
  int size_ = 1;
  bool joined_ = false;
  bool agreement_failed_ = false;  // after which no process agrees again
};

}  // namespace epochcast::cli

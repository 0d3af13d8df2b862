// Sweeps across processes: under an MPI launcher (`mpirun -np N`, `srun --mpi=pmix`, ...)
// `epochcast predict|compare ...` process r simulates points r, r + N, r + 2N, ... (each on its
// own threads, --jobs), and process 0 gathers every result, in sweep order, and alone writes the
// table and the output files — the serial run's output, byte for byte. Started alone, one process
// simulates everything. Started several times by a launcher that makes no MPI job (torchrun, srun
// without an MPI plugin), or by an MPI launcher with an epochcast built without MPI, it refuses
// on every process: each would simulate the whole sweep and write the same files
// (core/io/launcher_environment.h tells the launchers apart).
#pragma once

#include <cstddef>
#include <functional>
#include <string_view>
#include <vector>

#include "core/io/launcher_environment.h"
#include "sim/predict/point_codec.h"
#include "sim/predict/point_pool.h"
#include "sim/predict/predict.h"

namespace epochcast::cli {

class SweepProcesses {
 public:
  // Joins the MPI job when an MPI launcher started this process with others beside it; raises
  // InputError (on every process, before any work) for the launches it refuses, naming
  // `command` ("predict") in what to do instead.
  explicit SweepProcesses(std::string_view command,
                          const LaunchEnvironment& launch = read_launch_environment());
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
  // The same, but every point's outcome kept, failed or not (a shard records them all): what
  // became of every point, in sweep order, for process 0. `done` gets an empty result for a
  // point that failed.
  std::vector<sim::PointOutcome> outcomes(std::size_t count, int jobs,
                                          const std::function<sim::PointResult(std::size_t)>& point,
                                          const sim::PointDone& done = {});

 private:
  // Every process calls this at the same steps (the start and the end of each simulate, and
  // once more on leaving): true when every process is at the same step and says ok. A process
  // that fails calls it on its way out, so the others learn of it instead of waiting for it.
  enum class Step { enter_sweep = 1, end_sweep = 2, leave = 3 };
  bool agree(Step step, bool ok);
  // The outcomes on several processes; with `fail_fast`, process 0 raises the lowest-numbered
  // failure (after every process has heard that the sweep failed).
  std::vector<sim::PointOutcome> spread(std::size_t count, int jobs,
                                        const std::function<sim::PointResult(std::size_t)>& point,
                                        const sim::PointDone& done, bool fail_fast);

  int rank_ = 0;
  int size_ = 1;
  bool joined_ = false;
  bool agreement_failed_ = false;  // after which no process agrees again
};

}  // namespace epochcast::cli

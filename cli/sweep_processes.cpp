// Points spread over MPI processes and gathered on process 0.
#include "cli/sweep_processes.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "core/input_error.h"
#include "core/system_failure.h"
#include "sim/predict/point_codec.h"
#include "sim/predict/point_pool.h"

#ifdef EPOCHCAST_HAVE_MPI
// MPI's C API only (the deprecated C++ bindings need a library we do not link).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace epochcast::cli {

namespace {

constexpr const char* kOtherProcessFailed =
    "another process of this MPI job failed (only process 0 prints, so its message is not "
    "shown: an input or output path that only its node sees is the usual cause); run the same "
    "command without mpirun on that node to see why";

#ifdef EPOCHCAST_HAVE_MPI
constexpr bool kBuiltWithMpi = true;
#else
constexpr bool kBuiltWithMpi = false;
#endif

// Why a launch of several processes that make no MPI job is refused, and what to do instead.
std::string refusal(std::string_view command, const LaunchEnvironment& launch) {
  const std::string what =
      launch.launcher == Launcher::mpi
          ? fmt::format(
                "an MPI launcher started {} processes of epochcast {}, but this "
                "epochcast was built without MPI",
                launch.size, command)
          : fmt::format("{} started {} processes of epochcast {}, which make no MPI job",
                        launch.launcher == Launcher::torchrun ? "torchrun" : "srun (without --mpi)",
                        launch.size, command);
  return fmt::format(
      "{}: each would simulate the whole sweep and write the same files. Spread the sweep over "
      "processes with an MPI launcher ({}), or split it into shards that run apart (--shard auto "
      "--shard-output FILE in a Slurm job array or a Kubernetes indexed Job, or --shard K/N) and "
      "join them with epochcast merge",
      what,
      kBuiltWithMpi ? fmt::format("mpirun -np {} or srun --mpi=pmix", launch.size)
                    : "in an epochcast built where CMake finds MPI");
}

// A point's outcome on its way to process 0: its place in the sweep, then the outcome.
std::string encode(std::size_t index, const sim::PointOutcome& o) {
  sim::ByteWriter out;
  out.i64(static_cast<std::int64_t>(index));
  out.text(sim::encode_outcome(o));
  return out.take();
}

#ifdef EPOCHCAST_HAVE_MPI
// Process 0's view of a sweep: its own outcomes (points 0, N, 2N, ...) and every other process's
// message, in sweep order. A process that failed as a whole sent an outcome numbered `count`.
std::vector<sim::PointOutcome> gather(std::size_t count, int size,
                                      std::vector<sim::PointOutcome> own,
                                      const std::vector<std::string>& received,
                                      const std::string& own_failure) {
  if (!own_failure.empty()) throw SystemFailure(own_failure);
  std::vector<std::optional<sim::PointOutcome>> all(count);
  for (std::size_t k = 0; k < own.size(); ++k)
    all[k * static_cast<std::size_t>(size)] = std::move(own[k]);
  for (const std::string& bytes : received) {
    sim::ByteReader in(bytes);
    while (!in.done()) {
      const auto index = static_cast<std::size_t>(in.i64());
      if (index > count) throw std::logic_error("a process sent a point outside the sweep");
      sim::PointOutcome o;
      try {
        o = sim::decode_outcome(in.text());
      } catch (const sim::DamagedEncoding& e) {
        throw SystemFailure(fmt::format("a process of the sweep sent damaged bytes: {}", e.what()));
      }
      if (index == count) throw SystemFailure(o.internal_error);  // a whole process failed
      all[index] = std::move(o);
    }
  }
  std::vector<sim::PointOutcome> outcomes;
  outcomes.reserve(count);
  for (std::optional<sim::PointOutcome>& o : all) {
    if (!o) throw SystemFailure("a point of the sweep never arrived");
    outcomes.push_back(std::move(*o));
  }
  return outcomes;
}

void send_bytes(const std::string& data, int to) {
  const auto size = static_cast<std::uint64_t>(data.size());
  MPI_Send(&size, 1, MPI_UINT64_T, to, 0, MPI_COMM_WORLD);
  for (std::size_t at = 0; at < data.size(); at += INT_MAX) {
    const int chunk = static_cast<int>(std::min<std::size_t>(INT_MAX, data.size() - at));
    MPI_Send(data.data() + at, chunk, MPI_BYTE, to, 1, MPI_COMM_WORLD);
  }
}

std::string receive_bytes(int from) {
  std::uint64_t size = 0;
  MPI_Recv(&size, 1, MPI_UINT64_T, from, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  std::string data(static_cast<std::size_t>(size), '\0');
  for (std::size_t at = 0; at < data.size(); at += INT_MAX) {
    const int chunk = static_cast<int>(std::min<std::size_t>(INT_MAX, data.size() - at));
    MPI_Recv(data.data() + at, chunk, MPI_BYTE, from, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  return data;
}
#endif

}  // namespace

SweepProcesses::SweepProcesses(std::string_view command, const LaunchEnvironment& launch) {
  if (launch.size == 1) return;
  if (launch.launcher != Launcher::mpi || !kBuiltWithMpi) {
    throw InputError(SourceMark{"<environment>", 0, 0}, launch.rank_variable,
                     refusal(command, launch));
  }
#ifdef EPOCHCAST_HAVE_MPI
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
  joined_ = true;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  // Process 0 speaks for the job: the others' messages (the same input errors, progress) would
  // only repeat its own.
  if (rank_ != 0) {
    if (std::freopen("/dev/null", "w", stdout) == nullptr ||
        std::freopen("/dev/null", "w", stderr) == nullptr) {
      // Nothing to do: their output then repeats process 0's.
    }
  }
#endif
}

bool SweepProcesses::agree(Step step, bool ok) {
#ifdef EPOCHCAST_HAVE_MPI
  // Every process must be at the same step and well: the least and the greatest code agree.
  const int code = ok ? static_cast<int>(step) : 0;
  int least = 0, greatest = 0;
  MPI_Allreduce(&code, &least, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&code, &greatest, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  const bool agreed = least == greatest && least != 0;
  if (!agreed) agreement_failed_ = true;
  return agreed;
#else
  (void)step;
  return ok;
#endif
}

SweepProcesses::~SweepProcesses() {
#ifdef EPOCHCAST_HAVE_MPI
  if (!joined_) return;
  // The last agreement, or the one the others wait in when this process fails: every process
  // then leaves together, whichever failed and wherever.
  const bool failing = std::uncaught_exceptions() > 0;
  if (!agreement_failed_) agree(Step::leave, !failing);
  MPI_Finalize();
  // Process 0 reports a failure for the job (every process meets the same bad input). Another
  // leaving first with an error status would make mpirun stop process 0 before it said why.
  if (failing && rank_ != 0) std::_Exit(0);
#endif
}

std::size_t SweepProcesses::share(std::size_t count) const {
  const auto r = static_cast<std::size_t>(rank_), n = static_cast<std::size_t>(size_);
  return count > r ? (count - r + n - 1) / n : 0;
}

std::vector<sim::PointResult> SweepProcesses::simulate(
    std::size_t count, int jobs, const std::function<sim::PointResult(std::size_t)>& point,
    const sim::PointDone& done) {
  if (size_ == 1) return sim::simulate_points(count, jobs, point, done);
  std::vector<sim::PointOutcome> all = spread(count, jobs, point, done, /*fail_fast=*/true);
  std::vector<sim::PointResult> results;
  results.reserve(all.size());
  for (sim::PointOutcome& o : all)
    results.push_back(std::move(o).take());  // none failed: spread raised the first that did
  return results;
}

std::vector<sim::PointOutcome> SweepProcesses::outcomes(
    std::size_t count, int jobs, const std::function<sim::PointResult(std::size_t)>& point,
    const sim::PointDone& done) {
  if (size_ > 1) return spread(count, jobs, point, done, /*fail_fast=*/false);
  std::vector<sim::PointOutcome> all(count);
  sim::simulate_points(
      count, jobs,
      [&](std::size_t i) {
        all[i] = sim::outcome_of([&] { return point(i); });
        return sim::PointResult{};
      },
      [&](std::size_t i, const sim::PointResult&) {
        if (done) done(i, all[i].result ? *all[i].result : sim::PointResult{});
      });
  return all;
}

std::vector<sim::PointOutcome> SweepProcesses::spread(
    std::size_t count, int jobs, const std::function<sim::PointResult(std::size_t)>& point,
    const sim::PointDone& done, bool fail_fast) {
  if (!agree(Step::enter_sweep, true)) throw SystemFailure(kOtherProcessFailed);
  // This process's points, each kept with its outcome (errors too: the others must still
  // hear from it).
  const std::size_t mine = share(count);
  std::vector<sim::PointOutcome> outcomes(mine);
  auto global = [&](std::size_t k) {
    return k * static_cast<std::size_t>(size_) + static_cast<std::size_t>(rank_);
  };
  std::string message, failure;
  try {
    sim::simulate_points(
        mine, std::max(1, jobs),
        [&](std::size_t k) {
          outcomes[k] = sim::outcome_of([&] { return point(global(k)); });
          return sim::PointResult{};
        },
        [&](std::size_t k, const sim::PointResult&) {
          // A point that failed is reported with the sweep; the progress still counts it.
          if (done) done(global(k), outcomes[k].result ? *outcomes[k].result : sim::PointResult{});
        });
    for (std::size_t k = 0; k < mine; ++k)
      message += encode(global(k), outcomes[k]);
  } catch (...) {
    // Process 0 must still hear from this one (or wait forever): the failure stands for its
    // share, as an outcome numbered past the sweep's points.
    failure = "process " + std::to_string(rank_) + " of the sweep failed";
    try {
      throw;
    } catch (const std::exception& e) {
      failure += std::string(": ") + e.what();
    } catch (...) {
    }
    sim::PointOutcome failed;
    failed.internal_error = failure;
    message = encode(count, failed);
  }
#ifdef EPOCHCAST_HAVE_MPI
  if (rank_ != 0) {
    send_bytes(message, 0);
    if (!agree(Step::end_sweep, true)) {
      throw SystemFailure(kOtherProcessFailed);  // process 0 reports it
    }
    return {};
  }
  // Every message is received before any is read, so no process is left blocked in a send.
  std::vector<std::string> received;
  for (int from = 1; from < size_; ++from)
    received.push_back(receive_bytes(from));
  std::vector<sim::PointOutcome> all;
  std::exception_ptr error;
  try {
    all = gather(count, size_, std::move(outcomes), received, failure);
    if (fail_fast) {
      for (const sim::PointOutcome& o : all) {
        if (o.failed()) sim::PointOutcome(o).take();  // raises the lowest-numbered failure
      }
    }
  } catch (...) {
    error = std::current_exception();
  }
  if (!agree(Step::end_sweep, error == nullptr)) {
    if (error) std::rethrow_exception(error);
    throw SystemFailure(kOtherProcessFailed);
  }
  return all;
#else
  (void)fail_fast;
  return {};
#endif
}

}  // namespace epochcast::cli

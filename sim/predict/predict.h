// Predictions for the points of a scenario's sweep.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/spec/scenario_spec.h"
#include "sim/compute/memory_model.h"
#include "sim/predict/epoch_simulator.h"

namespace epochcast::sim {

struct PredictOptions {
  bool steady_state_shortcut = true;
  int trace_iterations = 0;  // > 0: keep a trace of the first iterations of each point
  // Across nodes, simulate node 0 and let its links stand for every node's (exact for identical
  // nodes on a non-blocking fabric); false simulates every node (for checking that claim).
  bool symmetric_clusters = true;
  // The work one epoch's simulation may take with the shortcut on (EpochOptions); beyond it the
  // point is refused as an InputError that says why.
  std::int64_t simulation_budget = kDefaultSimulationBudget;
  // The memory this process may take (bytes; 0: not capped): a point that runs out of it is
  // refused as an InputError that says so.
  std::uint64_t memory_limit_bytes = 0;
};

// The time breakdown of an epoch from GPU 0's point of view; the parts add up to the epoch.
struct Breakdown {
  double data = 0;  // GPU idle while the host loads or waits for data
  double h2d = 0;   // host-to-device copies, and the GPU idle during blocking ones
  double forward = 0;
  double backward = 0;
  double optimizer = 0;
  double communication = 0;  // exposed communication: the GPU idle, waiting for a collective
  double host = 0;           // GPU idle while the host dispatches or runs framework overhead
  double other = 0;          // GPU idle with the host idle too
};

// Where the epoch of a point with a process per GPU goes beyond perfect scaling: against plain
// training (no strategy) on one GPU at the same per-GPU batch (each rank's work), whose epoch
// over the GPU count is the ideal. The parts are seconds per epoch and add up to the loss:
// - strategy: what the strategy costs on that one GPU beyond plain training (ddp: the reducer's
//   bucket copies and hooks), over the GPU count;
// and the point against the strategy on one GPU, each cause taken in turn by simulating the
// point again without it, so that an interaction between two causes counts under the one
// removed first:
// - stragglers: the point against itself with every GPU at one speed (no wait for the slowest
//   GPU of gpu.speed_spread, none of the scenario's slow GPUs or nodes, no per-step jitter);
// - contention: that against itself with NCCL's kernels taking neither SMs nor memory bandwidth
//   from the compute beside them;
// - the rest, that last run's breakdown minus the reference's over the GPU count: communication
//   (collectives exposed, the scenario's link faults included), compute (kernels the strategy
//   adds or lengthens: the reducer's bucket copies, compressed gradients' casts, a sharded
//   step), input (loading and copying batches), host (dispatch and contention for the node's
//   cores) and other.
struct ScalingLoss {
  std::int64_t reference_batch = 0;
  double ideal_epoch = 0, loss = 0;
  double strategy = 0, communication = 0, compute = 0, stragglers = 0, contention = 0, input = 0,
         host = 0, other = 0;
};
// A point with a process per GPU on several GPUs simulated again for its scaling loss: with
// every GPU at one speed, then also without NCCL's contention for SMs and memory bandwidth (the
// same run as the point's, or as the first, where there is nothing to remove).
struct EvenRuns {
  double even_speed_epoch = 0;
  double uncontended_epoch = 0;
  Breakdown uncontended;  // the last run's breakdown
};

struct PointResult {
  SweepPoint point;
  std::int64_t train_iterations = 0;
  std::int64_t validation_iterations = 0;
  MemoryEstimate memory;
  bool simulated = false;  // false when the point does not fit in memory
  EpochStats stats;
  double epoch_seconds = 0;
  double iteration_seconds = 0;   // mean training iteration (epoch / training iterations)
  double samples_per_second = 0;  // training samples per second of epoch time
  Breakdown breakdown;            // seconds per epoch
  // Collectives in flight on GPU 0 and its communication kernels, exposed or not (>= exposed).
  double communication_seconds = 0;
  double gpu_busy_fraction = 0;
  // Throughput against one GPU of the same machine (0 when not known): at the same global batch
  // when the sweep's batches are global (strong scaling), at the same per-GPU batch when they
  // are per GPU (weak scaling).
  double speedup = 0;
  double scaling_efficiency = 0;
  bool one_gpu_faster = false;        // one GPU takes less time per epoch at this global batch
  std::optional<EvenRuns> even_runs;  // a process per GPU, on several GPUs
  std::optional<ScalingLoss> scaling_loss;  // a process per GPU, on several GPUs
  std::string bottleneck;  // one word: compute, host, input, copy, communication, memory
  std::string diagnosis;   // a sentence a user understands
  // With a calibrated profile's uncertainty (sim/predict/uncertainty.h): the epoch's 95%
  // interval and the standard deviation of its logarithm.
  std::optional<std::pair<double, double>> epoch_interval;
  double epoch_relative_sd = 0;
  Trace trace;  // with PredictOptions::trace_iterations: the first iterations' events
  // Across nodes: how the nodes were simulated — "node 0 mirrored" (it stands for identical
  // nodes) or "every rank"; empty on one node.
  std::string ranks_simulated;
  // The scenario's stragglers and faults that touch this point, in words (empty: none).
  std::vector<std::string> conditions;
};

PointResult predict_point(const ScenarioSpec& scenario, const SweepPoint& point,
                          const PredictOptions& options = {});
// Why node 0 cannot stand for every node of a point on `gpus` GPUs ("" when it can, or the point
// has one node): identical nodes mirror each other exactly only on a fabric without contention
// between leaves — all nodes under one leaf, or leaves under a spine that is not oversubscribed.
// Such points are simulated with every rank, whatever PredictOptions::symmetric_clusters says.
std::string mirror_not_exact(const MachineSpec& machine, int gpus);
// Why a point on `gpus` GPUs needs every rank simulated: mirror_not_exact, or stragglers and
// faults (ScenarioSpec::conditions) that touch some of its nodes and not others; "" when node 0
// can stand for every node.
std::string every_rank_reason(const ScenarioSpec& scenario, int gpus);
// The scaling loss of `point` (a process per GPU on several GPUs, with its even_runs) against
// `one_gpu`, the strategy on one GPU at its per-GPU batch, and `plain_one_gpu`, plain training
// there (`one_gpu` again where plain training cannot be simulated: no strategy part).
ScalingLoss scaling_loss(const PointResult& point, const PointResult& one_gpu,
                         const PointResult& plain_one_gpu);
// Every point, with speedup and scaling efficiency against one GPU.
std::vector<PointResult> predict(const ScenarioSpec& scenario, const PredictOptions& options = {});
// Fills in speedup, efficiency and the one-GPU comparison of multi-GPU points (simulating the
// one-GPU references it needs).
class OneGpuComparison {
 public:
  // `sweep`: the points whose results will be offered (a reference among them is awaited
  // rather than simulated).
  OneGpuComparison(const ScenarioSpec& scenario, const PredictOptions& options,
                   const std::vector<SweepPoint>& sweep);
  // A result of the sweep, which may be a reference.
  void offer(const PointResult& result);
  // Whether `result` can be compared now: every reference it needs is offered already or is
  // not in the sweep (simulated then).
  bool ready(const PointResult& result) const;
  // Sets speedup, efficiency and the one-GPU comparison of `result`.
  void apply(PointResult& result);
  // Simulates now, on up to `jobs` threads, the references the sweep's points may need that the
  // sweep lacks, so that apply() simulates nothing (rows printed as points finish).
  void prepare(int jobs);

 private:
  const PointResult& reference(std::int64_t batch);
  const PointResult& plain_reference(std::int64_t batch);
  std::vector<std::int64_t> references(const SweepPoint& point) const;
  const ScenarioSpec& scenario_;
  PredictOptions plain_;
  std::vector<SweepPoint> sweep_;
  std::set<std::int64_t> in_sweep_;              // the sweep's one-GPU batches
  std::map<std::int64_t, PointResult> one_gpu_;  // by global batch
  ScenarioSpec plain_training_;                  // the scenario without its strategy
  std::map<std::int64_t, PointResult> plain_one_gpu_;
};
void compare_with_one_gpu(const ScenarioSpec& scenario, std::vector<PointResult>& results,
                          const PredictOptions& options = {});

}  // namespace epochcast::sim

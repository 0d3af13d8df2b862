// Sharded data parallelism as PyTorch runs it (ZeRO, Rajbhandari et al. 2020):
//   zero1 - DistributedDataParallel with torch's ZeroRedundancyOptimizer: gradients all-reduced
//           as DDP does, each rank steps the optimizer over the parameters it owns, then
//           broadcasts them;
//   zero2 - FullyShardedDataParallel's SHARD_GRAD_OP: each unit's parameters all-gathered for
//           forward and kept to its backward, gradients reduce-scattered, the optimizer on the
//           rank's shard;
//   fsdp  - its FULL_SHARD (ZeRO stage 3): the parameters freed after each unit's forward and
//           all-gathered again for its backward.
#include <algorithm>
#include <deque>

#include <fmt/format.h>

#include "core/spec/sharding.h"
#include "sim/strategy/collective_ops.h"
#include "sim/strategy/ddp.h"
#include "sim/strategy/strategy.h"

namespace epochcast::sim {

namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}

// The model as an optimizer over `tensors` sees it: a rank's shard of the parameters.
ModelAnalysis with_tensors(const ModelAnalysis& analysis, std::vector<ParamTensor> tensors) {
  ModelAnalysis shard = analysis;
  shard.params = 0;
  for (const ParamTensor& t : tensors)
    shard.params += t.elements;
  shard.param_tensors = std::move(tensors);
  return shard;
}

// Bytes an element of the gathered parameters and reduced gradients takes: the compute dtype
// (FSDP's MixedPrecision with param_dtype and reduce_dtype the autocast dtype; fp32 without).
std::int64_t gathered_element(const ModelAnalysis& analysis) {
  return element_bytes(analysis.options.activation_dtype);
}

// Bytes an element of the reduce-scattered gradients takes: fp32 under reduce_dtype fp32, else
// the compute dtype.
std::int64_t reduced_element(const TrainingSpec& training, const ModelAnalysis& analysis) {
  return training.fsdp.reduce_in_fp32 ? element_bytes(DType::float32) : gathered_element(analysis);
}

// Rank 0's part of an FSDP step, repeated for every rank, with its collectives between.
class FsdpStep {
 public:
  FsdpStep(const MultiGpuContext& c, IterationPlan& plan, int world)
      : c_(c),
        plan_(plan),
        ranks_(c.ranks()),
        b_(c.step, plan, ranks_.front(), ranks_.front()),
        units_(fsdp_units(c.step.analysis, c.step.scenario.training.fsdp.wrap)),
        unit_of_layer_(c.step.analysis.layers.size(), -1),
        resident_(units_.size(), false),
        gathered_(units_.size()),
        element_(gathered_element(c.step.analysis)),
        world_(world),
        offload_(c.step.scenario.training.fsdp.cpu_offload) {
    for (std::size_t i = 0; i < ranks_.size(); ++i)
      replicas_.push_back(Replica{ranks_[i], ranks_[i], static_cast<int>(i)});
    // A unit covers every layer from its first to its last (a block's residual adds too).
    for (std::size_t u = 0; u < units_.size(); ++u) {
      if (units_[u].root) continue;
      for (std::size_t l = units_[u].layers.front(); l <= units_[u].layers.back(); ++l)
        unit_of_layer_[l] = static_cast<int>(u);
    }
  }

  // Forward (each unit gathered on entry, freed after when `reshard`), then the loss; with
  // `training`, backward, and on the last micro-batch of a cycle the reduce-scatters and the
  // optimizer on the shards. The others accumulate unsharded gradients (no_sync()).
  void run(std::int64_t batch, bool training, bool reshard, MicroStep micro = {}) {
    const HostCosts& costs = c_.profile.host;
    const FsdpSpec& fsdp = c_.step.scenario.training.fsdp;
    memory_bound_ = training ? memory_bound_share(c_, batch) : 0;
    open();
    b_.take_batch(batch, 0);
    b_.copy_batch(batch);
    if (training && micro.opens) b_.emit(zero_grad_calls(c_.step));
    b_.host("FullyShardedDataParallel forward", Category::forward, costs.forward_op);
    if (!units_.empty() && units_.front().root) {
      gather(0, {}, "root");
      wait_for_gather(0);
    }
    std::deque<std::int32_t> freed;  // the limiter's queue of frees, oldest first
    const std::vector<Call> forward = forward_calls(c_.step, batch, training, false);
    for (std::size_t k = 0; k < forward.size(); ++k) {
      const int u = unit_at(forward[k]);
      if (u >= 0 && entering(forward, k)) {
        if (!resident_[static_cast<std::size_t>(u)]) {
          std::vector<std::int32_t> waits;
          // limit_all_gathers: the host waits for the free of the unit two gathers back.
          if (fsdp.limit_all_gathers && freed.size() >= 2) {
            waits.push_back(freed.front());
            freed.pop_front();
          }
          gather(static_cast<std::size_t>(u), waits, "forward");
        }
        const std::size_t next = static_cast<std::size_t>(u) + 1;
        if (fsdp.forward_prefetch && next < units_.size() && !resident_[next])
          gather(next, {}, "forward prefetch");
        wait_for_gather(static_cast<std::size_t>(u));
      }
      open();
      b_.emit(forward[k]);
      if (u >= 0 && leaving(forward, k) && reshard) {
        b_.host(fmt::format("reshard unit {}", u), Category::forward, costs.forward_op);
        freed.push_back(b_.last_gpu_op());
        resident_[static_cast<std::size_t>(u)] = false;
      }
    }
    open();
    b_.emit(loss_forward_calls(c_.step, batch));
    if (!training) {
      b_.sync("validation loss.item()");
      b_.await_prefetched_batch();
      close();
      return;
    }
    b_.emit(loss_backward_calls(c_.step, batch));
    const bool accumulate =
        c_.step.scenario.training.framework == Framework::pytorch1 || !micro.opens;
    const std::vector<Call> backward = backward_calls(c_.step, batch, accumulate, false);
    for (std::size_t k = 0; k < backward.size(); ++k) {
      const int u = unit_at(backward[k]);
      if (u >= 0 && entering(backward, k)) {
        if (!resident_[static_cast<std::size_t>(u)])
          gather(static_cast<std::size_t>(u), {}, "backward");
        if (fsdp.backward_prefetch == FsdpBackwardPrefetch::pre) prefetch_before(u);
        wait_for_gather(static_cast<std::size_t>(u));
      }
      open();
      b_.emit(backward[k]);
      if (u >= 0 && leaving(backward, k)) {
        if (micro.closes)
          reduce(static_cast<std::size_t>(u));
        else if (reshard)
          resident_[static_cast<std::size_t>(u)] = false;  // freed, its gradients kept whole
        if (fsdp.backward_prefetch == FsdpBackwardPrefetch::post) prefetch_before(u);
      }
    }
    if (!micro.closes) {
      open();
      if (c_.step.scenario.training.sync_every_step) b_.sync("loss.item()");
      b_.await_prefetched_batch();
      close();
      return;
    }
    // The root's gradients are complete once the whole backward is.
    if (!units_.empty() && units_.front().root) reduce(0);
    std::vector<ParamTensor> shards;
    for (std::size_t u = 0; u < units_.size(); ++u) {
      shards.push_back(ParamTensor{fmt::format("unit {} shard", u),
                                   ceil_div(units_[u].params, static_cast<std::int64_t>(world_))});
    }
    open();
    if (offload_) {
      // With CPU offload the CPU waits for the gradient shards' copies, then steps them.
      b_.host("wait for the gradient shards in host memory", Category::optimizer, Seconds(0),
              offloaded_);
      b_.host(fmt::format("optimizer step on the CPU ({} shards)", shards.size()),
              Category::optimizer, cpu_optimizer_time(shards));
    } else {
      // FSDP's final callback: the compute stream waits for every reduce-scatter, then the
      // optimizer steps each unit's flat shard.
      std::vector<std::int32_t> arrived;
      for (std::vector<std::int32_t>& ends : reduced_)
        arrived.push_back(plan_.per_replica(std::move(ends)));
      b_.stream_waits("compute stream waits for the reduce-scatters", arrived);
      const ModelAnalysis shard = with_tensors(c_.step.analysis, std::move(shards));
      const StepContext over{c_.step.scenario, shard, c_.step.device};
      b_.optimizer_step(&over);
    }
    if (c_.step.scenario.training.sync_every_step) b_.sync("loss.item()");
    b_.await_prefetched_batch();
    close();
  }

 private:
  int unit_at(const Call& call) const {
    return call.layer >= 0 ? unit_of_layer_[static_cast<std::size_t>(call.layer)] : -1;
  }
  // Whether calls[k] is the first, or the last, of its unit in this pass.
  bool entering(const std::vector<Call>& calls, std::size_t k) const {
    return k == 0 || unit_at(calls[k - 1]) != unit_at(calls[k]);
  }
  bool leaving(const std::vector<Call>& calls, std::size_t k) const {
    return k + 1 == calls.size() || unit_at(calls[k + 1]) != unit_at(calls[k]);
  }
  void open() {
    if (!in_block_) plan_.begin_replicas(replicas_.front());
    in_block_ = true;
  }
  void close() {
    if (in_block_) plan_.end_replicas(replicas_);
    in_block_ = false;
  }
  // The all-gather of unit `u`, issued from the host after `waits`: under mixed precision the
  // local shard is cast to the compute dtype first (MixedPrecision's param_dtype).
  void gather(std::size_t u, std::vector<std::int32_t> waits, std::string_view why) {
    const HostCosts& costs = c_.profile.host;
    const std::int64_t shard = ceil_div(units_[u].params, static_cast<std::int64_t>(world_));
    const std::int64_t master = element_bytes(c_.step.analysis.options.parameter_dtype);
    open();
    std::vector<std::int32_t> ready;
    if (offload_) {
      // The shard lives in host memory: copied to the GPU first (pinned, non-blocking).
      ready.push_back(b_.pinned_copy(fmt::format("copy unit {}'s shard to the GPU", u),
                                     Category::h2d, Bytes(checked_product(shard, master))));
    }
    if (element_ != master) {
      ready.push_back(b_.kernel(
          fmt::format("cast unit {}'s shard", u), Category::communication, costs.forward_op,
          elementwise_time(c_, shard, static_cast<int>(master), static_cast<int>(element_)),
          ready));
    }
    ready.push_back(b_.host(fmt::format("all-gather unit {} ({})", u, why), Category::communication,
                            c_.profile.links.collective_launch, waits));
    close();
    const Bytes bytes(checked_product(units_[u].params, element_));
    const CollectiveChoice& choice = c_.collective(Collective::all_gather, bytes);
    gathered_[u] = add_collective(plan_, choice, c_.analytic, rank_sites(plan_, ranks_, ready),
                                  fmt::format("all-gather unit {} ({:.1f} MiB)", u, to_mib(bytes)),
                                  true, compute_speed_beside(c_, choice, memory_bound_));
    resident_[u] = true;
  }
  void wait_for_gather(std::size_t u) {
    open();
    b_.stream_waits(fmt::format("compute stream waits for unit {}", u),
                    {plan_.per_replica(gathered_[u])});
  }
  // The unit before `u` in layer order (the next in backward), gathered ahead of its backward.
  void prefetch_before(int u) {
    if (u <= 0) return;
    const auto before = static_cast<std::size_t>(u - 1);
    if (!units_[before].root && !resident_[before]) gather(before, {}, "backward prefetch");
  }
  // Unit `u`'s gradients, divided by the world size (and cast to the reduce dtype),
  // reduce-scattered on NCCL's stream.
  void reduce(std::size_t u) {
    const HostCosts& costs = c_.profile.host;
    const std::int64_t reduced = reduced_element(c_.step.scenario.training, c_.step.analysis);
    open();
    const std::int32_t divided = b_.kernel(
        fmt::format("divide unit {}'s gradients", u), Category::communication, costs.backward_op,
        elementwise_time(c_, units_[u].params, static_cast<int>(element_),
                         static_cast<int>(reduced)));
    const std::int32_t launched =
        b_.host(fmt::format("reduce-scatter unit {}", u), Category::communication,
                c_.profile.links.collective_launch);
    close();
    const Bytes bytes(checked_product(units_[u].params, reduced));
    const CollectiveChoice& choice = c_.collective(Collective::reduce_scatter, bytes);
    reduced_.push_back(
        add_collective(plan_, choice, c_.analytic, rank_sites(plan_, ranks_, {divided, launched}),
                       fmt::format("reduce-scatter unit {} ({:.1f} MiB)", u, to_mib(bytes)), true,
                       compute_speed_beside(c_, choice, memory_bound_)));
    resident_[u] = false;
    if (offload_) {
      // The reduced shard goes to host memory once its reduce-scatter has ended on this rank.
      open();
      const std::int64_t shard = ceil_div(units_[u].params, static_cast<std::int64_t>(world_));
      offloaded_.push_back(
          b_.pinned_copy(fmt::format("copy unit {}'s gradient shard to the host", u), Category::h2d,
                         Bytes(checked_product(shard, reduced)),
                         {plan_.per_replica(std::vector<std::int32_t>(reduced_.back()))}));
      close();
    }
  }

  // torch.optim's step over CPU tensors: its per-tensor ops, each dispatched from Python and run
  // on the CPU at the host's sustained memory bandwidth, shared by the node's ranks stepping at
  // the same time.
  Seconds cpu_optimizer_time(const std::vector<ParamTensor>& shards) const {
    const MachineSpec& machine = c_.step.scenario.machine;
    const int ranks_on_node = std::max(1, std::min(world_, machine.gpus_per_node));
    const double bandwidth =
        machine.host.memory_bandwidth.value().value() / static_cast<double>(ranks_on_node);
    double seconds = 0;
    for (const ParamTensor& tensor : shards) {
      for (const auto& [name, bytes] : per_tensor_optimizer(c_.step.scenario.training.optimizer)) {
        seconds += c_.profile.host.optimizer_op.value() +
                   static_cast<double>(checked_product(bytes, tensor.elements)) / bandwidth;
      }
    }
    return Seconds(seconds);
  }

  const MultiGpuContext& c_;
  IterationPlan& plan_;
  std::vector<int> ranks_;
  std::vector<Replica> replicas_;
  StepBuilder b_;
  std::vector<FsdpUnit> units_;
  std::vector<int> unit_of_layer_;                   // -1: no unit but the root's
  std::vector<bool> resident_;                       // gathered and not freed since
  std::vector<std::vector<std::int32_t>> gathered_;  // each unit's last all-gather, per rank
  std::vector<std::vector<std::int32_t>> reduced_;   // the reduce-scatters, per rank
  std::vector<std::int32_t> offloaded_;              // the gradient shards' copies to the host
  std::int64_t element_;
  int world_;
  bool offload_;
  double memory_bound_ = 0;
  bool in_block_ = false;
};

// What each rank holds for FSDP beyond its shards: gathered units in the compute dtype (the
// root, and the two units limit_all_gathers lets be in flight; every unit from forward to
// backward without resharding) and one unit's unsharded gradients (every unit's while
// gradients accumulate).
Bytes fsdp_buffers(const ModelAnalysis& analysis, const TrainingSpec& training, bool reshard) {
  const std::vector<FsdpUnit> units = fsdp_units(analysis, training.fsdp.wrap);
  const bool accumulates = training.gradient_accumulation > 1;
  std::int64_t root = 0, largest = 0, all = 0;
  for (const FsdpUnit& u : units) {
    if (u.root)
      root = u.params;
    else
      largest = std::max(largest, u.params);
    all += u.params;
  }
  const std::int64_t gathered = reshard ? root + 2 * largest : all;
  // Accumulating under no_sync(), every unit's gradients stay whole until the cycle's last.
  const std::int64_t gradients = accumulates ? all : std::max(root, largest);
  // The gradients in the compute dtype, and their copy in the reduce dtype where it differs.
  const std::int64_t element = gathered_element(analysis);
  const std::int64_t reduced = reduced_element(training, analysis);
  return Bytes(
      checked_sum(checked_product(gathered, element),
                  checked_product(gradients, element == reduced ? element : element + reduced)));
}

class FsdpStrategy final : public StrategyModel {
 public:
  explicit FsdpStrategy(bool full_shard) : full_shard_(full_shard) {}
  bool process_per_gpu() const override { return true; }
  MemoryEstimate memory(const StepContext& c, const SweepPoint& point) const override {
    const TrainingSpec& training = c.scenario.training;
    StateSharding sharding;
    sharding.ranks = point.gpus;
    sharding.optimizer = sharding.gradients = sharding.weights = true;
    sharding.copies_made_by_gather = true;
    sharding.offloaded = training.fsdp.cpu_offload;
    return estimate_memory(c.analysis, point.per_gpu_batch, training.optimizer, training.precision,
                           c.scenario.profile, c.scenario.machine.gpu.memory,
                           fsdp_buffers(c.analysis, training, reshard(training)), sharding,
                           training.activation_checkpointing);
  }
  int accumulation_cycle(const TrainingSpec& training) const override {
    return training.gradient_accumulation;
  }
  IterationPlan training_step(const MultiGpuContext& c, const SweepPoint& point, std::int64_t batch,
                              MicroStep micro) const override {
    IterationPlan plan;
    plan.samples = batch;
    FsdpStep(c, plan, point.gpus).run(batch, true, reshard(c.step.scenario.training), micro);
    return plan;
  }
  IterationPlan validation_step(const MultiGpuContext& c, const SweepPoint& point,
                                std::int64_t batch) const override {
    IterationPlan plan;
    plan.samples = batch;
    FsdpStep(c, plan, point.gpus).run(batch, false, true);
    return plan;
  }
  std::string collective_words() const override {
    return "(parameters all-gathered, gradients reduce-scattered)";
  }
  std::vector<std::string> assumptions(const ScenarioSpec& s) const override {
    const FsdpSpec& fsdp = s.training.fsdp;
    std::vector<std::string> out;
    const bool mixed = mixed_precision(s.training.precision);
    out.push_back(fmt::format(
        "{} runs FSDP's {}: units wrapped per {} (training.fsdp.wrap), gathered in {} "
        "(MixedPrecision's param_dtype) and reduced in {} (training.fsdp.reduce_dtype), one "
        "collective at a time on NCCL's stream, backward prefetch {}; they hold SMs and memory "
        "bandwidth from the kernels beside them as ddp's all-reduces do "
        "(training.nccl_sm_contention, training.nccl_memory_contention); each of FSDP's hooks "
        "costs the host one framework op (the profile's host.forward_op and backward_op), where "
        "its Python hooks are reported to take far longer on some models (pytorch/pytorch#173680), "
        "so small units may be host-bound sooner than predicted",
        name_of(s.training.strategy), reshard(s.training) ? "FULL_SHARD" : "SHARD_GRAD_OP",
        name_of(fsdp.wrap), mixed ? "16 bits" : "fp32",
        mixed && !fsdp.reduce_in_fp32 ? "16 bits" : "fp32", name_of(fsdp.backward_prefetch)));
    if (fsdp.cpu_offload) {
      out.push_back(fmt::format(
          "training.fsdp.cpu_offload: parameter and gradient shards and the optimizer state in "
          "host memory (none on the GPU); each gather first copies its shard to the GPU and each "
          "reduced gradient shard is copied back, over PCIe at the GPU's link rate (the node's "
          "GPUs are assumed not to share their host links); the optimizer steps on the CPU as "
          "torch.optim's per-tensor loop, each op at the host's sustained memory bandwidth "
          "({:.0f} GB/s, host.memory_bandwidth_gbps of the machine) shared by the node's ranks",
          s.machine.host.memory_bandwidth ? s.machine.host.memory_bandwidth->value() / 1e9 : 0.0));
    }
    return out;
  }

 private:
  bool reshard(const TrainingSpec& training) const {
    return full_shard_ && training.fsdp.reshard_after_forward;
  }
  bool full_shard_;
};

class Zero1Strategy final : public StrategyModel {
 public:
  bool process_per_gpu() const override { return true; }
  int accumulation_cycle(const TrainingSpec& training) const override {
    return training.gradient_accumulation;
  }
  MemoryEstimate memory(const StepContext& c, const SweepPoint& point) const override {
    const TrainingSpec& training = c.scenario.training;
    StateSharding sharding;
    sharding.ranks = point.gpus;
    sharding.optimizer = true;
    return estimate_memory(c.analysis, point.per_gpu_batch, training.optimizer, training.precision,
                           c.scenario.profile, c.scenario.machine.gpu.memory, ddp_bucket_bytes(c),
                           sharding, training.activation_checkpointing);
  }
  IterationPlan training_step(const MultiGpuContext& c, const SweepPoint& point, std::int64_t batch,
                              MicroStep micro) const override {
    if (!micro.closes) return ddp_training_step(c, batch, false, micro.opens);
    const ModelAnalysis& analysis = c.step.analysis;
    const std::vector<int> owner = zero_partition(analysis, point.gpus);
    // The step waits for the rank with the most to step: its tensors stand for every rank's.
    std::vector<std::int64_t> held(static_cast<std::size_t>(point.gpus), 0);
    for (std::size_t t = 0; t < owner.size(); ++t)
      held[static_cast<std::size_t>(owner[t])] += analysis.param_tensors[t].elements;
    const auto busiest =
        static_cast<int>(std::max_element(held.begin(), held.end()) - held.begin());
    std::vector<ParamTensor> mine;
    for (std::size_t t = 0; t < owner.size(); ++t) {
      if (owner[t] == busiest) mine.push_back(analysis.param_tensors[t]);
    }
    const ModelAnalysis shard = with_tensors(analysis, std::move(mine));
    const StepContext over{c.step.scenario, shard, c.step.device};
    ShardedOptimizer sharded;
    sharded.rank_shard = &over;
    const std::int64_t element = element_bytes(analysis.options.parameter_dtype);
    for (int rank = 0; point.gpus > 1 && rank < point.gpus; ++rank) {
      for (std::size_t t = 0; t < owner.size(); ++t) {
        if (owner[t] != rank) continue;
        sharded.broadcasts.push_back(
            {rank, Bytes(checked_product(analysis.param_tensors[t].elements, element))});
      }
    }
    return ddp_training_step(c, batch, true, micro.opens, &sharded);
  }
  IterationPlan validation_step(const MultiGpuContext& c, const SweepPoint& /*point*/,
                                std::int64_t batch) const override {
    return ddp_validation_step(c, batch);
  }
  std::string collective_words() const override {
    return "of gradients (all-reduce) and updated parameters (broadcast)";
  }
  std::vector<std::string> assumptions(const ScenarioSpec& s) const override {
    std::vector<std::string> out = strategy_model(Strategy::ddp).assumptions(s);
    out.push_back(
        "zero1 runs torch's ZeroRedundancyOptimizer over ddp: each rank steps the parameter "
        "tensors it owns (largest first, to the least loaded rank) and broadcasts each of them "
        "after its step (parameters_as_bucket_view=False, the default)");
    return out;
  }
};

}  // namespace

const StrategyModel& zero1_strategy() {
  static const Zero1Strategy strategy;
  return strategy;
}
const StrategyModel& zero2_strategy() {
  static const FsdpStrategy strategy(false);
  return strategy;
}
const StrategyModel& fsdp_strategy() {
  static const FsdpStrategy strategy(true);
  return strategy;
}

}  // namespace epochcast::sim

// ZeroRedundancyOptimizer and FSDP's flat parameters (see sharded_runner.h).
#include "runtime/train/sharded_runner.h"

#include <algorithm>
#include <functional>
#include <stdexcept>

#include <c10/core/DeviceGuard.h>
#include <fmt/format.h>
#include <torch/csrc/autograd/function_hook.h>

#include "core/spec/sharding.h"
#include "runtime/cuda/cuda_api.h"
#include "runtime/measure/collective_watchdog.h"
#include "runtime/measure/device_clock.h"
#include "runtime/train/ddp_reducer.h"

namespace epochcast::runtime {

namespace {

// The sharded runners' collectives: NCCL on the communication stream, which first waits for
// the work queued on LibTorch's stream (so it reads tensors after they are written and
// overwrites none still being read), or MPI on the CPU, done when the call returns.
class Collectives {
 public:
  explicit Collectives(const RunnerContext& c)
      : group_(c.group), nccl_(c.nccl), stream_(c.comm_stream), watchdog_(c.watchdog) {
    if (c.device.is_cuda()) {
      compute_ = current_stream(c.device);
      if (nccl_ == nullptr || stream_ == nullptr || compute_ == nullptr) {
        throw std::invalid_argument(
            "a sharded strategy on CUDA needs NCCL, a stream and LibTorch's CUDA stream");
      }
    }
  }

  bool on_cuda() const { return compute_ != nullptr; }
  int rank() const { return group_.rank(); }
  int size() const { return group_.size(); }

  // Each returns an event after the collective on the communication stream (nullptr on the
  // CPU: it has run).
  std::shared_ptr<cuda::Event> all_gather(const torch::Tensor& shard, const torch::Tensor& full) {
    const auto count = static_cast<std::size_t>(shard.numel());
    if (!on_cuda()) {
      group_.all_gather(shard.data_ptr<float>(), full.data_ptr<float>(), count);
      return nullptr;
    }
    return launch("an all-gather of a unit's parameters", [&] {
      nccl_->all_gather(shard.data_ptr(), full.data_ptr(), count, cuda::ElementType::float32,
                        *stream_);
    });
  }
  std::shared_ptr<cuda::Event> reduce_scatter(const torch::Tensor& full,
                                              const torch::Tensor& shard) {
    const auto count = static_cast<std::size_t>(shard.numel());
    if (!on_cuda()) {
      group_.reduce_scatter_sum(full.data_ptr<float>(), shard.data_ptr<float>(), count);
      return nullptr;
    }
    return launch("a reduce-scatter of a unit's gradients", [&] {
      nccl_->reduce_scatter_sum(full.data_ptr(), shard.data_ptr(), count,
                                cuda::ElementType::float32, *stream_);
    });
  }
  // A dense tensor's bytes from `root` to every rank.
  void broadcast(const torch::Tensor& tensor, int root) {
    const auto bytes = static_cast<std::size_t>(tensor.numel() * tensor.element_size());
    if (!on_cuda()) {
      group_.broadcast(tensor.data_ptr(), bytes, root);
      return;
    }
    launch("a broadcast of updated parameters", [&] {
      nccl_->broadcast(tensor.data_ptr(), bytes, cuda::ElementType::bytes, root, *stream_);
    });
  }

  // LibTorch's stream waits for the collective that recorded `done` (nothing on the CPU).
  void compute_waits(const std::shared_ptr<cuda::Event>& done) const {
    if (done) compute_->wait_for(*done);
  }
  // LibTorch's stream waits for every collective queued so far.
  void compute_waits_for_all() const {
    if (on_cuda()) compute_->wait_for(stream_);
  }

 private:
  // Once the watchdog has aborted the communicator, collectives are skipped instead of failing
  // inside a step: the ranks' agreement between iterations stops the point with its reason (as
  // the DDP reducer does).
  std::shared_ptr<cuda::Event> launch(const char* what, const std::function<void()>& collective) {
    stream_->wait_for(compute_.get());
    auto done = std::make_shared<cuda::Event>(stream_->device());
    if (watchdog_ != nullptr && watchdog_->failure()) return nullptr;
    try {
      collective();
    } catch (const cuda::CudaError&) {
      if (watchdog_ != nullptr && watchdog_->failure()) return nullptr;
      throw;
    }
    done->record(*stream_);
    if (watchdog_ != nullptr) watchdog_->watch(what, [done] { return done->finished(); });
    return done;
  }

  const Group& group_;
  cuda::NcclCommunicator* nccl_;
  cuda::Stream* stream_;
  CollectiveWatchdog* watchdog_;
  std::unique_ptr<cuda::Stream> compute_;  // LibTorch's current stream (borrowed)
};

// DDP's step with ZeroRedundancyOptimizer.
class Zero1Runner final : public StrategyRunner {
 public:
  explicit Zero1Runner(const RunnerContext& c)
      : ddp_(ddp_runner(c)), collectives_(c), parameters_(c.parameters) {
    std::vector<std::int64_t> elements;
    for (const torch::Tensor& p : parameters_)
      elements.push_back(p.numel());
    owner_ = zero_partition(elements, c.group.size());
    for (std::size_t i = 0; i < parameters_.size(); ++i) {
      if (owner_[i] == c.group.rank()) owned_.push_back(parameters_[i]);
    }
  }
  bool start() override { return ddp_->start(); }
  void before_forward(int micro, int micro_batches) override {
    ddp_->before_forward(micro, micro_batches);
  }
  torch::Tensor forward(const torch::Tensor& inputs) override { return ddp_->forward(inputs); }
  void after_backward() override { ddp_->after_backward(); }
  std::vector<torch::Tensor> optimized() const override { return owned_; }
  // ZeroRedundancyOptimizer.step(): every rank's updated parameters to the others.
  void after_step() override {
    if (detached_) return;
    torch::NoGradGuard no_grad;
    for (std::size_t i = 0; i < parameters_.size(); ++i)
      collectives_.broadcast(parameters_[i], owner_[i]);
    collectives_.compute_waits_for_all();
  }
  bool detach() override {
    ddp_->detach();
    detached_ = true;
    return true;
  }

 private:
  std::unique_ptr<StrategyRunner> ddp_;
  Collectives collectives_;
  std::vector<torch::Tensor> parameters_;
  std::vector<int> owner_;
  std::vector<torch::Tensor> owned_;
  bool detached_ = false;
};

// Frees a tensor's storage in place, keeping the tensor and every view of it (autograd's saved
// ones included): FSDP's storage().resize_(0) on a unit's gathered parameters.
void free_storage(const torch::Tensor& flat) {
  c10::StorageImpl* storage = flat.storage().unsafeGetStorageImpl();
  storage->set_data_ptr_noswap(at::DataPtr(nullptr, flat.device()));
  storage->set_nbytes(0);
}

// Gives the storage its bytes back (uninitialised), for a gather to fill.
void allocate_storage(const torch::Tensor& flat) {
  // The CUDA caching allocator allocates on the current device: the storage's.
  const c10::DeviceGuard on_its_device(flat.device());
  c10::StorageImpl* storage = flat.storage().unsafeGetStorageImpl();
  const auto bytes = static_cast<std::size_t>(flat.numel() * flat.element_size());
  if (storage->nbytes() == bytes) return;
  storage->set_data_ptr_noswap(storage->allocator()->allocate(bytes));
  storage->set_nbytes(bytes);
}

// Calls back once AccumulateGrad has written a parameter's .grad (DDP's reducer hooks there
// too: the gradient with the earlier micro-batches' added).
class AfterAccumulation final : public torch::autograd::FunctionPostHook {
 public:
  explicit AfterAccumulation(std::function<void()> call) : call_(std::move(call)) {}
  torch::autograd::variable_list operator()(
      const torch::autograd::variable_list& outputs,
      const torch::autograd::variable_list& /*inputs*/) override {
    call_();
    return outputs;
  }

 private:
  std::function<void()> call_;
};

class FlatParameterRunner final : public StrategyRunner {
 public:
  explicit FlatParameterRunner(const RunnerContext& c)
      : model_(c.model),
        parameters_(c.parameters),
        collectives_(c),
        fsdp_(c.scenario.training.fsdp),
        reshard_after_forward_(c.scenario.training.strategy == Strategy::fsdp &&
                               c.scenario.training.fsdp.reshard_after_forward) {
    build_units();
  }

  ~FlatParameterRunner() override { remove_hooks(); }
  FlatParameterRunner(const FlatParameterRunner&) = delete;
  FlatParameterRunner& operator=(const FlatParameterRunner&) = delete;

  // FSDP's sync_module_states: rank 0's parameters and buffers everywhere, then each rank keeps
  // its shards and frees the gathered parameters.
  bool start() override {
    torch::NoGradGuard no_grad;
    for (const Unit& u : units_)
      collectives_.broadcast(u.flat, 0);
    std::vector<torch::Tensor> buffers;
    for (const torch::Tensor& t : model_->buffers()) {
      buffers.push_back(t.contiguous());
      collectives_.broadcast(buffers.back(), 0);
    }
    collectives_.compute_waits_for_all();
    const std::vector<torch::Tensor> originals = model_->buffers();
    for (std::size_t b = 0; b < buffers.size(); ++b) {
      if (!buffers[b].is_same(originals[b])) originals[b].copy_(buffers[b]);
    }
    for (Unit& u : units_) {
      u.shard.copy_(u.flat.narrow(0, collectives_.rank() * u.shard.numel(), u.shard.numel()));
      free_storage(u.flat);
      u.gathered = false;
    }
    install_hooks();
    return true;
  }

  void before_forward(int micro, int micro_batches) override {
    synchronise_ = micro + 1 == micro_batches;
    for (Unit& u : units_)
      u.pending = u.parameters.size();
  }

  torch::Tensor forward(const torch::Tensor& inputs) override {
    if (!units_.empty() && units_.front().root) use(0);
    return model_->forward(inputs);
  }

  // The optimizer reads the shards' gradients: LibTorch's stream waits for the reductions, after
  // which no flat gradient is read any more.
  void after_backward() override {
    if (detached_) return;
    for (const Unit& u : units_) {
      if (u.pending != 0) {
        // Its unit would be neither reduced nor freed (DDP refuses the same way).
        throw std::logic_error(
            "fsdp: a parameter received no gradient in backward (unused parameters are not "
            "supported)");
      }
    }
    collectives_.compute_waits_for_all();
    in_flight_.clear();
  }

  std::vector<torch::Tensor> optimized() const override {
    std::vector<torch::Tensor> shards;
    for (const Unit& u : units_)
      shards.push_back(u.shard);
    return shards;
  }

  // Every unit gathered and kept, the hooks gone: the model is whole again.
  bool detach() override {
    for (std::size_t u = 0; u < units_.size(); ++u)
      use(u);
    collectives_.compute_waits_for_all();
    remove_hooks();
    detached_ = true;
    return true;
  }

 private:
  struct Unit {
    std::vector<std::size_t> parameters;  // indices into parameters_
    std::vector<std::int64_t> offsets;    // element offset of each in `flat`
    std::size_t first_layer = 0, last_layer = 0;
    bool root = false;
    torch::Tensor flat;      // the gathered parameters (the model's are views); storage freed
    torch::Tensor shard;     // this rank's slice of `flat`: the tensor the optimizer steps
    torch::Tensor gradient;  // the unit's flat gradient while its reduction is in flight
    std::shared_ptr<cuda::Event> gathered_event;  // after its gather (CUDA)
    bool gathered = true;
    std::size_t pending = 0;  // gradients not yet written in this backward
  };

  void build_units() {
    std::vector<std::size_t> parameter_layer;  // the layer of each parameter, in order
    for (std::size_t l = 0; l < model_->layer_count(); ++l) {
      for (std::size_t k = 0; k < model_->layer_parameters(l).size(); ++k)
        parameter_layer.push_back(l);
    }
    if (parameter_layer.size() != parameters_.size()) {
      throw std::logic_error(fmt::format("the model's layers register {} parameters, it has {}",
                                         parameter_layer.size(), parameters_.size()));
    }
    const int ranks = collectives_.size();
    unit_of_layer_.assign(model_->layer_count(), kNoUnit);
    for (const FsdpUnit& unit : fsdp_units(model_->analysis(), fsdp_.wrap)) {
      Unit u;
      u.root = unit.root;
      u.first_layer = unit.layers.front();
      u.last_layer = unit.layers.back();
      for (std::size_t l : unit.layers)
        unit_of_layer_[l] = units_.size();
      units_.push_back(std::move(u));
    }
    // Parameters in registration order within each unit, as FSDP flattens them.
    unit_of_parameter_.resize(parameters_.size());
    slot_of_parameter_.resize(parameters_.size());
    std::vector<std::int64_t> elements(units_.size(), 0);
    for (std::size_t p = 0; p < parameters_.size(); ++p) {
      const std::size_t u = unit_of_layer_[parameter_layer[p]];
      if (u == kNoUnit) throw std::logic_error("a parameter outside every FSDP unit");
      unit_of_parameter_[p] = u;
      slot_of_parameter_[p] = units_[u].parameters.size();
      units_[u].parameters.push_back(p);
      units_[u].offsets.push_back(elements[u]);
      elements[u] += parameters_[p].numel();
    }
    inverse_ranks_ = torch::scalar_tensor(1.0 / ranks, torch::kFloat);
    inverse_ranks_.unsafeGetTensorImpl()->set_wrapped_number(true);
    torch::NoGradGuard no_grad;
    for (std::size_t u = 0; u < units_.size(); ++u) {
      Unit& unit = units_[u];
      // Padded so that every rank's shard is the same size (FlatParamHandle's padding).
      const std::int64_t shard = (elements[u] + ranks - 1) / ranks;
      const torch::TensorOptions options = parameters_.front().options();
      unit.flat = torch::zeros({shard * ranks}, options);
      unit.shard = torch::empty({shard}, options).set_requires_grad(true);
      for (std::size_t k = 0; k < unit.parameters.size(); ++k) {
        torch::Tensor& p = parameters_[unit.parameters[k]];
        // The same strides (a channels_last weight stays channels_last) over the flat storage.
        torch::Tensor view = unit.flat.as_strided(p.sizes(), p.strides(), unit.offsets[k]);
        view.copy_(p);
        p.set_data(view);
      }
    }
  }

  void install_hooks() {
    TorchModelImpl::LayerHooks hooks;
    hooks.before = [this](std::size_t layer) { on_layer_start(layer); };
    hooks.after = [this](std::size_t layer, const torch::Tensor& output) {
      on_layer_end(layer, output);
    };
    model_->set_layer_hooks(std::move(hooks));
    for (std::size_t p = 0; p < parameters_.size(); ++p) {
      std::shared_ptr<torch::autograd::Node> accumulator =
          torch::autograd::impl::grad_accumulator(parameters_[p]);
      const std::uintptr_t key = accumulator->add_post_hook(
          std::make_unique<AfterAccumulation>([this, p] { on_gradient(p); }));
      accumulators_.emplace_back(std::move(accumulator), key);
    }
  }

  void remove_hooks() {
    if (!model_.is_empty()) model_->set_layer_hooks({});
    for (auto& [accumulator, key] : accumulators_)
      accumulator->del_post_hook(key);
    accumulators_.clear();
  }

  // Issues the unit's gather unless its parameters are gathered or on their way.
  void unshard(std::size_t u) {
    Unit& unit = units_[u];
    if (unit.gathered) return;
    allocate_storage(unit.flat);
    unit.gathered_event = collectives_.all_gather(unit.shard.detach(), unit.flat);
    unit.gathered = true;
  }

  // The unit's parameters gathered before LibTorch's stream reads them.
  void use(std::size_t u) {
    unshard(u);
    collectives_.compute_waits(units_[u].gathered_event);
    units_[u].gathered_event.reset();
  }

  void reshard(std::size_t u) {
    Unit& unit = units_[u];
    if (!unit.gathered) return;
    // A gather still in flight must not write into a block the compute stream gets back.
    collectives_.compute_waits(unit.gathered_event);
    free_storage(unit.flat);
    unit.gathered = false;
    unit.gathered_event.reset();
  }

  // The unit after `u` in forward's order, or kNoUnit (the root is not one of them).
  std::size_t next_unit(std::size_t u) const { return u + 1 < units_.size() ? u + 1 : kNoUnit; }
  std::size_t previous_unit(std::size_t u) const {
    return u > 0 && !units_[u - 1].root ? u - 1 : kNoUnit;
  }

  void on_layer_start(std::size_t layer) {
    const std::size_t u = unit_of_layer_[layer];
    if (u == kNoUnit || units_[u].root || layer != units_[u].first_layer) return;
    use(u);
    const std::size_t next = next_unit(u);
    if (fsdp_.forward_prefetch && next != kNoUnit) unshard(next);
  }

  void on_layer_end(std::size_t layer, const torch::Tensor& output) {
    const std::size_t u = unit_of_layer_[layer];
    if (u == kNoUnit || units_[u].root || layer != units_[u].last_layer) return;
    if (reshard_after_forward_) reshard(u);
    // Backward reaches the unit once its output's gradient exists: FSDP's pre-backward hook.
    if (output.requires_grad()) {
      output.register_hook([this, u](const torch::Tensor&) { before_unit_backward(u); });
    }
  }

  void before_unit_backward(std::size_t u) {
    use(u);
    const std::size_t next = previous_unit(u);  // the next unit backward reaches
    if (fsdp_.backward_prefetch == FsdpBackwardPrefetch::pre && next != kNoUnit) unshard(next);
  }

  // Runs inside backward (autograd's thread) once AccumulateGrad has written the parameter's
  // .grad. The unit's flat gradient gets it pre-divided by the ranks with DDP's one multiply
  // (FSDP splits the division before and after the reduction for large groups; one multiply
  // keeps the runtime's fsdp bit-identical to its ddp); the parameter's own gradient is freed.
  void on_gradient(std::size_t parameter) {
    const std::size_t u = unit_of_parameter_[parameter];
    Unit& unit = units_[u];
    if (synchronise_) {
      torch::NoGradGuard no_grad;
      if (!unit.gradient.defined()) unit.gradient = torch::zeros_like(unit.flat);
      torch::Tensor& p = parameters_[parameter];
      torch::Tensor slot = unit.gradient.as_strided(p.sizes(), p.strides(),
                                                    unit.offsets[slot_of_parameter_[parameter]]);
      // AccumulateGrad calls its hooks without a gradient too; the slot then stays zero.
      if (p.grad().defined()) torch::mul_out(slot, p.grad(), inverse_ranks_);
      p.mutable_grad().reset();
    }
    if (--unit.pending > 0) return;
    const std::size_t next = previous_unit(u);
    if (fsdp_.backward_prefetch == FsdpBackwardPrefetch::post && next != kNoUnit) unshard(next);
    if (synchronise_) reduce(u);
    reshard(u);
  }

  void reduce(std::size_t u) {
    // Flat gradients whose reductions have run are freed as backward goes on, not at its end:
    // FSDP holds one unit's gradients at a time, not the model's.
    std::erase_if(in_flight_, [](const InFlight& f) { return !f.done || f.done->finished(); });
    Unit& unit = units_[u];
    torch::Tensor shard_gradient = torch::empty_like(unit.shard);
    InFlight& reduction = in_flight_.emplace_back();
    reduction.gradient = std::move(unit.gradient);
    unit.gradient = torch::Tensor();
    reduction.done = collectives_.reduce_scatter(reduction.gradient, shard_gradient);
    unit.shard.mutable_grad() = shard_gradient;
  }

  static constexpr std::size_t kNoUnit = static_cast<std::size_t>(-1);

  TorchModel model_;
  std::vector<torch::Tensor> parameters_;
  Collectives collectives_;
  FsdpSpec fsdp_;
  bool reshard_after_forward_;
  std::vector<Unit> units_;
  std::vector<std::size_t> unit_of_layer_;
  std::vector<std::size_t> unit_of_parameter_;
  std::vector<std::pair<std::shared_ptr<torch::autograd::Node>, std::uintptr_t>> accumulators_;
  std::vector<std::size_t> slot_of_parameter_;  // its index in its unit's parameters
  // 1 / ranks as a float wrapped number, as the DDP reducer multiplies by.
  torch::Tensor inverse_ranks_;
  struct InFlight {
    torch::Tensor gradient;             // a flat gradient a reduce-scatter reads
    std::shared_ptr<cuda::Event> done;  // after it (nullptr: it has run)
  };
  std::vector<InFlight> in_flight_;
  bool synchronise_ = true;
  bool detached_ = false;  // the model whole again, its hooks gone
};

}  // namespace

std::unique_ptr<StrategyRunner> zero1_runner(const RunnerContext& context) {
  return std::make_unique<Zero1Runner>(context);
}

std::unique_ptr<StrategyRunner> flat_parameter_runner(const RunnerContext& context) {
  return std::make_unique<FlatParameterRunner>(context);
}

}  // namespace epochcast::runtime

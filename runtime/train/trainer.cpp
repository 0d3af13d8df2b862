// One sweep point, trained for real and timed (see trainer.h).
#include "runtime/train/trainer.h"

#include <array>
#include <chrono>
#include <cmath>
#include <fstream>
#include <new>
#include <optional>
#include <sstream>

#include <fmt/format.h>
#include <torch/version.h>

#include "core/spec/rank_share.h"
#include "core/system_failure.h"
#include "runtime/cuda/cuda_api.h"
#include "runtime/data/synthetic_loader.h"
#include "runtime/measure/collective_watchdog.h"
#include "runtime/measure/device_clock.h"
#include "runtime/model/torch_model.h"
#include "runtime/train/kernel_trace.h"
#include "runtime/train/optimizers.h"
#include "runtime/train/precision.h"
#include "runtime/train/profiler.h"
#include "runtime/train/strategy_runner.h"

#ifdef EPOCHCAST_TORCH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace epochcast::runtime {

namespace {

// loader.source synthetic_gpu: batches made once on the device, handed out again every step.
bool batches_made_on_device(const ScenarioSpec& scenario) {
  return scenario.loader.source == LoaderSource::synthetic_gpu;
}

using Clock = std::chrono::steady_clock;

bool is_out_of_memory(const std::exception& error) {
  if (dynamic_cast<const std::bad_alloc*>(&error) != nullptr) return true;
  std::string text = error.what();
  // cuBLAS and cuDNN report their own allocation failures (CUBLAS_STATUS_ALLOC_FAILED,
  // CUDNN_STATUS_ALLOC_FAILED) rather than LibTorch's "CUDA out of memory".
  return text.find("out of memory") != std::string::npos ||
         text.find("can't allocate memory") != std::string::npos ||
         text.find("not enough memory") != std::string::npos ||
         text.find("ALLOC_FAILED") != std::string::npos;
}

// --- memory -------------------------------------------------------------------------------------

// The peak since reset_peak_memory(): the CUDA caching allocator's high-water mark, or on the CPU
// the process's peak resident set (reset through /proc/self/clear_refs).
void reset_peak_memory(const torch::Device& device) {
#ifdef EPOCHCAST_TORCH_CUDA
  if (device.is_cuda()) {
    // The allocator has no per-device state until LibTorch has started CUDA on the device
    // ("Invalid device argument: did you call init?"); a first allocation starts it.
    torch::empty({1}, torch::TensorOptions().device(device));
    c10::cuda::CUDACachingAllocator::emptyCache();
    c10::cuda::CUDACachingAllocator::resetPeakStats(device.index());
    return;
  }
#endif
  if (device.is_cpu()) {
    std::ofstream clear("/proc/self/clear_refs");
    clear << "5";
  }
}

struct PeakMemory {
  std::int64_t allocated = 0;
  std::string source;
  std::optional<std::int64_t> reserved;  // the caching allocator's peak, GPU only
  std::optional<std::int64_t> context;   // the device's bytes in use beyond the allocator's
};

PeakMemory peak_memory(const torch::Device& device) {
  PeakMemory peak;
#ifdef EPOCHCAST_TORCH_CUDA
  if (device.is_cuda()) {
    auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
    peak.allocated = stats.allocated_bytes[0].peak;
    peak.source = "cuda_caching_allocator";
    peak.reserved = stats.reserved_bytes[0].peak;
    // What the device holds beyond the allocator's blocks: the CUDA context, cuBLAS/cuDNN
    // handles and NCCL's buffers; nvidia-smi shows it beside the reserved bytes.
    peak.context = std::max<std::int64_t>(
        0, cuda::memory_in_use(device.index()) - stats.reserved_bytes[0].current);
    return peak;
  }
#endif
  if (device.is_cuda()) {
    peak.source = "unavailable (LibTorch without CUDA allocator statistics)";
    return peak;
  }
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) {
      std::istringstream fields(line.substr(6));
      std::int64_t kib = 0;
      fields >> kib;
      peak.allocated = kib * 1024;
      peak.source = "process_peak_rss";
      return peak;
    }
  }
  peak.source = "unavailable";
  return peak;
}

void release_cached_memory(const torch::Device& device) {
#ifdef EPOCHCAST_TORCH_CUDA
  if (device.is_cuda()) c10::cuda::CUDACachingAllocator::emptyCache();
#else
  (void)device;
#endif
}

// Dynamic loss scaling for fp16 (what torch.cuda.amp.GradScaler does): scale the loss, unscale
// the gradients, skip the step and halve the scale on overflow, double it after 2000 good steps.
class LossScaler {
 public:
  explicit LossScaler(bool enabled) : enabled_(enabled) {}
  torch::Tensor scale(const torch::Tensor& loss) const { return enabled_ ? loss * scale_ : loss; }
  // Returns whether the optimizer should step.
  bool unscale(const std::vector<torch::Tensor>& parameters) {
    if (!enabled_) return true;
    torch::NoGradGuard no_grad;
    std::vector<torch::Tensor> gradients;
    for (const torch::Tensor& p : parameters) {
      if (p.grad().defined()) gradients.push_back(p.grad());
    }
    if (gradients.empty()) return true;
    // One fused unscale-and-check over all gradients and one host sync, as GradScaler does (a
    // check per tensor would stall the GPU once per parameter).
    auto options = torch::TensorOptions().dtype(torch::kFloat).device(gradients.front().device());
    torch::Tensor found_infinite = torch::zeros({1}, options);
    torch::Tensor inverse_scale = torch::full({1}, 1.0 / scale_, options);
    at::_amp_foreach_non_finite_check_and_unscale_(gradients, found_infinite, inverse_scale);
    const bool finite = found_infinite.item<float>() == 0.0F;
    if (!finite) {
      scale_ /= 2;
      good_steps_ = 0;
      return false;
    }
    if (++good_steps_ == 2000) {
      scale_ *= 2;
      good_steps_ = 0;
    }
    return true;
  }

 private:
  bool enabled_;
  double scale_ = 65536.0;
  int good_steps_ = 0;
};

SampleShape sample_shape_of(const ScenarioSpec& scenario, const ModelAnalysis& analysis) {
  SampleShape s;
  s.shape = analysis.input_shape;
  s.vocabulary = input_vocabulary(analysis);
  s.token_ids = s.vocabulary > 0;
  const OutputClasses out = output_classes(analysis.output_shape);
  s.classes = std::min(scenario.dataset.classes, out.classes);
  s.label_shape = out.label_shape;
  return s;
}

// Per-pixel scores [batch, classes, height, width] go to cross_entropy as they are, with
// [batch, height, width] labels (output_classes() in core).
torch::Tensor cross_entropy(const torch::Tensor& logits, const torch::Tensor& labels) {
  if (logits.dim() == 3) {  // a sequence: one label per token
    return torch::nn::functional::cross_entropy(logits.flatten(0, 1).to(torch::kFloat32),
                                                labels.flatten());
  }
  return torch::nn::functional::cross_entropy(logits.to(torch::kFloat32), labels);
}

// Everything one rank needs to train the point.
struct Rig {
  const ScenarioSpec& scenario;
  const SweepPoint& point;
  const RunOptions& options;
  const Group& group;
  torch::Device device;
  TorchModel model{nullptr};
  std::vector<torch::Tensor> parameters;
  std::unique_ptr<StepOptimizer> optimizer;
  std::unique_ptr<cuda::Stream> comm_stream;
  std::unique_ptr<cuda::NcclCommunicator> nccl;
  // Declared after the communicator it aborts, so that it stops first.
  std::unique_ptr<CollectiveWatchdog> collective_watchdog;
  // What the strategy adds around the model; destroyed before the communicator it uses.
  std::unique_ptr<StrategyRunner> runner;
  std::unique_ptr<SyntheticLoader> loader;
  LossScaler scaler;
  RankShare share;              // this rank's share of the training set, in batches
  std::int64_t rank_batch = 0;  // samples per rank per micro-batch
  torch::Tensor last_loss;      // of the last micro-batch, on the device

  Rig(const ScenarioSpec& s, const SweepPoint& p, const RunOptions& o, const Group& g,
      torch::Device d)
      : scenario(s),
        point(p),
        options(o),
        group(g),
        device(d),
        scaler(s.training.precision == TrainingPrecision::amp_fp16) {}

  // Micro-batches per optimizer step (the scenario allows more than one only where the
  // strategy accumulates).
  int accumulation() const { return scenario.training.gradient_accumulation; }

  torch::Tensor forward(torch::Tensor inputs) {
    AutocastScope autocast(scenario.training.precision, device);
    if (scenario.training.convolution.channels_last && inputs.dim() == 4) {
      inputs = inputs.contiguous(at::MemoryFormat::ChannelsLast);
    }
    return runner->forward(inputs);
  }

  // One optimizer step over `accumulation()` micro-batches; returns the last loss (a host sync
  // when the scenario reads it every step, as a training loop printing it does).
  void step() {
    int micro_batches = accumulation();
    for (int m = 0; m < micro_batches; ++m) {
      Batch batch = loader->next();
      bool last = m + 1 == micro_batches;
      runner->before_forward(m, micro_batches);
      torch::Tensor loss = cross_entropy(forward(batch.inputs), batch.labels);
      scaler.scale(loss / micro_batches).backward();
      runner->after_backward();
      if (last) {
        last_loss = loss.detach();
        if (scenario.training.sync_every_step) last_loss.item<double>();
      }
    }
    if (scaler.unscale(parameters)) optimizer->step();
    runner->after_step();
    // PyTorch 2 sets gradients to None; PyTorch 1 zeroes them in place.
    zero_grad(parameters, scenario.training.framework == Framework::pytorch2);
  }

  void evaluate(const Batch& batch) {
    torch::NoGradGuard no_grad;
    torch::Tensor logits = forward(batch.inputs);
    if (scenario.training.sync_every_step) cross_entropy(logits, batch.labels).item<double>();
  }
};

// The model's parameters and buffers, copied to host memory (not to the device the trial step
// is to find out whether it fits).
std::vector<torch::Tensor> host_copies(TorchModel& model) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> copies;
  for (const torch::Tensor& t : model->parameters())
    copies.push_back(t.to(torch::kCPU, /*non_blocking=*/false, /*copy=*/true));
  for (const torch::Tensor& t : model->buffers())
    copies.push_back(t.to(torch::kCPU, /*non_blocking=*/false, /*copy=*/true));
  return copies;
}

void restore(TorchModel& model, const std::vector<torch::Tensor>& copies) {
  torch::NoGradGuard no_grad;
  std::size_t i = 0;
  for (torch::Tensor& t : model->parameters())
    t.copy_(copies.at(i++));
  for (torch::Tensor& t : model->buffers())
    t.copy_(copies.at(i++));
  model->zero_grad();
}

}  // namespace

std::uint64_t parameter_hash(const std::vector<torch::Tensor>& parameters) {
  std::uint64_t hash = 1469598103934665603ULL;
  for (const torch::Tensor& p : parameters) {
    torch::Tensor host = p.detach().to(torch::kCPU).contiguous();
    const auto* bytes = static_cast<const unsigned char*>(host.data_ptr());
    auto n = static_cast<std::size_t>(host.numel() * host.element_size());
    for (std::size_t i = 0; i < n; ++i) {
      hash ^= bytes[i];
      hash *= 1099511628211ULL;
    }
  }
  return hash;
}

DevicePlan plan_devices(DeviceChoice choice) {
  DevicePlan plan;
  int cuda_devices = 0;
  if (choice != DeviceChoice::cpu) {
    // The model runs through LibTorch, so LibTorch must see the GPUs too.
    cuda_devices = torch::cuda::is_available() ? static_cast<int>(torch::cuda::device_count()) : 0;
  }
  if (cuda_devices > 0 && !cuda::compiled_with_cuda()) {
    throw SystemFailure(
        "LibTorch sees CUDA devices, but epochcast-run was built without the CUDA Toolkit and "
        "NCCL: rebuild with them, or pass --device cpu");
  }
  if (choice == DeviceChoice::cuda && cuda_devices == 0) {
    throw SystemFailure("--device cuda: no CUDA device is visible to LibTorch here");
  }
  plan.cuda = cuda_devices > 0;
  plan.device_count = cuda_devices;
  return plan;
}

std::string why_not_runnable(const ScenarioSpec& scenario, const SweepPoint& point,
                             const DevicePlan& devices, const World& world) {
  const TrainingSpec& t = scenario.training;
  if (!devices.cuda &&
      (t.precision == TrainingPrecision::tf32 || t.precision == TrainingPrecision::amp_fp16)) {
    return fmt::format("{} needs a CUDA GPU; this run is on the CPU", name_of(t.precision));
  }
  if (t.optimizer_implementation == OptimizerImplementation::fused) {
    // torch::optim's C++ optimizers update tensor by tensor; torch.optim's fused kernels are
    // reachable from Python only.
    return "optimizer_implementation fused: LibTorch's C++ optimizers have no fused kernels";
  }
  if (std::string why = unsupported_by_libtorch(analyze_model(scenario.model)); !why.empty())
    return why;
  if (scenario.loader.gpu_decode.value() > 0) {
    // Its samples are synthetic tensors: there are no encoded files, and DALI is not linked.
    return "loader.gpu_decode_us: the runtime has no encoded files to decode on the GPU";
  }
  return strategy_cannot_run(scenario, point, devices, world);
}

namespace {

RunnerContext runner_context(const Rig& rig) {
  return RunnerContext{rig.scenario,
                       rig.point,
                       rig.group,
                       rig.device,
                       rig.model,
                       rig.parameters,
                       rig.nccl.get(),
                       rig.comm_stream.get(),
                       rig.collective_watchdog.get()};
}

}  // namespace

MeasuredPoint measure_point(const ScenarioSpec& scenario, const SweepPoint& point,
                            const RunOptions& options, const DevicePlan& devices, World& world,
                            const std::atomic<bool>& stop_requested) {
  MeasuredPoint result;
  result.gpus = point.gpus;
  result.global_batch = point.global_batch;
  result.per_gpu_batch = point.per_gpu_batch;
  result.device = devices.cuda ? "cuda" : "cpu";
  const bool rank_per_gpu = process_per_gpu(scenario.training.strategy);
  result.ranks = strategy_ranks(scenario, point);

  // The reason must be the same on every rank, so ranks agree before anyone builds a group.
  std::string reason = why_not_runnable(scenario, point, devices, world);
  if (!world.all(reason.empty())) {
    result.status = PointStatus::skipped;
    result.reason = reason.empty() ? "another rank cannot run this point" : reason;
    return result;
  }
  Group group = Group::first_ranks(world, result.ranks);
  if (!group.member()) {
    world.barrier();
    return result;
  }

  torch::Device device =
      devices.cuda
          ? torch::Device(torch::kCUDA,
                          static_cast<c10::DeviceIndex>(strategy_device_index(scenario, world)))
          : torch::Device(torch::kCPU);
  if (device.is_cuda()) cuda::set_device(device.index());
  const TrainingSpec& training = scenario.training;
  if (devices.cuda) apply_math_flags(math_flags(training));

  Rig rig(scenario, point, options, group, device);
  auto finish = [&](MeasuredPoint&& r) {
    rig.runner.reset();
    rig.collective_watchdog.reset();
    rig.loader.reset();
    rig.optimizer.reset();
    rig.model = TorchModel(nullptr);
    release_cached_memory(device);
    world.barrier();
    return std::move(r);
  };

  // Build, then one trial step with local gradients only: a rank that runs out of memory there
  // tells the others before anyone waits in a collective for it (not for a sharded strategy,
  // whose memory a local step does not have: strategy_trial_step).
  bool trial_ok = true;
  std::string trial_error;
  try {
    reset_peak_memory(device);
    torch::manual_seed(options.seed);
    rig.model = build_torch_model(scenario.model);
    rig.model->to(device);
    if (scenario.training.convolution.channels_last) {
      // model.to(memory_format=torch.channels_last): 4-D weights (2-D convolutions) go NHWC.
      for (torch::Tensor& p : rig.model->parameters()) {
        if (p.dim() == 4) p.set_data(p.contiguous(at::MemoryFormat::ChannelsLast));
      }
    }
    rig.model->train();
    rig.parameters = rig.model->parameters();
    rig.rank_batch = rank_per_gpu ? point.per_gpu_batch : point.global_batch;
    // The simulator's rule (core/spec/rank_share.h): DistributedSampler's padded share.
    rig.share = rank_share(scenario.dataset.train_samples, result.ranks, rig.rank_batch,
                           training.drop_last);
    LoaderOptions loader_options;
    loader_options.samples = rig.share.samples;
    loader_options.batch = rig.rank_batch;
    loader_options.drop_last = training.drop_last;
    loader_options.workers = scenario.loader.workers;
    loader_options.prefetch_factor = scenario.loader.prefetch_factor;
    loader_options.pin_memory = scenario.loader.pin_memory;
    loader_options.normalize_on_device = scenario.loader.normalize_on_gpu;
    loader_options.prefetch_to_device = scenario.loader.prefetch_to_gpu;
    loader_options.made_on_device = batches_made_on_device(scenario);
    loader_options.seed = options.seed;
    loader_options.sample_offset = group.rank() * rig.share.samples;
    rig.loader = std::make_unique<SyntheticLoader>(sample_shape_of(scenario, rig.model->analysis()),
                                                   loader_options, device);
    rig.runner = local_runner(runner_context(rig));
    rig.optimizer = make_step_optimizer(
        training.optimizer, resolved_optimizer_implementation(training), rig.parameters);
    if (strategy_trial_step(scenario)) {
      // The trial trains nothing: every strategy starts its timed steps from the model as built
      // and the loader's first batch, so that two strategies on the same data end alike.
      const std::vector<torch::Tensor> built = host_copies(rig.model);
      rig.step();
      restore(rig.model, built);
      rig.optimizer = make_step_optimizer(
          training.optimizer, resolved_optimizer_implementation(training), rig.parameters);
      rig.loader->seek(0);
    }
    // Dropout's masks from here on do not depend on whether a trial step drew some.
    torch::manual_seed(options.seed);

  } catch (const std::exception& error) {
    trial_ok = false;
    trial_error = error.what();
    result.status = is_out_of_memory(error) ? PointStatus::oom : PointStatus::failed;
  }
  if (!group.all(trial_ok)) {
    if (trial_ok) {
      result.status = PointStatus::oom;
      result.reason = "another rank ran out of memory";
    } else {
      result.reason = result.status == PointStatus::oom
                          ? fmt::format("out of memory at per-GPU batch {}", rig.rank_batch)
                          : trial_error;
    }
    return finish(std::move(result));
  }

  // The communicator and the strategy's runner across ranks (DDP's buckets), agreed like the
  // trial: a rank that cannot set them up (out of memory for the buckets, NCCL failing or
  // timing out in its non-blocking initialisation) tells the others over the host transport
  // (MPI or TCP) before anyone queues a collective that would wait for it on the GPU.
  const bool communicates = strategy_communicates(scenario, group);
  if (communicates) {
    bool ready = true;
    std::string why;
    PointStatus status = PointStatus::failed;
    try {
      if (device.is_cuda()) {
        std::string id(cuda::NcclCommunicator::kUniqueIdBytes, '\0');
        if (group.rank() == 0) id = cuda::NcclCommunicator::create_unique_id();
        group.broadcast(id.data(), id.size(), 0);
        rig.comm_stream = std::make_unique<cuda::Stream>(device.index());
        rig.nccl = std::make_unique<cuda::NcclCommunicator>(group.rank(), group.size(), id,
                                                            device.index());
        cuda::NcclCommunicator* nccl = rig.nccl.get();
        rig.collective_watchdog = std::make_unique<CollectiveWatchdog>(
            nccl->timeout_s(),
            [nccl] {
              try {
                nccl->check_health();
                return std::string();
              } catch (const cuda::CudaError& error) {
                return std::string(error.what());
              }
            },
            [nccl] { nccl->abort(); });
      }
      rig.runner = group_runner(runner_context(rig));
    } catch (const std::exception& error) {
      ready = false;
      why = error.what();
      if (is_out_of_memory(error)) status = PointStatus::oom;
    }
    if (!group.all(ready)) {
      result.status = ready ? PointStatus::failed : status;
      result.reason = ready ? fmt::format("another rank could not set up {} (its buckets or NCCL)",
                                          name_of(training.strategy))
                            : why;
      return finish(std::move(result));
    }
  }

  try {
    // The ranks start alike (DDP broadcasts rank 0's state on wrapping), and where the trial's
    // optimizer state was local, afresh.
    if (rig.runner->start()) {
      std::vector<torch::Tensor> optimized = rig.runner->optimized();
      rig.optimizer =
          make_step_optimizer(training.optimizer, resolved_optimizer_implementation(training),
                              optimized.empty() ? rig.parameters : optimized);
    }
    // Without a trial step, the peak so far is the model built whole on every rank before the
    // strategy divided it.
    if (!strategy_trial_step(scenario)) reset_peak_memory(device);

    auto start = Clock::now();
    bool timed_out = false;
    // A stop is agreed over the group like the timeout (one all-reduce for both): a rank that
    // stopped alone would leave the others waiting in the next step's all-reduce.
    bool stop_agreed = false;
    // NCCL's own view of the communicator joins the agreement: a rank whose NCCL recorded an
    // asynchronous failure (a peer gone, a network error) aborts it, and every rank stops the
    // point together instead of queueing the next all-reduce behind a dead one.
    std::string nccl_failure;
    auto out_of_time = [&] {
      bool nccl_failed = false;
      if (rig.collective_watchdog) {
        if (auto why = rig.collective_watchdog->failure()) {
          nccl_failed = true;
          nccl_failure = *why;
        }
      }
      if (rig.nccl && !nccl_failed) {
        try {
          rig.nccl->check_health();
        } catch (const cuda::CudaError& error) {
          nccl_failed = true;
          nccl_failure = error.what();
        }
      }
      std::array<double, 3> stop_late_failed{stop_requested.load() ? 1.0 : 0.0,
                                             seconds_since(start) > options.timeout_s ? 1.0 : 0.0,
                                             nccl_failed ? 1.0 : 0.0};
      group.all_reduce_max(stop_late_failed.data(), stop_late_failed.size());
      if (stop_late_failed[2] > 0) {
        throw SystemFailure(nccl_failure.empty()
                                ? "another rank's NCCL communicator failed; the point stopped"
                                : nccl_failure);
      }
      stop_agreed = stop_late_failed[0] > 0;
      return stop_agreed || stop_late_failed[1] > 0;
    };
    auto interrupted = [&](MeasuredPoint&& r) {
      r.status = PointStatus::failed;
      r.reason = "interrupted";
      return finish(std::move(r));
    };
    for (int i = 1; i < options.warmup_iterations && !timed_out; ++i) {
      rig.step();
      timed_out = out_of_time();
    }
    result.warmup_iterations = options.warmup_iterations;

    rig.loader->reset_counters();
    // Nothing of the warm-up may still be queued when the first timed step starts.
    synchronize(device);
    IterationClock clock(device);
    torch::Tensor first_loss;
    for (int i = 0; i < options.timed_iterations && !timed_out; ++i) {
      clock.time([&] { rig.step(); });
      if (i == 0) first_loss = rig.last_loss;
      timed_out = out_of_time();
    }
    std::vector<double> samples = clock.seconds();
    if (stop_agreed) return interrupted(std::move(result));
    if (samples.empty()) {
      result.status = PointStatus::timeout;
      result.reason =
          fmt::format("warm-up took longer than the timeout ({:g} s)", options.timeout_s);
      return finish(std::move(result));
    }
    group.all_reduce_max(samples.data(), samples.size());
    result.iteration_samples_s = samples;
    result.iteration_s = spread_of(samples);
    result.loader_wait_s =
        group.max(rig.loader->wait_seconds() / static_cast<double>(samples.size()));
    result.loader_sample_cpu_s = rig.loader->sample_cpu_seconds();
    result.first_loss = first_loss.item<double>();
    result.last_loss = rig.last_loss.item<double>();
    if (timed_out) {
      result.status = PointStatus::timeout;
      result.reason =
          fmt::format("stopped after {} timed iterations: the point exceeded its timeout ({:g} s)",
                      samples.size(), options.timeout_s);
      return finish(std::move(result));
    }

    // Iterations per epoch, counted in optimizer steps of full batches, and the partial batch.
    const std::int64_t full_batches = rig.share.full_batches;
    const int accumulation = rig.accumulation();
    result.iterations_per_epoch = full_batches / accumulation;
    result.partial_batch = rig.share.partial() ? rig.share.last_batch * result.ranks : 0;
    // The median, not the mean: on a shared machine a few preempted iterations should not move
    // the estimate of a typical epoch (the mean is in iteration_s beside it).
    double epoch = static_cast<double>(result.iterations_per_epoch) * result.iteration_s.median;

    // The partial batch, timed on its own: its fixed costs do not shrink with its size.
    if (result.partial_batch > 0 && accumulation == 1) {
      IterationClock partial_clock(device);
      for (int r = 0; r < 3; ++r) {
        rig.loader->seek(full_batches);
        partial_clock.time([&] { rig.step(); });
      }
      std::vector<double> partial = partial_clock.seconds();
      group.all_reduce_max(partial.data(), partial.size());
      result.partial_iteration_s = spread_of(partial).median;
      epoch += *result.partial_iteration_s;
    }

    // Validation: forward passes over the validation set, as seed 000's loop runs after each
    // epoch.
    const std::int64_t validation_share =
        rank_share(scenario.dataset.validation_samples, result.ranks, rig.rank_batch, false)
            .samples;
    if (validation_share > 0 && options.validation_iterations > 0) {
      LoaderOptions v;
      v.samples = validation_share;
      v.batch = std::min(rig.rank_batch, validation_share);
      v.workers = scenario.loader.workers;
      v.prefetch_factor = scenario.loader.prefetch_factor;
      v.pin_memory = scenario.loader.pin_memory;
      v.normalize_on_device = scenario.loader.normalize_on_gpu;
      v.prefetch_to_device = scenario.loader.prefetch_to_gpu;
      v.made_on_device = batches_made_on_device(scenario);
      v.seed = options.seed + 1;
      SyntheticLoader validation(sample_shape_of(scenario, rig.model->analysis()), v, device);
      rig.model->eval();
      rig.evaluate(validation.next());  // warm-up
      synchronize(device);
      IterationClock validation_clock(device);
      for (int i = 0; i < options.validation_iterations; ++i) {
        validation_clock.time([&] { rig.evaluate(validation.next()); });
      }
      std::vector<double> times = validation_clock.seconds();
      rig.model->train();
      group.all_reduce_max(times.data(), times.size());
      result.validation_iteration_s = spread_of(times).median;
      result.validation_iterations = validation.batches_per_epoch();
      epoch += static_cast<double>(result.validation_iterations) * *result.validation_iteration_s;
    }
    result.epoch_s_estimated = epoch;
    result.samples_per_s =
        static_cast<double>(point.global_batch * accumulation) / result.iteration_s.median;

    if (options.full_epoch) {
      rig.loader->seek(0);
      synchronize(device);
      auto epoch_start = Clock::now();
      std::int64_t steps = rig.loader->batches_per_epoch() / accumulation;
      // A stop is agreed like the timed loop's, but only every kStopCheckSteps steps: on several
      // ranks the agreement is an all-reduce inside the timed epoch, and a part of an epoch is
      // no epoch anyway.
      constexpr std::int64_t kStopCheckSteps = 8;
      for (std::int64_t s = 0; s < steps && !stop_agreed; ++s) {
        rig.step();
        if ((s + 1) % kStopCheckSteps == 0) stop_agreed = !group.all(!stop_requested.load());
      }
      synchronize(device);
      if (stop_agreed) return interrupted(std::move(result));
      result.epoch_s_measured = group.max(seconds_since(epoch_start));
    }

    PeakMemory peak = peak_memory(device);
    result.peak_memory_bytes =
        static_cast<std::int64_t>(group.max(static_cast<double>(peak.allocated)));
    result.memory_source = peak.source;
    if (peak.reserved) {
      result.peak_reserved_bytes =
          static_cast<std::int64_t>(group.max(static_cast<double>(*peak.reserved)));
      result.cuda_context_bytes =
          static_cast<std::int64_t>(group.max(static_cast<double>(peak.context.value_or(0))));
    }

    // Layers are profiled, and kernels traced, with local work only (the model whole again, its
    // optimizer over its own parameters).
    if (rig.runner->detach()) {
      rig.optimizer = make_step_optimizer(
          training.optimizer, resolved_optimizer_implementation(training), rig.parameters);
    }
    const std::uint64_t hash = parameter_hash(rig.parameters);
    result.parameters_hash = fmt::format("{:016x}", hash);
    if (group.size() > 1) {
      std::vector<std::uint64_t> hashes = group.all_gather(hash);
      result.parameters_identical =
          std::all_of(hashes.begin(), hashes.end(), [&](auto h) { return h == hashes.front(); });
    }

    if (options.profile_layers && group.rank() == 0) {
      rig.loader->seek(0);
      Batch batch = rig.loader->next();
      ProfileOptions profile;
      profile.precision = training.precision;
      try {
        result.layers = profile_layers(rig.model, batch.inputs, profile);
      } catch (const std::exception& error) {
        // The point trained fine: the profile's several graphs alive at once are what did not
        // fit (or failed), and the point's figures stand without it.
        if (!is_out_of_memory(error)) throw;
        result.layers.clear();
        result.profile_note = fmt::format(
            "the layer profile ran out of memory ({} graphs of a layer at once); the point's "
            "timings stand",
            profile.calls);
        rig.model->zero_grad();
        release_cached_memory(device);
      }
    }
    if (!options.kernel_trace.empty() && group.rank() == 0) {
      // Kernel by kernel, as the steps ran (local work only: the model's own kernels).
      rig.loader->seek(0);
      try {
        record_kernel_trace(device, training.precision,
                            kernel_trace_path(options.kernel_trace, point), [&] {
                              for (int i = 0; i < kKernelTraceSteps; ++i)
                                rig.step();
                            });
      } catch (const std::exception& error) {
        // The point's timings stand without its trace.
        if (is_out_of_memory(error)) release_cached_memory(device);
        const std::string what = error.what();
        result.profile_note +=
            fmt::format("{}the kernel trace was not written: {}",
                        result.profile_note.empty() ? "" : "; ", what.substr(0, what.find('\n')));
      }
    }
    group.barrier();
  } catch (const std::exception& error) {
    result.status = is_out_of_memory(error) ? PointStatus::oom : PointStatus::failed;
    result.reason = error.what();
  }
  return finish(std::move(result));
}

}  // namespace epochcast::runtime

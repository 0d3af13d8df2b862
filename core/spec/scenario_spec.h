// A scenario: a model, a data set, how it is trained, on which machine, and the sweep of GPU
// counts and batch sizes to predict (or run) it for. Loading a scenario loads and checks
// everything it refers to, so a loaded scenario is ready to simulate.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/enum_name.h"
#include "core/input_error.h"
#include "core/model/analysis.h"
#include "core/model/model_spec.h"
#include "core/spec/hardware_spec.h"
#include "core/spec/profile_spec.h"
#include "core/yaml/override.h"

namespace epochcast {

// single: one device. dp: nn.DataParallel. ddp: DistributedDataParallel. zero1: DDP with the
// optimizer state sharded (torch's ZeroRedundancyOptimizer). zero2: FSDP's SHARD_GRAD_OP
// (gradients and optimizer state sharded). fsdp: FSDP's FULL_SHARD (ZeRO stage 3: parameters
// too).
enum class Strategy { single, dp, ddp, zero1, zero2, fsdp };
inline constexpr std::string_view kStrategyNames[] = {"single", "dp",    "ddp",
                                                      "zero1",  "zero2", "fsdp"};
inline std::string_view name_of(Strategy value) {
  return enum_name(kStrategyNames, value);
}
// A process per GPU, each over its own share of the data set.
inline bool process_per_gpu(Strategy strategy) {
  return strategy != Strategy::single && strategy != Strategy::dp;
}

enum class Optimizer { sgd, momentum, adam, adamw };
inline constexpr std::string_view kOptimizerNames[] = {"sgd", "momentum", "adam", "adamw"};
inline std::string_view name_of(Optimizer value) {
  return enum_name(kOptimizerNames, value);
}

// How torch.optim runs the update: a kernel per op and tensor (PyTorch 1.x), multi-tensor
// `_foreach_` ops (PyTorch 2.x's default on CUDA), or one fused kernel (`fused=True`). auto takes
// the framework's default.
enum class OptimizerImplementation { automatic, for_loop, foreach, fused };
inline constexpr std::string_view kOptimizerImplementationNames[] = {"auto", "for_loop", "foreach",
                                                                     "fused"};
inline std::string_view name_of(OptimizerImplementation value) {
  return enum_name(kOptimizerImplementationNames, value);
}

// fp32 is PyTorch's default float32 math: cuBLAS in full fp32 (torch.backends.cuda.matmul.
// allow_tf32 = False since PyTorch 1.12) and cuDNN convolutions on TF32 tensor cores
// (torch.backends.cudnn.allow_tf32 = True). tf32 allows TF32 for both; fp32_strict for neither.
enum class TrainingPrecision { fp32, tf32, amp_fp16, amp_bf16, fp32_strict };
inline constexpr std::string_view kTrainingPrecisionNames[] = {"fp32", "tf32", "amp_fp16",
                                                               "amp_bf16", "fp32_strict"};
inline std::string_view name_of(TrainingPrecision value) {
  return enum_name(kTrainingPrecisionNames, value);
}
// Autocast to 16 bits: fp32 master weights, 16-bit activations and matrix math.
inline bool mixed_precision(TrainingPrecision p) {
  return p == TrainingPrecision::amp_fp16 || p == TrainingPrecision::amp_bf16;
}

// The eager-framework generation the training loop runs on: PyTorch 1.x steps optimizers one
// parameter tensor at a time and zeroes gradients; PyTorch 2.x uses multi-tensor ("foreach")
// optimizer kernels and sets gradients to None.
enum class Framework { pytorch1, pytorch2 };
inline constexpr std::string_view kFrameworkNames[] = {"pytorch-1", "pytorch-2"};
inline std::string_view name_of(Framework value) {
  return enum_name(kFrameworkNames, value);
}

// All-reduce across nodes: hierarchical rings (bandwidth) or trees (latency), or the tuner's
// choice between them by message size. Inside a node collectives always run on rings.
// As NCCL_ALGO: the tuner's choice, or one algorithm (tree: across nodes; nvls: NVLink SHARP
// inside an NVSwitch node of 3 GPUs or more, rings elsewhere; nvlstree: NVLS inside such nodes
// and trees across them, rings inside one node; collnet: the network's switches reduce across
// nodes (SHARP; NCCL_COLLNET_ENABLE=1), on machines whose network says in_network_reduction;
// where NCCL cannot run the algorithm asked for, it falls back to rings and trees, and so does
// the simulator).
enum class CollectiveAlgorithm { automatic, ring, tree, nvls, nvls_tree, collnet };
inline constexpr std::string_view kCollectiveAlgorithmNames[] = {"auto", "ring",     "tree",
                                                                 "nvls", "nvlstree", "collnet"};
inline std::string_view name_of(CollectiveAlgorithm value) {
  return enum_name(kCollectiveAlgorithmNames, value);
}

enum class BatchMeaning { global, per_gpu };
inline constexpr std::string_view kBatchMeaningNames[] = {"global", "per_gpu"};
inline std::string_view name_of(BatchMeaning value) {
  return enum_name(kBatchMeaningNames, value);
}

struct DatasetSpec {
  std::string name;
  std::int64_t train_samples = 0;
  std::int64_t validation_samples = 0;
  TensorShape sample_shape;
  std::int64_t classes = 0;
  // A folder of MNIST-format IDX files (train-images-idx3-ubyte[.gz], ...) that `run
  // --to-target` trains on; timing runs use synthetic samples of the same shape.
  std::string files;
};

// The input pipeline, as a PyTorch DataLoader runs it.
// Where batches come from: made (read, decoded, transformed) on the host by the loader and
// copied to the GPU; or made once on the GPU and handed out again every step, as
// DeepLearningExamples' synthetic backend does to measure the GPU alone (no loader cost, no
// host-to-device copy).
enum class LoaderSource { host, synthetic_gpu };
inline constexpr std::string_view kLoaderSourceNames[] = {"host", "synthetic_gpu"};
inline std::string_view name_of(LoaderSource value) {
  return enum_name(kLoaderSourceNames, value);
}

struct LoaderSpec {
  LoaderSource source = LoaderSource::host;
  int workers = 0;          // 0: the training thread loads each batch itself
  int prefetch_factor = 2;  // batches each worker prepares ahead
  bool pin_memory = false;  // pinned batches copy asynchronously at full PCIe speed
  Seconds sample_cpu;       // CPU time to read, decode and transform one sample on one core
  // CPU time a batch costs beyond its samples, on the same core: collating them into one tensor
  // (default_collate's torch.stack) and the loader's own work a batch.
  Seconds batch_cpu;
  // The CPU time of loading a batch of `samples`: its cost a batch and each sample's.
  Seconds batch_load_cpu(std::int64_t samples) const {
    return Seconds(batch_cpu.value() + sample_cpu.value() * static_cast<double>(samples));
  }
  // Samples cross to the GPU as uint8 (one byte per element, as images decode) and the GPU
  // converts and normalises them: x.float().sub_(mean).div_(std) after the copy.
  bool normalize_on_gpu = false;
  // The next batch is copied to the GPU on a side CUDA stream while this step computes (apex's
  // data_prefetcher, timm's PrefetchLoader); the compute stream waits for it at the next step.
  bool prefetch_to_gpu = false;
  // GPU decoding (DALI's "mixed" decoder, nvJPEG): the encoded files cross PCIe and the GPU
  // spends this long per sample decoding and augmenting them; sample_cpu then holds what is
  // left on the CPU (reading files, Huffman decoding of the hybrid path). Zero: decoded on the CPU.
  Seconds gpu_decode;
  std::int64_t encoded_sample_bytes = 0;  // one encoded sample as it crosses PCIe
};

// How the framework drives cuDNN for convolutions.
struct ConvolutionSettings {
  // torch.backends.cudnn.benchmark: on, cuDNN times every algorithm for each shape and keeps
  // the fastest; off (PyTorch's default), its heuristic picks one without timing.
  bool cudnn_benchmark = false;
  // Activations in channels-last (NHWC) order (model and inputs converted with
  // memory_format=torch.channels_last); PyTorch's default is NCHW.
  bool channels_last = false;
};
inline constexpr std::string_view kMemoryFormatNames[] = {"channels_first", "channels_last"};

// The dtype ddp all-reduces its gradient buckets in: fp32, the parameters' (PyTorch's default);
// fp16 or bf16 through a compression hook, as PyTorch's fp16_compress_hook and
// bf16_compress_hook run it (torch/distributed/algorithms/ddp_comm_hooks/default_hooks.py): each
// bucket cast down and divided by the world size before its all-reduce (half the bytes on the
// wire), and cast back into the fp32 bucket after.
enum class GradientDtype { fp32, fp16, bf16 };
inline constexpr std::string_view kGradientDtypeNames[] = {"fp32", "fp16", "bf16"};
inline std::string_view name_of(GradientDtype value) {
  return enum_name(kGradientDtypeNames, value);
}

enum class TrainingLoop { python, libtorch };
inline constexpr std::string_view kTrainingLoopNames[] = {"python", "libtorch"};
inline std::string_view name_of(TrainingLoop value) {
  return enum_name(kTrainingLoopNames, value);
}

// How the learning rate follows the batch (the scenario states it; the runtime uses it): from
// `base` at `base_batch`, scaled linearly (Goyal et al. 2017), by the square root (Krizhevsky
// 2014; usual for Adam) or not at all, after a linear warm-up of `warmup_steps`.
enum class LearningRateScaling { none, linear, sqrt };
inline constexpr std::string_view kLearningRateScalingNames[] = {"none", "linear", "sqrt"};
inline std::string_view name_of(LearningRateScaling value) {
  return enum_name(kLearningRateScalingNames, value);
}
struct LearningRateSpec {
  double base = 0;  // 0: the optimizer's default (SGD 0.01, Adam 0.001)
  std::int64_t base_batch = 0;
  LearningRateScaling scaling = LearningRateScaling::none;
  std::int64_t warmup_steps = 0;
};
// The rate at a global batch (after warm-up), `fallback` standing for an unset base.
double learning_rate_at(const LearningRateSpec& rule, std::int64_t global_batch, double fallback);

// DistributedDataParallel's own settings (training.ddp), with PyTorch's defaults.
struct DdpSpec {
  // The gradient buckets (bucket_cap_mb 25; the first bucket 1 MiB,
  // dist._DEFAULT_FIRST_BUCKET_BYTES).
  Bytes bucket_cap = Bytes(25 * kMiB);
  Bytes first_bucket_cap = Bytes(1 * kMiB);
  // The gradients are views into the buckets (gradient_as_bucket_view=True): no copy back from
  // the buckets after the all-reduces, and the buckets take no memory beside the gradients.
  // False (PyTorch's default): both.
  bool gradient_as_bucket_view = false;
  // Before the forward of each step (the first after a synchronised backward) rank 0's buffers
  // (batch-norm statistics) are broadcast to every rank, as broadcast_buffers=True, the
  // default, does; false: no broadcast.
  bool broadcast_buffers = true;
  // find_unused_parameters=True (reducer.cpp): each gradient hook marks its parameter used in a
  // host-side map, the end of backward all-reduces that map (an int32 a parameter tensor) after
  // the last bucket and the optimizer waits for it, and the buckets keep the assignment made at
  // construction in registration order (should_rebuild_buckets: never rebuilt in the gradients'
  // order with it). False: PyTorch's default.
  bool find_unused_parameters = false;
  // static_graph=True: the reducer learns the graph in the first step, then neither searches for
  // unused parameters nor all-reduces their map, and rebuilds its buckets in the gradients'
  // order (reducer.h: dynamic_graph_find_unused() and should_rebuild_buckets()); the steady
  // state is then the default's. The first step's single bucket is not modelled.
  bool static_graph = false;
  // Whether every step searches for unused parameters and all-reduces their map (reducer.h,
  // dynamic_graph_find_unused()).
  bool searches_unused_parameters() const { return find_unused_parameters && !static_graph; }
};

// Which activations backward recomputes instead of keeping (torch.utils.checkpoint around each
// block, as apply_activation_checkpointing wraps transformer blocks): none, or every block of the
// model (transformer and residual blocks), which then keeps only its input.
enum class ActivationCheckpointing { none, blocks };
inline constexpr std::string_view kActivationCheckpointingNames[] = {"none", "blocks"};
inline std::string_view name_of(ActivationCheckpointing value) {
  return enum_name(kActivationCheckpointingNames, value);
}

// What FSDP wraps as its units, each all-gathered and reduce-scattered on its own: every block
// of the model (a transformer block, a residual block; the layers outside blocks stay in the
// root unit, as transformer_auto_wrap_policy leaves the embeddings and head), every layer with
// parameters, or the whole model as one unit.
enum class FsdpWrap { block, layer, model };
inline constexpr std::string_view kFsdpWrapNames[] = {"block", "layer", "model"};
inline std::string_view name_of(FsdpWrap value) {
  return enum_name(kFsdpWrapNames, value);
}
// When a unit's all-gather for backward is issued: before this unit's gradients are computed
// (BACKWARD_PRE, the default), after them (BACKWARD_POST), or when the unit's backward starts.
enum class FsdpBackwardPrefetch { pre, post, none };
inline constexpr std::string_view kFsdpBackwardPrefetchNames[] = {"pre", "post", "none"};
inline std::string_view name_of(FsdpBackwardPrefetch value) {
  return enum_name(kFsdpBackwardPrefetchNames, value);
}

// PyTorch FullyShardedDataParallel's settings (training.fsdp), used by zero2 and fsdp, with its
// defaults.
struct FsdpSpec {
  FsdpWrap wrap = FsdpWrap::block;
  FsdpBackwardPrefetch backward_prefetch = FsdpBackwardPrefetch::pre;
  // Issue the next unit's all-gather before this unit's forward (forward_prefetch=True).
  bool forward_prefetch = false;
  // At most two all-gathers in flight: the third waits until the unit two back is freed
  // (limit_all_gathers=True).
  bool limit_all_gathers = true;
  // fsdp: free each unit's gathered parameters after its forward and gather them again for
  // backward (FULL_SHARD); false keeps them to backward (SHARD_GRAD_OP, which zero2 is).
  bool reshard_after_forward = true;
  // Gradients reduce-scattered in fp32 (MixedPrecision's reduce_dtype=torch.float32, as
  // torchtitan runs it); false: in the parameters' compute dtype, FSDP's default.
  bool reduce_in_fp32 = false;
  // CPUOffload(offload_params=True): parameter and gradient shards and the optimizer state in
  // host memory; each gather first copies the shard to the GPU, each reduced gradient shard is
  // copied back, and the optimizer steps on the CPU.
  bool cpu_offload = false;
};

struct TrainingSpec {
  Strategy strategy = Strategy::single;
  Optimizer optimizer = Optimizer::sgd;
  OptimizerImplementation optimizer_implementation = OptimizerImplementation::automatic;
  TrainingPrecision precision = TrainingPrecision::fp32;
  Framework framework = Framework::pytorch2;
  int epochs = 1;
  bool drop_last = false;
  bool sync_every_step = true;  // the loop reads the loss each step (loss.item())
  // A synchronous step of several GPUs runs at the pace of the slowest of them (the profile's
  // gpu.speed_spread); false: every GPU at the catalogue's speed, for comparison.
  bool wait_for_slowest_gpu = true;
  // ddp's all-reduces run beside the backward pass on their own stream, their kernels holding
  // one SM per NCCL channel; false: compute keeps every SM, for comparison.
  bool nccl_sm_contention = true;
  // ddp's all-reduces also read and write the GPU's memory while they run, and the
  // memory-bound kernels beside them get the rest of its bandwidth; false: all of it.
  bool nccl_memory_contention = true;
  // The main threads and loader workers of a node's ranks share its host.cores; false: each
  // has a core of its own, for comparison.
  bool share_cpu_cores = true;
  // ddp: micro-batches per optimizer step; gradients are all-reduced on the last only.
  int gradient_accumulation = 1;
  // The dtype ddp all-reduces its buckets in (see GradientDtype).
  GradientDtype gradient_dtype = GradientDtype::fp32;
  // How collectives are simulated: as flows on the network (exact contention) or by their
  // analytic alpha-beta cost (fast).
  bool analytic_collectives = false;
  // Which all-reduce algorithm across nodes, as NCCL_ALGO forces it: auto lets the tuner pick.
  CollectiveAlgorithm collective_algorithm = CollectiveAlgorithm::automatic;
  ConvolutionSettings convolution;
  ActivationCheckpointing activation_checkpointing = ActivationCheckpointing::none;
  // The settings of each strategy, read whatever the strategy (a scenario can be switched
  // between strategies with --set) and used by their own.
  DdpSpec ddp;
  FsdpSpec fsdp;
  // Who drives the step: a Python training loop (PyTorch eager, what users run) or a C++ one on
  // LibTorch (epochcast-run, whose measurements say so); the profile's host costs for it.
  TrainingLoop loop = TrainingLoop::python;
  // Across nodes, simulate every rank even where node 0 could stand for identical nodes (slower;
  // the same answer there). Asymmetric fabrics are simulated so whatever this says.
  bool every_rank = false;
  LearningRateSpec learning_rate;
};

// Where a figure comes from, said wherever a prediction uses it.
enum class FigureSource { measured, calibrated, assumed };
inline constexpr std::string_view kFigureSourceNames[] = {"measured", "calibrated", "assumed"};
inline std::string_view name_of(FigureSource value) {
  return enum_name(kFigureSourceNames, value);
}

// What training has to reach: a metric on the validation set (or the training loss) and its
// value. Accuracy is reached from below, a loss from above.
enum class TargetMetric { validation_accuracy, validation_loss, training_loss };
inline constexpr std::string_view kTargetMetricNames[] = {"validation_accuracy", "validation_loss",
                                                          "training_loss"};
inline std::string_view name_of(TargetMetric value) {
  return enum_name(kTargetMetricNames, value);
}
struct TargetSpec {
  TargetMetric metric = TargetMetric::validation_accuracy;
  double value = 0;
};

struct EfficiencyFigure {
  double value = 0;
  double relative_sd = 0;  // one standard deviation, relative; 0: taken as exact
  FigureSource source = FigureSource::assumed;
};
// The statistics of reaching the target (McCandlish, Kaplan, Amodei et al., "An Empirical Model
// of Large-Batch Training", 2018, eq. 2.11): S(B) = S_min (1 + B_noise / B) optimizer steps at
// batch B, E(B) = E_min (1 + B / B_noise) samples, E_min = S_min x B_noise.
struct StatisticalEfficiencySpec {
  EfficiencyFigure noise_scale;  // B_noise, in samples
  EfficiencyFigure min_steps;    // S_min (given as min_epochs, converted with the data set)
  bool min_given_as_epochs = false;
};

// The optimizer implementation a training runs: the scenario's, or its framework's default
// (PyTorch 1.x: torch.optim's per-tensor loop; PyTorch 2.x: foreach).
inline OptimizerImplementation resolved_optimizer_implementation(const TrainingSpec& training) {
  if (training.optimizer_implementation != OptimizerImplementation::automatic) {
    return training.optimizer_implementation;
  }
  return training.framework == Framework::pytorch1 ? OptimizerImplementation::for_loop
                                                   : OptimizerImplementation::foreach;
}
inline constexpr std::string_view kCollectiveFidelityNames[] = {"flows", "analytic"};

// Other jobs on the same machine (a shared system): the share of each GPU's SMs and memory
// bandwidth, and of the host CPU's time, that this job gets. Other jobs' kernels occupy the
// rest of the SMs, so a small batch already saturates this job's share; their threads slow
// dispatch and loading alike. Memory capacity is not shared out (other jobs' memory is not
// modelled).
struct ContentionSpec {
  double gpu_share = 1.0;
  double cpu_share = 1.0;

  bool shared() const { return gpu_share < 1.0 || cpu_share < 1.0; }
};

// A cluster that is not uniform (`stragglers:` and `faults:`): GPUs or nodes slower than their
// peers, per-step jitter, network links below their rate or down. Each makes the cluster
// asymmetric, so a point it touches is simulated with every rank (the mirror would hide it).
struct SlowGpu {
  int gpu = 0;       // global rank
  double speed = 1;  // of its peers' speed, (0, 1]
};
struct SlowNode {
  int node = 0;
  double speed = 1;
};
// Each iteration, every GPU's compute runs at a speed drawn from a normal distribution with mean
// 1 and this coefficient of variation (clamped to [0.25, 1.75]); `steps` distinct draws per GPU
// (from `seed`) repeat in turn, so the epoch stays exactly simulable.
struct StepJitter {
  double spread = 0;
  std::uint64_t seed = 1;
  int steps = 16;
};
struct LinkFault {
  int node = -1, nic = -1;   // a node's NIC link to its leaf, or
  int leaf = -1;             // a leaf's uplink to the spine
  double rate_fraction = 1;  // of its rate (the YAML key `bandwidth`); 0: down, routed around
};
struct ClusterConditions {
  std::vector<SlowGpu> slow_gpus;
  std::vector<SlowNode> slow_nodes;
  StepJitter jitter;
  std::vector<LinkFault> links;
  SourceMark faults_mark;  // where `faults:` was given, for errors found when it is applied
  bool any() const {
    return !slow_gpus.empty() || !slow_nodes.empty() || jitter.spread > 0 || !links.empty();
  }
};

struct SweepSpec {
  std::vector<int> gpus;
  std::vector<std::int64_t> batch;
  BatchMeaning batch_is = BatchMeaning::global;
};

struct ScenarioSpec {
  std::string name;
  std::string description;
  std::string source_file;
  ModelSpec model;
  ModelAnalysis analysis;  // fp32 analysis of the model, checked against the data set
  MachineSpec machine;
  HardwareProfile profile;
  DatasetSpec dataset;
  LoaderSpec loader;
  TrainingSpec training;
  ContentionSpec contention;
  SweepSpec sweep;
  ClusterConditions conditions;
  // Time to a target (optional; both or neither).
  std::optional<TargetSpec> target;
  std::optional<StatisticalEfficiencySpec> statistical_efficiency;
};

// One point of the sweep.
struct SweepPoint {
  int gpus = 1;
  std::int64_t global_batch = 0;
  std::int64_t per_gpu_batch = 0;  // the largest share when the batch does not divide evenly
};

std::vector<SweepPoint> expand_sweep(const ScenarioSpec& scenario);

// Why `point` cannot run in `scenario` (more GPUs than the machine has, dp across nodes, a batch
// larger than the data set or smaller than the GPU count, a per-GPU batch that is not the global
// batch's largest share, ...), in words; empty when it can. The loader applies the same rules to
// the sweep; a point that comes from elsewhere (a measurement file) is checked with this.
std::string point_problem(const ScenarioSpec& scenario, const SweepPoint& point);

// Runs the scenario with `profile` instead of its machine's: a calibrated profile's measured
// input-pipeline costs replace the scenario's loader.sample_cpu_us and batch_cpu_us too.
void apply_profile(ScenarioSpec& scenario, HardwareProfile profile);
// The host costs the scenario's training loop pays: a C++ loop on LibTorch its own where the
// profile measured them (host_libtorch), else the profile's host figures.
const HostCosts& loop_host_costs(const ScenarioSpec& scenario);
// Bytes of one sample as the loader hands it over: float32 elements, one byte each when the GPU
// normalises (uint8), eight for token ids (int64, whatever integer type the model declares).
std::int64_t loader_sample_bytes(const ScenarioSpec& scenario);
// The loader's CPU time per sample under `profile`'s measured input-pipeline cost (nullopt when
// the profile has none): its per-sample figure plus its per-byte one for this data set.
std::optional<Seconds> profile_sample_cpu(const HardwareProfile& profile,
                                          const ScenarioSpec& scenario);
// The scenario's loader costs (per sample, per batch) as `profile` measured them, where it did.
void apply_input_costs(const HardwareProfile& profile, ScenarioSpec& scenario);
// The profile precision whose efficiencies a training precision runs at.
std::string_view efficiency_precision(TrainingPrecision precision);

// A sentence for every output when the scenario's profile was calibrated on another device than
// its machine's GPU (a prediction for a GPU one does not have); empty otherwise.
std::string cross_device_note(const ScenarioSpec& scenario);

// `overrides` (from --set PATH=VALUE) replace values in the file before it is checked, so they
// get the same checks and errors that name them.
ScenarioSpec load_scenario(const std::filesystem::path& file,
                           const std::vector<yaml::Override>& overrides = {});
ScenarioSpec load_scenario_from_string(const std::string& text, const std::string& name,
                                       const std::filesystem::path& relative_to = ".",
                                       const std::vector<yaml::Override>& overrides = {});

}  // namespace epochcast

// Reads scenario files and everything they refer to, checking them against each other.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/spec/data_paths.h"
#include "core/spec/file_kind.h"
#include "core/spec/limits.h"
#include "core/spec/scenario_spec.h"
#include "core/yaml/strict_yaml.h"

namespace epochcast {

std::vector<SweepPoint> expand_sweep(const ScenarioSpec& scenario) {
  std::vector<SweepPoint> points;
  for (int gpus : scenario.sweep.gpus) {
    for (std::int64_t batch : scenario.sweep.batch) {
      SweepPoint point;
      point.gpus = gpus;
      if (scenario.sweep.batch_is == BatchMeaning::global) {
        point.global_batch = batch;
        point.per_gpu_batch = (batch + gpus - 1) / gpus;
      } else {
        point.global_batch = batch * gpus;
        point.per_gpu_batch = batch;
      }
      points.push_back(point);
    }
  }
  return points;
}

namespace {

std::string gpu_count_problem(const ScenarioSpec& s, int gpus);
std::string batch_problem(const ScenarioSpec& s, int gpus, std::int64_t global);

}  // namespace

std::string point_problem(const ScenarioSpec& scenario, const SweepPoint& point) {
  if (std::string problem = gpu_count_problem(scenario, point.gpus); !problem.empty())
    return problem;
  if (point.global_batch < 1 || point.global_batch > limits::kMaxSamples) {
    return fmt::format("expected a global batch from 1 to {}, got {}", limits::kMaxSamples,
                       point.global_batch);
  }
  if (std::string problem = batch_problem(scenario, point.gpus, point.global_batch);
      !problem.empty())
    return problem;
  const std::int64_t share = (point.global_batch + point.gpus - 1) / point.gpus;
  if (point.per_gpu_batch != share) {
    return fmt::format("a global batch of {} over {} GPUs gives {} per GPU, not {}",
                       point.global_batch, point.gpus, share, point.per_gpu_batch);
  }
  return "";
}

namespace {

template <typename Enum, std::size_t N>
Enum read_enum(const yaml::Node& node, const std::string_view (&names)[N]) {
  return static_cast<Enum>(node.as_choice(names));
}

ModelSpec read_model_reference(const yaml::Node& node, const std::filesystem::path& relative_to) {
  std::filesystem::path file = resolve_data_file(node.as_string(), relative_to, "scenarios/models",
                                                 node.mark(), node.path());
  return load_model(file);
}

// `hardware:` names a machine, or gives {base: machine, profile: profile, nodes: N} to run the
// machine with a calibrated profile instead of its own, or as a cluster of N nodes.
void read_hardware(const yaml::Node& node, const std::filesystem::path& relative_to,
                   ScenarioSpec& s) {
  std::optional<yaml::MapReader> map;
  if (node.is_map())
    map.emplace(node, std::initializer_list<std::string_view>{"base", "profile", "nodes"});
  const yaml::Node base = map ? map->required("base") : node;
  const std::optional<yaml::Node> profile = map ? map->optional("profile") : std::nullopt;
  std::filesystem::path file =
      resolve_data_file(base.as_string(), relative_to, "topologies", base.mark(), base.path());
  s.machine = load_machine(file, bundled_gpu_catalogue());
  if (map) {
    if (auto nodes = map->optional("nodes")) {
      s.machine.nodes = nodes->as_int32_in(1, limits::kMaxNodes);
      if (s.machine.nodes > 1 && !s.machine.topology.network) {
        nodes->fail(fmt::format("the machine '{}' has no network section to join several nodes",
                                s.machine.name));
      }
    }
  }
  if (profile) {
    std::filesystem::path profile_file = resolve_data_file(
        profile->as_string(), relative_to, "topologies/profiles", profile->mark(), profile->path());
    s.profile = load_profile(profile_file);
  } else {
    s.profile = load_profile(s.machine.profile_file);
  }
}

constexpr std::string_view kLoaderKeys[] = {
    "source",       "workers",          "prefetch_factor", "pin_memory",    "sample_cpu_us",
    "batch_cpu_us", "normalize_on_gpu", "prefetch_to_gpu", "gpu_decode_us", "encoded_sample_bytes"};

LoaderSpec read_loader(const yaml::Node& node) {
  yaml::MapReader map(node, kLoaderKeys);
  LoaderSpec loader;
  if (auto source = map.optional("source")) {
    loader.source = static_cast<LoaderSource>(source->as_choice(kLoaderSourceNames));
  }
  if (loader.source == LoaderSource::synthetic_gpu) {
    // Every other key describes a host loader.
    for (std::string_view key : kLoaderKeys) {
      if (key != "source" && map.has(key)) {
        map.required(key).fail(fmt::format(
            "means nothing with source synthetic_gpu: the batches are made once on the GPU "
            "(no loader, no copy); leave {} out, or use source: host",
            key));
      }
    }
    return loader;
  }
  if (auto w = map.optional("workers")) {
    loader.workers = w->as_int32_in(0, limits::kMaxLoaderWorkers);
  }
  if (auto p = map.optional("prefetch_factor")) {
    loader.prefetch_factor = p->as_int32_in(1, limits::kMaxPrefetchFactor);
  }
  if (loader.workers * loader.prefetch_factor > limits::kMaxBatchesInFlight) {
    (map.has("prefetch_factor") ? map.required("prefetch_factor") : map.required("workers"))
        .fail(fmt::format(
            "{} workers x prefetch factor {} keep {} batches in flight; epochcast "
            "models at most {} (PyTorch's default is 2 per worker)",
            loader.workers, loader.prefetch_factor,
            yaml::readable_integer(std::int64_t{loader.workers} * loader.prefetch_factor),
            yaml::readable_integer(limits::kMaxBatchesInFlight)));
  }
  if (auto pin = map.optional("pin_memory")) loader.pin_memory = pin->as_bool();
  if (auto cost = map.optional("sample_cpu_us")) {
    loader.sample_cpu = microseconds(cost->as_number_in(0, 1e9));
  }
  if (auto cost = map.optional("batch_cpu_us")) {
    loader.batch_cpu = microseconds(cost->as_number_in(0, 1e9));
  }
  if (auto normalize = map.optional("normalize_on_gpu")) {
    loader.normalize_on_gpu = normalize->as_bool();
  }
  if (auto prefetch = map.optional("prefetch_to_gpu")) loader.prefetch_to_gpu = prefetch->as_bool();
  if (auto decode = map.optional("gpu_decode_us")) {
    loader.gpu_decode = microseconds(decode->as_number_in(0, 1e6));
  }
  if (auto encoded = map.optional("encoded_sample_bytes")) {
    loader.encoded_sample_bytes = encoded->as_int_in(1, limits::kMaxEncodedSampleBytes);
  }
  const bool decodes_on_gpu = loader.gpu_decode.value() > 0;
  if (decodes_on_gpu && !map.has("encoded_sample_bytes")) {
    map.required("gpu_decode_us")
        .fail(
            "decoding on the GPU copies the encoded files: give loader.encoded_sample_bytes "
            "too (ImageNet's training JPEGs average about 110 KB: 140 GB over 1.28 M files)");
  }
  if (!decodes_on_gpu && map.has("encoded_sample_bytes")) {
    map.required("encoded_sample_bytes")
        .fail(
            "encoded_sample_bytes describes GPU decoding: set loader.gpu_decode_us (> 0) too, "
            "or leave it out");
  }
  if (decodes_on_gpu && loader.normalize_on_gpu) {
    map.required("normalize_on_gpu")
        .fail(
            "with gpu_decode_us the GPU decoding stage normalises (DALI's "
            "crop_mirror_normalize): count that in gpu_decode_us and leave normalize_on_gpu out");
  }
  return loader;
}

DatasetSpec read_dataset(const yaml::Node& node, const ModelSpec& model) {
  yaml::MapReader map(
      node, {"name", "train_samples", "validation_samples", "sample_shape", "classes", "files"});
  DatasetSpec data;
  data.name = map.required("name").as_string();
  data.train_samples = map.required("train_samples").as_int_in(1, limits::kMaxSamples);
  if (auto v = map.optional("validation_samples"))
    data.validation_samples = v->as_int_in(0, limits::kMaxSamples);
  data.sample_shape = model.input_shape;
  if (auto shape = map.optional("sample_shape")) {
    data.sample_shape.dims = shape->as_int_list(1);
    if (data.sample_shape != model.input_shape) {
      shape->fail(fmt::format("the samples are {} but the model '{}' takes {}",
                              data.sample_shape.str(), model.name, model.input_shape.str()));
    }
  }
  data.classes = map.required("classes").as_int_at_least(2);
  if (auto files = map.optional("files")) data.files = files->as_string();
  return data;
}

ContentionSpec read_contention(const yaml::Node& node) {
  yaml::MapReader map(node, {"gpu_share", "cpu_share"});
  ContentionSpec contention;
  auto share = [](const yaml::Node& n) { return n.as_number_in(limits::kMinShare, 1); };
  if (auto g = map.optional("gpu_share")) contention.gpu_share = share(*g);
  if (auto c = map.optional("cpu_share")) contention.cpu_share = share(*c);
  return contention;
}

// `stragglers:` and `faults:`, checked against the machine's ranks, nodes, NICs and leaves.
void read_stragglers(const yaml::Node& node, const MachineSpec& machine, ClusterConditions& out) {
  yaml::MapReader map(node, {"gpus", "nodes", "jitter"});
  auto speed = [](const yaml::MapReader& entry) {
    return entry.required("speed").as_number_in(0.01, 1);
  };
  // Each GPU or node once: two entries for one would multiply without saying so.
  if (auto gpus = map.optional("gpus")) {
    for (const yaml::Node& item : gpus->items()) {
      yaml::MapReader entry(item, {"gpu", "speed"});
      const int gpu = entry.required("gpu").as_int32_in(0, machine.total_gpus() - 1);
      for (const SlowGpu& earlier : out.slow_gpus) {
        if (earlier.gpu == gpu)
          item.fail(fmt::format("GPU {} is listed twice: give it one speed", gpu));
      }
      out.slow_gpus.push_back({gpu, speed(entry)});
    }
  }
  if (auto nodes = map.optional("nodes")) {
    for (const yaml::Node& item : nodes->items()) {
      yaml::MapReader entry(item, {"node", "speed"});
      const int index = entry.required("node").as_int32_in(0, machine.nodes - 1);
      for (const SlowNode& earlier : out.slow_nodes) {
        if (earlier.node == index)
          item.fail(fmt::format("node {} is listed twice: give it one speed", index));
      }
      out.slow_nodes.push_back({index, speed(entry)});
    }
  }
  if (auto jitter = map.optional("jitter")) {
    yaml::MapReader j(*jitter, {"spread", "seed", "steps"});
    out.jitter.spread = j.required("spread").as_number_in(0, 0.5);
    if (auto seed = j.optional("seed"))
      out.jitter.seed = static_cast<std::uint64_t>(seed->as_int_in(0, std::int64_t{1} << 62));
    if (auto steps = j.optional("steps")) out.jitter.steps = steps->as_int32_in(2, 256);
  }
}

void read_faults(const yaml::Node& node, const MachineSpec& machine, ClusterConditions& out) {
  yaml::MapReader map(node, {"links"});
  out.faults_mark = node.mark();
  const std::optional<NetworkTopology>& network = machine.topology.network;
  for (const yaml::Node& item : map.required("links").items()) {
    yaml::MapReader entry(item, {"node", "nic", "leaf", "bandwidth", "down"});
    if (!network || machine.nodes < 2) {
      item.fail("the machine has one node, or no network between nodes: no link of it can fail");
    }
    LinkFault fault;
    if (entry.has("leaf")) {
      if (entry.has("node") || entry.has("nic")) {
        item.fail(
            "a link is either a node's NIC ({node, nic}) or a leaf's uplink ({leaf}), not both");
      }
      const int per_leaf = network->nodes_per_leaf > 0 ? network->nodes_per_leaf : machine.nodes;
      const int leaves = (machine.nodes + per_leaf - 1) / per_leaf;
      if (leaves < 2) {
        item.fail(
            fmt::format("the machine's {} nodes hang off one switch: there is no leaf uplink "
                        "(network.nodes_per_leaf splits them into leaves)",
                        machine.nodes));
      }
      fault.leaf = entry.required("leaf").as_int32_in(0, leaves - 1);
    } else {
      fault.node = entry.required("node").as_int32_in(0, machine.nodes - 1);
      fault.nic = entry.required("nic").as_int32_in(0, network->nics_per_node - 1);
    }
    const bool down = entry.has("down") && entry.required("down").as_bool();
    if (down == entry.has("bandwidth")) {
      item.fail("give the link either a `bandwidth` (a fraction of its rate) or `down: true`");
    }
    fault.rate_fraction = down ? 0 : entry.required("bandwidth").as_number_in(0.01, 1);
    for (const LinkFault& earlier : out.links) {
      if (earlier.node == fault.node && earlier.nic == fault.nic && earlier.leaf == fault.leaf)
        item.fail("this link is listed twice: give it one bandwidth, or down");
    }
    out.links.push_back(fault);
  }
}

LearningRateSpec read_learning_rate(const yaml::Node& node) {
  yaml::MapReader map(node, {"base", "base_batch", "scaling", "warmup_steps"});
  LearningRateSpec rate;
  if (auto b = map.optional("base")) rate.base = b->as_number_in(1e-9, 100);
  if (auto s = map.optional("scaling")) {
    rate.scaling = static_cast<LearningRateScaling>(s->as_choice(kLearningRateScalingNames));
  }
  if (auto b = map.optional("base_batch")) {
    rate.base_batch = b->as_int_in(1, limits::kMaxSamples);
  } else if (rate.scaling != LearningRateScaling::none) {
    map.required("base_batch");  // the batch the base rate is for: scaling needs it
  }
  if (auto w = map.optional("warmup_steps")) rate.warmup_steps = w->as_int_in(0, 1'000'000'000);
  return rate;
}

// `{value, source, relative_sd}` of a statistical-efficiency figure, within [low, high].
EfficiencyFigure read_efficiency_figure(const yaml::Node& node, double low, double high) {
  yaml::MapReader map(node, {"value", "source", "relative_sd"});
  EfficiencyFigure figure;
  figure.value = map.required("value").as_number_in(low, high);
  figure.source = static_cast<FigureSource>(map.required("source").as_choice(kFigureSourceNames));
  if (auto sd = map.optional("relative_sd")) figure.relative_sd = sd->as_number_in(0, 10);
  return figure;
}

TargetSpec read_target(const yaml::Node& node) {
  yaml::MapReader map(node, {"metric", "value"});
  TargetSpec target;
  target.metric = static_cast<TargetMetric>(map.required("metric").as_choice(kTargetMetricNames));
  yaml::Node value = map.required("value");
  target.value = target.metric == TargetMetric::validation_accuracy
                     ? value.as_number_in(1e-6, 1)
                     : value.as_number_in(1e-12, 1e6);
  return target;
}

StatisticalEfficiencySpec read_statistical_efficiency(const yaml::Node& node,
                                                      const DatasetSpec& dataset) {
  yaml::MapReader map(node, {"noise_scale", "min_steps", "min_epochs"});
  StatisticalEfficiencySpec out;
  out.noise_scale = read_efficiency_figure(map.required("noise_scale"), 1e-3, 1e12);
  std::optional<yaml::Node> steps = map.optional("min_steps");
  std::optional<yaml::Node> epochs = map.optional("min_epochs");
  if (steps.has_value() == epochs.has_value()) {
    map.node().fail(
        "give the minimum steps to the target (min_steps) or the minimum epochs (min_epochs), "
        "one of them");
  }
  if (steps) {
    out.min_steps = read_efficiency_figure(*steps, 1e-3, 1e15);
  } else {
    // E_min = S_min x B_noise samples, min_epochs x the training set.
    out.min_steps = read_efficiency_figure(*epochs, 1e-9, 1e9);
    out.min_steps.value *= static_cast<double>(dataset.train_samples) / out.noise_scale.value;
    out.min_given_as_epochs = true;
  }
  return out;
}

DdpSpec read_ddp(const yaml::Node& node) {
  yaml::MapReader map(node, {"bucket_cap_mib", "first_bucket_mib", "gradient_as_bucket_view",
                             "broadcast_buffers", "find_unused_parameters", "static_graph"});
  auto mebibytes = [](const yaml::Node& n) {
    double mib = n.as_number_in(1.0 / kMiB, 1e6);
    return Bytes(static_cast<std::int64_t>(mib * static_cast<double>(kMiB)));
  };
  DdpSpec ddp;
  if (auto cap = map.optional("bucket_cap_mib")) ddp.bucket_cap = mebibytes(*cap);
  if (auto first = map.optional("first_bucket_mib")) ddp.first_bucket_cap = mebibytes(*first);
  if (auto view = map.optional("gradient_as_bucket_view"))
    ddp.gradient_as_bucket_view = view->as_bool();
  if (auto sync = map.optional("broadcast_buffers")) ddp.broadcast_buffers = sync->as_bool();
  if (auto search = map.optional("find_unused_parameters"))
    ddp.find_unused_parameters = search->as_bool();
  if (auto fixed = map.optional("static_graph")) ddp.static_graph = fixed->as_bool();
  return ddp;
}

constexpr std::string_view kFsdpKeys[] = {"wrap",
                                          "backward_prefetch",
                                          "forward_prefetch",
                                          "limit_all_gathers",
                                          "reshard_after_forward",
                                          "reduce_dtype",
                                          "cpu_offload"};

FsdpSpec read_fsdp(const yaml::Node& node) {
  yaml::MapReader map(node, kFsdpKeys);
  FsdpSpec fsdp;
  if (auto wrap = map.optional("wrap"))
    fsdp.wrap = static_cast<FsdpWrap>(wrap->as_choice(kFsdpWrapNames));
  if (auto prefetch = map.optional("backward_prefetch")) {
    fsdp.backward_prefetch =
        static_cast<FsdpBackwardPrefetch>(prefetch->as_choice(kFsdpBackwardPrefetchNames));
  }
  if (auto prefetch = map.optional("forward_prefetch")) fsdp.forward_prefetch = prefetch->as_bool();
  if (auto limit = map.optional("limit_all_gathers")) fsdp.limit_all_gathers = limit->as_bool();
  if (auto reshard = map.optional("reshard_after_forward"))
    fsdp.reshard_after_forward = reshard->as_bool();
  if (auto reduce = map.optional("reduce_dtype")) {
    static constexpr std::string_view kReduceDtypes[] = {"param", "fp32"};
    fsdp.reduce_in_fp32 = reduce->as_choice(kReduceDtypes) == 1;
  }
  if (auto offload = map.optional("cpu_offload")) fsdp.cpu_offload = offload->as_bool();
  return fsdp;
}

constexpr std::string_view kTrainingKeys[] = {"strategy",
                                              "optimizer",
                                              "optimizer_implementation",
                                              "precision",
                                              "framework",
                                              "epochs",
                                              "drop_last",
                                              "sync_every_step",
                                              "gradient_accumulation",
                                              "gradient_dtype",
                                              "collectives",
                                              "collective_algorithm",
                                              "cudnn_benchmark",
                                              "memory_format",
                                              "wait_for_slowest_gpu",
                                              "nccl_sm_contention",
                                              "share_cpu_cores",
                                              "nccl_memory_contention",
                                              "ddp",
                                              "fsdp",
                                              "activation_checkpointing",
                                              "loop",
                                              "every_rank",
                                              "learning_rate"};

TrainingSpec read_training(const yaml::Node& node) {
  yaml::MapReader map(node, kTrainingKeys,
                      {{"bucket_cap_mib", "training.ddp.bucket_cap_mib"},
                       {"first_bucket_mib", "training.ddp.first_bucket_mib"},
                       {"gradient_as_bucket_view", "training.ddp.gradient_as_bucket_view"},
                       {"broadcast_buffers", "training.ddp.broadcast_buffers"}});
  TrainingSpec training;
  training.strategy = read_enum<Strategy>(map.required("strategy"), kStrategyNames);
  training.optimizer = read_enum<Optimizer>(map.required("optimizer"), kOptimizerNames);
  if (auto implementation = map.optional("optimizer_implementation")) {
    training.optimizer_implementation = static_cast<OptimizerImplementation>(
        implementation->as_choice(kOptimizerImplementationNames));
  }
  if (auto p = map.optional("precision")) {
    training.precision = read_enum<TrainingPrecision>(*p, kTrainingPrecisionNames);
  }
  if (auto e = map.optional("epochs")) {
    training.epochs = e->as_int32_in(1, limits::kMaxEpochs);
  }
  if (auto d = map.optional("drop_last")) training.drop_last = d->as_bool();
  if (auto f = map.optional("framework"))
    training.framework = read_enum<Framework>(*f, kFrameworkNames);
  if (auto sync = map.optional("sync_every_step")) training.sync_every_step = sync->as_bool();
  if (auto slowest = map.optional("wait_for_slowest_gpu")) {
    training.wait_for_slowest_gpu = slowest->as_bool();
  }
  if (auto memory = map.optional("nccl_memory_contention")) {
    training.nccl_memory_contention = memory->as_bool();
  }
  if (auto contention = map.optional("nccl_sm_contention")) {
    training.nccl_sm_contention = contention->as_bool();
  }
  if (auto cores = map.optional("share_cpu_cores")) training.share_cpu_cores = cores->as_bool();
  if (auto every = map.optional("every_rank")) training.every_rank = every->as_bool();
  if (auto rate = map.optional("learning_rate")) training.learning_rate = read_learning_rate(*rate);
  if (auto loop = map.optional("loop"))
    training.loop = static_cast<TrainingLoop>(loop->as_choice(kTrainingLoopNames));
  if (auto accumulate = map.optional("gradient_accumulation")) {
    training.gradient_accumulation = accumulate->as_int32_in(1, limits::kMaxGradientAccumulation);
    if (training.gradient_accumulation > 1 && !process_per_gpu(training.strategy)) {
      accumulate->fail(
          "gradient accumulation is modelled for a process per GPU (ddp, zero1, zero2, fsdp)");
    }
  }
  if (auto ddp = map.optional("ddp")) training.ddp = read_ddp(*ddp);
  if (auto fsdp = map.optional("fsdp")) training.fsdp = read_fsdp(*fsdp);
  if (auto checkpointing = map.optional("activation_checkpointing")) {
    training.activation_checkpointing = static_cast<ActivationCheckpointing>(
        checkpointing->as_choice(kActivationCheckpointingNames));
  }
  if (auto dtype = map.optional("gradient_dtype")) {
    training.gradient_dtype = static_cast<GradientDtype>(dtype->as_choice(kGradientDtypeNames));
    if (training.gradient_dtype != GradientDtype::fp32 && training.strategy != Strategy::ddp) {
      dtype->fail(
          "a compressed all-reduce is modelled for the ddp strategy (a DDP communication hook); "
          "use strategy: ddp, or leave gradient_dtype out");
    }
  }
  if (auto fidelity = map.optional("collectives")) {
    training.analytic_collectives = fidelity->as_choice(kCollectiveFidelityNames) == 1;
  }
  if (auto algorithm = map.optional("collective_algorithm")) {
    training.collective_algorithm =
        static_cast<CollectiveAlgorithm>(algorithm->as_choice(kCollectiveAlgorithmNames));
  }
  if (auto benchmark = map.optional("cudnn_benchmark")) {
    training.convolution.cudnn_benchmark = benchmark->as_bool();
  }
  if (auto format = map.optional("memory_format")) {
    training.convolution.channels_last = format->as_choice(kMemoryFormatNames) == 1;
  }
  return training;
}

SweepSpec read_sweep(const yaml::Node& node) {
  yaml::MapReader map(node, {"gpus", "batch", "batch_is"});
  SweepSpec sweep;
  yaml::Node gpus = map.required("gpus");
  for (std::int64_t g : gpus.as_int_list_in(1, limits::kMaxGpus))
    sweep.gpus.push_back(static_cast<int>(g));
  sweep.batch = map.required("batch").as_int_list_in(1, limits::kMaxSamples);
  // Every point is checked, simulated and reported: their count is bounded before any of that.
  const std::uint64_t points = static_cast<std::uint64_t>(sweep.gpus.size()) *
                               static_cast<std::uint64_t>(sweep.batch.size());
  if (points > static_cast<std::uint64_t>(limits::kMaxSweepPoints)) {
    node.fail(
        fmt::format("the sweep has {} points ({} GPU counts x {} batches), more than {}: "
                    "split it into several scenarios or runs",
                    yaml::readable_integer(static_cast<std::int64_t>(points)),
                    yaml::readable_integer(static_cast<std::int64_t>(sweep.gpus.size())),
                    yaml::readable_integer(static_cast<std::int64_t>(sweep.batch.size())),
                    yaml::readable_integer(limits::kMaxSweepPoints)));
  }
  // Mandatory: the two readings differ by a factor of the GPU count.
  sweep.batch_is = read_enum<BatchMeaning>(map.required("batch_is"), kBatchMeaningNames);
  return sweep;
}

std::string gpu_count_problem(const ScenarioSpec& s, int gpus) {
  if (gpus < 1) return fmt::format("expected at least 1 GPU, got {}", gpus);
  if (gpus > s.machine.total_gpus()) {
    return fmt::format("{} GPUs asked for, but the machine '{}' has {} ({} per node x {} nodes)",
                       gpus, s.machine.name, s.machine.total_gpus(), s.machine.gpus_per_node,
                       s.machine.nodes);
  }
  if (gpus > 1 && s.training.strategy == Strategy::single) {
    return fmt::format(
        "strategy 'single' runs on one GPU; use dp, ddp, zero1, zero2 or fsdp for {} GPUs", gpus);
  }
  if (s.training.strategy == Strategy::dp && gpus > s.machine.gpus_per_node) {
    return fmt::format(
        "dp (nn.DataParallel) runs in one process on one node: at most {} GPUs here; use ddp "
        "across nodes",
        s.machine.gpus_per_node);
  }
  if (process_per_gpu(s.training.strategy) && gpus > s.machine.gpus_per_node &&
      gpus % s.machine.gpus_per_node != 0) {
    return fmt::format("across nodes {} uses whole nodes: a multiple of {} GPUs",
                       name_of(s.training.strategy), s.machine.gpus_per_node);
  }
  return "";
}

std::string batch_problem(const ScenarioSpec& s, int gpus, std::int64_t global) {
  if (global > s.dataset.train_samples) {
    return fmt::format(
        "a global batch of {} ({} GPU{}) is larger than the data set ({} training samples)", global,
        gpus, gpus == 1 ? "" : "s", s.dataset.train_samples);
  }
  if (global < gpus) {
    return fmt::format("a global batch of {} cannot be split over {} GPUs", global, gpus);
  }
  return "";
}

// Cross-checks between the parts, each reported at the key a user would change.
void check_consistency(const ScenarioSpec& s, const yaml::MapReader& top) {
  const OutputClasses outputs = output_classes(s.analysis.output_shape);
  if (outputs.classes != s.dataset.classes) {
    const bool per_pixel = s.analysis.output_shape.rank() >= 3;
    top.required("dataset").fail(fmt::format(
        "the data set has {} classes but the model '{}' gives {} class scores {} (its output is "
        "{}: {})",
        s.dataset.classes, s.model.name, outputs.classes,
        per_pixel ? "per pixel" : (outputs.labels_per_sample > 1 ? "per token" : "per sample"),
        s.analysis.output_shape.str(),
        per_pixel ? "[classes, height, width], a label per pixel"
                  : "the last dimension holds the classes"));
  }
  if (s.loader.normalize_on_gpu && is_integer(s.analysis.input_dtype)) {
    yaml::MapReader loader(top.required("loader"), kLoaderKeys);
    loader.required("normalize_on_gpu")
        .fail(fmt::format("the model '{}' takes integer {} inputs (token ids): there is nothing "
                          "to normalise; leave normalize_on_gpu out",
                          s.model.name, name_of(s.analysis.input_dtype)));
  }
  if (s.loader.gpu_decode.value() > 0 && is_integer(s.analysis.input_dtype)) {
    yaml::MapReader loader(top.required("loader"), kLoaderKeys);
    loader.required("gpu_decode_us")
        .fail(fmt::format("the model '{}' takes integer {} inputs (token ids): GPU decoding is "
                          "for images; leave gpu_decode_us out",
                          s.model.name, name_of(s.analysis.input_dtype)));
  }
  const bool sharded =
      s.training.strategy == Strategy::zero2 || s.training.strategy == Strategy::fsdp;
  if (sharded && s.training.fsdp.cpu_offload && !s.machine.host.memory_bandwidth) {
    yaml::MapReader training(top.required("training"), kTrainingKeys);
    yaml::MapReader fsdp(training.required("fsdp"), kFsdpKeys);
    fsdp.required("cpu_offload")
        .fail(fmt::format(
            "the optimizer steps on the CPU, bound by host memory, and the machine '{}' gives no "
            "host.memory_bandwidth_gbps: add what STREAM Triad sustains on its host (about 3/4 of "
            "channels x MT/s x 8 bytes, all sockets) to {}",
            s.machine.name, s.machine.source_file));
  }
  yaml::MapReader sweep(top.required("sweep"), {"gpus", "batch", "batch_is"});
  std::vector<yaml::Node> gpu_nodes = sweep.required("gpus").items();
  std::vector<yaml::Node> batch_nodes = sweep.required("batch").items();
  for (const yaml::Node& g : gpu_nodes) {
    const int gpus = static_cast<int>(g.as_int());
    if (std::string problem = gpu_count_problem(s, gpus); !problem.empty()) g.fail(problem);
    for (const yaml::Node& b : batch_nodes) {
      std::int64_t batch = b.as_int();
      std::int64_t global = s.sweep.batch_is == BatchMeaning::global ? batch : batch * gpus;
      if (std::string problem = batch_problem(s, gpus, global); !problem.empty()) b.fail(problem);
    }
  }
}

ScenarioSpec read_scenario(const yaml::Document& document,
                           const std::filesystem::path& relative_to) {
  yaml::Node root = document.root();
  expect_file_kind(root, FileKind::scenario);
  yaml::MapReader top(
      root, {"kind", "name", "description", "model", "hardware", "dataset", "loader", "training",
             "contention", "sweep", "stragglers", "faults", "target", "statistical_efficiency"});
  ScenarioSpec s;
  s.source_file = document.file_name();
  s.name = top.required("name").as_string();
  if (auto d = top.optional("description")) s.description = d->as_string();
  // Plain values first, so simple mistakes are reported before any referenced file is read.
  s.training = read_training(top.required("training"));
  if (auto loader = top.optional("loader")) s.loader = read_loader(*loader);
  if (auto contention = top.optional("contention")) s.contention = read_contention(*contention);
  s.sweep = read_sweep(top.required("sweep"));
  s.model = read_model_reference(top.required("model"), relative_to);
  s.analysis = analyze_model(s.model);
  read_hardware(top.required("hardware"), relative_to, s);
  if (auto stragglers = top.optional("stragglers"))
    read_stragglers(*stragglers, s.machine, s.conditions);
  if (auto faults = top.optional("faults")) read_faults(*faults, s.machine, s.conditions);
  resolve_for_device(s.profile, s.machine.gpu, efficiency_precision(s.training.precision));
  s.dataset = read_dataset(top.required("dataset"), s.model);
  if (auto target = top.optional("target")) s.target = read_target(*target);
  if (auto efficiency = top.optional("statistical_efficiency")) {
    s.statistical_efficiency = read_statistical_efficiency(*efficiency, s.dataset);
  }
  if (s.target.has_value() != s.statistical_efficiency.has_value()) {
    top.required(s.target ? "statistical_efficiency" : "target");
  }
  // A calibrated profile knows what the measured input pipeline costs per sample (and byte, and
  // batch).
  apply_input_costs(s.profile, s);
  check_consistency(s, top);
  return s;
}

}  // namespace

double learning_rate_at(const LearningRateSpec& rule, std::int64_t global_batch, double fallback) {
  const double base = rule.base > 0 ? rule.base : fallback;
  if (rule.scaling == LearningRateScaling::none || rule.base_batch <= 0) return base;
  const double ratio = static_cast<double>(global_batch) / static_cast<double>(rule.base_batch);
  return rule.scaling == LearningRateScaling::linear ? base * ratio : base * std::sqrt(ratio);
}

ScenarioSpec load_scenario(const std::filesystem::path& file,
                           const std::vector<yaml::Override>& overrides) {
  yaml::Document document = yaml::Document::load_file(file);
  document.apply_overrides(overrides);
  return read_scenario(document, file.parent_path());
}

ScenarioSpec load_scenario_from_string(const std::string& text, const std::string& name,
                                       const std::filesystem::path& relative_to,
                                       const std::vector<yaml::Override>& overrides) {
  yaml::Document document = yaml::Document::load_string(text, name);
  document.apply_overrides(overrides);
  return read_scenario(document, relative_to);
}

}  // namespace epochcast

// Reads scenario files and everything they refer to, checking them against each other.
#include <algorithm>

#include <fmt/format.h>

#include "core/spec/data_paths.h"
#include "core/spec/file_kind.h"
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
      s.machine.nodes = static_cast<int>(nodes->as_int_at_least(1));
      if (s.machine.nodes > 65536) nodes->fail("at most 65536 nodes are supported");
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

LoaderSpec read_loader(const yaml::Node& node) {
  yaml::MapReader map(node, {"workers", "prefetch_factor", "pin_memory", "sample_cpu_us"});
  LoaderSpec loader;
  if (auto w = map.optional("workers")) {
    loader.workers = static_cast<int>(w->as_int_at_least(0));
    if (loader.workers > 1024) w->fail("at most 1024 loader workers");
  }
  if (auto p = map.optional("prefetch_factor")) {
    loader.prefetch_factor = static_cast<int>(p->as_int_at_least(1));
    if (loader.prefetch_factor > 1024) p->fail("at most 1024 batches prefetched per worker");
  }
  if (auto pin = map.optional("pin_memory")) loader.pin_memory = pin->as_bool();
  if (auto cost = map.optional("sample_cpu_us")) {
    double us = cost->as_number();
    if (us < 0 || us > 1e9) cost->fail(fmt::format("expected 0 to 1e9 microseconds, got {}", us));
    loader.sample_cpu = microseconds(us);
  }
  return loader;
}

DatasetSpec read_dataset(const yaml::Node& node, const ModelSpec& model) {
  yaml::MapReader map(node,
                      {"name", "train_samples", "validation_samples", "sample_shape", "classes"});
  DatasetSpec data;
  data.name = map.required("name").as_string();
  data.train_samples = map.required("train_samples").as_int_at_least(1);
  if (auto v = map.optional("validation_samples")) data.validation_samples = v->as_int_at_least(0);
  data.sample_shape = model.input_shape;
  if (auto shape = map.optional("sample_shape")) {
    data.sample_shape.dims = shape->as_int_list(1);
    if (data.sample_shape != model.input_shape) {
      shape->fail(fmt::format("the samples are {} but the model '{}' takes {}",
                              data.sample_shape.str(), model.name, model.input_shape.str()));
    }
  }
  data.classes = map.required("classes").as_int_at_least(2);
  return data;
}

ContentionSpec read_contention(const yaml::Node& node) {
  yaml::MapReader map(node, {"gpu_share", "cpu_share"});
  ContentionSpec contention;
  auto share = [](const yaml::Node& n) {
    double value = n.as_number();
    if (!(value > 0 && value <= 1)) {
      n.fail(fmt::format("expected a share above 0 and at most 1, got {}", value));
    }
    return value;
  };
  if (auto g = map.optional("gpu_share")) contention.gpu_share = share(*g);
  if (auto c = map.optional("cpu_share")) contention.cpu_share = share(*c);
  return contention;
}

TrainingSpec read_training(const yaml::Node& node) {
  yaml::MapReader map(
      node, {"strategy", "optimizer", "precision", "framework", "epochs", "drop_last",
             "sync_every_step", "gradient_accumulation", "bucket_cap_mib", "first_bucket_mib",
             "collectives", "collective_algorithm"});
  TrainingSpec training;
  training.strategy = read_enum<Strategy>(map.required("strategy"), kStrategyNames);
  training.optimizer = read_enum<Optimizer>(map.required("optimizer"), kOptimizerNames);
  if (auto p = map.optional("precision")) {
    training.precision = read_enum<TrainingPrecision>(*p, kTrainingPrecisionNames);
  }
  if (auto e = map.optional("epochs")) {
    training.epochs = static_cast<int>(e->as_int_at_least(1));
    if (training.epochs > 100000) e->fail("at most 100000 epochs");
  }
  if (auto d = map.optional("drop_last")) training.drop_last = d->as_bool();
  if (auto f = map.optional("framework"))
    training.framework = read_enum<Framework>(*f, kFrameworkNames);
  if (auto sync = map.optional("sync_every_step")) training.sync_every_step = sync->as_bool();
  if (auto accumulate = map.optional("gradient_accumulation")) {
    training.gradient_accumulation = static_cast<int>(accumulate->as_int_at_least(1));
    if (training.gradient_accumulation > 1024)
      accumulate->fail("at most 1024 micro-batches per step");
    if (training.gradient_accumulation > 1 && training.strategy != Strategy::ddp) {
      accumulate->fail("gradient accumulation is modelled for the ddp strategy");
    }
  }
  auto mebibytes = [](const yaml::Node& n) {
    double mib = n.as_positive_number();
    if (mib > 1e6) n.fail("at most 1e6 MiB");
    return Bytes(static_cast<std::int64_t>(mib * static_cast<double>(kMiB)));
  };
  if (auto cap = map.optional("bucket_cap_mib")) training.bucket_cap = mebibytes(*cap);
  if (auto first = map.optional("first_bucket_mib")) training.first_bucket_cap = mebibytes(*first);
  if (auto fidelity = map.optional("collectives")) {
    training.analytic_collectives = fidelity->as_choice(kCollectiveFidelityNames) == 1;
  }
  if (auto algorithm = map.optional("collective_algorithm")) {
    training.collective_algorithm =
        static_cast<CollectiveAlgorithm>(algorithm->as_choice(kCollectiveAlgorithmNames));
  }
  return training;
}

SweepSpec read_sweep(const yaml::Node& node) {
  yaml::MapReader map(node, {"gpus", "batch", "batch_is"});
  SweepSpec sweep;
  yaml::Node gpus = map.required("gpus");
  for (std::int64_t g : gpus.as_int_list(1)) {
    if (g > 1'000'000) gpus.fail(fmt::format("{} GPUs is beyond what epochcast models", g));
    sweep.gpus.push_back(static_cast<int>(g));
  }
  sweep.batch = map.required("batch").as_int_list(1);
  // Mandatory: the two readings differ by a factor of the GPU count.
  sweep.batch_is = read_enum<BatchMeaning>(map.required("batch_is"), kBatchMeaningNames);
  return sweep;
}

// Cross-checks between the parts, each reported at the key a user would change.
void check_consistency(const ScenarioSpec& s, const yaml::MapReader& top) {
  const std::int64_t outputs = s.analysis.output_shape.last();
  if (outputs != s.dataset.classes) {
    top.required("dataset").fail(
        fmt::format("the data set has {} classes but the model '{}' outputs {} values per sample "
                    "(its output is {})",
                    s.dataset.classes, s.model.name, outputs, s.analysis.output_shape.str()));
  }
  yaml::MapReader sweep(top.required("sweep"), {"gpus", "batch", "batch_is"});
  std::vector<yaml::Node> gpu_nodes = sweep.required("gpus").items();
  std::vector<yaml::Node> batch_nodes = sweep.required("batch").items();
  for (const yaml::Node& g : gpu_nodes) {
    int gpus = static_cast<int>(g.as_int());
    if (gpus > s.machine.total_gpus()) {
      g.fail(fmt::format("{} GPUs asked for, but the machine '{}' has {} ({} per node x {} nodes)",
                         gpus, s.machine.name, s.machine.total_gpus(), s.machine.gpus_per_node,
                         s.machine.nodes));
    }
    if (gpus > 1 && s.training.strategy == Strategy::single) {
      g.fail(fmt::format("strategy 'single' runs on one GPU; use dp or ddp for {} GPUs", gpus));
    }
    if (s.training.strategy == Strategy::dp && gpus > s.machine.gpus_per_node) {
      g.fail(
          fmt::format("dp (nn.DataParallel) runs in one process on one node: at most {} GPUs "
                      "here; use ddp across nodes",
                      s.machine.gpus_per_node));
    }
    if (s.training.strategy == Strategy::ddp && gpus > s.machine.gpus_per_node &&
        gpus % s.machine.gpus_per_node != 0) {
      g.fail(fmt::format("across nodes ddp uses whole nodes: a multiple of {} GPUs",
                         s.machine.gpus_per_node));
    }
    for (const yaml::Node& b : batch_nodes) {
      std::int64_t batch = b.as_int();
      std::int64_t global = s.sweep.batch_is == BatchMeaning::global ? batch : batch * gpus;
      if (global > s.dataset.train_samples) {
        b.fail(
            fmt::format("a global batch of {} ({} GPUs) is larger than the data set ({} "
                        "training samples)",
                        global, gpus, s.dataset.train_samples));
      }
      if (global < gpus) {
        b.fail(fmt::format("a global batch of {} cannot be split over {} GPUs", global, gpus));
      }
    }
  }
}

ScenarioSpec read_scenario(const yaml::Document& document,
                           const std::filesystem::path& relative_to) {
  yaml::Node root = document.root();
  expect_file_kind(root, FileKind::scenario);
  yaml::MapReader top(root, {"kind", "name", "description", "model", "hardware", "dataset",
                             "loader", "training", "contention", "sweep"});
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
  // A calibrated profile knows what the measured input pipeline costs per sample.
  if (s.profile.sample_cpu) s.loader.sample_cpu = *s.profile.sample_cpu;
  s.dataset = read_dataset(top.required("dataset"), s.model);
  check_consistency(s, top);
  return s;
}

}  // namespace

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

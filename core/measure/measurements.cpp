// Measurement files: JSON out (nlohmann, ordered keys), strict reading back in (JSON is YAML, so
// the strict YAML reader gives every error its file:line:col and key).
#include "core/measure/measurements.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/input_error.h"
#include "core/io/launcher_environment.h"
#include "core/measure/nccl_tests_log.h"
#include "core/spec/limits.h"
#include "core/yaml/strict_yaml.h"

namespace epochcast {

using Json = nlohmann::ordered_json;

Spread spread_of(std::vector<double> samples) {
  Spread s;
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  auto percentile = [&](double q) {
    double position = q * static_cast<double>(samples.size() - 1);
    auto below = static_cast<std::size_t>(std::floor(position));
    std::size_t above = std::min(below + 1, samples.size() - 1);
    double fraction = position - static_cast<double>(below);
    return samples[below] + (samples[above] - samples[below]) * fraction;
  };
  s.median = percentile(0.5);
  s.p10 = percentile(0.1);
  s.p90 = percentile(0.9);
  double sum = 0;
  for (double x : samples)
    sum += x;
  s.mean = sum / static_cast<double>(samples.size());
  s.min = samples.front();
  s.max = samples.back();
  s.count = static_cast<int>(samples.size());
  return s;
}

namespace {

double median_of(std::vector<double> values) {
  return spread_of(std::move(values)).median;
}

}  // namespace

MeasuredPoint combine_rounds(const std::vector<MeasuredPoint>& rounds) {
  if (rounds.empty()) throw std::invalid_argument("combine_rounds needs a round");
  for (const MeasuredPoint& r : rounds) {
    if (r.status != PointStatus::ok) return r;
  }
  MeasuredPoint out = rounds.front();
  const auto n = static_cast<double>(rounds.size());
  out.rounds = static_cast<int>(rounds.size());
  out.iteration_samples_s.clear();
  double partial = 0, validation = 0, loader_wait = 0, sample_cpu = 0, whole_epoch = 0;
  for (const MeasuredPoint& r : rounds) {
    out.iteration_samples_s.insert(out.iteration_samples_s.end(), r.iteration_samples_s.begin(),
                                   r.iteration_samples_s.end());
    partial += r.partial_iteration_s.value_or(0) / n;
    validation += r.validation_iteration_s.value_or(0) / n;
    loader_wait += r.loader_wait_s / n;
    sample_cpu += r.loader_sample_cpu_s / n;
    whole_epoch += r.epoch_s_measured.value_or(0) / n;
    out.peak_memory_bytes = std::max(out.peak_memory_bytes, r.peak_memory_bytes);
    if (r.cuda_context_bytes)
      out.cuda_context_bytes = std::max(out.cuda_context_bytes.value_or(0), *r.cuda_context_bytes);
    // A round whose layer profile did not fit leaves the layers of the rounds that did.
    if (out.layers.empty() && !r.layers.empty()) {
      out.layers = r.layers;
      out.profile_note.clear();
    }
    if (r.peak_reserved_bytes)
      out.peak_reserved_bytes =
          std::max(out.peak_reserved_bytes.value_or(0), *r.peak_reserved_bytes);
    if (r.parameters_identical && out.parameters_identical)
      out.parameters_identical = *out.parameters_identical && *r.parameters_identical;
    // Rounds train from the same seed: a hash that differs between them is no hash of the point.
    if (r.parameters_hash != out.parameters_hash) out.parameters_hash.clear();
  }
  out.iteration_s = spread_of(out.iteration_samples_s);
  // samples per step (the global batch times the accumulation steps) = rate x median time.
  const double samples_per_step = rounds.front().samples_per_s * rounds.front().iteration_s.median;
  out.samples_per_s = out.iteration_s.median > 0 ? samples_per_step / out.iteration_s.median : 0;
  if (out.partial_iteration_s) out.partial_iteration_s = partial;
  if (out.validation_iteration_s) out.validation_iteration_s = validation;
  if (out.epoch_s_measured) out.epoch_s_measured = whole_epoch;
  out.epoch_s_estimated =
      static_cast<double>(out.iterations_per_epoch) * out.iteration_s.median +
      out.partial_iteration_s.value_or(0) +
      static_cast<double>(out.validation_iterations) * out.validation_iteration_s.value_or(0);
  out.loader_wait_s = loader_wait;
  out.loader_sample_cpu_s = sample_cpu;
  out.last_loss = rounds.back().last_loss;
  for (std::size_t i = 0; i < out.layers.size(); ++i) {
    std::vector<double> forward, backward;
    for (const MeasuredPoint& r : rounds) {
      if (i >= r.layers.size()) continue;
      forward.push_back(r.layers[i].forward_s);
      backward.push_back(r.layers[i].backward_s);
    }
    out.layers[i].forward_s = median_of(forward);
    out.layers[i].backward_s = median_of(backward);
  }
  return out;
}

namespace {

// ---- writing ----------------------------------------------------------------------------------

Json spread_json(const Spread& s) {
  return Json{{"median", s.median}, {"p10", s.p10}, {"p90", s.p90},    {"mean", s.mean},
              {"min", s.min},       {"max", s.max}, {"count", s.count}};
}

template <typename T>
void put_optional(Json& j, const char* key, const std::optional<T>& value) {
  if (value) j[key] = *value;
}

Json point_json(const MeasuredPoint& p) {
  Json j{{"gpus", p.gpus},
         {"global_batch", p.global_batch},
         {"per_gpu_batch", p.per_gpu_batch},
         {"status", name_of(p.status)}};
  if (!p.reason.empty()) j["reason"] = p.reason;
  j["device"] = p.device;
  j["ranks"] = p.ranks;
  if (p.status != PointStatus::ok) return j;
  j["warmup_iterations"] = p.warmup_iterations;
  j["iteration_s"] = spread_json(p.iteration_s);
  j["iteration_samples_s"] = p.iteration_samples_s;
  j["iterations_per_epoch"] = p.iterations_per_epoch;
  j["partial_batch"] = p.partial_batch;
  put_optional(j, "partial_iteration_s", p.partial_iteration_s);
  j["validation_iterations"] = p.validation_iterations;
  put_optional(j, "validation_iteration_s", p.validation_iteration_s);
  j["epoch_s_estimated"] = p.epoch_s_estimated;
  put_optional(j, "epoch_s_measured", p.epoch_s_measured);
  j["samples_per_s"] = p.samples_per_s;
  j["loader_wait_s"] = p.loader_wait_s;
  j["loader_sample_cpu_s"] = p.loader_sample_cpu_s;
  j["peak_memory_bytes"] = p.peak_memory_bytes;
  j["memory_source"] = p.memory_source;
  put_optional(j, "peak_reserved_bytes", p.peak_reserved_bytes);
  put_optional(j, "cuda_context_bytes", p.cuda_context_bytes);
  j["first_loss"] = p.first_loss;
  j["last_loss"] = p.last_loss;
  put_optional(j, "parameters_identical", p.parameters_identical);
  if (!p.parameters_hash.empty()) j["parameters_hash"] = p.parameters_hash;
  if (p.rounds > 1) j["rounds"] = p.rounds;
  if (!p.layers.empty()) {
    Json layers = Json::array();
    for (const LayerTiming& l : p.layers) {
      layers.push_back(Json{{"index", l.index},
                            {"name", l.name},
                            {"type", l.type},
                            {"forward_s", l.forward_s},
                            {"backward_s", l.backward_s}});
    }
    j["layers"] = std::move(layers);
  }
  if (!p.profile_note.empty()) j["profile_note"] = p.profile_note;
  return j;
}

Json benchmarks_json(const Benchmarks& b) {
  Json j = Json::object();
  if (!b.collectives.empty()) {
    Json list = Json::array();
    for (const CollectiveMeasurement& c : b.collectives) {
      Json item{{"operation", c.operation},   {"ranks", c.ranks},
                {"bytes", c.bytes},           {"time_s", c.time_s},
                {"algbw_gbps", c.algbw_gbps}, {"busbw_gbps", c.busbw_gbps},
                {"correct", c.correct}};
      // Only where it is not the process-per-GPU default, so that older files read the same.
      if (c.launches_per_iteration != 1) item["launches_per_iteration"] = c.launches_per_iteration;
      list.push_back(std::move(item));
    }
    j["collectives"] = std::move(list);
  }
  if (!b.copies.empty()) {
    Json list = Json::array();
    for (const CopyMeasurement& c : b.copies) {
      list.push_back(Json{{"kind", c.kind},
                          {"pinned", c.pinned},
                          {"source", c.source},
                          {"destination", c.destination},
                          {"bytes", c.bytes},
                          {"time_s", c.time_s},
                          {"gbps", c.gbps}});
    }
    j["copies"] = std::move(list);
  }
  if (b.dispatch) {
    j["dispatch"] = Json{{"op_dispatch_s", b.dispatch->op_dispatch_s},
                         {"kernel_launch_s", b.dispatch->kernel_launch_s},
                         {"kernel_device_s", b.dispatch->kernel_device_s}};
    put_optional(j["dispatch"], "python_op_dispatch_s", b.dispatch->python_op_dispatch_s);
    if (b.dispatch->optimizer_step_ops > 0) {
      j["dispatch"]["module_call_s"] = b.dispatch->module_call_s;
      j["dispatch"]["optimizer_step_s"] = b.dispatch->optimizer_step_s;
      j["dispatch"]["optimizer_step_ops"] = b.dispatch->optimizer_step_ops;
    }
    put_optional(j["dispatch"], "python_module_call_s", b.dispatch->python_module_call_s);
    put_optional(j["dispatch"], "python_optimizer_step_s", b.dispatch->python_optimizer_step_s);
  }
  if (!b.throughput.empty()) {
    Json list = Json::array();
    for (const ThroughputMeasurement& t : b.throughput) {
      list.push_back(Json{{"operation", t.operation},
                          {"precision", t.precision},
                          {"shape", t.shape},
                          {"flops", t.flops},
                          {"time_s", t.time_s},
                          {"tflops", t.tflops}});
    }
    j["throughput"] = std::move(list);
  }
  if (b.largest_batch) {
    j["largest_batch"] = Json{{"model", b.largest_batch->model},
                              {"largest_fitting", b.largest_batch->largest_fitting},
                              {"first_failing", b.largest_batch->first_failing},
                              {"cap", b.largest_batch->cap}};
  }
  if (!b.skipped.empty()) j["skipped"] = b.skipped;
  return j;
}

// ---- reading ----------------------------------------------------------------------------------

using yaml::MapReader;
using yaml::Node;

std::string str(const MapReader& m, std::string_view key) {
  return m.required(key).as_string();
}
// Optional text, which may be empty (a CPU run has no driver version).
std::string str_or(const MapReader& m, std::string_view key) {
  auto n = m.optional(key);
  if (!n) return "";
  if (!n->is_scalar()) n->fail("expected a string, got " + n->describe());
  return n->raw().Scalar();
}
double num(const MapReader& m, std::string_view key) {
  return m.required(key).as_number();
}
double nonnegative(const MapReader& m, std::string_view key) {
  Node n = m.required(key);
  double value = n.as_number();
  if (value < 0) n.fail(fmt::format("expected a number >= 0, got {}", value));
  return value;
}
// A time in seconds: from 0 to a billion (about 32 years; no measurement runs longer).
constexpr double kMaxSeconds = 1e9;
double seconds(const MapReader& m, std::string_view key) {
  return m.required(key).as_number_in(0, kMaxSeconds);
}
std::optional<double> optional_seconds(const MapReader& m, std::string_view key) {
  if (!m.has(key)) return std::nullopt;
  return seconds(m, key);
}
// An epoch that was measured: it took some time, and less than a billion seconds.
double epoch_seconds(const MapReader& m, std::string_view key) {
  Node n = m.required(key);
  double value = n.as_number();
  if (!(value > 0 && value <= kMaxSeconds)) {
    n.fail(fmt::format("expected an epoch time above 0 and at most {:g} s (32 years), got {}",
                       kMaxSeconds, n.raw().Scalar()));
  }
  return value;
}
std::int64_t count(const MapReader& m, std::string_view key, std::int64_t minimum = 0) {
  return m.required(key).as_int_at_least(minimum);
}
int small_count(const MapReader& m, std::string_view key, std::int64_t minimum = 0) {
  Node n = m.required(key);
  std::int64_t value = n.as_int_at_least(minimum);
  if (value > 1'000'000'000) n.fail(fmt::format("expected at most 1000000000, got {}", value));
  return static_cast<int>(value);
}

int small_count_or(const MapReader& m, std::string_view key, int fallback,
                   std::int64_t minimum = 0) {
  return m.optional(key) ? small_count(m, key, minimum) : fallback;
}

Spread read_spread(const Node& node) {
  MapReader m(node, {"median", "p10", "p90", "mean", "min", "max", "count"});
  Spread s;
  s.median = seconds(m, "median");
  s.p10 = seconds(m, "p10");
  s.p90 = seconds(m, "p90");
  s.mean = seconds(m, "mean");
  s.min = seconds(m, "min");
  s.max = seconds(m, "max");
  s.count = small_count(m, "count", 1);
  if (!(s.min <= s.p10 && s.p10 <= s.median && s.median <= s.p90 && s.p90 <= s.max)) {
    node.fail("expected min <= p10 <= median <= p90 <= max");
  }
  return s;
}

MeasuredEnvironment read_environment(const Node& node) {
  MapReader m(node, {"host",
                     "device_kind",
                     "device_name",
                     "device_count",
                     "device_memory_bytes",
                     "driver_version",
                     "cuda_version",
                     "nccl_version",
                     "torch_version",
                     "mpi_version",
                     "ranks",
                     "launcher",
                     "cpu_threads",
                     "host_allocator",
                     "epochcast_version",
                     "started_at",
                     "cublas_allow_tf32",
                     "cudnn_allow_tf32",
                     "cudnn_benchmark",
                     "nccl_settings"});
  MeasuredEnvironment e;
  e.host = str_or(m, "host");
  static constexpr std::string_view kinds[] = {"cuda", "cpu"};
  e.device_kind = kinds[m.required("device_kind").as_choice(kinds)];
  e.device_name = str(m, "device_name");
  e.device_count = small_count(m, "device_count");
  e.device_memory_bytes = count(m, "device_memory_bytes");
  e.driver_version = str_or(m, "driver_version");
  e.cuda_version = str_or(m, "cuda_version");
  e.nccl_version = str_or(m, "nccl_version");
  e.torch_version = str_or(m, "torch_version");
  e.mpi_version = str_or(m, "mpi_version");
  e.ranks = small_count(m, "ranks", 1);
  if (auto launcher = m.optional("launcher")) {
    static const std::array<std::string_view, 4> launchers{
        name_of(Launcher::none), name_of(Launcher::mpi), name_of(Launcher::torchrun),
        name_of(Launcher::slurm)};
    e.launcher = launchers[launcher->as_choice(launchers)];
  }
  e.cpu_threads = small_count(m, "cpu_threads");
  e.host_allocator = str_or(m, "host_allocator");
  e.epochcast_version = str_or(m, "epochcast_version");
  e.started_at = str_or(m, "started_at");
  if (auto flag = m.optional("cublas_allow_tf32")) e.cublas_allow_tf32 = flag->as_bool();
  if (auto flag = m.optional("cudnn_allow_tf32")) e.cudnn_allow_tf32 = flag->as_bool();
  if (auto flag = m.optional("cudnn_benchmark")) e.cudnn_benchmark = flag->as_bool();
  if (auto settings = m.optional("nccl_settings")) {
    for (const Node& setting : settings->items())
      e.nccl_settings.push_back(setting.as_string());
  }
  return e;
}

MeasuredPoint read_point(const Node& node) {
  static constexpr std::string_view keys[] = {"gpus",
                                              "global_batch",
                                              "per_gpu_batch",
                                              "status",
                                              "reason",
                                              "device",
                                              "ranks",
                                              "warmup_iterations",
                                              "iteration_s",
                                              "iteration_samples_s",
                                              "iterations_per_epoch",
                                              "partial_batch",
                                              "partial_iteration_s",
                                              "validation_iterations",
                                              "validation_iteration_s",
                                              "epoch_s_estimated",
                                              "epoch_s_measured",
                                              "samples_per_s",
                                              "loader_wait_s",
                                              "loader_sample_cpu_s",
                                              "peak_memory_bytes",
                                              "memory_source",
                                              "first_loss",
                                              "last_loss",
                                              "parameters_identical",
                                              "parameters_hash",
                                              "rounds",
                                              "layers",
                                              "peak_reserved_bytes",
                                              "cuda_context_bytes",
                                              "profile_note"};
  MapReader m(node, keys);
  MeasuredPoint p;
  p.gpus = small_count(m, "gpus", 1);
  p.global_batch = m.required("global_batch").as_int_in(1, limits::kMaxSamples);
  p.per_gpu_batch = m.required("per_gpu_batch").as_int_in(1, limits::kMaxSamples);
  p.status = static_cast<PointStatus>(m.required("status").as_choice(kPointStatusNames));
  p.reason = str_or(m, "reason");
  p.device = str(m, "device");
  p.ranks = small_count(m, "ranks", 1);
  if (p.status != PointStatus::ok) return p;
  p.warmup_iterations = small_count(m, "warmup_iterations");
  p.iteration_s = read_spread(m.required("iteration_s"));
  if (auto samples = m.optional("iteration_samples_s")) {
    for (const Node& item : samples->items()) {
      p.iteration_samples_s.push_back(item.as_number_in(0, kMaxSeconds));
    }
  }
  p.iterations_per_epoch = count(m, "iterations_per_epoch");
  p.partial_batch = count(m, "partial_batch");
  p.partial_iteration_s = optional_seconds(m, "partial_iteration_s");
  p.validation_iterations = count(m, "validation_iterations");
  p.validation_iteration_s = optional_seconds(m, "validation_iteration_s");
  p.epoch_s_estimated = epoch_seconds(m, "epoch_s_estimated");
  if (m.has("epoch_s_measured")) p.epoch_s_measured = epoch_seconds(m, "epoch_s_measured");
  p.samples_per_s = nonnegative(m, "samples_per_s");
  p.loader_wait_s = seconds(m, "loader_wait_s");
  p.loader_sample_cpu_s = seconds(m, "loader_sample_cpu_s");
  p.peak_memory_bytes = count(m, "peak_memory_bytes");
  p.memory_source = str_or(m, "memory_source");
  p.first_loss = num(m, "first_loss");
  p.last_loss = num(m, "last_loss");
  if (auto same = m.optional("parameters_identical")) p.parameters_identical = same->as_bool();
  p.parameters_hash = str_or(m, "parameters_hash");
  p.rounds = small_count_or(m, "rounds", 1, 1);
  if (m.has("peak_reserved_bytes")) p.peak_reserved_bytes = count(m, "peak_reserved_bytes");
  if (m.has("cuda_context_bytes")) p.cuda_context_bytes = count(m, "cuda_context_bytes");
  p.profile_note = str_or(m, "profile_note");
  if (auto layers = m.optional("layers")) {
    for (const Node& item : layers->items()) {
      MapReader l(item, {"index", "name", "type", "forward_s", "backward_s"});
      LayerTiming t;
      t.index = small_count(l, "index");
      t.name = str(l, "name");
      t.type = str(l, "type");
      t.forward_s = seconds(l, "forward_s");
      t.backward_s = seconds(l, "backward_s");
      p.layers.push_back(std::move(t));
    }
  }
  return p;
}

Benchmarks read_benchmarks(const Node& node) {
  MapReader m(node,
              {"collectives", "copies", "dispatch", "throughput", "largest_batch", "skipped"});
  Benchmarks b;
  if (auto list = m.optional("collectives")) {
    for (const Node& item : list->items()) {
      MapReader c(item, {"operation", "ranks", "bytes", "time_s", "algbw_gbps", "busbw_gbps",
                         "correct", "launches_per_iteration"});
      b.collectives.push_back(
          {str(c, "operation"), small_count(c, "ranks", 1), count(c, "bytes", 1),
           nonnegative(c, "time_s"), nonnegative(c, "algbw_gbps"), nonnegative(c, "busbw_gbps"),
           c.required("correct").as_bool(), small_count_or(c, "launches_per_iteration", 1)});
    }
  }
  if (auto list = m.optional("copies")) {
    for (const Node& item : list->items()) {
      MapReader c(item, {"kind", "pinned", "source", "destination", "bytes", "time_s", "gbps"});
      // -1 is the host (the end of a host-to-device or device-to-host copy).
      b.copies.push_back({str(c, "kind"), c.required("pinned").as_bool(),
                          small_count(c, "source", -1), small_count(c, "destination", -1),
                          count(c, "bytes", 1), nonnegative(c, "time_s"), nonnegative(c, "gbps")});
    }
  }
  if (auto d = m.optional("dispatch")) {
    MapReader r(*d, {"op_dispatch_s", "kernel_launch_s", "kernel_device_s", "python_op_dispatch_s",
                     "module_call_s", "optimizer_step_s", "optimizer_step_ops",
                     "python_module_call_s", "python_optimizer_step_s"});
    b.dispatch = DispatchMeasurement{};
    b.dispatch->op_dispatch_s = nonnegative(r, "op_dispatch_s");
    b.dispatch->kernel_launch_s = nonnegative(r, "kernel_launch_s");
    b.dispatch->kernel_device_s = nonnegative(r, "kernel_device_s");
    if (r.has("python_op_dispatch_s"))
      b.dispatch->python_op_dispatch_s = nonnegative(r, "python_op_dispatch_s");
    if (r.has("optimizer_step_ops")) {
      b.dispatch->module_call_s = nonnegative(r, "module_call_s");
      b.dispatch->optimizer_step_s = nonnegative(r, "optimizer_step_s");
      b.dispatch->optimizer_step_ops = small_count(r, "optimizer_step_ops", 1);
    }
    if (r.has("python_module_call_s"))
      b.dispatch->python_module_call_s = nonnegative(r, "python_module_call_s");
    if (r.has("python_optimizer_step_s"))
      b.dispatch->python_optimizer_step_s = nonnegative(r, "python_optimizer_step_s");
  }
  if (auto list = m.optional("throughput")) {
    for (const Node& item : list->items()) {
      MapReader t(item, {"operation", "precision", "shape", "flops", "time_s", "tflops"});
      b.throughput.push_back({str(t, "operation"), str(t, "precision"), str(t, "shape"),
                              nonnegative(t, "flops"), nonnegative(t, "time_s"),
                              nonnegative(t, "tflops")});
    }
  }
  if (auto l = m.optional("largest_batch")) {
    MapReader r(*l, {"model", "largest_fitting", "first_failing", "cap"});
    b.largest_batch = LargestBatch{str(r, "model"), count(r, "largest_fitting"),
                                   count(r, "first_failing"), count(r, "cap")};
  }
  if (auto list = m.optional("skipped")) {
    for (const Node& item : list->items())
      b.skipped.push_back(item.as_string());
  }
  return b;
}

}  // namespace

// The files are JSON: syntax errors are reported as JSON errors (the YAML reader that gives
// the values their positions would call them YAML errors, or accept YAML that is not JSON).
void check_json_syntax(const std::string& text, const std::string& name) {
  try {
    Json parsed = Json::parse(text);
    static_cast<void>(parsed);
  } catch (const Json::parse_error& error) {
    // error.byte is the 1-based offset of the character that broke the parse.
    int line = 1, column = 1;
    std::size_t end = std::min<std::size_t>(error.byte > 0 ? error.byte - 1 : 0, text.size());
    for (std::size_t i = 0; i < end; ++i) {
      if (text[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    std::string what = error.what();
    std::size_t detail = what.find("syntax error");
    throw InputError(
        SourceMark{name, line, column}, "",
        "not valid JSON: " + (detail == std::string::npos ? what : what.substr(detail)));
  } catch (const Json::out_of_range&) {
    // A number beyond a double's range (1e999) is valid JSON syntax: the strict reader below
    // refuses it where a number is expected, naming its line, column and key.
  }
}

void check_file_kind(yaml::MapReader& reader, std::string_view format, int version,
                     std::string_view what) {
  yaml::Node named = reader.required("format");
  if (named.as_string() != format)
    named.fail(fmt::format("expected \"{}\": this is not an epochcast {}", format, what));
  yaml::Node read = reader.required("version");
  if (read.as_int() != version) {
    read.fail(fmt::format("this epochcast reads {}s of version {}, not {}", what, version,
                          read.as_int()));
  }
}

namespace {

MeasurementFile read_file(const yaml::Document& document) {
  Node root = document.root();
  static constexpr std::string_view keys[] = {
      "format",    "version",   "scenario", "scenario_file", "model",  "strategy",  "precision",
      "optimizer", "arguments", "settings", "environment",   "points", "benchmarks"};
  if (!root.is_map())
    root.fail("expected a measurement file (a JSON object), got " + root.describe());
  MapReader m(root, keys);
  check_file_kind(m, kMeasurementsFormat, kMeasurementsVersion, "measurement file");
  MeasurementFile f;
  f.scenario_name = str_or(m, "scenario");
  f.scenario_file = str_or(m, "scenario_file");
  f.model = str_or(m, "model");
  f.strategy = str_or(m, "strategy");
  f.precision = str_or(m, "precision");
  f.optimizer = str_or(m, "optimizer");
  if (auto arguments = m.optional("arguments")) {
    for (const Node& item : arguments->items())
      f.arguments.push_back(item.as_string());
  }
  MapReader s(m.required("settings"), {"warmup_iterations", "timed_iterations", "timeout_s",
                                       "full_epoch", "profile_layers", "seed", "rounds"});
  f.settings.warmup_iterations = small_count(s, "warmup_iterations");
  f.settings.timed_iterations = small_count(s, "timed_iterations");
  f.settings.timeout_s = nonnegative(s, "timeout_s");
  f.settings.full_epoch = s.required("full_epoch").as_bool();
  f.settings.profile_layers = s.required("profile_layers").as_bool();
  f.settings.seed = static_cast<std::uint64_t>(count(s, "seed"));
  f.settings.rounds = small_count_or(s, "rounds", 1, 1);
  f.environment = read_environment(m.required("environment"));
  if (auto points = m.optional("points")) {
    std::vector<Node> items = points->items();
    for (std::size_t i = 0; i < items.size(); ++i) {
      MeasuredPoint point = read_point(items[i]);
      // One record per point: run merges rounds and resumptions into one, so a second record
      // is a hand edit or two files pasted together, and which one counts would be a guess.
      for (std::size_t j = 0; j < f.points.size(); ++j) {
        if (f.points[j].gpus == point.gpus && f.points[j].global_batch == point.global_batch) {
          items[i].fail(
              fmt::format("the point {} GPU{}, global batch {} is already measured "
                          "in points[{}]; keep one record per point",
                          point.gpus, point.gpus == 1 ? "" : "s", point.global_batch, j));
        }
      }
      f.points.push_back(std::move(point));
    }
  }
  if (auto benchmarks = m.optional("benchmarks")) f.benchmarks = read_benchmarks(*benchmarks);
  return f;
}

}  // namespace

std::string to_json(const MeasurementFile& file) {
  const MeasuredEnvironment& e = file.environment;
  Json j{{"format", kMeasurementsFormat}, {"version", kMeasurementsVersion}};
  if (!file.scenario_name.empty()) {
    j["scenario"] = file.scenario_name;
    j["scenario_file"] = file.scenario_file;
    j["model"] = file.model;
    j["strategy"] = file.strategy;
    j["precision"] = file.precision;
    j["optimizer"] = file.optimizer;
  }
  j["arguments"] = file.arguments;
  j["settings"] = Json{{"warmup_iterations", file.settings.warmup_iterations},
                       {"timed_iterations", file.settings.timed_iterations},
                       {"timeout_s", file.settings.timeout_s},
                       {"full_epoch", file.settings.full_epoch},
                       {"profile_layers", file.settings.profile_layers},
                       {"seed", file.settings.seed},
                       {"rounds", file.settings.rounds}};
  j["environment"] = Json{{"host", e.host},
                          {"device_kind", e.device_kind},
                          {"device_name", e.device_name},
                          {"device_count", e.device_count},
                          {"device_memory_bytes", e.device_memory_bytes},
                          {"driver_version", e.driver_version},
                          {"cuda_version", e.cuda_version},
                          {"nccl_version", e.nccl_version},
                          {"torch_version", e.torch_version},
                          {"mpi_version", e.mpi_version},
                          {"ranks", e.ranks},
                          {"cpu_threads", e.cpu_threads},
                          {"host_allocator", e.host_allocator},
                          {"epochcast_version", e.epochcast_version},
                          {"started_at", e.started_at}};
  if (!e.launcher.empty()) j["environment"]["launcher"] = e.launcher;
  if (e.cublas_allow_tf32) j["environment"]["cublas_allow_tf32"] = *e.cublas_allow_tf32;
  if (e.cudnn_allow_tf32) j["environment"]["cudnn_allow_tf32"] = *e.cudnn_allow_tf32;
  if (e.cudnn_benchmark) j["environment"]["cudnn_benchmark"] = *e.cudnn_benchmark;
  if (!e.nccl_settings.empty()) j["environment"]["nccl_settings"] = e.nccl_settings;
  Json points = Json::array();
  for (const MeasuredPoint& p : file.points)
    points.push_back(point_json(p));
  j["points"] = std::move(points);
  Json benchmarks = benchmarks_json(file.benchmarks);
  if (!benchmarks.empty()) j["benchmarks"] = std::move(benchmarks);
  return j.dump(2) + "\n";
}

MeasurementFile load_measurements(const std::filesystem::path& path) {
  return load_measurements_from_string(yaml::read_input_file(path), path.string());
}

MeasurementFile load_measurements_from_string(const std::string& text, const std::string& name) {
  // nccl-tests' logs (text or -J) are collective microbenchmarks like `epochcast bench`'s.
  if (looks_like_nccl_tests_log(text))
    return measurements_from_nccl_tests(parse_nccl_tests_log(text, name));
  check_json_syntax(text, name);
  return read_file(yaml::Document::load_string(text, name));
}

}  // namespace epochcast

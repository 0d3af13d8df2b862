// libFuzzer target for the simulator: a small bundled scenario, a list of --set overrides built
// from real scenario keys and awkward values, the sweep expanded, and predict_point on its first
// two points. The contract: success, or InputError (bad input, or a point too large for the
// simulator's clock). Any other exception, crash, sanitizer report, leak or slow input is a
// finding, and so is a result that breaks the simulator's own promises: the breakdown adds up
// to the epoch, and skipping repeated iterations gives exactly what simulating them all gives.
//
// The input is read with FuzzedDataProvider: one byte picks the scenario, then each override is
// a key from kKeys and a value from one of the value kinds below. An input may also be text, for
// hand-written cases: the line "#fuzz_predict", a scenario of kScenarios, then one PATH=VALUE per
// line (read as --set reads it). EPOCHCAST_FUZZ_VERBOSE=1 prints the decoded input, as an
// `epochcast predict` command line and as text, before running it.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <fuzzer/FuzzedDataProvider.h>

#include "core/input_error.h"
#include "core/spec/scenario_spec.h"
#include "core/yaml/strict_yaml.h"
#include "sim/predict/predict.h"
#include "tests/fuzz/fuzz_common.h"

namespace {

// Small bundled scenarios, one of each strategy and loader style.
constexpr std::string_view kScenarios[] = {
    "scenarios/seed-001/linear.yaml",                // dp, 4x GTX 1080 Ti, loader in-thread
    "scenarios/seed-003/desktop.yaml",               // single GPU, 2 workers, validation
    "scenarios/what-if/dp-vs-ddp-seed001-box.yaml",  // dp conv1d
    "tests/validate/scenarios/cpu-mnist-cnn.yaml",   // the CPU as the device
    "tests/runtime/scenarios/ddp-2rank-cpu.yaml",    // ddp, small buckets, accumulation
};

// A scenario key and the words that make sense for it (empty: numbers only).
struct Key {
  std::string_view path;
  std::vector<std::string_view> words;
};

const std::vector<std::string_view> kBools = {"true", "false"};
const std::vector<std::string_view> kMachines = {"seed001-box",      "seed003-desktop",
                                                 "host-cpu",         "dgx-h100",
                                                 "dgx-h200",         "dgx-a100",
                                                 "dgx1-v100",        "hgx-h100-4gpu",
                                                 "h100-sxm-1gpu",    "rtx2080ti-4x-nvlink-pairs",
                                                 "pcie-2socket-8gpu"};
// `hardware:` as a machine, a cluster of nodes, or a machine with another profile.
const std::vector<std::string_view> kHardware = {
    "seed001-box",
    "seed003-desktop",
    "host-cpu",
    "dgx-h100",
    "dgx1-v100",
    "rtx2080ti-4x-nvlink-pairs",
    "pcie-2socket-8gpu",
    "{base: dgx-h100-cluster, nodes: 2}",
    "{base: dgx-h100-cluster, nodes: 3}",
    "{base: dgx-a100, nodes: 4}",
    "{base: dgx1-v100, nodes: 2}",
    "{base: seed001-box, profile: default}",
    "{base: dgx-h100, nodes: 65536}",
    "{base: host-cpu, profile: validate/data/host-cpu/profile.yaml}"};

// A whole data set for each model of the zoo, so that one override makes a model swap fit.
const std::vector<std::string_view> kDatasets = {
    "{name: d, train_samples: 1000, classes: 2, sample_shape: [128]}",
    "{name: d, train_samples: 1000, classes: 50257, sample_shape: [1024]}",
    "{name: d, train_samples: 1000, classes: 2, sample_shape: [3, 200, 200]}",
    "{name: d, train_samples: 1000, validation_samples: 100, classes: 1000}",
    "{name: d, train_samples: 1000, classes: 10, sample_shape: [1, 28, 28]}",
    "{name: d, train_samples: 1000, classes: 10, sample_shape: [1, 12000]}"};

const std::vector<Key> kKeys = {
    {"training.epochs", {}},
    {"training.gradient_accumulation", {}},
    {"training.strategy", {"single", "dp", "ddp"}},
    {"training.optimizer", {"sgd", "momentum", "adam", "adamw"}},
    {"training.precision", {"fp32", "tf32", "amp_fp16", "amp_bf16"}},
    {"training.framework", {"pytorch-1", "pytorch-2"}},
    {"training.drop_last", kBools},
    {"training.sync_every_step", kBools},
    {"training.ddp.bucket_cap_mib", {}},
    {"training.ddp.first_bucket_mib", {}},
    {"training.collectives", {"flows", "analytic"}},
    {"training.collective_algorithm", {"auto", "ring", "tree", "nvls", "nvlstree", "collnet"}},
    {"training.wait_for_slowest_gpu", kBools},
    {"training.nccl_sm_contention", kBools},
    {"training.nccl_memory_contention", kBools},
    {"training.share_cpu_cores", kBools},
    {"loader.workers", {}},
    {"loader.prefetch_factor", {}},
    {"loader.pin_memory", kBools},
    {"loader.prefetch_to_gpu", kBools},
    {"loader.gpu_decode_us", {}},
    {"loader.encoded_sample_bytes", {}},
    {"loader.sample_cpu_us", {}},
    {"dataset.train_samples", {}},
    {"dataset.validation_samples", {}},
    {"dataset.classes", {"2", "10", "1000", "50257"}},
    {"dataset.sample_shape",
     {"[128]", "[1024]", "[1, 28, 28]", "[1, 12000]", "[3, 200, 200]", "[3, 224, 224]"}},
    {"dataset", kDatasets},
    {"contention.gpu_share", {}},
    {"contention.cpu_share", {}},
    {"sweep.gpus", {}},
    {"sweep.batch", {}},
    {"sweep.gpus[0]", {}},
    {"sweep.batch[0]", {}},
    {"sweep.batch_is", {"global", "per_gpu"}},
    {"hardware", kHardware},
    {"hardware.nodes", {}},
    {"hardware.base", kMachines},
    {"hardware.profile", {"default", "validate/data/host-cpu/profile.yaml"}},
    {"model",
     {"mnist-cnn", "spoken-digits-linear", "spoken-digits-conv1d", "cats-dogs-cnn", "mobilenet-v2",
      "resnet-50", "bert-base", "gpt2-small"}},
};

// Integers at the edges of the loaders' ranges and of the integer types behind them, fractions
// at the edges of shares and rates, and YAML that is not a scalar or not plain.
// clang-format off
constexpr std::string_view kIntegers[] = {
    "0", "1", "-1", "2", "3", "4", "5", "7", "8", "9", "16", "63", "64", "65", "100",
    "509", "511", "512", "513", "1019", "1021", "1023", "1024", "1025", "4096", "4097", "65535", "65536", "65537", "1000000", "1000001",
    "2147483647", "2147483648", "-2147483648", "4294967296", "4294967297",
    "9007199254740992", "9007199254740993", "999999999999", "1000000000000", "1000000000001",
    "9223372036854775807", "9223372036854775808", "-9223372036854775808",
    "18446744073709551616", "1e12", "0x10", "0o17", "+8", "1_000"};
constexpr std::string_view kFractions[] = {
    "0.5", "0.001", "0.0009999", "1e-3", "1e-9", "1e-300", "5e-324", "1e308",
    "1.7976931348623157e308", "-0.0", "0.0", "1.0", "1.5", "0.999999", "2.5", ".inf", "-.inf",
    ".nan", "nan", "1e3", "1e9", "1000000000.5", "0.25", "1048576"};
constexpr std::string_view kShapes[] = {
    "~", "null", "''", "{}", "[]", "[[1]]", "{a: 1}", "[1, 2]", "[2, 1]", "[1, 1]", "[4, 4]",
    "[1, 2, 3, 4, 5, 6, 7, 8]", "[8, 16]", "!!str 3", "!!int 3", "&a 1", "*a", "'4'", "|\n  4",
    "[1, [2]]", "- 1", "true", "yes", "1,2"};
// clang-format on

std::string number(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange<int>(0, 5)) {
    case 0:
      return std::to_string(in.ConsumeIntegralInRange<int>(-2, 300));
    case 1:
      return std::string(in.PickValueInArray(kIntegers));
    case 2:
      return std::string(in.PickValueInArray(kFractions));
    case 3:
      return std::to_string(in.ConsumeIntegral<std::int64_t>());
    case 4:
      return fmt::format("{}", in.ConsumeFloatingPoint<double>());
    default:
      return fmt::format("{}", in.ConsumeProbability<double>());
  }
}

std::string value_for(const Key& key, FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange<int>(0, 9)) {
    case 0:
    case 1:
    case 2:
      if (!key.words.empty()) return std::string(epochcast::fuzz::pick(in, key.words));
      return number(in);
    case 3:
    case 4:
    case 5:
      return number(in);
    case 6: {  // a list of numbers, for the sweep
      const int n = in.ConsumeIntegralInRange<int>(0, 4);
      std::string list = "[";
      for (int i = 0; i < n; ++i)
        list += (i ? ", " : "") + number(in);
      return list + "]";
    }
    case 7:
      return std::string(in.PickValueInArray(kShapes));
    default:
      return in.ConsumeRandomLengthString(40);
  }
}

struct Case {
  std::string scenario;
  std::vector<epochcast::yaml::Override> overrides;
  int trace_iterations = 0;
};

Case decode(FuzzedDataProvider& in) {
  Case c;
  c.scenario = std::string(in.PickValueInArray(kScenarios));
  c.trace_iterations = in.ConsumeBool() ? in.ConsumeIntegralInRange<int>(1, 3) : 0;
  const int count = in.ConsumeIntegralInRange<int>(0, 8);
  for (int i = 0; i < count && in.remaining_bytes() > 0; ++i) {
    const Key& key = kKeys[in.ConsumeIntegralInRange<std::size_t>(0, kKeys.size() - 1)];
    c.overrides.push_back(epochcast::yaml::Override{std::string(key.path), value_for(key, in), ""});
  }
  return c;
}

constexpr std::string_view kTextMarker = "#fuzz_predict\n";

// The text form; nullopt when the scenario is not one of kScenarios. Lines are split at '\n';
// a malformed PATH=VALUE raises InputError, as on the command line.
std::optional<Case> decode_text(std::string_view text) {
  text.remove_prefix(kTextMarker.size());
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    const std::size_t end = std::min(text.find('\n'), text.size());
    lines.push_back(text.substr(0, end));
    text.remove_prefix(std::min(end + 1, text.size()));
  }
  if (lines.empty()) return std::nullopt;
  Case c;
  for (std::string_view known : kScenarios)
    if (lines[0] == known) c.scenario = std::string(known);
  if (c.scenario.empty()) return std::nullopt;
  for (std::size_t i = 1; i < lines.size(); ++i)
    c.overrides.push_back(epochcast::yaml::parse_override(lines[i]));
  return c;
}

void print(const Case& c) {
  std::string line = "epochcast predict " + c.scenario;
  std::string text = std::string(kTextMarker) + c.scenario + "\n";
  for (const epochcast::yaml::Override& o : c.overrides) {
    line += " --set " + epochcast::fuzz::shell_quoted(o.text());
    text += o.text() + "\n";
  }
  std::fprintf(stderr,
               "fuzz_predict input (first 2 points, trace_iterations %d):\n  %s\n"
               "as text:\n%s",
               c.trace_iterations, line.c_str(), text.c_str());
}

bool same_stats(const epochcast::sim::EpochStats& a, const epochcast::sim::EpochStats& b) {
  auto same = [](const auto& x, const auto& y) {
    for (std::size_t i = 0; i < x.size(); ++i)
      if (x[i].ns() != y[i].ns()) return false;
    return true;
  };
  return a.epoch.ns() == b.epoch.ns() && same(a.gpu_busy, b.gpu_busy) &&
         same(a.gpu_idle, b.gpu_idle) && a.gpu_idle_other.ns() == b.gpu_idle_other.ns() &&
         same(a.cpu_busy, b.cpu_busy) && a.communication.ns() == b.communication.ns() &&
         a.collective_bytes == b.collective_bytes && a.collectives == b.collectives &&
         a.kernels == b.kernels && a.iterations == b.iterations;
}

// The promises a simulated point keeps (predict.h, epoch_simulator.h).
void check_result(const epochcast::ScenarioSpec& scenario, const epochcast::SweepPoint& point,
                  const epochcast::sim::PointResult& r) {
  using epochcast::fuzz::finding;
  if (!r.simulated) return;
  if (!(std::isfinite(r.epoch_seconds) && r.epoch_seconds > 0))
    finding(fmt::format("epoch_seconds is {}", r.epoch_seconds));
  const epochcast::sim::Breakdown& b = r.breakdown;
  const double sum =
      b.data + b.h2d + b.forward + b.backward + b.optimizer + b.communication + b.host + b.other;
  if (!(std::abs(sum - r.epoch_seconds) <= 1e-9 * r.epoch_seconds))
    finding(fmt::format("the breakdown adds up to {} s, the epoch is {} s", sum, r.epoch_seconds));
  // Skipping repeated iterations is exact: check it where simulating every one is cheap.
  if (r.train_iterations + r.validation_iterations <= 64) {
    epochcast::sim::PredictOptions exact;
    exact.steady_state_shortcut = false;
    epochcast::sim::PointResult full;
    try {
      full = epochcast::sim::predict_point(scenario, point, exact);
    } catch (const epochcast::InputError& error) {
      finding(
          fmt::format("the point simulates with the steady-state shortcut but without it "
                      "raises: {}",
                      error.what()));
      return;
    }
    if (!same_stats(r.stats, full.stats))
      finding(
          fmt::format("with the steady-state shortcut the epoch is {} ns, without it {} ns "
                      "(or another statistic differs)",
                      r.stats.epoch.ns(), full.stats.epoch.ns()));
  }
}

bool verbose = false;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  verbose = epochcast::fuzz::verbose_requested();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  Case c;
  if (bytes.substr(0, kTextMarker.size()) == kTextMarker) {
    std::optional<Case> text;
    if (!epochcast::fuzz::expect_input_error_at_most([&] { text = decode_text(bytes); }) || !text)
      return 0;
    c = *text;
  } else {
    FuzzedDataProvider in(data, size);
    c = decode(in);
  }
  if (verbose) print(c);
  epochcast::fuzz::expect_input_error_at_most([&] {
    try {
      const epochcast::ScenarioSpec scenario = epochcast::load_scenario(
          std::string(EPOCHCAST_FUZZ_DATA_DIR) + "/" + c.scenario, c.overrides);
      const std::vector<epochcast::SweepPoint> points = epochcast::expand_sweep(scenario);
      epochcast::sim::PredictOptions options;
      options.trace_iterations = c.trace_iterations;
      // Under ASan the default budget's few seconds would be minutes: a smaller one keeps every
      // input within libFuzzer's timeout and still reaches the refusal of a point that does not
      // settle.
      options.simulation_budget = std::int64_t{1} << 20;
      for (std::size_t i = 0; i < points.size() && i < 2; ++i) {
        if (verbose) {
          std::fprintf(stderr, "point %d GPUs, global batch %lld, per GPU %lld: ", points[i].gpus,
                       static_cast<long long>(points[i].global_batch),
                       static_cast<long long>(points[i].per_gpu_batch));
        }
        const epochcast::sim::PointResult r =
            epochcast::sim::predict_point(scenario, points[i], options);
        if (verbose) {
          std::fprintf(stderr, "%s, %lld training iterations (%lld simulated), epoch %g s\n",
                       r.simulated ? "simulated" : r.bottleneck.c_str(),
                       static_cast<long long>(r.train_iterations),
                       static_cast<long long>(r.stats.simulated_iterations), r.epoch_seconds);
        }
        check_result(scenario, points[i], r);
      }
    } catch (const epochcast::InputError& error) {
      if (verbose) std::fprintf(stderr, "refused: %s\n", error.what());
      throw;
    }
  });
  return 0;
}

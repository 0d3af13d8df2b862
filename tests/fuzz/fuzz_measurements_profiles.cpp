// libFuzzer target for the files calibration reads and writes: measurement files (JSON read
// strictly) and hardware profiles (YAML). Each input is offered to both loaders. The contract:
// loading succeeds or raises InputError. What loads must also survive the trip the tools make
// with it: a measurement file written back by to_json reads back to the same text (to_json
// promises numbers that round-trip exactly); a profile written by profile_yaml reads back, as
// the same profile (text exactly, numbers to the last bits); and a profile that loads drives the
// simulator on two small scenarios (success or InputError). EPOCHCAST_FUZZ_VERBOSE=1 says what
// each loader made of the input.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "core/input_error.h"
#include "core/measure/measurements.h"
#include "core/measure/results_csv.h"
#include "core/spec/profile_spec.h"
#include "core/spec/scenario_spec.h"
#include "sim/predict/predict.h"
#include "tests/fuzz/fuzz_common.h"

namespace {

using epochcast::fuzz::expect_input_error_at_most;
using epochcast::fuzz::finding;

bool verbose = false;

// Loads with `load`; in verbose mode says what became of the input.
template <typename Load>
void load_and_tell(const char* what, Load load) {
  expect_input_error_at_most([&] {
    try {
      load();
      if (verbose) std::fprintf(stderr, "%s: loaded\n", what);
    } catch (const epochcast::InputError& error) {
      if (verbose) std::fprintf(stderr, "%s: refused: %s\n", what, error.what());
      throw;
    }
  });
}

// A results table: rows that read have the figures and batches the format promises.
void check_results_table(const std::string& text) {
  std::optional<epochcast::ResultsTable> table;
  load_and_tell("results table", [&] { table = epochcast::parse_results_csv(text, "fuzz.csv"); });
  if (!table) return;
  for (const epochcast::ResultRow& row : table->rows) {
    if (row.gpus < 1 || (!row.global_batch && !row.per_gpu_batch) ||
        (!row.epoch_s && !row.iteration_s && !row.samples_per_s)) {
      finding(
          fmt::format("a results table row read without a GPU count, batch or figure "
                      "(line {})",
                      row.mark.line));
    }
  }
}

void check_measurements(const std::string& text) {
  std::optional<epochcast::MeasurementFile> loaded;
  load_and_tell("measurements",
                [&] { loaded = epochcast::load_measurements_from_string(text, "fuzz.json"); });
  if (!loaded) return;
  const std::string written = epochcast::to_json(*loaded);
  std::string rewritten;
  try {
    rewritten = epochcast::to_json(epochcast::load_measurements_from_string(written, "fuzz.json"));
  } catch (const epochcast::InputError& error) {
    finding(
        fmt::format("a measurement file that loads, written by to_json, does not read back: "
                    "{}\n--- written ---\n{}",
                    error.what(), written));
    return;
  }
  if (rewritten != written) {
    finding(
        fmt::format("to_json(load(to_json(m))) differs from to_json(m)\n--- first ---\n{}\n"
                    "--- second ---\n{}",
                    written, rewritten));
  }
}

// Two small scenarios to run a loaded profile on: one GPU with its own machine, and ddp on two
// GPUs, whose collectives use the profile's link figures.
struct Target {
  epochcast::ScenarioSpec scenario;
  epochcast::SweepPoint point;
};
const std::vector<Target>& targets() {
  static const std::vector<Target> loaded = [] {
    std::vector<Target> t;
    for (const char* file : {"tests/validate/scenarios/cpu-mnist-cnn.yaml",
                             "tests/runtime/scenarios/ddp-2rank-cpu.yaml"}) {
      epochcast::ScenarioSpec s =
          epochcast::load_scenario(std::string(EPOCHCAST_FUZZ_DATA_DIR) + "/" + file);
      const std::vector<epochcast::SweepPoint> points = epochcast::expand_sweep(s);
      t.push_back(Target{s, points.back()});
    }
    return t;
  }();
  return loaded;
}

// The first difference between a profile and the one profile_yaml wrote and the loader read back
// (empty when none): text exactly, numbers to a relative 1e-12 (microseconds are written as
// seconds x 1e6, which may move the last bit).
std::string difference(const epochcast::HardwareProfile& a, const epochcast::HardwareProfile& b) {
  auto near = [](double x, double y) { return std::abs(x - y) <= 1e-12 * std::abs(x); };
  auto seconds = [&](const auto& x, const auto& y) { return near(x.value(), y.value()); };
  if (a.name != b.name) return fmt::format("name {:?} became {:?}", a.name, b.name);
  if (a.calibration.device != b.calibration.device || a.calibration.date != b.calibration.date ||
      a.calibration.measurements != b.calibration.measurements)
    return "the calibration origin changed";
  if (a.sources != b.sources) {
    for (const auto& [key, text] : a.sources) {
      auto other = b.sources.find(key);
      if (other == b.sources.end()) return fmt::format("sources.{} was lost", key);
      if (other->second != text)
        return fmt::format("sources.{} {:?} became {:?}", key, text, other->second);
    }
    return "the sources changed";
  }
  if (a.sample_cpu.has_value() != b.sample_cpu.has_value() ||
      (a.sample_cpu && !seconds(*a.sample_cpu, *b.sample_cpu)))
    return "input.sample_cpu_us changed";
  for (std::size_t i = 0; i < a.gpu.compute.size(); ++i)
    if (!near(a.gpu.compute[i], b.gpu.compute[i])) return "a gpu.efficiency changed";
  if (a.gpu.memory.has_value() != b.gpu.memory.has_value() ||
      (a.gpu.memory && !near(*a.gpu.memory, *b.gpu.memory)) ||
      a.gpu.optimizer_memory.has_value() != b.gpu.optimizer_memory.has_value() ||
      (a.gpu.optimizer_memory && !near(*a.gpu.optimizer_memory, *b.gpu.optimizer_memory)) ||
      !seconds(a.gpu.min_kernel, b.gpu.min_kernel))
    return "a gpu figure changed";
  const auto& h = a.host;
  const auto& k = b.host;
  if (!seconds(h.forward_op, k.forward_op) || !seconds(h.backward_op, k.backward_op) ||
      !seconds(h.optimizer_op, k.optimizer_op) || !seconds(h.step_overhead, k.step_overhead) ||
      !seconds(h.sync, k.sync) || !seconds(h.batch_fetch, k.batch_fetch))
    return "a host figure changed";
  if (a.memory.context.value() != b.memory.context.value() ||
      a.memory.workspace.value() != b.memory.workspace.value() ||
      !near(a.memory.allocator_overhead, b.memory.allocator_overhead))
    return "a memory figure changed";
  if (!near(a.transfer.pcie_efficiency, b.transfer.pcie_efficiency) ||
      !near(a.transfer.pageable_efficiency, b.transfer.pageable_efficiency) ||
      !seconds(a.transfer.copy_latency, b.transfer.copy_latency))
    return "a transfer figure changed";
  for (std::size_t i = 0; i < a.links.efficiency.size(); ++i) {
    if (!near(a.links.efficiency[i], b.links.efficiency[i]) ||
        !seconds(a.links.step_latency[i], b.links.step_latency[i]))
      return "a links figure changed";
  }
  if (!seconds(a.links.collective_launch, b.links.collective_launch))
    return "links.collective_launch_us changed";
  return "";
}

void check_profile(const std::string& text) {
  std::optional<epochcast::HardwareProfile> loaded;
  load_and_tell("profile",
                [&] { loaded = epochcast::load_profile_from_string(text, "fuzz.yaml"); });
  if (!loaded) return;
  const std::string written = epochcast::profile_yaml(*loaded, "fuzz");
  try {
    const std::string changed =
        difference(*loaded, epochcast::load_profile_from_string(written, "written.yaml"));
    if (!changed.empty()) {
      finding(
          fmt::format("a profile written by profile_yaml reads back different: {}\n"
                      "--- written ---\n{}",
                      changed, written));
    }
  } catch (const epochcast::InputError& error) {
    finding(
        fmt::format("a profile that loads, written by profile_yaml, does not read back: {}\n"
                    "--- written ---\n{}",
                    error.what(), written));
    return;
  }
  for (const Target& target : targets()) {
    epochcast::ScenarioSpec scenario = target.scenario;
    epochcast::apply_profile(scenario, *loaded);
    expect_input_error_at_most([&] { epochcast::sim::predict_point(scenario, target.point); });
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  verbose = epochcast::fuzz::verbose_requested();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  check_measurements(text);
  check_profile(text);
  check_results_table(text);
  return 0;
}

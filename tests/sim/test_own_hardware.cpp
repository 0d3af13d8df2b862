// A GPU the catalogue lacks: described inline in a machine file, or in a catalogue of one's own.
#include <filesystem>
#include <fstream>
#include <sstream>

#include <catch2/catch.hpp>

#include "core/spec/hardware_spec.h"
#include "core/spec/scenario_spec.h"
#include "sim/predict/predict.h"
#include "support/paths.h"
#include "support/text.h"

using namespace epochcast;
using epochcast::test::read_file;

namespace {

// The catalogue entry `id` as it is written in topologies/gpus.yaml: its lines below "  id:".
std::string catalogue_entry(const std::string& id) {
  std::istringstream lines(read_file(test::source_dir() / "topologies" / "gpus.yaml"));
  std::string entry, line;
  bool inside = false;
  while (std::getline(lines, line)) {
    if (line == "  " + id + ":") {
      inside = true;
      continue;
    }
    if (inside && line.rfind("    ", 0) != 0 && !line.empty()) break;
    if (inside) entry += line + "\n";
  }
  return entry;
}

// dgx-h100.yaml with its `gpu: h100-sxm` replaced by `replacement` (lines of its own).
std::string dgx_h100_with_gpu(const std::string& replacement) {
  std::string machine = read_file(test::source_dir() / "topologies" / "dgx-h100.yaml");
  const std::string named = "gpu: h100-sxm\n";
  const std::size_t at = machine.find(named);
  REQUIRE(at != std::string::npos);
  return machine.replace(at, named.size(), replacement);
}

const char* kScenario = R"(kind: scenario
name: own-gpu
model: resnet-50
dataset: {name: imagenet, train_samples: 16384, classes: 1000}
loader: {workers: 8, pin_memory: true, sample_cpu_us: 300}
training: {strategy: ddp, optimizer: momentum, precision: amp_bf16}
sweep: {gpus: [1, 8], batch: [64], batch_is: per_gpu}
)";

}  // namespace

TEST_CASE("an inline copy of a catalogue GPU predicts exactly as the catalogue's entry") {
  const std::string entry = catalogue_entry("h100-sxm");
  REQUIRE(entry.find("peak_tflops") != std::string::npos);
  const auto folder = std::filesystem::temp_directory_path() / "epochcast-own-gpu";
  std::filesystem::create_directories(folder);
  std::ofstream(folder / "inline.yaml") << dgx_h100_with_gpu("gpu:\n    id: h100-sxm\n" + entry);
  ScenarioSpec named = load_scenario_from_string(std::string(kScenario) + "hardware: dgx-h100\n",
                                                 "named.yaml", test::source_dir());
  ScenarioSpec inline_gpu = load_scenario_from_string(
      std::string(kScenario) + "hardware: inline.yaml\n", "inline.yaml", folder);
  CHECK(inline_gpu.machine.gpu.id == "h100-sxm");
  CHECK(inline_gpu.machine.gpu.name == named.machine.gpu.name);
  const std::vector<sim::PointResult> a = sim::predict(named);
  const std::vector<sim::PointResult> b = sim::predict(inline_gpu);
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i].epoch_seconds == b[i].epoch_seconds);
    CHECK(a[i].memory.peak == b[i].memory.peak);
    CHECK(a[i].diagnosis == b[i].diagnosis);
  }
  // Without an id the name stands for one.
  std::ofstream(folder / "no-id.yaml") << dgx_h100_with_gpu("gpu:\n" + entry);
  CHECK(load_machine(folder / "no-id.yaml", bundled_gpu_catalogue()).gpu.id ==
        "nvidia-h100-sxm5-80gb");
  std::filesystem::remove_all(folder);
}

TEST_CASE("an inline GPU needs sources as the catalogue's entries do, and a misspelt name helps") {
  const auto folder = std::filesystem::temp_directory_path() / "epochcast-own-gpu-bad";
  std::filesystem::create_directories(folder);
  std::string entry = catalogue_entry("h100-sxm");
  const std::size_t sources = entry.find("    sources:");
  REQUIRE(sources != std::string::npos);
  std::ofstream(folder / "unsourced.yaml")
      << dgx_h100_with_gpu("gpu:\n    id: mine\n" + entry.substr(0, sources));
  try {
    load_machine(folder / "unsourced.yaml", bundled_gpu_catalogue());
    FAIL("an inline GPU without sources loaded");
  } catch (const InputError& e) {
    CHECK_THAT(e.what(), Catch::Contains("gpu"));
    CHECK_THAT(e.what(), Catch::Contains("sources"));
  }
  std::ofstream(folder / "misspelt.yaml") << dgx_h100_with_gpu("gpu: rtx-409\n");
  try {
    load_machine(folder / "misspelt.yaml", bundled_gpu_catalogue());
    FAIL("an unknown GPU loaded");
  } catch (const InputError& e) {
    CHECK_THAT(e.what(), Catch::Contains("did you mean 'rtx-4090'"));
    CHECK_THAT(e.what(), Catch::Contains("described in place"));
    CHECK_THAT(e.what(), Catch::Contains("--catalogue FILE"));
  }
  std::filesystem::remove_all(folder);
}

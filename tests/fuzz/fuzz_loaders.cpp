// libFuzzer target for every YAML loader, and the reader of nvidia-smi topo -m: whatever the
// bytes, loading either succeeds or raises InputError. Any other exception, crash, leak or
// undefined behaviour is a bug.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/model/analysis.h"
#include "core/spec/hardware_spec.h"
#include "core/spec/nvidia_smi_topology.h"
#include "core/spec/scenario_spec.h"
#include "sim/network/topology.h"
#include "tests/fuzz/fuzz_common.h"

namespace {

using epochcast::fuzz::expect_input_error_at_most;

const epochcast::GpuCatalogue& catalogue() {
  static const epochcast::GpuCatalogue bundled = epochcast::bundled_gpu_catalogue();
  return bundled;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  expect_input_error_at_most(
      [&] { epochcast::analyze_model(epochcast::load_model_from_string(text, "fuzz.yaml")); });
  expect_input_error_at_most([&] { epochcast::load_gpu_catalogue_from_string(text, "fuzz.yaml"); });
  expect_input_error_at_most([&] {
    epochcast::MachineSpec m = epochcast::load_machine_from_string(text, "fuzz.yaml", catalogue());
    // A machine that loads must build into a graph with a route between every two GPUs.
    const int nodes = m.topology.network ? 2 : 1;
    epochcast::sim::Topology t = epochcast::sim::Topology::build(m, nodes);
    for (int a = 0; a < t.gpus(); ++a) {
      for (int b = 0; b < t.gpus(); ++b)
        if (a != b) t.path(a, b);
    }
  });
  // nvidia-smi topo -m: a matrix that reads becomes a machine file (or an InputError: NVLinks
  // the GPU lacks) that must load, and whose graph has a route between every two GPUs.
  expect_input_error_at_most([&] {
    const epochcast::SmiTopology smi = epochcast::parse_smi_topology(text, "fuzz.txt");
    const epochcast::SmiMachine draft =
        epochcast::smi_machine(smi, *catalogue().find("a100-sxm4-40gb"), "fuzz");
    epochcast::MachineSpec m;
    try {
      m = epochcast::load_machine_from_string(draft.yaml(), "fuzz.yaml", catalogue());
    } catch (const epochcast::InputError& error) {
      epochcast::fuzz::finding(std::string("a machine written from a matrix does not load: ") +
                               error.what());
      return;
    }
    epochcast::sim::Topology t = epochcast::sim::Topology::build(m, 1);
    for (int a = 0; a < t.gpus(); ++a) {
      for (int b = 0; b < t.gpus(); ++b)
        if (a != b) t.path(a, b);
    }
  });
  expect_input_error_at_most([&] {
    epochcast::ScenarioSpec s =
        epochcast::load_scenario_from_string(text, "fuzz.yaml", EPOCHCAST_FUZZ_DATA_DIR);
    epochcast::expand_sweep(s);
  });
  return 0;
}

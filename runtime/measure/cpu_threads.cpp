// Intra-op threads of a CPU run: see cpu_threads.h.
#include "runtime/measure/cpu_threads.h"

#include <thread>

#include <fmt/format.h>
#include <torch/torch.h>

#include "core/spec/architecture_traits.h"

namespace epochcast::runtime {

std::string compute_on_device_cores(const MachineSpec& machine) {
  if (!is_cpu_architecture(machine.gpu.architecture) || machine.gpu.sm_count < 1) return "";
  torch::set_num_threads(machine.gpu.sm_count);
  const unsigned hardware = std::thread::hardware_concurrency();
  if (hardware == 0 || static_cast<int>(hardware) >= machine.gpu.sm_count) return "";
  return fmt::format(
      "warning: {} has {} cores and this host {} hardware threads: the steps share them, and "
      "measure a slower device than the one predicted",
      machine.gpu.name, machine.gpu.sm_count, hardware);
}

}  // namespace epochcast::runtime

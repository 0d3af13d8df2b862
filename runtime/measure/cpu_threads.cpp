// Intra-op threads of a CPU run: see cpu_threads.h.
#include "runtime/measure/cpu_threads.h"

#include <cstdint>
#include <thread>

#include <dlfcn.h>
#include <fmt/format.h>
#include <torch/torch.h>

#include "core/spec/architecture_traits.h"

namespace epochcast::runtime {

namespace {

// LibTorch's set_num_threads sizes its own pool, OpenMP's and MKL's, but not a BLAS with a
// thread pool of its own: Debian's LibTorch calls the system BLAS (BLAS_INFO=generic), by default
// OpenBLAS's pthread build, which takes every core unless told otherwise
// (openblas_set_num_threads, the runtime form of OPENBLAS_NUM_THREADS), or BLIS
// (bli_thread_set_num_threads). Looked up in the process, so that a build without them links
// and runs as before.
void limit_blas_threads(int threads) {
  using SetThreads = void (*)(int);
  for (const char* name : {"openblas_set_num_threads", "bli_thread_set_num_threads"}) {
    if (void* symbol = dlsym(RTLD_DEFAULT, name))
      reinterpret_cast<SetThreads>(reinterpret_cast<std::uintptr_t>(symbol))(threads);
  }
}

}  // namespace

std::string compute_on_device_cores(const MachineSpec& machine) {
  if (!is_cpu_architecture(machine.gpu.architecture) || machine.gpu.sm_count < 1) return "";
  torch::set_num_threads(machine.gpu.sm_count);
  limit_blas_threads(machine.gpu.sm_count);
  const unsigned hardware = std::thread::hardware_concurrency();
  if (hardware == 0 || static_cast<int>(hardware) >= machine.gpu.sm_count) return "";
  return fmt::format(
      "warning: {} has {} cores and this host {} hardware threads: the steps share them, and "
      "measure a slower device than the one predicted",
      machine.gpu.name, machine.gpu.sm_count, hardware);
}

}  // namespace epochcast::runtime

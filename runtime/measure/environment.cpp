// Reads the environment from the CUDA runtime, LibTorch, the launcher and MPI, and /proc.
#include "runtime/measure/environment.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string_view>

#include <fmt/format.h>
#include <torch/torch.h>
#include <torch/version.h>
#include <unistd.h>

#include "core/build_info.h"
#include "runtime/cuda/cuda_api.h"
#include "runtime/measure/host_memory.h"

namespace epochcast::runtime {

namespace {

std::string proc_field(const char* file, const std::string& key) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) != 0) continue;
    std::size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(" \t"));
    return value;
  }
  return "";
}

// The NVIDIA kernel driver's version ("580.159.04"), from the first line of
// /proc/driver/nvidia/version: "NVRM version: NVIDIA UNIX [Open Kernel Module for] x86_64 Kernel
// Module  580.159.04  Release Build ...". Empty where there is no such file.
std::string nvidia_driver_version() {
  std::ifstream in("/proc/driver/nvidia/version");
  std::string line;
  std::getline(in, line);
  std::size_t module = line.find("Module");
  if (module == std::string::npos) return "";
  std::istringstream tokens(line.substr(module));
  for (std::string token; tokens >> token;) {
    if (std::isdigit(static_cast<unsigned char>(token.front())) &&
        token.find('.') != std::string::npos)
      return token;
  }
  return "";
}

std::string utc_now() {
  std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

}  // namespace

MeasuredEnvironment describe_environment(const DevicePlan& devices, const World& world) {
  MeasuredEnvironment e;
  e.host = world.host();
  e.torch_version = TORCH_VERSION;
  e.mpi_version = world.mpi_version();
  e.ranks = world.size();
  e.launcher = std::string(name_of(world.launcher()));
  e.cpu_threads = torch::get_num_threads();
  e.host_allocator = host_allocator_description();
  for (char** variable = environ; *variable != nullptr; ++variable) {
    if (std::string_view(*variable).starts_with("NCCL_")) e.nccl_settings.emplace_back(*variable);
  }
  std::sort(e.nccl_settings.begin(), e.nccl_settings.end());
  e.epochcast_version = project_version();
  e.started_at = utc_now();
  if (devices.cuda) {
    cuda::DeviceInfo info = cuda::device_info(0);
    e.device_kind = "cuda";
    e.device_name = info.name;
    e.device_count = devices.device_count;
    e.device_memory_bytes = info.memory_bytes;
    // The driver's own version where the kernel module says it, with the CUDA API level it
    // supports (all the CUDA runtime can tell).
    std::string driver = nvidia_driver_version();
    e.driver_version = driver.empty() ? "CUDA " + info.driver_version
                                      : fmt::format("{} (CUDA {})", driver, info.driver_version);
    e.cuda_version = info.runtime_version;
    e.nccl_version = info.nccl_version;
  } else {
    e.device_kind = "cpu";
    e.device_name = proc_field("/proc/cpuinfo", "model name");
    if (e.device_name.empty()) e.device_name = "CPU";
    e.device_count = 1;
    std::istringstream memory(proc_field("/proc/meminfo", "MemTotal"));
    std::int64_t kib = 0;
    memory >> kib;
    e.device_memory_bytes = kib * 1024;
  }
  return e;
}

}  // namespace epochcast::runtime

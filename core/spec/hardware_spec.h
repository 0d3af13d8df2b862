// Hardware as specs describe it: the GPU catalogue (topologies/gpus.yaml) and machine files
// (topologies/<machine>.yaml). Every catalogue figure carries its source.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/input_error.h"
#include "core/units.h"

namespace epochcast {

// Numeric precisions a GPU can compute in. tf32/fp16/bf16 peaks are tensor-core rates where
// the GPU has tensor cores for them, else the CUDA-core rate.
enum class Precision { fp32, tf32, fp16, bf16 };
inline constexpr std::string_view kPrecisionNames[] = {"fp32", "tf32", "fp16", "bf16"};

struct NvlinkSpec {
  int generation = 0;
  int links = 0;
  BytesPerSecond per_link_per_direction;
};

struct GpuSpec {
  std::string id;    // catalogue key, e.g. "gtx-1080-ti"
  std::string name;  // marketing name
  std::string architecture;
  int sm_count = 0;
  Bytes memory;
  BytesPerSecond memory_bandwidth;
  // Dense peak throughput per precision; absent when the GPU cannot run that precision.
  std::map<Precision, FlopsPerSecond> peak;
  int pcie_generation = 0;
  int pcie_lanes = 0;
  std::optional<NvlinkSpec> nvlink;
  std::map<std::string, std::string> sources;  // figure key -> where it comes from
  SourceMark mark;

  std::optional<FlopsPerSecond> peak_for(Precision precision) const;
  // Unidirectional PCIe bandwidth from generation and lanes (PCI-SIG line rates and encoding).
  BytesPerSecond pcie_bandwidth() const;
};

struct GpuCatalogue {
  std::string source_file;
  std::vector<GpuSpec> gpus;

  const GpuSpec* find(std::string_view id) const;
};

struct HostSpec {
  std::string cpu;
  int sockets = 1;
  int cores = 1;  // physical cores in total
  std::optional<Bytes> memory;
};

// A machine: some nodes, each with GPUs of one model and a host. Topology (links, switches,
// NICs) extends this format in the multi-GPU work.
struct MachineSpec {
  std::string name;
  std::string description;
  std::string source_file;
  GpuSpec gpu;
  int gpus_per_node = 1;
  int nodes = 1;
  HostSpec host;
  // The hardware profile (topologies/profiles/) this machine runs with unless a scenario
  // names another: `profile:` in the file, else the bundled default.
  std::filesystem::path profile_file;

  int total_gpus() const { return gpus_per_node * nodes; }
};

GpuCatalogue load_gpu_catalogue(const std::filesystem::path& file);
GpuCatalogue load_gpu_catalogue_from_string(const std::string& text, const std::string& name);

// The catalogue bundled with epochcast (topologies/gpus.yaml in the data directory).
const GpuCatalogue& bundled_gpu_catalogue();

// Loads a machine file; its `gpu` must name an entry of `catalogue`.
MachineSpec load_machine(const std::filesystem::path& file, const GpuCatalogue& catalogue);
MachineSpec load_machine_from_string(const std::string& text, const std::string& name,
                                     const GpuCatalogue& catalogue);

}  // namespace epochcast

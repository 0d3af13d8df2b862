// What the models need to know about each processor architecture a catalogue entry may name, in
// one table: NVIDIA's GPU generations, oldest first, then the CPUs the runtime measures on. A
// name outside the table is refused where it is read (an InputError), never modelled as a default.
#pragma once

#include <array>
#include <cstddef>
#include <string_view>

namespace epochcast {

// The tile shapes cuBLAS/CUTLASS choose GEMM kernels from on an architecture.
enum class GemmTiles {
  rows_of_128,  // Maxwell and Pascal's SGEMM kernels: tiles of 128 rows
  tensor_core,  // Volta and later: the tensor-core tile shapes, in both directions
  // A CPU's BLAS: blocks that never pad, and operands packed before they are computed on. The
  // Goto/van de Geijn GEMM (Goto and van de Geijn, "Anatomy of High-Performance Matrix
  // Multiplication", ACM TOMS 34(3), 2008; OpenBLAS, BLIS, MKL, oneDNN) copies each panel of A
  // and B into a cache-sized contiguous buffer in a pass of its own, then its micro-kernel
  // computes from cache: the streaming and the arithmetic add rather than overlap.
  cpu_blas,
};

struct ArchitectureTraits {
  std::string_view name;  // the catalogue's spelling ("hopper", "x86-64")
  bool cpu = false;       // a host CPU (the runtime's host device), not a GPU generation
  // Resident threads per SM, the occupancy limit of a launch (CUDA C++ Programming Guide,
  // "Technical Specifications per Compute Capability": 1,024 at 7.5, 1,536 at 8.9). Ampere is
  // taken as the A100's 2,048 (GA10x boards have 1,536; it only sets how far reductions split).
  int max_threads_per_sm = 2048;
  GemmTiles gemm_tiles = GemmTiles::tensor_core;
  // Batched SGEMM picks among Volta's tile set (cuBLAS's volta_sgemm_*_batched kernels, which
  // Turing also runs) rather than Ampere's single 128x128 tile.
  bool volta_batched_sgemm = false;
  // NCCL enables its LL128 protocol by default on this generation (NCCL src/graph/tuning.cc:
  // compute capability 7.0, 8.0 and 9.0 only).
  bool nccl_ll128 = false;
  // The NVSwitch generation paired with it reduces and multicasts in the switch (NVLink SHARP,
  // NCCL's NVLS algorithms: Hopper and later).
  bool nvlink_sharp = false;
  // NCCL's caps on its low-latency protocols, from the tuner's constants (src/tuning/cost_model.cc,
  // commit 1fc949c; one row per generation: Volta's for compute capability below 8.0, Ampere's
  // below 9.0), in GB/s of bus traffic a rank:
  // - LL at most this on one node, two nodes, three or more (llMaxBws; Hopper's one-node figure
  //   was 87.7 in NCCL 2.20);
  // - LL128 at most this a channel (perChMaxRingLL128Bws).
  std::array<double, 3> nccl_ll_max_gbps = {39.0, 39.0, 20.4};
  double nccl_ll128_channel_gbps = 20.0;
};

inline constexpr ArchitectureTraits kArchitectures[] = {
    {.name = "maxwell", .gemm_tiles = GemmTiles::rows_of_128},
    {.name = "pascal", .gemm_tiles = GemmTiles::rows_of_128},
    {.name = "volta", .volta_batched_sgemm = true, .nccl_ll128 = true},
    {.name = "turing", .max_threads_per_sm = 1024, .volta_batched_sgemm = true},
    {.name = "ampere", .nccl_ll128 = true, .nccl_ll_max_gbps = {87.7, 22.5, 19.0}},
    {.name = "ada", .max_threads_per_sm = 1536, .nccl_ll_max_gbps = {87.7, 22.5, 19.0}},
    {.name = "hopper",
     .nccl_ll128 = true,
     .nvlink_sharp = true,
     .nccl_ll_max_gbps = {141.0, 45.0, 35.0},
     .nccl_ll128_channel_gbps = 36.7},
    {.name = "blackwell",
     .nvlink_sharp = true,
     .nccl_ll_max_gbps = {282.0, 90.0, 70.0},
     .nccl_ll128_channel_gbps = 40.0},
    {.name = "x86-64", .cpu = true, .gemm_tiles = GemmTiles::cpu_blas},
    {.name = "aarch64", .cpu = true, .gemm_tiles = GemmTiles::cpu_blas},
};
inline constexpr std::size_t kArchitectureCount = std::size(kArchitectures);

// The table's names in its order: the choices a catalogue's `architecture` key accepts.
inline constexpr std::array<std::string_view, kArchitectureCount> kArchitectureNames = [] {
  std::array<std::string_view, kArchitectureCount> names{};
  for (std::size_t i = 0; i < kArchitectureCount; ++i)
    names[i] = kArchitectures[i].name;
  return names;
}();

// The traits of `name`, or nullptr when the table has no such architecture.
const ArchitectureTraits* find_architecture(std::string_view name);
// The traits of `name`. An unknown name is an InputError on the key gpu.architecture that lists
// the table's names (a spec made in code must use them too).
const ArchitectureTraits& architecture_traits(std::string_view name);
// Whether `architecture` is a CPU's (the runtime's host device), not a GPU generation.
bool is_cpu_architecture(std::string_view architecture);

}  // namespace epochcast

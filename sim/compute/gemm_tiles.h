// How BLAS and convolution libraries cut a matrix product into output tiles, and how much of
// the GPU those tiles keep busy.
//
// A product of `batches` (m x k) by (k x n) matrices is cut into tm x tn output tiles; when
// there are too few tiles to give every resident slot one, the reduction (k) is split as well
// (split-K). Tiles run in waves of SMs x 2 resident tiles. What a kernel pays for is every
// slot of every wave over a whole tile, so three losses fold into one utilisation: the
// padding of the edge tiles, the idle slots of the last wave, and the uneven last slice of a
// split reduction.
#pragma once

#include <string_view>

namespace epochcast::sim {

// The tile shapes a GPU generation's libraries choose from.
enum class TileFamily {
  // Maxwell/Pascal-era cuBLAS and cuDNN: 128 output rows per tile, 32 to 128 columns
  // (kernel names maxwell_sgemm_128x64, maxwell_scudnn_128x32/128x64/128x128).
  rows_of_128,
  // Volta and later: also 64- and 32-row tiles (volta_sgemm_64x64, 32x128, 128x32, ...).
  mixed,
  // A CPU (the runtime's host device): its BLAS blocks a product over the cores with no
  // padding worth modelling; only whole rounds of the cores count.
  unpadded,
};
// The family of an architecture of kArchitectureNames (core/spec/hardware_spec.h); any other
// name is std::invalid_argument (the catalogue loader refuses such names first).
TileFamily tile_family(std::string_view architecture);

struct TileChoice {
  int tile_m = 128, tile_n = 128;
  double split_k = 1;  // slices of the reduction
  double units = 1;    // tiles x split: the blocks launched
  double waves = 1;
  double slot_work = 0;    // multiply-adds the launched slots cost, padding and idling included
  double utilisation = 1;  // useful multiply-adds / slot_work, in (0, 1]
};

inline constexpr int kResidentTilesPerSm = 2;

// The tile (and split) with the least slot work, as the libraries' heuristics pick the kernel
// that fills the GPU with the least waste; ties go to the larger tile. Sizes in double: they
// come from user files and batches.
TileChoice choose_tiles(double batches, double m, double n, double k, int sms, TileFamily family);

}  // namespace epochcast::sim

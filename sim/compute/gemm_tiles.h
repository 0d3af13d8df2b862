// How BLAS and convolution libraries cut a matrix product into output tiles, and how much of
// the GPU those tiles keep busy.
//
// A product of `batches` (m x k) by (k x n) matrices is cut into tm x tn output tiles; when
// there are too few tiles to give every resident slot one, the reduction (k) is split as well
// (split-K). Tiles run in waves of SMs x the tiles resident on each. What a kernel pays for is
// every slot of every wave over a whole tile, so these losses fold into one utilisation: the
// padding of the edge tiles, the idle slots of the last wave, the uneven last slice of a split
// reduction and, where the TileCosts say so, each tile's costs beyond its multiply-adds.
#pragma once

#include <string_view>

#include "core/model/analysis.h"

namespace epochcast::sim {

// The tile shapes a library chooses from.
enum class TileFamily {
  // Maxwell/Pascal-era cuDNN and tensor-core-less libraries: 128 output rows per tile, 32 to
  // 128 columns (maxwell_scudnn_128x32/128x64/128x128).
  rows_of_128,
  // Volta and later: also 64- and 32-row tiles (cuBLAS/CUTLASS tensor-core and cuDNN tiles).
  mixed,
  // A CPU (the runtime's host device): its BLAS blocks a product over the cores with no
  // padding worth modelling; only whole rounds of the cores count.
  unpadded,
  // cuBLAS's CUDA-core SGEMM kernels (fp32 products without tensor cores), as CUPTI names
  // them in the public kernel data (cuBLAS 12.1; docs/evidence/sgemm-tiles.md). Single
  // products: Pascal's maxwell_sgemm 128x32, 32x128 and 64x64 for nn.Linear's forward ("tn");
  // Volta's, Turing's and Ampere's 128x128, 128x64, 128x32, 32x128, 64x64 and the sliced 64x32
  // and 32x32 for every layout. Pascal's other layouts keep `rows_of_128` (openai-gemm's cuBLAS
  // table pads a small "nn" minibatch to 128 rows). Batched products: Pascal's
  // maxwell_sgemm_128x64; Volta's and Turing's volta_sgemm 128x64, 64x64, 128x32 and 32x128;
  // Ampere's ampere_sgemm_128x128 alone; they never split the reduction (the grid's third
  // dimension is the batch).
  sgemm_pascal_tn,
  sgemm_volta,
  sgemm_batched_pascal,
  sgemm_batched_volta,
  sgemm_batched_ampere,
};
// The family of an architecture (core/spec/architecture_traits.h) for tensor-core GEMMs and
// convolutions; an unknown name is an InputError (the catalogue loader refuses such names first).
TileFamily tile_family(std::string_view architecture);
// cuBLAS's CUDA-core SGEMM family on a GPU architecture for a single product in `layout` or a
// batched one (a CPU's: unpadded). Architectures after Ampere take Ampere's kernels (no kernel
// data of theirs yet).
TileFamily sgemm_family(std::string_view architecture, bool batched, GemmLayout layout);

// How many tiles share an SM, and what a tile costs beyond its tm x tn multiply-adds per step
// of the reduction.
struct TileCosts {
  // Multiply-adds' worth of time each of a step's tm + tn operand elements costs to stage (the
  // staging cycles per element times the SM's FP32 lanes); a step costs the longer of staging
  // and its tm x tn multiply-adds (the two overlap). The GEMM efficiency is what a 128x128
  // tile reaches (the architecture's large-GEMM figure), so where staging bounds even that tile
  // (an SM with many lanes) every step is costed relative to it.
  double staging = 0;
  int tiles_per_sm = 2;         // tiles in flight on an SM at once
  bool split_reduction = true;  // whether too few tiles may split k (GemmShape::split_reduction)
};

struct TileChoice {
  int tile_m = 128, tile_n = 128;
  double split_k = 1;  // slices of the reduction
  double units = 1;    // tiles x split: the blocks launched
  double waves = 1;
  double slot_work = 0;    // multiply-adds the launched slots cost, padding and idling included
  double utilisation = 1;  // useful multiply-adds / slot_work, in (0, 1]
};

// The tile (and split) with the least slot work, as the libraries' heuristics pick the kernel
// that fills the GPU with the least waste; ties go to the larger tile. Sizes in double: they
// come from user files and batches.
TileChoice choose_tiles(double batches, double m, double n, double k, int sms, TileFamily family,
                        const TileCosts& costs = {});

}  // namespace epochcast::sim

// Tile and split-K choice.
#include "sim/compute/gemm_tiles.h"

#include <algorithm>
#include <cmath>

#include "core/spec/architecture_traits.h"
#include "core/spec/hardware_spec.h"

namespace epochcast::sim {

namespace {

struct Tile {
  int m, n;
};
// Largest first, so that ties keep the larger tile.
constexpr Tile kRowsOf128[] = {{128, 128}, {128, 64}, {128, 32}};
constexpr Tile kMixed[] = {{128, 128}, {128, 64}, {64, 128}, {64, 64}, {128, 32}, {32, 128}};
// cuBLAS names a kernel's tile AxB with A along the output's columns (n) and B along its rows
// (m): for nn.Linear(6233 outputs) on 215 rows, ampere_sgemm_128x64 launches a grid of 49 x 4.
constexpr Tile kSgemmPascalTn[] = {{128, 32}, {64, 64}, {32, 128}};
constexpr Tile kSgemmVolta[] = {{128, 128}, {64, 128}, {128, 32}, {32, 128},
                                {64, 64},   {32, 64},  {32, 32}};
constexpr Tile kSgemmBatchedPascal[] = {{64, 128}};
constexpr Tile kSgemmBatchedVolta[] = {{64, 128}, {64, 64}, {32, 128}, {128, 32}};
constexpr Tile kSgemmBatchedAmpere[] = {{128, 128}};
// A split-K slice covers at least this much of the reduction (below it the partial sums'
// reduction costs more than the parallelism gains).
constexpr double kSplitKSlice = 128;
// Larger tiles reuse each operand they load over more outputs, so the libraries keep them
// unless a smaller tile saves a clear share of the slot work. A modelling choice, not a fitted
// figure: it reproduces the tiles CUPTI records for cuBLAS SGEMM on a V100 (128x128 at 2048^3,
// 128x64 at 4096^3, where 128x128 would cost 7.7% more slots).
constexpr double kLargerTileTolerance = 0.05;

}  // namespace

TileFamily tile_family(std::string_view architecture) {
  switch (architecture_traits(architecture).gemm_tiles) {
    case GemmTiles::rows_of_128:
      return TileFamily::rows_of_128;
    case GemmTiles::cpu_blas:
      return TileFamily::unpadded;
    case GemmTiles::tensor_core:
      break;
  }
  return TileFamily::mixed;  // cuBLAS/CUTLASS's tensor-core tile shapes
}

TileFamily sgemm_family(std::string_view architecture, bool batched, GemmLayout layout) {
  switch (tile_family(architecture)) {
    case TileFamily::unpadded:
      return TileFamily::unpadded;
    case TileFamily::rows_of_128:
      if (batched) return TileFamily::sgemm_batched_pascal;
      return layout == GemmLayout::tn ? TileFamily::sgemm_pascal_tn : TileFamily::rows_of_128;
    default:
      break;
  }
  if (!batched) return TileFamily::sgemm_volta;
  if (architecture_traits(architecture).volta_batched_sgemm) return TileFamily::sgemm_batched_volta;
  return TileFamily::sgemm_batched_ampere;
}

namespace {

// What a CPU's BLAS does (the previous GPU rule, kept for the runtime's host device): blocks of
// the largest edge that still gives every core one, else a split reduction; edges never pad (a
// CPU kernel handles remainders at full speed), so only whole rounds of the cores count.
TileChoice unpadded_choice(double batches, double m, double n, double k, double capacity) {
  double tiles = 0;
  int edge = 16;
  for (int e : {128, 64, 32, 16}) {
    edge = e;
    tiles = batches * std::ceil(m / e) * std::ceil(n / e);
    if (tiles >= capacity) break;
  }
  double split = 1;
  if (tiles < capacity) {
    split = std::max(1.0, std::min(std::ceil(k / kSplitKSlice), std::floor(capacity / tiles)));
  }
  const double units = tiles * split;
  const double waves = std::ceil(units / capacity);
  const double utilisation = std::min(1.0, units / (waves * capacity));
  return {edge, edge, split, units, waves, batches * m * n * k / utilisation, utilisation};
}

// A tile's blocks (split to fill one wave when too few, never below a slice's worth of k) and
// the slot work they cost: a partial wave still takes a whole tile's time on the slots it uses.
// Batched SGEMM kernels never split (their grid's third dimension is the batch).
TileChoice padded_cost(Tile tile, double batches, double m, double n, double k, double capacity,
                       const TileCosts& costs, bool may_split) {
  const double tiles = batches * std::ceil(m / tile.m) * std::ceil(n / tile.n);
  double split = 1;
  if (may_split && tiles < capacity) {
    split = std::max(1.0, std::min(std::floor(k / kSplitKSlice), std::floor(capacity / tiles)));
  }
  const double units = tiles * split;
  const double waves = std::ceil(units / capacity);
  // Staging the next step's operands overlaps this step's multiply-adds (the kernels pipeline
  // them through shared memory), so a step takes the longer of the two.
  // Relative to a 128x128 tile, whose step the GEMM efficiency already covers (TileCosts).
  const double reference = std::max(1.0, costs.staging * (128 + 128) / (128.0 * 128));
  const double per_step =
      std::max(static_cast<double>(tile.m) * tile.n, costs.staging * (tile.m + tile.n)) / reference;
  const double slot_work = waves * capacity * per_step * std::ceil(k / split);
  return {tile.m,
          tile.n,
          split,
          units,
          waves,
          slot_work,
          std::min(1.0, batches * m * n * k / slot_work)};
}

// The least slot work, then the first (largest) tile within the tolerance of it.
template <std::size_t N>
TileChoice padded_choice(const Tile (&candidates)[N], double batches, double m, double n, double k,
                         double capacity, const TileCosts& costs, bool may_split = true) {
  TileChoice choices[N];
  double least = 0;
  for (std::size_t i = 0; i < N; ++i) {
    choices[i] = padded_cost(candidates[i], batches, m, n, k, capacity, costs,
                             may_split && costs.split_reduction);
    if (i == 0 || choices[i].slot_work < least) least = choices[i].slot_work;
  }
  for (const TileChoice& c : choices) {
    if (c.slot_work <= least * (1 + kLargerTileTolerance)) return c;
  }
  return choices[0];
}

}  // namespace

TileChoice choose_tiles(double batches, double m, double n, double k, int sms, TileFamily family,
                        const TileCosts& costs) {
  batches = std::max(batches, 1.0);
  m = std::max(m, 1.0);
  n = std::max(n, 1.0);
  k = std::max(k, 1.0);
  const double capacity = static_cast<double>(sms) * costs.tiles_per_sm;
  switch (family) {
    case TileFamily::unpadded:
      return unpadded_choice(batches, m, n, k, capacity);
    case TileFamily::rows_of_128:
      return padded_choice(kRowsOf128, batches, m, n, k, capacity, costs);
    case TileFamily::mixed:
      return padded_choice(kMixed, batches, m, n, k, capacity, costs);
    case TileFamily::sgemm_pascal_tn:
      return padded_choice(kSgemmPascalTn, batches, m, n, k, capacity, costs);
    case TileFamily::sgemm_volta:
      return padded_choice(kSgemmVolta, batches, m, n, k, capacity, costs);
    case TileFamily::sgemm_batched_pascal:
      return padded_choice(kSgemmBatchedPascal, batches, m, n, k, capacity, costs, false);
    case TileFamily::sgemm_batched_volta:
      return padded_choice(kSgemmBatchedVolta, batches, m, n, k, capacity, costs, false);
    case TileFamily::sgemm_batched_ampere:
      return padded_choice(kSgemmBatchedAmpere, batches, m, n, k, capacity, costs, false);
  }
  return padded_choice(kMixed, batches, m, n, k, capacity, costs);
}

}  // namespace epochcast::sim

// ATen's launch rules (PyTorch 2.1), written from its launch code: each rule below names the
// file it follows. Sizes are doubles: they come from user input and may exceed 64 bits.
#include "sim/compute/kernel_launch.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/model/kernel_launches.h"
#include "core/yaml/strict_yaml.h"

namespace epochcast::sim {

namespace {

double ceil_div(double a, double b) {
  return std::ceil(a / b);
}

// The largest power of two not above n (at least 1): ATen's lastPow2 / last_pow2.
double last_pow2(double n) {
  return n < 2 ? 1 : std::exp2(std::floor(std::log2(n)));
}

// The smallest power of two not below n (at least 1).
double next_pow2(double n) {
  return n <= 1 ? 1 : std::exp2(std::ceil(std::log2(n)));
}

std::string count_text(double n) {
  return n < 1e15 ? yaml::readable_integer(static_cast<std::int64_t>(n)) : fmt::format("{:.3g}", n);
}

// Normalization.cuh's getNumThreads: the first of 32, 64, ..., 512 that covers n.
double bn_threads(double n) {
  for (double t : {32.0, 64.0, 128.0, 256.0}) {
    if (n <= t) return t;
  }
  return 512;
}

// Normalization.cuh's flexible_launch_configs(reduction, stride, coop): the grid of the
// channels-last kernels, `stride` channels across x, the reduction split over y.
LaunchGrid flexible_grid(double reduction, double channels, bool coop) {
  constexpr double kMaxBlock = 512, kTileWidth = 32, kElementsPerThread = 16, kMaxHeight = 128;
  double x = std::min(last_pow2(channels), kTileWidth);
  const double y =
      std::min(last_pow2(ceil_div(reduction, kElementsPerThread)), std::floor(kMaxBlock / x));
  if (x * y != kMaxBlock) x = std::min(last_pow2(channels), std::floor(kMaxBlock / y));
  const double grid_x = ceil_div(channels, x);
  double grid_y = std::min(ceil_div(reduction, y * kElementsPerThread), kMaxHeight);
  // A grid-wide reduction is not worth it over a short reduction dimension.
  if (coop && grid_y < 8) grid_y = 1;
  return {grid_x * grid_y, static_cast<int>(x * y),
          fmt::format("channels-last: {} x {} blocks over {} channels", count_text(grid_x),
                      count_text(grid_y), count_text(channels))};
}

// Reduce.cuh's setReduceConfig: `outputs` values of `inputs` inputs each. Threads cover the
// outputs (or the inputs, when those are adjacent) across a warp, then the inputs or more
// outputs across warps; when each thread would still sum 256 values or more and the grid is
// small, the inputs are split across blocks as well, up to a grid that fills every SM.
LaunchGrid reduction_grid(double outputs, double inputs, bool inputs_adjacent, bool vectorized,
                          const LaunchTarget& target) {
  constexpr double kMaxThreads = 512, kWarp = 32, kMinPerThread = 16, kMaxPerThread = 256;
  double dim0 = inputs_adjacent ? inputs : outputs, dim1 = inputs_adjacent ? outputs : inputs;
  double output_vector = 1;
  if (inputs_adjacent) {
    if (vectorized && dim0 > 128) dim0 = std::floor(dim0 / 4);  // loads of four inputs
  } else {
    // Four (or two) adjacent outputs a thread where they divide evenly (get_output_vec_size).
    output_vector = std::fmod(outputs, 4) == 0 ? 4 : std::fmod(outputs, 2) == 0 ? 2 : 1;
    dim0 = std::floor(dim0 / output_vector);
  }
  const double most = kMaxThreads / output_vector;
  auto pow2 = [&](double d) { return d < most ? last_pow2(d) : most; };
  double width = std::min(pow2(dim0), kWarp);
  const double height = std::min(pow2(dim1), std::floor(most / width));
  width = std::min(pow2(dim0), std::floor(most / height));
  const double threads = width * height;
  double step_input = 1, step_output = 1;
  (inputs_adjacent ? step_input : step_output) *= width;
  const bool split_warps = ceil_div(inputs, step_input) >= height * kMinPerThread ||
                           ceil_div(inputs, step_input) >= kMaxPerThread;
  (split_warps ? step_input : step_output) *= height;
  const double grid_x = ceil_div(std::floor(outputs / output_vector), step_output);
  const double per_thread = ceil_div(inputs, step_input);
  const double target_grid = target.sm_count * std::floor(target.max_threads_per_sm / threads);
  double blocks_per_output = 1;
  if (split_warps && per_thread >= kMaxPerThread && grid_x <= target_grid) {
    blocks_per_output =
        std::max(std::min(ceil_div(target_grid, grid_x), ceil_div(per_thread, kMinPerThread)),
                 ceil_div(per_thread, kMaxPerThread));
  }
  return {grid_x * blocks_per_output, static_cast<int>(threads),
          fmt::format("reduction to {} outputs of {} inputs: {} x {} blocks", count_text(outputs),
                      count_text(inputs), count_text(grid_x), count_text(blocks_per_output))};
}

// SoftMax.cu's dispatch (host_softmax and its backward): rows of up to 1,024 elements and 4 KiB
// go to the persistent kernels of PersistentSoftmax.cuh, a warp a row (two rows when they fit in
// 128 elements), four warps a block; longer rows get a block each, its width from
// SoftMax_getBlockSize (16-byte loads, half the row's vectors at most, 32 to 1,024 threads).
LaunchGrid softmax_grid(double rows, double length, int element_bytes) {
  length = std::max(length, 1.0);
  // (A length past 1,024, or not a number, takes the block path without a cast.)
  if (length <= 1024 &&
      launch::softmax_row_in_registers(static_cast<std::int64_t>(length), element_bytes)) {
    const double padded = next_pow2(length);
    const double warp = std::min(padded, 32.0);
    const double rows_per_warp = padded <= 128 ? 2 : 1;
    const double rows_per_block = (128 / warp) * rows_per_warp;
    return {ceil_div(rows, rows_per_block), 128,
            fmt::format("softmax, {} rows a block of 128 threads ({} rows)",
                        count_text(rows_per_block), count_text(rows))};
  }
  const double vector = 16.0 / element_bytes;
  double widest = std::min(std::floor(length / vector), 1024.0);
  if (vector > 1) widest = std::floor(widest / 2);
  const double threads = std::max(next_pow2(widest), 32.0);
  return {rows, static_cast<int>(threads),
          fmt::format("softmax, a block of {} threads per row ({} rows)", count_text(threads),
                      count_text(rows))};
}

// SoftMax.cu's spatial kernels (scores of [batch, classes, positions]): threads along the
// positions (up to 1,024), and along the classes too when positions are few (64 or fewer,
// 64 classes or more); as many blocks as the GPU holds at once (the occupancy query stands for
// resident threads here), positions first, then samples.
LaunchGrid spatial_softmax_grid(double samples, double positions, double classes,
                                const LaunchTarget& target) {
  double across_classes = 1;
  if (positions <= 64 && classes >= 64) {
    while (positions * across_classes * 2 <= 1024 && across_classes * 2 <= classes)
      across_classes *= 2;
  }
  const double along_positions = std::min(positions, std::floor(1024 / across_classes));
  const double threads = across_classes * along_positions;
  const double resident =
      target.sm_count * std::max(1.0, std::floor(target.max_threads_per_sm / threads));
  const double position_blocks = std::min(ceil_div(positions, along_positions), resident);
  const double sample_blocks = std::min(ceil_div(resident, position_blocks), samples);
  return {position_blocks * sample_blocks, static_cast<int>(threads),
          fmt::format("softmax across {} classes at each of {} positions: {} x {} blocks",
                      count_text(classes), count_text(positions), count_text(position_blocks),
                      count_text(sample_blocks))};
}

}  // namespace

LaunchGrid launch_grid(const KernelLaunch& l, std::int64_t batch, const LaunchTarget& target) {
  const double units = std::max(scaled(l.units, batch), 1.0);
  const double length = std::max(scaled(l.length, batch), 1.0);
  LaunchGrid grid;
  switch (l.kind) {
    case LaunchKind::blocks: {
      const double per_block = static_cast<double>(std::max<std::int64_t>(l.per_block, 1));
      grid = {ceil_div(units, per_block), l.threads,
              l.per_block == 1
                  ? fmt::format("{} blocks of {} threads", count_text(units), l.threads)
                  : fmt::format("a block per {} elements", count_text(per_block))};
      if (l.units.per_sample == 0 && l.units.fixed == 1) {
        grid.rule = fmt::format("one block of {} threads", l.threads);
      }
      break;
    }
    case LaunchKind::softmax:
      grid = softmax_grid(units, length, l.element_bytes);
      break;
    case LaunchKind::spatial_softmax:
      grid = spatial_softmax_grid(static_cast<double>(std::max<std::int64_t>(batch, 1)),
                                  std::max(static_cast<double>(l.units.per_sample), 1.0), length,
                                  target);
      break;
    case LaunchKind::reduction: {
      // A channel's positions (length: positions per sample x batch for a bias gradient, or
      // positions for a mean over height and width) are adjacent in channels-first memory,
      // unless there is one per sample ([batch, channels]: the channels are). Inputs are loaded
      // four at a time when they are adjacent along one reduced dimension.
      bool adjacent = l.layout == ReductionLayout::rows;
      bool one_dimension = l.layout == ReductionLayout::rows;
      if (l.layout == ReductionLayout::channels) {
        const std::int64_t positions =
            l.length.per_sample != 0 ? l.length.per_sample : l.length.fixed;
        adjacent = !(target.channels_last && l.four_d) && positions > 1;
        one_dimension = l.length.per_sample == 0;
      }
      grid = reduction_grid(units, length, adjacent, adjacent && one_dimension, target);
      break;
    }
    case LaunchKind::channel_statistics:
    case LaunchKind::channel_transform: {
      // Normalization.cu takes the channels-last kernels for NHWC tensors and for [batch,
      // features] ones (stride 1 along the channels), the channels-first ones otherwise.
      const double spatial = std::max(static_cast<double>(l.length.per_sample), 1.0);
      const double samples = static_cast<double>(std::max<std::int64_t>(batch, 1));
      if ((target.channels_last && l.four_d) || spatial <= 1) {
        grid = flexible_grid(length, units, l.kind == LaunchKind::channel_statistics);
      } else if (l.kind == LaunchKind::channel_statistics) {
        // batch_norm_collect_statistics_kernel and the fused backward: a block per channel.
        grid = {units, 512, fmt::format("a block per channel ({})", count_text(units))};
      } else {
        // batch_norm_transform_input_kernel: a row of blocks per channel over the samples.
        const double x = std::max(bn_threads(spatial / 4), std::min(bn_threads(spatial), 64.0));
        const double y = std::max(std::floor(64 / x), 1.0);
        const double per_channel = std::min(
            std::max(1.0, std::min(std::floor(256 * 1024 / units), ceil_div(samples, y))), 65535.0);
        grid = {units * per_channel, static_cast<int>(x * y),
                fmt::format("{} blocks per channel ({} channels)", count_text(per_channel),
                            count_text(units))};
      }
      break;
    }
    case LaunchKind::column_sums: {
      // GammaBetaBackward: few rows, 256 columns a block; else 32 (or 16) columns a block.
      const double rows = length, columns = units;
      if (rows < 128) {
        grid = {ceil_div(columns, 256), 256, "gamma/beta gradient, a block per 256 columns"};
      } else if (std::fmod(rows, 32) == 0 && std::fmod(columns, 32) == 0) {
        grid = {ceil_div(columns, 32), 1024, "gamma/beta gradient, a block per 32 columns"};
      } else {
        grid = {ceil_div(columns, 16), 512, "gamma/beta gradient, a block per 16 columns"};
      }
      break;
    }
  }
  grid.blocks = std::max(grid.blocks, 1.0);
  return grid;
}

}  // namespace epochcast::sim

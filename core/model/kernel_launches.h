// The launches of PyTorch's CUDA kernels (ATen, PyTorch 2.1, the version of the kernel
// measurements in shared/data/kernels), as KernelLaunch records: which rule of
// sim/compute/kernel_launch.h cuts each kernel into blocks, with its sizes. Each constructor
// names the ATen source whose launch it follows. `PerBatch` sizes grow with the batch.
#pragma once

#include <cstdint>

#include "core/model/analysis.h"

namespace epochcast::launch {

using Count = PerBatch<std::int64_t>;

// TensorIterator's element-wise kernels (ATen/native/cuda/CUDALoops.cuh, thread_constants.h):
// 128 threads of 4 elements, a block per 512 elements. Every add, mul, relu, gelu and tanh of the
// kernel measurements ran so on the A100 and the T4.
inline KernelLaunch elementwise(Count elements) {
  return {LaunchKind::blocks, elements, {}, 512, 128};
}

// A block per row of `threads` (LayerNorm forward and its input gradient: vectorized_layer_norm_
// kernel and layer_norm_grad_input_kernel, <<<M, 128>>>, ATen/native/cuda/layer_norm_kernel.cu).
inline KernelLaunch per_row(Count rows, int threads) {
  return {LaunchKind::blocks, rows, {}, 1, threads};
}

// A block per `per_block` units of `threads`: multi_tensor_apply's chunks (65,536 elements, 512
// threads, ATen/native/cuda/MultiTensorApply.cuh), PyTorch's own direct kernels
// (GET_BLOCKS: 1,024 threads a block, one output each, ATen/cuda/detail/KernelUtils.h).
inline KernelLaunch blocks_of(Count units, std::int64_t per_block, int threads) {
  return {LaunchKind::blocks, units, {}, per_block, threads};
}

// One block whatever the size (nll_loss's reduced forward and backward for [rows, classes]:
// <<<1, NLL_LOSS_THREADS = 32>>>, ATen/native/cuda/Loss.cu).
inline KernelLaunch single_block(int threads) {
  return {LaunchKind::blocks, {0, 1}, {}, 1, threads};
}

// Whether SoftMax.cu's dispatch runs rows of `length` elements of `element_bytes` in its
// persistent kernels (PersistentSoftmax.cuh: a warp a row, the row held in registers): rows of
// up to 1,024 elements and 4 KiB; longer ones get cunn_SoftMaxForward/Backward, a block a row.
inline bool softmax_row_in_registers(std::int64_t length, int element_bytes) {
  return length <= 1024 && length * element_bytes <= 4096;
}

// The memory traffic of a softmax (or log-softmax) kernel of PyTorch 2.1, in half row-sized
// passes (a half for a re-read that the caches serve half the time). The persistent kernels read
// their row once and write once: forward 2 passes; backward reads the gradient and the output and
// writes, 3. cunn_SoftMaxForward reads the row three times (the max, the sum of exponentials, the
// write-out) and writes once; cunn_SoftMaxBackward reads the gradient for the sum, then the
// gradient again and the output for the result, and writes. **Assumed**: half of a block's
// re-reads of the row it has just read are served by the caches: forward 3 passes, backward 3.5
// (the kernel measurements behind it: the default profile's source of
// gpu.bandwidth_relative). Later PyTorch releases read rows that fit in shared memory once
// (cunn_SoftMaxForwardSmem, PR 122970): not modelled.
inline std::int64_t softmax_half_passes(std::int64_t length, int element_bytes, bool backward) {
  if (softmax_row_in_registers(length, element_bytes)) return backward ? 6 : 4;
  return backward ? 7 : 6;
}

// Softmax or log-softmax over the last dimension: `rows` rows of `length` elements of
// `element_bytes` (ATen/native/cuda/SoftMax.cu, PersistentSoftmax.cuh).
inline KernelLaunch softmax(Count rows, std::int64_t length, int element_bytes) {
  KernelLaunch l{LaunchKind::softmax, rows, {0, length}, 1, 128};
  l.element_bytes = element_bytes;
  return l;
}

// Softmax over `channels` at each of `positions` positions per sample (SoftMax.cu's spatial
// kernel: the positions across threads, as many blocks as keep every SM busy).
inline KernelLaunch spatial_softmax(std::int64_t positions, std::int64_t channels) {
  return {LaunchKind::spatial_softmax, {positions, 0}, {0, channels}, 1, 0};
}

// A sum or mean through ATen's Reduce.cuh: `outputs` values, each of `inputs` inputs; a
// `channels` layout over a 4-D activation when `four_d`.
inline KernelLaunch reduction(Count outputs, Count inputs, ReductionLayout layout,
                              bool four_d = false) {
  KernelLaunch l{LaunchKind::reduction, outputs, inputs, 1, 0};
  l.layout = layout;
  l.four_d = four_d;
  return l;
}

// BatchNorm's per-channel passes over `channels` channels of `positions` positions per sample
// (ATen/native/cuda/Normalization.cuh), of a 4-D activation when `four_d`.
inline KernelLaunch channel_statistics(std::int64_t channels, std::int64_t positions, bool four_d) {
  KernelLaunch l{LaunchKind::channel_statistics, {0, channels}, {positions, 0}, 1, 0};
  l.four_d = four_d;
  return l;
}
inline KernelLaunch channel_transform(std::int64_t channels, std::int64_t positions, bool four_d) {
  KernelLaunch l{LaunchKind::channel_transform, {0, channels}, {positions, 0}, 1, 0};
  l.four_d = four_d;
  return l;
}

// LayerNorm's gamma/beta gradient: `columns` features summed over `rows` rows
// (GammaBetaBackward kernels, ATen/native/cuda/layer_norm_kernel.cu).
inline KernelLaunch column_sums(std::int64_t columns, Count rows) {
  return {LaunchKind::column_sums, {0, columns}, rows, 1, 0};
}

}  // namespace epochcast::launch

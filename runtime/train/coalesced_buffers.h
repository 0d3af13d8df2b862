// How PyTorch packs many small tensors into a few large transfers (nn.DataParallel's broadcast
// and reduce of parameters, DDP's per-forward broadcast of buffers): tensors flattened into
// buffers cut by size and dtype, one transfer per buffer, then viewed or copied back.
#pragma once

#include <cstdint>
#include <vector>

#include <torch/torch.h>

namespace epochcast::runtime {

// Tensor indices per coalesced buffer, as torch/csrc/utils/tensor_flatten.cpp's take_tensors
// cuts them: each dtype has an open buffer that takes its tensors in order and closes as soon as
// it holds `cap_bytes` or more (the tensor that passes the cap included); buffers still open at
// the end follow, in dtype order.
std::vector<std::vector<std::size_t>> plan_coalesced_buffers(
    const std::vector<torch::Tensor>& tensors, std::int64_t cap_bytes);

// The same cut by torch/_utils.py's _take_tensors, which torch.cuda.comm.reduce_add_coalesced
// uses (nn.DataParallel's gradients): a tensor that would take a dtype's open buffer past
// `cap_bytes` closes it first (so a buffer passes the cap only by holding one large tensor);
// buffers still open at the end follow in the order their dtype first appeared.
std::vector<std::vector<std::size_t>> plan_coalesced_buffers_python(
    const std::vector<torch::Tensor>& tensors, std::int64_t cap_bytes);

// The buffer's tensors flattened into one (the same dtype; a copy).
torch::Tensor flatten_buffer(const std::vector<torch::Tensor>& tensors,
                             const std::vector<std::size_t>& buffer);

// Views of `flat` with the shapes of the buffer's tensors, in its order.
std::vector<torch::Tensor> unflatten_buffer(const torch::Tensor& flat,
                                            const std::vector<torch::Tensor>& tensors,
                                            const std::vector<std::size_t>& buffer);

}  // namespace epochcast::runtime

// Coalesced transfers (see coalesced_buffers.h).
#include "runtime/train/coalesced_buffers.h"

#include <algorithm>
#include <map>

namespace epochcast::runtime {

std::vector<std::vector<std::size_t>> plan_coalesced_buffers(
    const std::vector<torch::Tensor>& tensors, std::int64_t cap_bytes) {
  struct Open {
    std::vector<std::size_t> tensors;
    std::int64_t bytes = 0;
  };
  std::vector<std::vector<std::size_t>> buffers;
  // One open buffer per dtype, kept in dtype order: what is left open at the end is emitted in
  // that order, as take_tensors' map of type ids does.
  std::map<int, Open> open;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const torch::Tensor& t = tensors[i];
    Open& buffer = open[static_cast<int>(t.scalar_type())];
    buffer.tensors.push_back(i);
    buffer.bytes += t.numel() * static_cast<std::int64_t>(t.element_size());
    if (buffer.bytes >= cap_bytes) {  // closes once it reaches the cap, this tensor included
      buffers.push_back(std::move(buffer.tensors));
      buffer = Open{};
    }
  }
  for (auto& [dtype, buffer] : open) {
    if (!buffer.tensors.empty()) buffers.push_back(std::move(buffer.tensors));
  }
  return buffers;
}

std::vector<std::vector<std::size_t>> plan_coalesced_buffers_python(
    const std::vector<torch::Tensor>& tensors, std::int64_t cap_bytes) {
  struct Open {
    c10::ScalarType dtype;
    std::vector<std::size_t> tensors;
    std::int64_t bytes = 0;
  };
  std::vector<std::vector<std::size_t>> buffers;
  std::vector<Open> open;  // in the order each dtype first appeared
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const torch::Tensor& t = tensors[i];
    auto found = std::find_if(open.begin(), open.end(),
                              [&](const Open& o) { return o.dtype == t.scalar_type(); });
    if (found == open.end()) found = open.insert(open.end(), Open{t.scalar_type(), {}, 0});
    const std::int64_t bytes = t.numel() * static_cast<std::int64_t>(t.element_size());
    if (found->bytes > 0 && found->bytes + bytes > cap_bytes) {
      buffers.push_back(std::move(found->tensors));
      found->tensors.clear();
      found->bytes = 0;
    }
    found->tensors.push_back(i);
    found->bytes += bytes;
  }
  for (Open& o : open) {
    if (!o.tensors.empty()) buffers.push_back(std::move(o.tensors));
  }
  return buffers;
}

torch::Tensor flatten_buffer(const std::vector<torch::Tensor>& tensors,
                             const std::vector<std::size_t>& buffer) {
  std::vector<torch::Tensor> parts;
  parts.reserve(buffer.size());
  for (std::size_t i : buffer)
    parts.push_back(tensors[i].reshape(-1));
  return torch::cat(parts);
}

std::vector<torch::Tensor> unflatten_buffer(const torch::Tensor& flat,
                                            const std::vector<torch::Tensor>& tensors,
                                            const std::vector<std::size_t>& buffer) {
  std::vector<torch::Tensor> views;
  views.reserve(buffer.size());
  std::int64_t offset = 0;
  for (std::size_t i : buffer) {
    const std::int64_t n = tensors[i].numel();
    views.push_back(flat.narrow(0, offset, n).view(tensors[i].sizes()));
    offset += n;
  }
  return views;
}

}  // namespace epochcast::runtime

// IDX files (Yann LeCun's MNIST format): a big-endian header (magic, then one 32-bit size per
// dimension) followed by unsigned bytes. zlib reads gzip-compressed and plain files alike.
#include "runtime/data/idx_dataset.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include <fmt/format.h>
#include <zlib.h>

#include "core/input_error.h"

namespace epochcast::runtime {

namespace {

[[noreturn]] void bad(const std::filesystem::path& file, const std::string& problem) {
  throw InputError(SourceMark{file.string(), 0, 0}, "", problem);
}

// The file as named, or with .gz.
std::filesystem::path find(const std::filesystem::path& folder, const std::string& name) {
  for (const std::string& candidate : {name, name + ".gz"}) {
    std::filesystem::path path = folder / candidate;
    if (std::filesystem::is_regular_file(path)) return path;
  }
  bad(folder / name, fmt::format("missing: the folder holds no {} (nor {}.gz); dataset.files "
                                 "must name a folder of MNIST-format IDX files (on Debian: "
                                 "apt-get install dataset-fashion-mnist)",
                                 name, name));
}

// The dimensions and bytes of an IDX file of unsigned bytes with `rank` dimensions.
std::vector<std::uint8_t> read_idx(const std::filesystem::path& path, int rank,
                                   std::vector<std::int64_t>& dims) {
  gzFile in = gzopen(path.c_str(), "rb");
  if (in == nullptr) bad(path, "cannot be opened");
  struct Closer {
    gzFile f;
    ~Closer() { gzclose(f); }
  } closer{in};
  auto read_exactly = [&](void* into, unsigned size) {
    if (gzread(in, into, size) != static_cast<int>(size))
      bad(path, "is shorter than its header says");
  };
  // A plain file's size tells at once whether it holds what its header claims; a compressed
  // one's only shows as it is read, so its bytes are read a chunk at a time and the buffer
  // grows with what arrived: a lying header never makes us allocate what the file lacks.
  std::error_code size_error;
  const std::uintmax_t file_bytes = std::filesystem::file_size(path, size_error);
  auto big_endian = [](const std::array<unsigned char, 4>& b) {
    return (std::uint32_t{b[0]} << 24) | (std::uint32_t{b[1]} << 16) | (std::uint32_t{b[2]} << 8) |
           std::uint32_t{b[3]};
  };
  std::array<unsigned char, 4> word{};
  read_exactly(word.data(), 4);
  // 0x08: unsigned bytes; the last byte: the number of dimensions.
  if (word[0] != 0 || word[1] != 0 || word[2] != 0x08 || word[3] != rank) {
    bad(path, fmt::format("is not an IDX file of unsigned bytes with {} dimensions", rank));
  }
  // Checked as the product is built: a hostile header must not overflow it.
  constexpr std::int64_t kMostBytes = std::int64_t{1} << 34;
  std::int64_t total = 1;
  dims.clear();
  for (int d = 0; d < rank; ++d) {
    read_exactly(word.data(), 4);
    dims.push_back(big_endian(word));
    if (dims.back() <= 0 || dims.back() > kMostBytes / total) {
      bad(path, "has an implausible size in its header");
    }
    total *= dims.back();
  }
  const std::int64_t header = 4 * (1 + rank);
  if (gzdirect(in) == 1 && !size_error &&
      file_bytes < static_cast<std::uintmax_t>(header + total)) {
    bad(path, fmt::format("is shorter than its header says: the header promises {} bytes of "
                          "data, the file holds {}",
                          total, file_bytes - std::min<std::uintmax_t>(file_bytes, header)));
  }
  std::vector<std::uint8_t> bytes;
  constexpr std::int64_t kChunk = 1 << 24;
  for (std::int64_t at = 0; at < total; at += kChunk) {
    const std::int64_t piece = std::min(kChunk, total - at);
    bytes.resize(static_cast<std::size_t>(at + piece));
    const int got = gzread(in, bytes.data() + at, static_cast<unsigned>(piece));
    if (got != static_cast<int>(piece)) {
      bad(path, fmt::format("is shorter than its header says: the header promises {} bytes of "
                            "data, the file holds {}",
                            total, at + std::max(got, 0)));
    }
  }
  return bytes;
}

IdxSplit read_split(const std::filesystem::path& folder, const std::string& prefix) {
  std::vector<std::int64_t> image_dims, label_dims;
  const std::filesystem::path images_file = find(folder, prefix + "-images-idx3-ubyte");
  const std::filesystem::path labels_file = find(folder, prefix + "-labels-idx1-ubyte");
  std::vector<std::uint8_t> images = read_idx(images_file, 3, image_dims);
  std::vector<std::uint8_t> labels = read_idx(labels_file, 1, label_dims);
  if (label_dims[0] != image_dims[0]) {
    bad(labels_file, fmt::format("holds {} labels for {} images", label_dims[0], image_dims[0]));
  }
  IdxSplit split;
  split.images = torch::from_blob(images.data(), {image_dims[0], 1, image_dims[1], image_dims[2]},
                                  torch::kUInt8)
                     .to(torch::kFloat32)
                     .div_(255.0);
  split.labels = torch::from_blob(labels.data(), {label_dims[0]}, torch::kUInt8).to(torch::kInt64);
  return split;
}

}  // namespace

IdxDataset load_idx_dataset(const std::filesystem::path& folder) {
  IdxDataset data;
  data.train = read_split(folder, "train");
  data.test = read_split(folder, "t10k");
  // One model sees both splits: their images must have one geometry.
  const auto train_shape = data.train.images.sizes().slice(1).vec();
  const auto test_shape = data.test.images.sizes().slice(1).vec();
  if (train_shape != test_shape) {
    bad(find(folder, "t10k-images-idx3-ubyte"),
        fmt::format("holds images of {}x{} but the training images are {}x{}: both splits must "
                    "have the model's input size",
                    test_shape[1], test_shape[2], train_shape[1], train_shape[2]));
  }
  // Normalised as torchvision's transforms.Normalize would be, with the training set's figures.
  const double mean = data.train.images.mean().item<double>();
  const double std = data.train.images.std().item<double>();
  if (!(std > 0)) {
    bad(find(folder, "train-images-idx3-ubyte"),
        fmt::format("every training image has the same pixel values (mean {:.4g}, standard "
                    "deviation 0): they cannot be normalised, and there is nothing to learn",
                    mean));
  }
  data.train.images.sub_(mean).div_(std);
  data.test.images.sub_(mean).div_(std);
  return data;
}

}  // namespace epochcast::runtime

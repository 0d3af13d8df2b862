// IDX files (Yann LeCun's MNIST format): a big-endian header (magic, then one 32-bit size per
// dimension) followed by unsigned bytes. zlib reads gzip-compressed and plain files alike.
#include "runtime/data/idx_dataset.h"

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
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(total));
  constexpr std::int64_t kChunk = 1 << 26;
  for (std::int64_t at = 0; at < total; at += kChunk) {
    read_exactly(bytes.data() + at, static_cast<unsigned>(std::min(kChunk, total - at)));
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
  // Normalised as torchvision's transforms.Normalize would be, with the training set's figures.
  const double mean = data.train.images.mean().item<double>();
  const double std = data.train.images.std().item<double>();
  data.train.images.sub_(mean).div_(std);
  data.test.images.sub_(mean).div_(std);
  return data;
}

}  // namespace epochcast::runtime

// A real data set in MNIST's IDX format (MNIST, Fashion-MNIST, KMNIST): the training and test
// images and labels of a folder, gzip-compressed or not, as tensors in memory.
#pragma once

#include <filesystem>

#include <torch/torch.h>

namespace epochcast::runtime {

struct IdxSplit {
  torch::Tensor images;  // [N, 1, rows, cols] float32, normalised with the training set's mean/std
  torch::Tensor labels;  // [N] int64
};

struct IdxDataset {
  IdxSplit train;
  IdxSplit test;
};

// Reads train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte and
// t10k-labels-idx1-ubyte (each with or without .gz) from `folder`. Raises InputError naming
// the file for a missing file or a malformed header.
IdxDataset load_idx_dataset(const std::filesystem::path& folder);

}  // namespace epochcast::runtime

// The one rule for what a data-parallel rank sees in an epoch, used by the simulator, the
// runtime, calibration and compare alike.
//
// PyTorch's DistributedSampler (torch/utils/data/distributed.py, drop_last=False, its default)
// gives every one of R ranks ceil(N / R) samples, padding the data set with its first samples
// so that it divides evenly; the DataLoader then cuts a rank's share into batches, keeping the
// last partial one unless drop_last. One process (single GPU, nn.DataParallel) is R = 1: the
// loader serves global batches of the whole data set.
#pragma once

#include <cstdint>

namespace epochcast {

struct RankShare {
  std::int64_t samples = 0;     // the rank's samples in one epoch (padding included)
  std::int64_t batch = 0;       // a full batch
  std::int64_t iterations = 0;  // batches in one epoch, the partial one included unless dropped
  std::int64_t full_batches = 0;
  std::int64_t last_batch = 0;  // samples in the last batch (`batch` when none is partial)
  bool partial() const { return last_batch != batch && iterations > 0; }
};

// A rank's epoch over `dataset_samples` (>= 0) split across `ranks` (>= 1) in batches of `batch`
// (>= 1) per rank. With `drop_last` a partial last batch is not run; a share smaller than one
// batch then runs no iteration at all, as PyTorch's loader yields nothing.
RankShare rank_share(std::int64_t dataset_samples, int ranks, std::int64_t batch, bool drop_last);

}  // namespace epochcast

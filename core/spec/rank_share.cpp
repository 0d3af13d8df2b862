#include "core/spec/rank_share.h"

#include <stdexcept>

namespace epochcast {

RankShare rank_share(std::int64_t dataset_samples, int ranks, std::int64_t batch, bool drop_last) {
  if (dataset_samples < 0 || ranks < 1 || batch < 1) {
    throw std::invalid_argument("rank_share: needs samples >= 0, ranks >= 1 and batch >= 1");
  }
  RankShare share;
  share.samples = (dataset_samples + ranks - 1) / ranks;  // DistributedSampler pads to this
  share.batch = batch;
  share.full_batches = share.samples / batch;
  const std::int64_t remainder = share.samples % batch;
  if (remainder == 0 || drop_last) {
    share.iterations = share.full_batches;
    share.last_batch = batch;
  } else {
    share.iterations = share.full_batches + 1;
    share.last_batch = remainder;
  }
  return share;
}

}  // namespace epochcast

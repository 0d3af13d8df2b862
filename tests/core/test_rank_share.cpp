// The one rule for a data-parallel rank's epoch: DistributedSampler's padded share, cut into
// batches by the DataLoader.
#include <catch2/catch.hpp>

#include "core/spec/rank_share.h"

using namespace epochcast;

TEST_CASE(
    "a rank's share is DistributedSampler's ceil(N / ranks), batched as the DataLoader does") {
  // torch/utils/data/distributed.py (drop_last=False): num_samples = ceil(N / num_replicas).
  for (const auto& [samples, ranks, batch] :
       {std::tuple{1000, 3, 111}, {1000, 3, 333}, {60000, 8, 256}, {7, 8, 1}, {10, 1, 10}}) {
    INFO(samples << " samples, " << ranks << " ranks, batch " << batch);
    const std::int64_t per_rank = (samples + ranks - 1) / ranks;
    const RankShare kept = rank_share(samples, ranks, batch, false);
    CHECK(kept.samples == per_rank);
    CHECK(kept.full_batches == per_rank / batch);
    CHECK(kept.iterations == (per_rank + batch - 1) / batch);
    CHECK(kept.last_batch == (per_rank % batch == 0 ? batch : per_rank % batch));
    CHECK(kept.partial() == (per_rank % batch != 0));
    const RankShare dropped = rank_share(samples, ranks, batch, true);
    CHECK(dropped.samples == per_rank);
    CHECK(dropped.iterations == per_rank / batch);
    CHECK(dropped.last_batch == batch);
    CHECK_FALSE(dropped.partial());
  }
}

TEST_CASE("an empty data set gives no iteration, and nonsense arguments are refused") {
  const RankShare none = rank_share(0, 4, 32, false);
  CHECK(none.samples == 0);
  CHECK(none.iterations == 0);
  CHECK_FALSE(none.partial());
  CHECK_THROWS_AS(rank_share(-1, 1, 1, false), std::invalid_argument);
  CHECK_THROWS_AS(rank_share(10, 0, 1, false), std::invalid_argument);
  CHECK_THROWS_AS(rank_share(10, 1, 0, false), std::invalid_argument);
}

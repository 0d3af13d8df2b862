// nccl-tests' algbw and busbw, defined once (see docs/metrics.md).
#include "sim/collectives/collective.h"

namespace epochcast::sim {

double algorithm_bandwidth(Bytes bytes, Seconds time) {
  return static_cast<double>(bytes.value()) / time.value();
}

double bus_bandwidth_factor(Collective collective, int ranks) {
  const double n = ranks;
  switch (collective) {
    case Collective::all_reduce:
      return 2.0 * (n - 1) / n;
    case Collective::reduce_scatter:
    case Collective::all_gather:
    case Collective::scatter:
    case Collective::gather:
    case Collective::all_to_all:
      return (n - 1) / n;
    case Collective::broadcast:
    case Collective::reduce:
    case Collective::send_recv:
      return 1.0;
  }
  return 1.0;
}

double bus_bandwidth(Collective collective, int ranks, Bytes bytes, Seconds time) {
  return algorithm_bandwidth(bytes, time) * bus_bandwidth_factor(collective, ranks);
}

}  // namespace epochcast::sim

// One collective over a range of message sizes on a machine, as nccl-tests' *_perf binaries
// measure it (size, count, time, algbw, busbw), for `epochcast collective`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/spec/hardware_spec.h"
#include "core/spec/profile_spec.h"
#include "core/spec/scenario_spec.h"
#include "sim/collectives/collective.h"
#include "sim/collectives/protocols.h"

namespace epochcast::sim {

// Sizes one sweep may visit (nccl-tests' own runs take a few dozen).
inline constexpr std::size_t kMaxCollectiveSizes = 10'000;

struct CollectiveSweep {
  Collective collective = Collective::all_reduce;
  std::int64_t min_bytes = 8;
  std::int64_t max_bytes = 128 * kMiB;
  double factor = 2;           // each size is the previous times this...
  std::int64_t increment = 0;  // ...or, when > 0, plus this (nccl-tests' -i)
  int element_bytes = 4;       // of the data type
  // Equal parts the size is split into, each a whole number of elements: the ranks, for the
  // collectives nccl-tests gives a buffer per rank (all_gather, reduce_scatter, alltoall),
  // else 1. A row's count is the elements of one part.
  int parts = 1;
  int gpus_per_node = 0;  // 0: all of a node
  int nodes = 1;
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::automatic;  // across nodes
  std::optional<Protocol> protocol = std::nullopt;  // forced (NCCL_PROTO); none: the tuner's
  bool flows = true;  // flows on the network (contention); false: the analytic time
  int root = 0;       // of broadcast and reduce
  // Kernels one host thread launches in turn each iteration: nccl-tests' -g (the GPUs a thread
  // drives), 1 with a process per GPU, 0 when the iterations replay a CUDA graph (-G), which
  // launches from the GPU's queue. Each launch takes the profile's links.nccl_launch_us.
  int launches_per_iteration = 1;
};

struct CollectiveRow {
  std::int64_t bytes = 0;  // nccl-tests' size: the larger buffer, whole elements in each part
  std::int64_t count = 0;  // elements per part, as nccl-tests prints them
  // An iteration as nccl-tests times it: the collective on the GPUs, or the launches its thread
  // issues each iteration where those take longer (iterations are queued back to back, so
  // whichever is slower sets the pace).
  double seconds = 0;
  double collective_seconds = 0;  // the collective alone, from the last rank's launch
  bool launch_bound = false;      // seconds is the thread's launches
  double algbw = 0;               // bytes / seconds (B/s)
  double busbw = 0;               // algbw x nccl-tests' factor for the collective and rank count
  std::string algorithm;
  std::string protocol;  // NCCL's protocol chosen (or forced)
  int channels = 1;      // NCCL's channels at this size, one CTA (SM) each (nccl_channels)
};

// The sizes nccl-tests visits: from min to max by factor (or increment), each rounded down to a
// whole number of elements in each part (0 where one part has less than an element, as
// nccl-tests then times an empty collective); at most `most` of them (the first).
std::vector<std::int64_t> sweep_sizes(const CollectiveSweep& sweep,
                                      std::size_t most = kMaxCollectiveSizes);

// Every size of the sweep, on `machine`'s first `gpus_per_node` GPUs of each of `nodes` nodes
// (identical nodes are simulated as node 0 standing for all, which is exact for them).
std::vector<CollectiveRow> run_collective_sweep(const MachineSpec& machine,
                                                const HardwareProfile& profile,
                                                const CollectiveSweep& sweep);

}  // namespace epochcast::sim

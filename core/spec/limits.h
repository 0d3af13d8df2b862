// The ranges epochcast accepts for counts and rates in specs. Each is far beyond any real
// system, and together they keep every product the simulator forms (samples x epochs, batch x
// GPUs, iterations x tags) inside 64-bit integers; times that still overflow the simulator's
// clock are reported per point (sim/engine/sim_time.h). Loaders check values against these in
// 64 bits before narrowing, and name the range in their messages.
#pragma once

#include <cstdint>

namespace epochcast::limits {

// Samples in a data set, and so in a batch: 10^12 (the largest public training sets hold about
// 10^10 samples). Keeps iterations below 2^44, the simulator's tag space.
inline constexpr std::int64_t kMaxSamples = 1'000'000'000'000;
inline constexpr int kMaxEpochs = 100'000;
inline constexpr int kMaxGradientAccumulation = 1024;
// DataLoader worker processes, and batches each keeps in flight (PyTorch's default is 2).
inline constexpr int kMaxLoaderWorkers = 1024;
inline constexpr int kMaxPrefetchFactor = 1024;
// Batches a loader keeps in flight (workers x prefetch_factor): each is a task the simulator
// carries, so the bound keeps a point's cost bounded too.
inline constexpr int kMaxBatchesInFlight = 512;
// One encoded sample (a JPEG, a video clip) as it crosses to a decoding GPU: 1 GiB.
inline constexpr std::int64_t kMaxEncodedSampleBytes = std::int64_t{1} << 30;
// GPUs in a sweep point, GPUs per node, nodes per machine.
inline constexpr int kMaxGpus = 1'000'000;
inline constexpr int kMaxGpusPerNode = 64;
inline constexpr int kMaxNodes = 65'536;
// Points of one sweep (GPU counts x batches): each is simulated and its result kept until the
// report (about a kilobyte each).
inline constexpr std::int64_t kMaxSweepPoints = 1'000'000;
// A job's share of a shared GPU or CPU (contention): down to a thousandth.
inline constexpr double kMinShare = 1e-3;

}  // namespace epochcast::limits

// The input pipeline of a real training loop, fed with synthetic data: worker threads make each
// sample (seeded by its index, so every run sees the same data), apply a per-sample transform
// (normalisation), collate samples into batches, pin them when the device is a GPU, and hand
// them over in order; the training thread copies each batch to its device. `workers: 0` makes
// the batch in the training thread, as PyTorch's DataLoader(num_workers=0) does.
//
// PyTorch's workers are processes; ours are threads (LibTorch has no pickling) — each does the
// same work per sample, and the GIL that makes PyTorch use processes does not exist here.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <torch/torch.h>

#include "core/model/tensor_shape.h"

namespace epochcast::runtime {

struct LoaderOptions {
  std::int64_t samples = 0;  // in the data set (this rank's share)
  std::int64_t batch = 1;    // samples per batch
  bool drop_last = false;
  int workers = 0;
  int prefetch_factor = 2;  // batches each worker prepares ahead
  bool pin_memory = false;  // only meaningful for a CUDA device
  // Samples are uint8 on the host; after the copy the device converts and normalises them
  // (x.float().sub_(mean).div_(std)), as image pipelines that normalise on the GPU do.
  bool normalize_on_device = false;
  // On a CUDA device, the next batch is copied (and normalised) on a side stream while the
  // caller computes, and the caller's stream waits for it when next() hands it over (apex's
  // data_prefetcher, timm's PrefetchLoader). On a CPU there is no copy to overlap.
  bool prefetch_to_device = false;
  // Each batch size's batch is made once, copied once, and handed out again every step
  // (scenario loader.source synthetic_gpu, DeepLearningExamples' synthetic backend): the loop
  // then measures the device alone. No workers, no copies after the first.
  bool made_on_device = false;
  std::uint64_t seed = 0;
  std::int64_t sample_offset = 0;  // the first sample index of this rank's share
};

// What one sample looks like.
struct SampleShape {
  TensorShape shape;       // as the model takes it, per sample
  bool token_ids = false;  // int64 ids below `vocabulary`, else normal floats
  std::int64_t vocabulary = 0;
  std::int64_t classes = 0;  // labels below this
  // Labels per sample, as core's output_classes() reads the model's output: [] (one class),
  // [tokens] for a sequence output [tokens, vocab], [height, width] for per-pixel scores.
  std::vector<std::int64_t> label_shape;
};

struct Batch {
  torch::Tensor inputs;  // on the device
  torch::Tensor labels;  // on the device, int64
  std::int64_t samples = 0;
};

class SyntheticLoader {
 public:
  SyntheticLoader(SampleShape sample, LoaderOptions options, torch::Device device);
  ~SyntheticLoader();
  SyntheticLoader(const SyntheticLoader&) = delete;
  SyntheticLoader& operator=(const SyntheticLoader&) = delete;

  std::int64_t batches_per_epoch() const;
  // The next batch, cycling through the data set epoch after epoch (batch index wraps).
  Batch next();
  // Restarts at batch `index` (workers discard what they prepared).
  void seek(std::int64_t index);

  // Seconds the caller waited inside next() for batches not yet ready, since the last reset.
  double wait_seconds() const { return wait_seconds_; }
  // CPU seconds spent making and transforming samples per sample, over all batches made so far.
  double sample_cpu_seconds() const;
  void reset_counters();

 private:
  struct Host {
    torch::Tensor inputs, labels;
    std::int64_t samples = 0;
  };
  struct SideStream;  // the prefetcher's CUDA stream (defined where CUDA is known)

  Host make_batch(std::int64_t index);  // thread-safe
  Host take_host_batch();               // the next batch from the workers (or made here)
  Batch to_device(Host host);           // copied (and normalised) on the current stream
  void worker_loop(int worker);
  void start_workers(std::int64_t first_batch);
  void stop_workers();
  std::int64_t batch_size(std::int64_t index) const;

  SampleShape sample_;
  LoaderOptions options_;
  torch::Device device_;
  std::int64_t next_index_ = 0;       // next batch to hand out (monotonic; wraps modulo epoch)
  std::unique_ptr<SideStream> side_;  // set when prefetching to a CUDA device
  std::optional<Batch> prefetched_;   // the next batch, on its way to the device
  double wait_seconds_ = 0;
  std::map<std::int64_t, Batch> on_device_;  // made_on_device: the batch of each size

  mutable std::mutex mutex_;
  std::condition_variable ready_;      // a batch was made
  std::condition_variable space_;      // the consumer took one: workers may go ahead
  std::map<std::int64_t, Host> done_;  // made, not yet handed out, by batch index
  std::int64_t handed_out_ = 0;        // batches handed out since the workers started
  std::int64_t first_batch_ = 0;       // where the workers started
  bool stopping_ = false;
  // Workers' failures by batch index, handed to the training thread when it asks for that batch
  // (as PyTorch's DataLoader re-raises a worker's exception in the main process), instead of
  // terminating. Several workers can fail, in any order.
  std::map<std::int64_t, std::exception_ptr> failures_;
  std::vector<std::thread> threads_;
  double cpu_seconds_ = 0;
  std::int64_t samples_made_ = 0;
};

}  // namespace epochcast::runtime

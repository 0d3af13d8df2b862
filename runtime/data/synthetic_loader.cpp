// Worker threads make batches ahead of the training loop, at most prefetch_factor per worker.
#include "runtime/data/synthetic_loader.h"

#include <chrono>
#include <exception>
#include <stdexcept>

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <time.h>

#ifdef EPOCHCAST_TORCH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include "core/system_failure.h"

namespace epochcast::runtime {

namespace {

double thread_cpu_seconds() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

// A well-mixed seed per sample (splitmix64), so neighbouring samples are unrelated.
std::uint64_t sample_seed(std::uint64_t seed, std::int64_t index) {
  std::uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (static_cast<std::uint64_t>(index) + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

#ifdef EPOCHCAST_TORCH_CUDA
struct SyntheticLoader::SideStream {
  explicit SideStream(c10::DeviceIndex device)
      : stream(c10::cuda::getStreamFromPool(false, device)) {}
  c10::cuda::CUDAStream stream;
};
#else
struct SyntheticLoader::SideStream {};
#endif

SyntheticLoader::SyntheticLoader(SampleShape sample, LoaderOptions options, torch::Device device)
    : sample_(std::move(sample)), options_(options), device_(device) {
  if (options_.batch < 1 || options_.samples < 1) {
    throw std::invalid_argument("SyntheticLoader needs at least one sample and a batch of one");
  }
  if (batches_per_epoch() == 0) {
    throw std::invalid_argument("drop_last leaves no batch: the batch exceeds the data set");
  }
  if (device_.is_cpu()) options_.pin_memory = false;  // nothing to copy to
  if (options_.made_on_device) {
    options_.workers = 0;  // one batch per size, made here when first asked for
    options_.prefetch_to_device = false;
  }
#ifdef EPOCHCAST_TORCH_CUDA
  if (options_.prefetch_to_device && device_.is_cuda())
    side_ = std::make_unique<SideStream>(device_.index());
#endif
  start_workers(0);
}

SyntheticLoader::~SyntheticLoader() {
  stop_workers();
}

std::int64_t SyntheticLoader::batches_per_epoch() const {
  std::int64_t full = options_.samples / options_.batch;
  bool partial = options_.samples % options_.batch != 0 && !options_.drop_last;
  return full + (partial ? 1 : 0);
}

std::int64_t SyntheticLoader::batch_size(std::int64_t index) const {
  std::int64_t in_epoch = index % batches_per_epoch();
  return std::min(options_.batch, options_.samples - in_epoch * options_.batch);
}

SyntheticLoader::Host SyntheticLoader::make_batch(std::int64_t index) {
  std::int64_t in_epoch = index % batches_per_epoch();
  std::int64_t count = batch_size(index);
  std::vector<std::int64_t> dims = sample_.shape.dims;
  std::vector<torch::Tensor> inputs, labels;
  inputs.reserve(static_cast<std::size_t>(count));
  labels.reserve(static_cast<std::size_t>(count));
  double cpu_start = thread_cpu_seconds();
  for (std::int64_t i = 0; i < count; ++i) {
    std::int64_t sample = options_.sample_offset + in_epoch * options_.batch + i;
    auto generator = at::make_generator<at::CPUGeneratorImpl>(sample_seed(options_.seed, sample));
    if (sample_.token_ids) {
      inputs.push_back(torch::randint(sample_.vocabulary, dims, generator, torch::kInt64));
    } else if (options_.normalize_on_device) {
      inputs.push_back(torch::randint(0, 256, dims, generator, torch::kUInt8));
    } else {
      // The transform a real pipeline applies: normalise each sample to zero mean, unit variance.
      torch::Tensor x = torch::randn(dims, generator) * 3.0 + 1.0;
      inputs.push_back((x - x.mean()) / (x.std() + 1e-6));
    }
    std::vector<std::int64_t> label_dims = sample_.label_shape;
    if (label_dims.empty()) label_dims = {1};
    labels.push_back(torch::randint(sample_.classes, label_dims, generator, torch::kInt64));
  }
  Host batch;
  batch.inputs = torch::stack(inputs);
  batch.labels = torch::stack(labels);
  // One label per sample (a single-token sequence too) is a [batch] vector, as cross_entropy
  // takes it; per-pixel labels keep their [batch, height, width].
  if (sample_.label_shape.size() <= 1 && batch.labels.size(1) == 1) {
    batch.labels = batch.labels.squeeze(1);
  }
  if (options_.pin_memory) {
    batch.inputs = batch.inputs.pin_memory();
    batch.labels = batch.labels.pin_memory();
  }
  batch.samples = count;
  double cpu = thread_cpu_seconds() - cpu_start;
  std::lock_guard lock(mutex_);
  cpu_seconds_ += cpu;
  samples_made_ += count;
  return batch;
}

void SyntheticLoader::worker_loop(int worker) {
  const std::int64_t stride = options_.workers;
  const std::int64_t ahead = static_cast<std::int64_t>(options_.workers) * options_.prefetch_factor;
  std::int64_t index = first_batch_ + worker;
  for (;; index += stride) {
    {
      std::unique_lock lock(mutex_);
      space_.wait(lock, [&] { return stopping_ || index < first_batch_ + handed_out_ + ahead; });
      if (stopping_) return;
    }
    Host batch;
    try {
      batch = make_batch(index);
    } catch (...) {
      std::lock_guard lock(mutex_);
      failures_.emplace(index, std::current_exception());
      ready_.notify_all();
      return;
    }
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    done_.emplace(index, std::move(batch));
    ready_.notify_all();
  }
}

void SyntheticLoader::start_workers(std::int64_t first_batch) {
  first_batch_ = first_batch;
  handed_out_ = 0;
  stopping_ = false;
  failures_.clear();
  done_.clear();
  for (int w = 0; w < options_.workers; ++w)
    threads_.emplace_back([this, w] { worker_loop(w); });
}

void SyntheticLoader::stop_workers() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  space_.notify_all();
  ready_.notify_all();
  for (std::thread& t : threads_)
    t.join();
  threads_.clear();
}

void SyntheticLoader::seek(std::int64_t index) {
  prefetched_.reset();
  stop_workers();
  next_index_ = index;
  start_workers(index);
}

SyntheticLoader::Host SyntheticLoader::take_host_batch() {
  Host host;
  if (options_.workers == 0) {
    host = make_batch(next_index_);
  } else {
    std::unique_lock lock(mutex_);
    // Batches before a failed one are handed out first, in order.
    ready_.wait(lock,
                [&] { return done_.count(next_index_) > 0 || failures_.count(next_index_) > 0; });
    auto found = done_.find(next_index_);
    if (found == done_.end()) {
      try {
        std::rethrow_exception(failures_.at(next_index_));
      } catch (const std::exception& e) {
        throw SystemFailure(
            fmt::format("a loader worker failed making batch {}: {}", next_index_, e.what()));
      }
    }
    host = std::move(found->second);
    done_.erase(found);
    ++handed_out_;
    space_.notify_all();
  }
  ++next_index_;
  return host;
}

Batch SyntheticLoader::to_device(Host host) {
  Batch batch;
  // A pinned batch copies asynchronously; pageable memory makes the copy synchronous.
  batch.inputs = host.inputs.to(device_, /*non_blocking=*/options_.pin_memory);
  batch.labels = host.labels.to(device_, /*non_blocking=*/options_.pin_memory);
  if (options_.normalize_on_device) {
    // The usual ImageNet-style constants matter little: any mean and scale cost the same.
    batch.inputs = batch.inputs.to(torch::kFloat).sub_(127.5).div_(64.0);
  }
  batch.samples = host.samples;
  return batch;
}

Batch SyntheticLoader::next() {
  auto start = std::chrono::steady_clock::now();
  Batch batch;
  if (options_.made_on_device) {
    const std::int64_t size = batch_size(next_index_);
    auto made = on_device_.find(size);
    if (made == on_device_.end()) {
      // take_host_batch() moves next_index_ on.
      made = on_device_.emplace(size, to_device(take_host_batch())).first;
    } else {
      ++next_index_;
    }
    wait_seconds_ +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return made->second;
  }
#ifdef EPOCHCAST_TORCH_CUDA
  if (side_) {
    auto on_side_stream = [&] {
      c10::cuda::CUDAStreamGuard guard(side_->stream);
      return to_device(take_host_batch());
    };
    if (!prefetched_) prefetched_ = on_side_stream();  // the first batch after a (re)start
    batch = std::move(*prefetched_);
    prefetched_.reset();
    // current_stream().wait_stream(side); the batch's memory is then in use on the current
    // stream, which the caching allocator must know before it frees it.
    c10::cuda::CUDAStream current = c10::cuda::getCurrentCUDAStream(device_.index());
    at::cuda::CUDAEvent copied;
    copied.record(side_->stream);
    copied.block(current);
    batch.inputs.record_stream(current);
    batch.labels.record_stream(current);
    prefetched_ = on_side_stream();  // the next batch travels while the caller computes
  }
#endif
  if (!batch.inputs.defined()) batch = to_device(take_host_batch());
  wait_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return batch;
}

double SyntheticLoader::sample_cpu_seconds() const {
  std::lock_guard lock(mutex_);
  return samples_made_ > 0 ? cpu_seconds_ / static_cast<double>(samples_made_) : 0.0;
}

void SyntheticLoader::reset_counters() {
  std::lock_guard lock(mutex_);
  wait_seconds_ = 0;
  cpu_seconds_ = 0;
  samples_made_ = 0;
}

}  // namespace epochcast::runtime

// Buckets, gradient hooks and overlapped all-reduce (see ddp_reducer.h).
#include "runtime/train/ddp_reducer.h"

#include <stdexcept>

#include <fmt/format.h>

#include "runtime/cuda/cuda_api.h"
#include "runtime/measure/collective_watchdog.h"
#include "runtime/measure/device_clock.h"
#include "runtime/train/coalesced_buffers.h"

namespace epochcast::runtime {

std::vector<std::vector<std::size_t>> plan_buckets(const std::vector<torch::Tensor>& parameters,
                                                   std::int64_t first_cap_bytes,
                                                   std::int64_t cap_bytes) {
  std::vector<std::vector<std::size_t>> buckets;
  std::vector<std::size_t> current;
  std::int64_t filled = 0;
  for (std::size_t i = parameters.size(); i-- > 0;) {
    current.push_back(i);
    filled += parameters[i].numel() * parameters[i].element_size();
    std::int64_t cap = buckets.empty() ? first_cap_bytes : cap_bytes;
    if (filled >= cap) {
      buckets.push_back(std::move(current));
      current.clear();
      filled = 0;
    }
  }
  if (!current.empty()) buckets.push_back(std::move(current));
  return buckets;
}

DdpReducer::DdpReducer(std::vector<torch::Tensor> parameters, const Group& group,
                       std::int64_t first_cap_bytes, std::int64_t cap_bytes,
                       cuda::NcclCommunicator* nccl, cuda::Stream* stream,
                       CollectiveWatchdog* watchdog)
    : parameters_(std::move(parameters)),
      group_(group),
      nccl_(nccl),
      stream_(stream),
      watchdog_(watchdog) {
  if (parameters_.empty()) throw std::invalid_argument("ddp needs a model with parameters");
  on_cuda_ = parameters_.front().is_cuda();
  // LibTorch's current stream, where the gradients are written and the optimizer reads them.
  if (on_cuda_) compute_ = current_stream(parameters_.front().device());
  if (on_cuda_ && (nccl_ == nullptr || stream_ == nullptr)) {
    throw std::invalid_argument("ddp on CUDA needs an NCCL communicator and a stream");
  }
  where_.resize(parameters_.size());
  for (auto& members : plan_buckets(parameters_, first_cap_bytes, cap_bytes)) {
    Bucket bucket;
    std::int64_t elements = 0;
    for (std::size_t p : members) {
      where_[p] = {buckets_.size(), bucket.parameters.size()};
      bucket.parameters.push_back(p);
      bucket.offsets.push_back(elements);
      elements += parameters_[p].numel();
    }
    bucket.flat = torch::zeros({elements}, parameters_[members.front()].options());
    buckets_.push_back(std::move(bucket));
  }
  inverse_world_size_ = torch::scalar_tensor(1.0 / group_.size(), torch::kFloat);
  inverse_world_size_.unsafeGetTensorImpl()->set_wrapped_number(true);
  for (std::size_t p = 0; p < parameters_.size(); ++p) {
    hooks_.push_back(parameters_[p].register_hook(
        [this, p](const torch::Tensor& gradient) { on_gradient(p, gradient); }));
  }
  if (!on_cuda_ && group_.size() > 1) thread_ = std::thread([this] { communication_loop(); });
}

DdpReducer::~DdpReducer() {
  // The hooks call into this object; a backward pass after it is gone (per-layer profiling)
  // must not reach them.
  for (std::size_t p = 0; p < hooks_.size(); ++p)
    parameters_[p].remove_hook(hooks_[p]);
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void DdpReducer::broadcast_from_rank0(const std::vector<torch::Tensor>& tensors) {
  if (group_.size() < 2) return;
  torch::NoGradGuard no_grad;
  // The communication stream does not follow LibTorch's: it waits for the work queued so far
  // (the trial step's optimizer) before reading or overwriting the tensors.
  if (on_cuda_) stream_->wait_for(compute_.get());
  for (const torch::Tensor& t : tensors) {
    if (on_cuda_) {
      // As bytes: buffers include integers (batch norm's num_batches_tracked).
      torch::Tensor contiguous = t.contiguous();
      nccl_->broadcast(contiguous.data_ptr(),
                       static_cast<std::size_t>(contiguous.numel() * contiguous.element_size()),
                       cuda::ElementType::bytes, 0, *stream_);
      stream_->synchronize();
      if (!contiguous.is_same(t)) t.copy_(contiguous);
    } else {
      torch::Tensor contiguous = t.contiguous();
      group_.broadcast(contiguous.data_ptr(),
                       static_cast<std::size_t>(contiguous.numel() * contiguous.element_size()), 0);
      if (!contiguous.is_same(t)) t.copy_(contiguous);
    }
  }
}

void DdpReducer::sync_buffers(const std::vector<torch::Tensor>& buffers) {
  if (group_.size() < 2 || buffers.empty()) return;
  torch::NoGradGuard no_grad;
  for (const std::vector<std::size_t>& bucket :
       plan_coalesced_buffers(buffers, kBufferBroadcastBytes)) {
    torch::Tensor flat = flatten_buffer(buffers, bucket);
    const auto bytes = static_cast<std::size_t>(flat.numel() * flat.element_size());
    if (on_cuda_) {
      // NCCL's stream waits for the flattening; the forward's stream waits for the broadcast.
      stream_->wait_for(compute_.get());
      launch_unless_aborted(
          [&] { nccl_->broadcast(flat.data_ptr(), bytes, cuda::ElementType::bytes, 0, *stream_); });
      watch_last_launch("the broadcast of rank 0's buffers");
      compute_waits_for_communication();
    } else {
      group_.broadcast(flat.data_ptr(), bytes, 0);
    }
    std::vector<torch::Tensor> received = unflatten_buffer(flat, buffers, bucket);
    for (std::size_t k = 0; k < bucket.size(); ++k)
      buffers[bucket[k]].copy_(received[k]);
  }
}

void DdpReducer::prepare(bool synchronise) {
  synchronise_ = synchronise;
  for (Bucket& b : buckets_)
    b.pending = b.parameters.size();
  std::lock_guard lock(mutex_);
  launched_ = completed_ = 0;
}

// Runs inside backward (autograd's thread) with the parameter's gradient of this pass. Earlier
// micro-batches' gradients already sit in .grad, so the bucket gets their sum, pre-divided by
// the world size as DDP does. The kernels are DDP's: one multiply writing the gradient into its
// bucket (reducer.cpp, mark_variable_ready_dense: mul_out(bucket_view, grad, div_factor)), and
// with accumulated gradients the add that AccumulateGrad does before it.
void DdpReducer::on_gradient(std::size_t parameter, const torch::Tensor& gradient) {
  if (!synchronise_) return;
  auto [b, slot] = where_[parameter];
  Bucket& bucket = buckets_[b];
  torch::NoGradGuard no_grad;
  torch::Tensor view =
      bucket.flat.narrow(0, bucket.offsets[slot], gradient.numel()).view(gradient.sizes());
  const torch::Tensor& accumulated = parameters_[parameter].grad();
  if (accumulated.defined()) {
    torch::add_out(view, accumulated, gradient);
    view.mul_(inverse_world_size_);
  } else {
    torch::mul_out(view, gradient, inverse_world_size_);
  }
  if (--bucket.pending == 0) launch(b);
}

void DdpReducer::launch(std::size_t bucket) {
  if (group_.size() < 2) return;
  if (on_cuda_) {
    // The gradients were written on LibTorch's current stream: the side stream waits for them.
    stream_->wait_for(compute_.get());
    launch_unless_aborted([&] {
      nccl_->all_reduce_sum(buckets_[bucket].flat.data_ptr(),
                            static_cast<std::size_t>(buckets_[bucket].flat.numel()),
                            cuda::ElementType::float32, *stream_);
    });
    watch_last_launch(fmt::format("the all-reduce of gradient bucket {}", bucket));
    return;
  }
  std::lock_guard lock(mutex_);
  queue_.push_back(bucket);
  ++launched_;
  work_.notify_one();
}

void DdpReducer::compute_waits_for_communication() const {
  if (compute_) {
    compute_->wait_for(stream_);
  } else {
    stream_->make_default_stream_wait();  // LibTorch's stream is the legacy default one
  }
}

// Once the watchdog has aborted the communicator, collectives are skipped instead of failing
// inside backward: the step ends normally and the ranks' agreement between iterations stops the
// point everywhere with the watchdog's reason (an exception here would send this rank to a
// barrier while its peers wait in that agreement).
void DdpReducer::launch_unless_aborted(const std::function<void()>& launch) {
  if (watchdog_ != nullptr && watchdog_->failure()) return;
  try {
    launch();
  } catch (const cuda::CudaError&) {
    if (watchdog_ != nullptr && watchdog_->failure()) return;  // aborted while launching
    throw;
  }
}

// An event after the collective just queued on NCCL's stream, for the watchdog to ask about.
void DdpReducer::watch_last_launch(std::string what) {
  if (watchdog_ == nullptr) return;
  auto done = std::make_shared<cuda::Event>(stream_->device());
  done->record(*stream_);
  watchdog_->watch(std::move(what), [done] { return done->finished(); });
}

void DdpReducer::communication_loop() {
  for (;;) {
    std::size_t bucket = 0;
    {
      std::unique_lock lock(mutex_);
      work_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_ && queue_.empty()) return;
      bucket = queue_.front();
      queue_.pop_front();
    }
    // An exception must not leave the thread (that would end the process without a word):
    // the training thread raises it from finish().
    std::exception_ptr failure;
    try {
      all_reduce(buckets_[bucket]);
    } catch (...) {
      failure = std::current_exception();
    }
    std::lock_guard lock(mutex_);
    if (failure && !communication_failure_) communication_failure_ = failure;
    ++completed_;
    done_.notify_all();
  }
}

void DdpReducer::all_reduce(Bucket& bucket) {
  group_.all_reduce_sum(bucket.flat.data_ptr<float>(),
                        static_cast<std::size_t>(bucket.flat.numel()));
}

void DdpReducer::finish() {
  if (!synchronise_) return;
  for (const Bucket& b : buckets_) {
    if (b.pending != 0) {
      throw std::logic_error(
          "ddp: a parameter received no gradient in backward (unused "
          "parameters are not supported)");
    }
  }
  if (group_.size() > 1) {
    if (on_cuda_) {
      compute_waits_for_communication();
    } else {
      std::unique_lock lock(mutex_);
      done_.wait(lock, [&] { return completed_ == launched_ && queue_.empty(); });
      if (communication_failure_) std::rethrow_exception(communication_failure_);
    }
  }
  torch::NoGradGuard no_grad;
  for (const Bucket& b : buckets_) {
    for (std::size_t slot = 0; slot < b.parameters.size(); ++slot) {
      torch::Tensor& p = parameters_[b.parameters[slot]];
      torch::Tensor averaged = b.flat.narrow(0, b.offsets[slot], p.numel()).view(p.sizes());
      if (p.grad().defined()) {
        p.mutable_grad().copy_(averaged);
      } else {
        p.mutable_grad() = averaged.clone();
      }
    }
  }
}

}  // namespace epochcast::runtime

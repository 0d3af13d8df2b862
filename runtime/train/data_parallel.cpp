// nn.DataParallel's step (see data_parallel.h).
#include "runtime/train/data_parallel.h"

#include <exception>
#include <optional>
#include <stdexcept>

#include <ATen/ThreadLocalState.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include "runtime/train/coalesced_buffers.h"
#include "runtime/train/precision.h"

namespace epochcast::runtime {

DataParallel::DataParallel(TorchModel module, std::vector<torch::Device> devices,
                           TrainingPrecision precision, std::int64_t buffer_bytes)
    : devices_(std::move(devices)), precision_(precision) {
  if (devices_.empty()) throw std::invalid_argument("dp needs at least one device");
  replicas_.push_back(module);
  for (std::size_t r = 1; r < devices_.size(); ++r) {
    // Built once: each step re-broadcasts the values into these modules.
    replicas_.emplace_back(std::dynamic_pointer_cast<TorchModelImpl>(module->clone(devices_[r])));
  }
  for (const TorchModel& replica : replicas_) {
    parameters_.push_back(replica->parameters());
    buffers_.push_back(replica->buffers());
  }
  parameter_buffers_ = plan_coalesced_buffers(parameters_.front(), buffer_bytes);
  // Broadcast's backward (ReduceAddCoalesced) cuts the gradients by Python's rule, over the
  // parameters that take gradients.
  for (std::size_t i = 0; i < parameters_.front().size(); ++i) {
    if (parameters_.front()[i].requires_grad()) trained_.push_back(i);
  }
  std::vector<torch::Tensor> trained;
  for (std::size_t i : trained_)
    trained.push_back(parameters_.front()[i]);
  for (std::vector<std::size_t>& buffer : plan_coalesced_buffers_python(trained, buffer_bytes)) {
    for (std::size_t& k : buffer)
      k = trained_[k];
    gradient_buffers_.push_back(std::move(buffer));
  }
  buffer_buffers_ = plan_coalesced_buffers(buffers_.front(), buffer_bytes);
}

void DataParallel::broadcast(const std::vector<torch::Tensor>& sources,
                             const std::vector<std::vector<std::size_t>>& buffers,
                             const std::vector<std::vector<torch::Tensor>>& targets,
                             std::size_t replicas) {
  for (const std::vector<std::size_t>& buffer : buffers) {
    const torch::Tensor flat = flatten_buffer(sources, buffer);
    for (std::size_t r = 1; r < replicas; ++r) {
      torch::Tensor copy = flat.to(devices_[r], /*non_blocking=*/true, /*copy=*/true);
      // The replica's tensors become views of the received buffer, as unflattening does: no
      // copy per tensor.
      std::vector<torch::Tensor> views = unflatten_buffer(copy, sources, buffer);
      for (std::size_t k = 0; k < buffer.size(); ++k)
        targets[r][buffer[k]].set_data(views[k]);
    }
  }
}

torch::Tensor DataParallel::forward(const torch::Tensor& inputs) {
  // torch.chunk's pieces: a batch smaller than the device count runs on fewer replicas.
  std::vector<torch::Tensor> chunks = inputs.chunk(static_cast<std::int64_t>(devices_.size()), 0);
  used_replicas_ = chunks.size();
  const bool training = replicas_.front()->is_training();
  {
    torch::NoGradGuard no_grad;
    broadcast(parameters_.front(), parameter_buffers_, parameters_, used_replicas_);
    broadcast(buffers_.front(), buffer_buffers_, buffers_, used_replicas_);
  }
  for (std::size_t r = 0; r < used_replicas_; ++r) {
    replicas_[r]->train(training);  // replicate() copies the module's mode each call
    chunks[r] = chunks[r].to(devices_[r], /*non_blocking=*/true);
  }

  // parallel_apply: a thread per replica with the caller's thread-local state (grad mode,
  // autocast), its device, and that device's current stream as the caller sees it.
  const at::ThreadLocalState caller_state;
  const bool grad_enabled = torch::GradMode::is_enabled();
  std::vector<std::optional<c10::Stream>> streams(used_replicas_);
  for (std::size_t r = 0; r < used_replicas_; ++r) {
    if (!devices_[r].is_cpu())
      streams[r] = c10::impl::VirtualGuardImpl(devices_[r].type()).getStream(devices_[r]);
  }
  std::vector<torch::Tensor> outputs(used_replicas_);
  std::vector<std::exception_ptr> errors(used_replicas_);
  last_threads_.assign(used_replicas_, ReplicaThreadState{});
  {
    std::vector<std::thread> threads;
    threads.reserve(used_replicas_);
    // Every thread started is joined when this block ends, also when the next cannot start.
    struct JoinAll {
      std::vector<std::thread>& threads;
      ~JoinAll() {
        for (std::thread& thread : threads)
          if (thread.joinable()) thread.join();
      }
    } join_all{threads};
    for (std::size_t r = 0; r < used_replicas_; ++r) {
      threads.emplace_back([&, r] {
        try {
          at::ThreadLocalStateGuard state(caller_state);
          c10::OptionalDeviceGuard device_guard;
          std::optional<c10::StreamGuard> stream_guard;
          if (streams[r]) {
            device_guard.reset_device(devices_[r]);
            stream_guard.emplace(*streams[r]);
          }
          torch::AutoGradMode grad_mode(grad_enabled);
          AutocastScope autocast(precision_, devices_[r]);
          last_threads_[r] = {std::this_thread::get_id(), devices_[r],
                              torch::GradMode::is_enabled(), autocast_enabled(devices_[r].type())};
          outputs[r] = replicas_[r]->forward(chunks[r]);
        } catch (...) {
          errors[r] = std::current_exception();
        }
      });
    }
  }
  for (const std::exception_ptr& error : errors) {
    if (error) std::rethrow_exception(error);
  }

  // gather: every output on the first device, concatenated along the batch.
  for (torch::Tensor& output : outputs)
    output = output.to(devices_.front());
  return used_replicas_ == 1 ? outputs.front() : torch::cat(outputs, 0);
}

void DataParallel::reduce_gradients() {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor>& module_parameters = parameters_.front();
  for (const std::vector<std::size_t>& buffer : gradient_buffers_) {
    torch::Tensor sum;
    for (std::size_t r = 0; r < used_replicas_; ++r) {
      std::vector<torch::Tensor> gradients(parameters_[r].size());
      for (std::size_t i : buffer) {
        torch::Tensor& parameter = parameters_[r][i];
        gradients[i] = parameter.grad().defined() ? parameter.grad() : torch::zeros_like(parameter);
        if (r > 0) parameter.mutable_grad() = torch::Tensor();  // replicas keep no gradients
      }
      torch::Tensor flat = flatten_buffer(gradients, buffer);
      // reduce_add without NCCL: the first two summed into a new tensor, the rest added in.
      if (r == 0) {
        sum = flat;
      } else if (r == 1) {
        sum = sum + flat.to(devices_.front(), /*non_blocking=*/true);
      } else {
        sum.add_(flat.to(devices_.front(), /*non_blocking=*/true));
      }
    }
    std::vector<torch::Tensor> reduced = unflatten_buffer(sum, module_parameters, buffer);
    for (std::size_t k = 0; k < buffer.size(); ++k)
      module_parameters[buffer[k]].mutable_grad() = reduced[k];
  }
}

}  // namespace epochcast::runtime

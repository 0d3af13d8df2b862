// Replays each layer alone and takes its device time forward and backward.
#include "runtime/train/profiler.h"

#include "runtime/measure/device_clock.h"
#include "runtime/train/precision.h"

namespace epochcast::runtime {

void synchronize(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

std::vector<LayerTiming> profile_layers(TorchModel& model, const torch::Tensor& input,
                                        const ProfileOptions& options) {
  const torch::Device device = input.device();
  // On the CPU each call is timed by the host clock anyway: one call per trial is enough, and
  // keeps one graph alive rather than ten.
  const int calls = device.is_cuda() ? std::max(options.calls, 1) : 1;
  std::vector<std::vector<torch::Tensor>> inputs;
  {
    torch::NoGradGuard no_grad;
    AutocastScope autocast(options.precision, device);
    model->forward_recording(input, inputs);
  }
  std::vector<torch::Tensor> parameters = model->parameters();
  std::vector<LayerTiming> timings;
  for (std::size_t i = 0; i < model->layer_count(); ++i) {
    const LayerCosts& costs = model->layer_costs(i);
    // Fresh copies of the layer's inputs for each call: a backward then writes each input's
    // gradient once, as in training, instead of accumulating into one.
    std::vector<std::vector<torch::Tensor>> call_inputs(static_cast<std::size_t>(calls));
    auto fresh_inputs = [&] {
      for (auto& layer_inputs : call_inputs) {
        layer_inputs.clear();
        for (const torch::Tensor& x : inputs[i]) {
          torch::Tensor copy = x.detach().clone();
          if (copy.is_floating_point() && costs.needs_input_grad) copy.requires_grad_(true);
          layer_inputs.push_back(copy);
        }
      }
    };
    std::vector<torch::Tensor> outputs(static_cast<std::size_t>(calls));
    auto forward = [&](int k) {
      AutocastScope autocast(options.precision, device);
      outputs[static_cast<std::size_t>(k)] =
          model->run_layer(i, call_inputs[static_cast<std::size_t>(k)]);
    };
    // Warm-up: cuDNN's plans, the allocator's blocks, lazy initialisations.
    fresh_inputs();
    forward(0);
    const bool has_backward = outputs[0].requires_grad();
    if (has_backward) outputs[0].backward(torch::ones_like(outputs[0]));

    LayerTiming t;
    t.index = static_cast<int>(i);
    t.name = costs.layer.name;
    t.type = std::string(name_of(costs.layer.type));
    t.forward_s = device_seconds_per_call(device, calls, options.trials, forward, fresh_inputs);
    if (has_backward) {
      std::vector<torch::Tensor> gradients(static_cast<std::size_t>(calls));
      auto forward_all = [&] {
        fresh_inputs();
        for (int k = 0; k < calls; ++k) {
          forward(k);
          gradients[static_cast<std::size_t>(k)] =
              torch::ones_like(outputs[static_cast<std::size_t>(k)]);
        }
      };
      auto backward = [&](int k) {
        // Parameter gradients as training leaves them before a backward (set to None), so each
        // call writes them rather than adding to the previous call's.
        for (torch::Tensor& p : parameters)
          p.mutable_grad() = torch::Tensor();
        outputs[static_cast<std::size_t>(k)].backward(gradients[static_cast<std::size_t>(k)]);
      };
      t.backward_s = device_seconds_per_call(device, calls, options.trials, backward, forward_all);
    }
    timings.push_back(std::move(t));
  }
  model->zero_grad();
  return timings;
}

}  // namespace epochcast::runtime

// Replays each layer alone, timing forward and backward with the device synchronised around.
#include "runtime/train/profiler.h"

#include <chrono>

namespace epochcast::runtime {

void synchronize(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

}  // namespace

std::vector<LayerTiming> profile_layers(TorchModel& model, const torch::Tensor& input,
                                        int repetitions) {
  const torch::Device device = input.device();
  std::vector<std::vector<torch::Tensor>> inputs;
  {
    torch::NoGradGuard no_grad;
    model->forward_recording(input, inputs);
  }
  std::vector<LayerTiming> timings;
  for (std::size_t i = 0; i < model->layer_count(); ++i) {
    const LayerCosts& costs = model->layer_costs(i);
    std::vector<double> forward, backward;
    for (int r = 0; r <= repetitions; ++r) {  // r == 0 is the warm-up
      std::vector<torch::Tensor> layer_inputs;
      for (const torch::Tensor& x : inputs[i]) {
        torch::Tensor copy = x.detach().clone();
        if (copy.is_floating_point() && costs.needs_input_grad) copy.requires_grad_(true);
        layer_inputs.push_back(copy);
      }
      synchronize(device);
      auto start = std::chrono::steady_clock::now();
      torch::Tensor output = model->run_layer(i, layer_inputs);
      synchronize(device);
      double forward_s = seconds_since(start);
      double backward_s = 0;
      if (output.requires_grad()) {
        torch::Tensor gradient = torch::ones_like(output);
        synchronize(device);
        start = std::chrono::steady_clock::now();
        output.backward(gradient);
        synchronize(device);
        backward_s = seconds_since(start);
      }
      if (r > 0) {
        forward.push_back(forward_s);
        backward.push_back(backward_s);
      }
    }
    LayerTiming t;
    t.index = static_cast<int>(i);
    t.name = costs.layer.name;
    t.type = std::string(to_string(costs.layer.type));
    t.forward_s = median(forward);
    t.backward_s = median(backward);
    timings.push_back(std::move(t));
  }
  model->zero_grad();
  return timings;
}

}  // namespace epochcast::runtime

// The per-layer profiling pass: every primitive layer is replayed alone on the inputs it saw in a
// real forward pass and timed forward, then backward (with respect to its input and its
// parameters). Calibration fits op-class efficiencies to these times.
#pragma once

#include <vector>

#include <torch/torch.h>

#include "core/measure/measurements.h"
#include "runtime/model/torch_model.h"

namespace epochcast::runtime {

// `input` is a batch on the model's device. Each figure is the median of `repetitions` timed
// runs after one warm-up.
std::vector<LayerTiming> profile_layers(TorchModel& model, const torch::Tensor& input,
                                        int repetitions);

// Waits for all queued work on `device` (a no-op on the CPU).
void synchronize(const torch::Device& device);

}  // namespace epochcast::runtime

// The per-layer profiling pass: every primitive layer is replayed alone on the inputs it saw in a
// real forward pass and timed forward, then backward (with respect to its input and its
// parameters), in the scenario's precision (autocast as in training). Calibration fits op-class
// efficiencies to these times, so they are the device's time alone: on a GPU, CUDA events around
// back-to-back calls queued behind a hold (runtime/measure/device_clock.h), not the host's
// dispatch and synchronisation around each layer.
#pragma once

#include <vector>

#include <torch/torch.h>

#include "core/measure/measurements.h"
#include "core/spec/scenario_spec.h"
#include "runtime/model/torch_model.h"

namespace epochcast::runtime {

struct ProfileOptions {
  int calls = 10;  // back-to-back calls per trial (GPU); their graphs are alive together
  int trials = 5;  // the figure is the median trial's time per call
  TrainingPrecision precision = TrainingPrecision::fp32;
};

// `input` is a batch on the model's device.
std::vector<LayerTiming> profile_layers(TorchModel& model, const torch::Tensor& input,
                                        const ProfileOptions& options);

// Waits for all queued work on `device` (a no-op on the CPU).
void synchronize(const torch::Device& device);

}  // namespace epochcast::runtime

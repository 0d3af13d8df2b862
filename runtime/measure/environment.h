// What a measurement was taken on: device, driver, CUDA, NCCL, LibTorch, MPI, the launcher.
#pragma once

#include "core/measure/measurements.h"
#include "runtime/comm/communicator.h"
#include "runtime/train/trainer.h"

namespace epochcast::runtime {

MeasuredEnvironment describe_environment(const DevicePlan& devices, const World& world);

}  // namespace epochcast::runtime

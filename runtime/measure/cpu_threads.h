// How many threads a step on the CPU computes with, so that the step measured is the device the
// simulator predicts.
#pragma once

#include <string>

#include "core/spec/hardware_spec.h"

namespace epochcast::runtime {

// A CPU device in the catalogue counts one core per SM. LibTorch's own default (its intra-op
// thread pool: the physical cores it detects, or OMP_NUM_THREADS) depends on the host and on how
// a virtual machine presents its CPUs, so a CPU run sets it to the device's cores, and a BLAS
// with a thread pool of its own (OpenBLAS, BLIS) too: a step on a one-core device computes on
// one thread whatever machine it runs on. Returns a line for the terminal when the host has
// fewer hardware threads than the device has cores (the step then shares them), else an empty
// string. Leaves LibTorch's default where the machine's device is not a CPU (a GPU scenario
// tried out on the CPU).
std::string compute_on_device_cores(const MachineSpec& machine);

}  // namespace epochcast::runtime

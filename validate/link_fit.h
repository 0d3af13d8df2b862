// Link figures from collective microbenchmarks (nccl-tests logs, `epochcast bench`), with the
// simulator in the loop: each measured size is predicted by the same collective model
// `predict` and `collective` use (NCCL's tuner picking the algorithm and protocol, flows on the
// machine's links), and the figures of the link kinds that model's times depend on are solved
// for, each within its physical range:
//  - links.efficiency.<kind> of the kind whose rate bounds the largest size, matched on the
//    sizes within 8x of the largest where that rate is most of the time (a tenth off it moves
//    the time by 8% or more): where a measurement shows the link's rate best;
//  - the latency that moves the sizes most in all, a kind's links.step_latency_us.<kind> or
//    NCCL's links.collective_launch_us, matched on the sizes it moves at least half as much as
//    any.
//  - where the run's thread launched several GPUs' kernels an iteration (nccl-tests' -g 8),
//    links.nccl_launch_us, matched on the sizes those launches bound; the latency is then
//    matched on the other sizes.
//  - how the GPUs run NCCL's LL and LL128 (LinkCosts): each size NCCL's tuner runs under one of
//    them goes to the figure of that protocol that moves it most — LL's step latency on the
//    link kind that can explain its sizes (the one moving them most whose matching value stays
//    in its range), LL's rate, LL128's rate — and is matched by it, not by the two figures
//    above (whose sizes are the others).
// They are solved in turn until none moves (a size may pay several).
// Each is the value where the median of log(predicted / measured) over its sizes is zero (a
// one-dimensional root, found by bisection, since a time only falls as an efficiency rises and
// only rises with a latency). An efficiency that would have to leave its range to match is held
// at the bound; a latency, launch or protocol figure keeps its prior; either way the sizes it
// leaves unexplained are named as a gap.
#pragma once

#include <string>
#include <vector>

#include "core/measure/measurements.h"
#include "core/spec/hardware_spec.h"
#include "core/spec/profile_spec.h"

namespace epochcast::validate {

struct LinkFigureFit {
  std::string key;   // "links.efficiency.nvswitch"
  double value = 0;  // in the key's unit
  int observations = 0;
  double rms_relative_residual = 0;  // over the sizes it was matched on, after the fit
  std::string from;
};

struct LinkFit {
  HardwareProfile profile;  // the prior with the fitted figures
  std::vector<LinkFigureFit> fitted;
  std::vector<std::string> notes;  // what was not fitted, and why
  std::vector<std::string> gaps;   // sizes the model cannot represent within physical ranges
};

// Fits to the collective with the most ranks among `measured` (all_reduce first where several
// have as many), on `machine`: ranks up to its GPUs per node are one node, more fill whole nodes
// over its network.
LinkFit fit_link_figures(const std::vector<CollectiveMeasurement>& measured,
                         const MachineSpec& machine, const HardwareProfile& prior);

}  // namespace epochcast::validate

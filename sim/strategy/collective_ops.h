// Inserting a collective into an iteration plan: on each participating GPU's lane a marker that
// opens it (once that rank is ready), then its transfers as flows on the network — or, at the
// analytic fidelity, one delay of its alpha-beta time — then a marker per rank that closes it
// once everything the rank sends and receives has arrived.
#pragma once

#include <string>
#include <vector>

#include "sim/collectives/alpha_beta.h"
#include "sim/engine/sim_time.h"
#include "sim/strategy/iteration_plan.h"

namespace epochcast::sim {

// Where one rank takes part: its GPU, the lane its markers go on (the compute stream for
// DataParallel, the communication stream for DDP), and what it must wait for first.
struct CollectiveSite {
  int gpu = 0;
  Lane lane;
  std::vector<std::int32_t> ready;  // plan ops the rank's part waits for
};

// Returns, in `sites` order, the op closing the collective on each rank.
std::vector<std::int32_t> add_collective(IterationPlan& plan, const CollectiveChoice& choice,
                                         bool analytic, const std::vector<CollectiveSite>& sites,
                                         const std::string& name, bool nccl = true,
                                         double compute_speed = 1.0);

}  // namespace epochcast::sim

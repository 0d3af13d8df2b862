// Running one transfer plan on its own as flows on the network: what nccl-tests measures, in
// simulation. Used by tests (flows against alpha-beta) and for collective bandwidth tables.
#pragma once

#include "core/spec/profile_spec.h"
#include "sim/collectives/collective.h"
#include "sim/network/topology.h"

namespace epochcast::sim {

Seconds simulate_plan(const TransferPlan& plan, const Topology& topology,
                      const HardwareProfile& profile);

}  // namespace epochcast::sim

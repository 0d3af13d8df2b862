// What NCCL's environment variables let a collective run, read as NCCL reads them, for
// `epochcast collective`: NCCL_ALGO and NCCL_PROTO (lists, '^' to exclude, per-collective
// "allreduce:tree,ring;allgather:ring"), NCCL_P2P_LEVEL / NCCL_P2P_DISABLE and NCCL_NVLS_ENABLE.
// Variables that change what NCCL does but not what this simulator models are reported, not
// silently dropped.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/io/launcher_environment.h"
#include "core/spec/hardware_spec.h"
#include "core/spec/scenario_spec.h"
#include "sim/collectives/collective.h"

namespace epochcast::cli {

struct NcclChoices {
  // The algorithms and protocols NCCL may pick from (its tuner takes the fastest of them);
  // every one where the list is empty.
  std::vector<CollectiveAlgorithm> algorithms;
  std::vector<sim::Protocol> protocols;
  std::optional<P2pLevel> p2p_level;  // replaces the machine's topology.pcie.nccl_p2p_level
  std::vector<std::string> applied;   // "NCCL_ALGO=Ring", as set, for the output's record
  std::vector<std::string> ignored;   // "NCCL_MAX_NCHANNELS=4: ...", read but not modelled
};

// `collective` in nccl-tests' words ("all_reduce"); `algo_option` and `proto_option` are the
// command's --algo and --proto (the same syntax as the variables), which win over them; empty
// or "auto" leaves the variable (or NCCL's default) in force. Raises InputError naming the
// variable or option for a value NCCL would refuse.
NcclChoices read_nccl_choices(std::string_view collective, const std::string& algo_option,
                              const std::string& proto_option,
                              const EnvironmentLookup& lookup = {});

}  // namespace epochcast::cli

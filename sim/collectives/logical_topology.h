// Logical topologies laid over the GPUs: the rings and trees along which collectives move data.
#pragma once

#include <vector>

#include "sim/network/topology.h"

namespace epochcast::sim {

struct Ring {
  std::vector<int> order;  // GPUs in ring order; each sends to the next
};

// Rings over `ranks` (GPUs of one node) along the fastest links. On an NVLink mesh: as many
// Hamiltonian cycles as the NVLink lanes allow (each taking one lane per edge, as NCCL finds
// several rings on a DGX-1), each with its reverse, which uses the other direction of the same
// lanes. Otherwise (PCIe, or NVSwitch where all traffic shares each GPU's links to the fabric)
// one ring in rank order, which keeps PCIe neighbours adjacent.
std::vector<Ring> build_rings(const Topology& topology, const std::vector<int>& ranks);

// A binary tree in heap order over `ranks`: ranks[0] is the root, the children of position i
// are positions 2i+1 and 2i+2.
struct Tree {
  std::vector<int> ranks;
  int parent(int position) const { return position == 0 ? -1 : (position - 1) / 2; }
  std::vector<int> children(int position) const;
  int depth() const;  // levels below the root
};

}  // namespace epochcast::sim

// `epochcast topo` end to end: the path matrix users compare with `nvidia-smi topo -m`.
#include <catch2/catch.hpp>

#include "support/run_command.h"

using namespace epochcast::test;

TEST_CASE("topo shows the DGX-1's hybrid cube-mesh: one and two NVLinks, PCIe across the halves") {
  CommandResult r = run_command(epochcast_binary() + " topo dgx1-v100");
  REQUIRE(r.exit_code == 0);
  // GPU0's row as nvidia-smi prints it on a DGX-1V: NV1 NV1 NV2 NV2 to GPUs 1-4, SYS beyond,
  // where NCCL stages through host memory (marked *) since no NVLink joins them.
  CHECK_THAT(r.output, Catch::Contains("GPU0     X   NV1   NV1   NV2   NV2  SYS*  SYS*  SYS*"));
  CHECK_THAT(r.output, Catch::Contains("GPU0     -  25.0  25.0  50.0  50.0  15.8  15.8  15.8"));
  CHECK_THAT(r.output, Catch::Contains("Sources:\n[1] "));
}

TEST_CASE("topo shows seed 001's box: peer traffic through the PCIe host bridge") {
  CommandResult r = run_command(epochcast_binary() + " topo seed001-box");
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("GPU0     X  PHB*  PHB*  PHB*"));
  CHECK_THAT(r.output, Catch::Contains("GPU3  15.8  15.8  15.8     -"));
  CHECK_THAT(r.output, Catch::Contains("farther apart than its P2P level, pxb"));
}

TEST_CASE("topo shows 8 RTX 4090 without peer-to-peer, across two sockets") {
  CommandResult r = run_command(epochcast_binary() + " topo rtx4090-8x-pcie");
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("peer-to-peer off"));
  CHECK_THAT(r.output, Catch::Contains("SYS"));
}

TEST_CASE("topo of a cluster shows the path across nodes through the network") {
  CommandResult r = run_command(epochcast_binary() + " topo dgx-h100-cluster --nodes 4");
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("4 nodes"));
  CHECK_THAT(r.output,
             Catch::Contains("Across nodes: GPU0 of node 0 to GPU0 of node 1: NET, 50.0 GB/s"));
  CHECK_THAT(r.output, Catch::Contains("NV18"));
}

TEST_CASE("topo of an unknown machine exits 2 with a suggestion") {
  CommandResult r = run_command(epochcast_binary() + " topo dgx-a10");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("(did you mean 'dgx-a100'?)"));
  CHECK_THAT(r.output, !Catch::Contains(" gpus,"));
}

TEST_CASE("topo --nodes on a machine without a network exits 2 and names the option") {
  CommandResult r = run_command(epochcast_binary() + " topo seed001-box --nodes 2");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::StartsWith("--nodes 2: error: the machine 'seed001-box'"));
}

// Reading nvidia-smi topo -m and nvidia-smi -q (core/spec/nvidia_smi_topology): the public
// outputs in tests/cli/nvidia_smi/, and copies of them changed the ways pasted text goes wrong.
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include <catch2/catch.hpp>

#include "core/spec/hardware_spec.h"
#include "core/spec/nvidia_smi_topology.h"
#include "support/paths.h"

using namespace epochcast;

namespace {

std::string fixture_text(const std::string& name) {
  std::ifstream in(test::source_dir() / "tests/cli/nvidia_smi" / name, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// `text` with every `from` replaced by `to`.
std::string replaced(std::string text, const std::string& from, const std::string& to) {
  for (std::size_t at = text.find(from); at != std::string::npos;
       at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

const GpuCatalogue& catalogue() {
  static const GpuCatalogue bundled =
      load_gpu_catalogue(test::source_dir() / "topologies" / "gpus.yaml");
  return bundled;
}

void expect_error(const std::function<void()>& read, const std::string& where,
                  const std::string& key, const std::string& phrase) {
  try {
    read();
  } catch (const InputError& error) {
    INFO(error.what());
    CHECK(error.mark().str() == where);
    CHECK(error.key() == key);
    CHECK_THAT(error.problem(), Catch::Contains(phrase));
    return;
  }
  FAIL("no InputError was raised");
}

}  // namespace

TEST_CASE("the DGX-1 matrix reads as GPUs then NICs with their links and CPU affinity") {
  const SmiTopology t = parse_smi_topology(fixture_text("dgx1-v100-msccl-tools.txt"), "dgx1.txt");
  REQUIRE(t.gpus == 8);
  REQUIRE(t.devices.size() == 12);
  CHECK(t.devices[8].name == "mlx5_0");
  CHECK_FALSE(t.devices[8].is_gpu);
  CHECK(t.label(0, 3) == "NV2");
  CHECK(t.cell(0, 3).nvlinks == 2);
  CHECK(t.label(0, 8) == "PIX");
  CHECK(t.label(0, 10) == "PHB");
  CHECK(t.label(0, 4) == "NV2");
  CHECK(t.label(0, 5) == "SYS");
  CHECK(t.devices[4].cpu_affinity == "20-39,60-79");
  CHECK(t.devices[4].numa_affinity.empty());
  CHECK(t.cell(0, 3).mark.str() == "dgx1.txt:2:18");
}

TEST_CASE("a matrix with spaces reads its affinity columns and NIC legend") {
  const SmiTopology t =
      parse_smi_topology(fixture_text("a100-nvswitch-8gpu-xuesongtap.txt"), "a100.txt");
  REQUIRE(t.gpus == 8);
  REQUIRE(t.devices.size() == 25);
  CHECK(t.label(6, 7) == "NV12");
  CHECK(t.label(0, 8) == "PXB");
  CHECK(t.label(8, 9) == "PIX");
  CHECK(t.devices[7].cpu_affinity == "0-103");
  CHECK(t.devices[7].numa_affinity == "0");
  CHECK(t.device_name(24) == "NIC16 (mlx5_bond_0)");
}

TEST_CASE("with tabs an empty CPU Affinity stays empty and NUMA Affinity keeps its column") {
  const std::string text = fixture_text("rtx4090-8gpu-go-gpuallocator-17.txt");
  const SmiTopology t = parse_smi_topology(
      replaced(text, "GPU0\t X \tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\t0-55,112-167",
               "GPU0\t X \tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\t"),
      "4090.txt");
  CHECK(t.devices[0].cpu_affinity.empty());
  CHECK(t.devices[0].numa_affinity == "0");
  CHECK(t.devices[4].cpu_affinity == "56-111,168-223");
  CHECK(t.devices[4].numa_affinity == "1");
}

TEST_CASE("ANSI colour codes around the names do not change the matrix") {
  const std::string text = fixture_text("dgx1-v100-msccl-tools.txt");
  const std::string coloured = replaced(replaced(text, "\tGPU1\t", "\t\x1b[1mGPU1\x1b[0m\t"),
                                        "GPU7\t", "\x1b[4mGPU7\x1b[0m\t");
  const SmiTopology plain = parse_smi_topology(text, "plain.txt");
  const SmiTopology t = parse_smi_topology(coloured, "coloured.txt");
  REQUIRE(t.devices.size() == plain.devices.size());
  for (int a = 0; a < 12; ++a) {
    for (int b = 0; b < 12; ++b)
      CHECK(t.label(a, b) == plain.label(a, b));
  }
}

TEST_CASE("SOC of drivers before NODE existed reads as SYS") {
  const SmiTopology t = parse_smi_topology(
      replaced(fixture_text("dgx1-v100-msccl-tools.txt"), "SYS", "SOC"), "soc.txt");
  CHECK(t.label(0, 5) == "SYS");
}

TEST_CASE("a file without a matrix is refused and says what to give") {
  expect_error([] { parse_smi_topology("Legend:\n\n  X    = Self\n", "legend.txt"); },
               "legend.txt:1:1", "", "no matrix of nvidia-smi topo -m here");
}

TEST_CASE("a header with GPUs out of order is refused at the name") {
  const std::string text =
      replaced(fixture_text("dgx1-v100-msccl-tools.txt"), "\tGPU2\tGPU3\t", "\tGPU3\tGPU2\t");
  expect_error([&] { parse_smi_topology(text, "order.txt"); }, "order.txt:1:12", "GPU3",
               "expected GPU2 here");
}

TEST_CASE("a matrix that is not symmetric is refused at the later of the two entries") {
  // GPU0's link to GPU1 says NV2; GPU1's row (line 3) still says NV1.
  std::string text = fixture_text("dgx1-v100-msccl-tools.txt");
  text.replace(text.find("GPU0\t X \tNV1"), 12, "GPU0\t X \tNV2");
  expect_error([&] { parse_smi_topology(text, "asym.txt"); }, "asym.txt:3:6", "GPU1.GPU0",
               "NV1 here but NV2 at GPU0.GPU1 (asym.txt:2:10)");
}

TEST_CASE("the matrix of nvidia-smi topo -p2p is refused with a hint") {
  std::string text = fixture_text("dgx1-v100-msccl-tools.txt");
  text.replace(text.find("GPU0\t X \tNV1"), 12, "GPU0\t X \tOK ");
  expect_error([&] { parse_smi_topology(text, "p2p.txt"); }, "p2p.txt:2:10", "GPU0.GPU1",
               "this looks like nvidia-smi topo -p2p's matrix");
}

TEST_CASE("a row with one entry too many is refused as not square") {
  std::string text = fixture_text("dgx1-v100-msccl-tools.txt");
  text.replace(text.find("\tSYS\t0-19,40-59\nGPU1"), 4, "\tSYS\tSYS");
  expect_error([&] { parse_smi_topology(text, "long.txt"); }, "long.txt:2:54", "GPU0",
               "the row has more than 12 entries where the header names 12 devices");
}

TEST_CASE("a CPU Affinity that is no list of CPUs is refused at its column") {
  std::string text = fixture_text("dgx1-v100-msccl-tools.txt");
  text.replace(text.find("0-19,40-59"), 10, "0-19,40-5x");
  expect_error([&] { parse_smi_topology(text, "cpus.txt"); }, "cpus.txt:2:54", "GPU0.CPU Affinity",
               "expected CPU numbers such as 0-19,40-59");
}

TEST_CASE("product names of nvidia-smi name catalogue entries when exactly one fits") {
  const auto id_of = [](const std::string& product) {
    const GpuSpec* gpu = gpu_for_product_name(product, catalogue());
    return gpu == nullptr ? std::string("none") : gpu->id;
  };
  CHECK(id_of("NVIDIA H100 80GB HBM3") == "h100-sxm");
  CHECK(id_of("NVIDIA H100 PCIe") == "h100-pcie");
  CHECK(id_of("Tesla V100-SXM2-32GB") == "v100-sxm2-32gb");
  CHECK(id_of("Tesla V100-PCIE-32GB") == "v100-pcie-32gb");
  CHECK(id_of("NVIDIA A100-SXM4-40GB") == "a100-sxm4-40gb");
  CHECK(id_of("NVIDIA A100 80GB PCIe") == "a100-pcie-80gb");
  CHECK(id_of("NVIDIA GeForce RTX 4090") == "rtx-4090");
  CHECK(id_of("NVIDIA RTX A6000") == "rtx-a6000");
  CHECK(id_of("NVIDIA L40S") == "l40s");
  CHECK(id_of("Tesla T4") == "t4");
  // An L40 is no L40S; "NVIDIA H200" is the SXM board's name and the NVL's without "NVL".
  CHECK(id_of("NVIDIA L40") == "none");
  CHECK(id_of("NVIDIA H200") == "none");
  CHECK(id_of("NVIDIA A800-SXM4-80GB") == "none");
  const std::vector<std::string> similar = similar_gpu_ids("NVIDIA A800-SXM4-80GB", catalogue(), 3);
  REQUIRE(!similar.empty());
  CHECK(similar.front() == "a100-sxm4-80gb");
}

TEST_CASE("nvidia-smi -q gives each GPU's product name and the count of GPUs") {
  const SmiQuery q = parse_smi_query(
      "==============NVSMI LOG==============\n\n"
      "Attached GPUs                             : 2\n"
      "GPU 00000000:18:00.0\n"
      "    Product Name                          : NVIDIA H100 80GB HBM3\n"
      "    Product Brand                         : NVIDIA\n"
      "GPU 00000000:2A:00.0\n"
      "    Product Name                          : NVIDIA H100 80GB HBM3\n",
      "q.txt");
  REQUIRE(q.products.size() == 2);
  CHECK(q.products[0].name == "NVIDIA H100 80GB HBM3");
  CHECK(q.products[1].mark.str() == "q.txt:8:45");
  REQUIRE(q.attached_gpus);
  CHECK(*q.attached_gpus == 2);
}

TEST_CASE("a query without a Product Name line is refused and names the other option") {
  expect_error([] { parse_smi_query("Driver Version : 535.54.03\n", "q.txt"); }, "q.txt:1:1",
               "Product Name",
               "the topology matrix, `nvidia-smi topo -m`, goes to --from-nvidia-smi");
}

TEST_CASE("more NVLinks on a GPU than its catalogue entry has are refused at its row") {
  const SmiTopology t = parse_smi_topology(fixture_text("dgx1-v100-msccl-tools.txt"), "dgx1.txt");
  // A P100 SXM2 has four NVLinks; the DGX-1's V100 rows add up to six.
  expect_error([&] { smi_machine(t, *catalogue().find("p100-sxm2-16gb"), "x"); }, "dgx1.txt:2:1",
               "GPU0", "add up to 6 NVLinks, more than the 4");
}

TEST_CASE("the DGX-1 matrix becomes two sockets of two switches and its NVLink pairs") {
  const SmiTopology t = parse_smi_topology(fixture_text("dgx1-v100-msccl-tools.txt"), "dgx1.txt");
  const SmiMachine m = smi_machine(t, *catalogue().find("v100-sxm2-32gb"), "dgx1");
  CHECK(m.sockets == 2);
  CHECK(m.switches_per_socket == 2);
  CHECK(m.nvlink == NvlinkShape::explicit_links);
  CHECK(m.nvlink_pairs.size() == 16);
  // CPUs 0-19,40-59 and 20-39,60-79.
  CHECK(m.cores == 80);
  CHECK(m.not_expressed.empty());
  // The file loads as a machine of the bundled catalogue.
  const MachineSpec machine = load_machine_from_string(m.yaml(), "dgx1.yaml", catalogue());
  CHECK(machine.host.sockets == 2);
  CHECK(machine.topology.nvlink.pairs.size() == 16);
}

TEST_CASE("a matrix whose grouping the format cannot draw says so") {
  const SmiTopology t = parse_smi_topology(fixture_text("t4-pcie-4gpu-nccl-428.txt"), "t4.txt");
  const SmiMachine m = smi_machine(t, *catalogue().find("t4"), "t4");
  CHECK(m.sockets == 2);
  REQUIRE(!m.not_expressed.empty());
  CHECK_THAT(m.not_expressed.front(),
             Catch::Contains("the matrix groups them otherwise (sockets: GPU 0; GPUs 1-3)"));
  CHECK_THAT(m.yaml(), Catch::Contains("# What the machine format cannot say as the matrix does"));
}

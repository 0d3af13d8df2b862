// `epochcast topo --from-nvidia-smi` end to end on real `nvidia-smi topo -m` outputs
// (tests/cli/nvidia_smi/, with their sources): the machine file written loads, and `epochcast
// topo` on it shows every GPU pair as the matrix does; bad matrices are refused where they are bad.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "support/run_command.h"

using namespace epochcast::test;

namespace {

std::string read_text(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void write_text(const std::filesystem::path& file, const std::string& text) {
  std::ofstream(file, std::ios::binary) << text;
}

std::vector<std::string> words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string word; in >> word;)
    out.push_back(word);
  return out;
}

// The command, its prose unwrapped (COLUMNS=0: no width), so that phrases stay on one line.
std::string unwrapped_epochcast() {
  return "COLUMNS=0 " + epochcast_binary();
}

std::string fixture(const std::string& name) {
  return source_file("tests/cli/nvidia_smi/" + name);
}

// A square table of labels, GPU rows and columns only: the fixture's matrix as nvidia-smi
// printed it, read here independently of the code under test.
using Labels = std::vector<std::vector<std::string>>;

Labels smi_gpu_labels(const std::string& text) {
  std::istringstream lines(text);
  Labels labels;
  std::size_t gpus = 0;
  for (std::string line; std::getline(lines, line);) {
    std::vector<std::string> w = words(line);
    if (gpus == 0) {
      // The header: GPU0 first, and not GPU0's row (whose next word is X).
      if (w.size() > 1 && w[0] == "GPU0" && w[1] != "X") {
        while (gpus < w.size() && w[gpus] == "GPU" + std::to_string(gpus))
          ++gpus;
      }
      continue;
    }
    if (labels.size() < gpus && !w.empty() && w[0] == "GPU" + std::to_string(labels.size())) {
      labels.emplace_back(w.begin() + 1, w.begin() + 1 + static_cast<std::ptrdiff_t>(gpus));
    }
  }
  return labels;
}

// `epochcast topo`'s "Path between GPUs" table, without the '*' that marks staged pairs.
Labels topo_gpu_labels(const std::string& output) {
  std::istringstream lines(output);
  Labels labels;
  bool in_table = false;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("Path between GPUs", 0) == 0) {
      in_table = true;
      continue;
    }
    // The rows come after the column names and a dashed line.
    if (!in_table || line.rfind("---", 0) == 0) continue;
    std::vector<std::string> w = words(line);
    if (w.empty()) break;
    if (w.size() > 1 && w[1] == "GPU1") continue;
    if (w[0] != "GPU" + std::to_string(labels.size())) continue;
    std::vector<std::string> row(w.begin() + 1, w.end());
    for (std::string& label : row)
      if (!label.empty() && label.back() == '*') label.pop_back();
    labels.push_back(row);
  }
  return labels;
}

// What `epochcast topo` shows for an nvidia-smi entry: the format has one level of PCIe switches
// (PXB is drawn as a switch, PIX) and one root complex per socket (NODE is drawn as PHB).
std::string as_epochcast_shows(const std::string& smi) {
  if (smi == "PXB") return "PIX";
  if (smi == "NODE") return "PHB";
  return smi;
}

struct Written {
  CommandResult command;
  std::string machine;  // the file written
  std::string topo;     // `epochcast topo` on it
};

Written from_smi(const std::string& fixture_name, const std::string& arguments,
                 const std::string& output_name) {
  Written w;
  const std::string out = output_file(output_name);
  std::filesystem::remove(out);
  w.command = run_command(unwrapped_epochcast() + " topo --from-nvidia-smi " +
                          fixture(fixture_name) + " " + arguments + " -o " + out);
  w.machine = read_text(out);
  w.topo = run_command(unwrapped_epochcast() + " topo " + out).output;
  return w;
}

void check_every_pair(const std::string& fixture_name, const Written& w) {
  REQUIRE(w.command.exit_code == 0);
  const Labels expected = smi_gpu_labels(read_text(fixture(fixture_name)));
  const Labels shown = topo_gpu_labels(w.topo);
  REQUIRE(!expected.empty());
  REQUIRE(shown.size() == expected.size());
  for (std::size_t a = 0; a < expected.size(); ++a) {
    REQUIRE(shown[a].size() == expected.size());
    for (std::size_t b = 0; b < expected.size(); ++b) {
      INFO("GPU" << a << " to GPU" << b);
      CHECK(shown[a][b] == as_epochcast_shows(expected[a][b]));
    }
  }
}

// A copy of a fixture with `from` replaced by `to` at its first place after `after`.
std::string edited(const std::string& fixture_name, const std::string& after,
                   const std::string& from, const std::string& to, const std::string& name) {
  std::string text = read_text(fixture(fixture_name));
  const std::size_t at = text.find(from, text.find(after));
  REQUIRE(at != std::string::npos);
  text.replace(at, from.size(), to);
  const std::string file = output_file(name);
  write_text(file, text);
  return file;
}

}  // namespace

TEST_CASE("topo from nvidia-smi turns the DGX-1 matrix into its hybrid cube-mesh pair for pair") {
  const Written w =
      from_smi("dgx1-v100-msccl-tools.txt", "--gpu v100-sxm2-32gb", "smi-dgx1-v100.yaml");
  check_every_pair("dgx1-v100-msccl-tools.txt", w);
  // Two sockets (SYS parts GPUs 0-3 from 4-7), a switch for each GPU pair and its NIC (PIX),
  // the NVLinks as the matrix counts them: the layout of topologies/dgx1-v100.yaml.
  CHECK_THAT(w.machine, Catch::Contains("  sockets: 2\n"));
  CHECK_THAT(w.machine, Catch::Contains("    switches_per_socket: 2\n"));
  CHECK_THAT(w.machine, Catch::Contains("    shape: explicit\n"));
  CHECK_THAT(w.machine, Catch::Contains("      - [0, 3, 2]\n"));
  CHECK_THAT(w.topo, Catch::Contains("GPU0     X   NV1   NV1   NV2   NV2  SYS*  SYS*  SYS*"));
  CHECK_THAT(w.command.output, Catch::Contains("Every GPU pair's path in `epochcast topo` is the "
                                               "matrix's entry (28 pairs"));
  // What the matrix cannot give is said, in the output and in the file.
  CHECK_THAT(w.command.output, Catch::Contains("topology.sockets: the matrix has no rate"));
  CHECK_THAT(w.machine, Catch::Contains("#   - topology.sockets: the matrix has no rate"));
}

TEST_CASE(
    "topo from nvidia-smi draws eight A100 with NV12 between every pair as an NVSwitch board") {
  const Written w = from_smi("a100-nvswitch-8gpu-xuesongtap.txt", "--gpu a100-sxm4-40gb",
                             "smi-a100-nvswitch.yaml");
  check_every_pair("a100-nvswitch-8gpu-xuesongtap.txt", w);
  CHECK_THAT(w.machine, Catch::Contains("    shape: nvswitch\n"));
  // SYS parts each GPU pair and its four NICs from the rest: four sockets of one switch each.
  CHECK_THAT(w.machine, Catch::Contains("  sockets: 4\n"));
  CHECK_THAT(w.machine, Catch::Contains("    switches_per_socket: 1\n"));
  CHECK_THAT(w.topo, Catch::Contains("1 NVSwitch fabric(s)"));
  // GPUs and NICs PXB apart are drawn under one switch, and that is said.
  CHECK_THAT(w.command.output, Catch::Contains("PXB (several PCIe switches, no host bridge) is "
                                               "drawn as one switch"));
  CHECK_THAT(w.machine, Catch::Contains("#   - PXB (several PCIe switches, no host bridge)"));
}

TEST_CASE("topo from nvidia-smi draws four L40S on two NUMA nodes and says NODE becomes PHB") {
  const Written w =
      from_smi("l40s-pcie-4gpu-miss-alignment-106.txt", "--gpu l40s", "smi-l40s.yaml");
  check_every_pair("l40s-pcie-4gpu-miss-alignment-106.txt", w);
  CHECK_THAT(w.machine, Catch::Contains("    shape: none\n"));
  CHECK_THAT(w.machine, Catch::Contains("    switches_per_socket: 0\n"));
  CHECK_THAT(w.topo, Catch::Contains("GPU0     X  PHB*  SYS*  SYS*"));
  CHECK_THAT(w.command.output,
             Catch::Contains("NODE (across the host bridges of one NUMA node) is drawn as PHB"));
  CHECK_THAT(w.command.output, Catch::Contains("one per socket (GPU0-GPU1, GPU2-GPU3)"));
}

TEST_CASE("topo from nvidia-smi keeps SYS between every pair of an RTX 4090 server") {
  const Written w =
      from_smi("rtx4090-8gpu-go-gpuallocator-17.txt", "--gpu rtx-4090", "smi-rtx4090.yaml");
  check_every_pair("rtx4090-8gpu-go-gpuallocator-17.txt", w);
  // Every GPU is SYS from every other, though the NUMA Affinity column puts four on each node:
  // the entries win, and the file says so.
  CHECK_THAT(w.machine, Catch::Contains("  sockets: 8\n"));
  CHECK_THAT(w.machine, Catch::Contains("SYS entries part GPUs of one NUMA Affinity"));
}

TEST_CASE("topo from nvidia-smi lists the pairs that an uneven NUMA split cannot keep") {
  // One T4 on one NUMA node and three on the other: the format fills sockets with equal shares.
  const Written w = from_smi("t4-pcie-4gpu-nccl-428.txt", "--gpu t4", "smi-t4.yaml");
  REQUIRE(w.command.exit_code == 0);
  const Labels expected = smi_gpu_labels(read_text(fixture("t4-pcie-4gpu-nccl-428.txt")));
  const Labels shown = topo_gpu_labels(w.topo);
  REQUIRE(shown.size() == 4);
  int differing = 0;
  for (std::size_t a = 0; a < 4; ++a) {
    for (std::size_t b = a + 1; b < 4; ++b)
      differing += shown[a][b] != as_epochcast_shows(expected[a][b]) ? 1 : 0;
  }
  CHECK(differing == 3);
  CHECK_THAT(w.command.output,
             Catch::Contains("3 of the 6 GPU pairs take another path than the matrix's: "
                             "GPU0-GPU1 SYS in the matrix, PHB in the machine, GPU1-GPU2 NODE in "
                             "the matrix, SYS in the machine, GPU1-GPU3 NODE in the matrix, SYS "
                             "in the machine."));
  CHECK_THAT(w.machine, Catch::Contains("#   - 3 of the 6 GPU pairs take another path"));
}

TEST_CASE("topo from nvidia-smi takes the GPU from the product name of nvidia-smi -q") {
  const std::string query = output_file("smi-query-v100.txt");
  write_text(query,
             "==============NVSMI LOG==============\n\n"
             "Attached GPUs                             : 8\n"
             "GPU 00000000:06:00.0\n"
             "    Product Name                          : Tesla V100-SXM2-32GB\n"
             "GPU 00000000:07:00.0\n"
             "    Product Name                          : Tesla V100-SXM2-32GB\n");
  const Written w =
      from_smi("dgx1-v100-msccl-tools.txt", "--smi-query " + query, "smi-dgx1-query.yaml");
  check_every_pair("dgx1-v100-msccl-tools.txt", w);
  CHECK_THAT(w.machine, Catch::Contains("gpu: \"v100-sxm2-32gb\"\n"));
}

TEST_CASE("topo from nvidia-smi writes the same machine file byte for byte every time") {
  const Written first =
      from_smi("a100-nvswitch-8gpu-xuesongtap.txt", "--gpu a100-sxm4-40gb", "smi-same-1.yaml");
  const Written second =
      from_smi("a100-nvswitch-8gpu-xuesongtap.txt", "--gpu a100-sxm4-40gb", "smi-same-1.yaml");
  REQUIRE(first.command.exit_code == 0);
  CHECK(first.machine == second.machine);
}

TEST_CASE("topo from nvidia-smi without -o writes the machine to standard output") {
  const std::string out = output_file("smi-stdout.yaml");
  // The notes go to standard error, left out here.
  const CommandResult r = run_command("(" + unwrapped_epochcast() + " topo --from-nvidia-smi " +
                                      fixture("l40s-pcie-4gpu-miss-alignment-106.txt") +
                                      " --gpu l40s 2>/dev/null) > " + out);
  REQUIRE(r.exit_code == 0);
  const std::string machine = read_text(out);
  CHECK_THAT(machine, Catch::Contains("kind: machine\n"));
  CHECK_THAT(machine, !Catch::Contains("Machine file "));
}

TEST_CASE("topo from nvidia-smi refuses a matrix cut short and names the missing row") {
  std::string text = read_text(fixture("dgx1-v100-msccl-tools.txt"));
  text = text.substr(0, text.find("\nGPU6\t") + 1);
  const std::string cut = output_file("smi-cut.txt");
  write_text(cut, text);
  const std::string out = output_file("smi-cut.yaml");
  std::filesystem::remove(out);
  const CommandResult r = run_command(unwrapped_epochcast() + " topo --from-nvidia-smi " + cut +
                                      " --gpu v100-sxm2-32gb -o " + out);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains(cut + ":8:1: error: GPU6: the matrix ends after 6 of its "
                                             "12 rows"));
  CHECK(!std::filesystem::exists(out));
}

TEST_CASE("topo from nvidia-smi refuses an entry outside the legend at its line and column") {
  // GPU0's row: "GPU0\t X \tNV1\tNV1\tNV2..." with NV2, the link to GPU3, at column 18.
  const std::string bad =
      edited("dgx1-v100-msccl-tools.txt", "GPU0\t X", "NV2", "NVX", "smi-legend.txt");
  const CommandResult r = run_command(unwrapped_epochcast() + " topo --from-nvidia-smi " + bad +
                                      " --gpu v100-sxm2-32gb");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains(bad + ":2:18: error: GPU0.GPU3: expected an entry of "
                                             "nvidia-smi topo -m's legend"));
  CHECK_THAT(r.output, Catch::Contains("got 'NVX'"));
}

TEST_CASE("topo from nvidia-smi refuses a row with fewer entries than the header has devices") {
  const std::string bad = edited("dgx1-v100-msccl-tools.txt", "GPU3\t", "\tSYS\tSYS\tSYS\tNV1",
                                 "\tSYS\tSYS\tNV1", "smi-short-row.txt");
  const CommandResult r = run_command(unwrapped_epochcast() + " topo --from-nvidia-smi " + bad +
                                      " --gpu v100-sxm2-32gb");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains(bad + ":5:"));
  CHECK_THAT(r.output, Catch::Contains("GPU3: the row has only 11 entries where the header names "
                                       "12 devices"));
}

TEST_CASE("topo from nvidia-smi refuses a product name the catalogue does not have") {
  const std::string query = output_file("smi-query-unknown.txt");
  write_text(query, "GPU 00000000:06:00.0\n    Product Name    : NVIDIA A800-SXM4-80GB\n");
  const CommandResult r =
      run_command(unwrapped_epochcast() + " topo --from-nvidia-smi " +
                  fixture("a100-nvswitch-8gpu-xuesongtap.txt") + " --smi-query " + query);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains(query + ":2:23: error: Product Name: 'NVIDIA "
                                               "A800-SXM4-80GB' is not one GPU of the catalogue"));
  CHECK_THAT(r.output, Catch::Contains("the closest are a100-sxm4-80gb"));
  CHECK_THAT(r.output, Catch::Contains("--gpu ID"));
}

TEST_CASE("topo from nvidia-smi without a GPU model says what to pass and which ids fit") {
  const CommandResult r = run_command(unwrapped_epochcast() + " topo --from-nvidia-smi " +
                                      fixture("a100-nvswitch-8gpu-xuesongtap.txt"));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("<command line>: error: --gpu: the matrix"));
  CHECK_THAT(r.output, Catch::Contains("--smi-query FILE"));
  // Twelve NVLinks a GPU: the A100s.
  CHECK_THAT(r.output, Catch::Contains("a100-sxm4-40gb"));
  CHECK_THAT(r.output, !Catch::Contains("v100-sxm2-16gb"));
}

TEST_CASE("topo from nvidia-smi refuses NVLink entries for a GPU without NVLink") {
  const CommandResult r = run_command(unwrapped_epochcast() + " topo --from-nvidia-smi " +
                                      fixture("dgx1-v100-msccl-tools.txt") + " --gpu l40s");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains(":2:10: error: GPU0.GPU1: NV1: the matrix joins GPUs by "
                                       "NVLink, but the catalogue's NVIDIA L40S (l40s) has none"));
}

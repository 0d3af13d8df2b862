// `epochcast collective` end to end: nccl-tests' sizes, counts, algbw and busbw, and its errors.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "support/paths.h"
#include "support/run_command.h"
#include "support/text.h"

using namespace epochcast::test;

namespace {

std::string out_path(const std::string& name) {
  std::filesystem::path folder = epochcast::test::output_dir() / "collective";
  std::filesystem::create_directories(folder);
  return (folder / name).string();
}

// Runs `collective ARGS --json FILE` and returns its JSON.
nlohmann::json rows_of(const std::string& args, const std::string& name) {
  const std::string file = out_path(name);
  std::filesystem::remove(file);
  CommandResult r = run_command(epochcast_binary() + " collective " + args + " --json " + file);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  return nlohmann::json::parse(text.str());
}

}  // namespace

TEST_CASE("collective speaks nccl-tests: sizes from -b to -e by -f, busbw = algbw x 2(n-1)/n") {
  // Rings only, as NCCL_ALGO=RING (NVLS: the next test).
  nlohmann::json out = rows_of("dgx-h100 -b 1M -e 1G -f 4 --algo RING", "all_reduce.json");
  CHECK(out["op"] == "all_reduce");
  CHECK(out["gpus_per_node"] == 8);
  const nlohmann::json& rows = out["rows"];
  REQUIRE(rows.size() == 6);  // 1M, 4M, 16M, 64M, 256M, 1G
  double previous = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const nlohmann::json& row = rows[i];
    const double bytes = row["size_bytes"].get<double>();
    CHECK(bytes == std::ldexp(1.0, 20 + 2 * static_cast<int>(i)));
    CHECK(row["count"].get<double>() == bytes / 4);  // float
    const double seconds = row["time_us"].get<double>() * 1e-6;
    CHECK(row["algbw_gb_per_s"].get<double>() == Approx(bytes / seconds / 1e9));
    CHECK(row["busbw_gb_per_s"].get<double>() ==
          Approx(row["algbw_gb_per_s"].get<double>() * 2 * 7 / 8));
    CHECK(row["algorithm"] == "ring");
    CHECK(seconds > previous);
    previous = seconds;
  }
  // NCCL's tuner on Hopper with NVLink: LL for small messages, LL128 in the middle, Simple for
  // the largest (its 0.92 share of the bandwidth no longer pays for its shorter steps).
  CHECK(rows[0]["protocol"] == "ll");
  CHECK(rows[2]["protocol"] == "ll128");
  CHECK(rows.back()["protocol"] == "simple");
  // A large ring all-reduce runs at the NVSwitch link's rate: 18 NVLink4 links, 450 GB/s each
  // way, at the profile's nvswitch efficiency 0.8.
  CHECK(rows.back()["busbw_gb_per_s"].get<double>() == Approx(450 * 0.8).epsilon(0.02));
}

namespace {

// NVLS's all-reduce of S = 8 GiB over n GPUs of an H100 node (sim/collectives/algorithms.h,
// nvls_loop): 128 KiB chunks, 16 channels x n heads of them a loop, three warp groups in turn,
// so loops + 2 iterations of 6 us and the first loop's data twice more, S (1 + 1/n) each way
// over each GPU's 18 NVLink4 links (450 GB/s) at the profile's 0.74. Bus bandwidth in GB/s.
double nvls_8g_busbw(int n) {
  const double size = 8.0 * (1 << 30), loop = 16.0 * n * (128 << 10);
  const double seconds =
      (size / loop + 2) * 6e-6 + (size + 2 * loop) * (1 + 1.0 / n) / (450e9 * 0.74);
  return size / seconds / 1e9 * 2 * (n - 1) / n;
}

}  // namespace

TEST_CASE("collective on an H100 NVSwitch node: NVLS for large all-reduces, in its loop") {
  const nlohmann::json eight = rows_of("dgx-h100 -b 8G -e 8G", "nvls-8.json")["rows"][0];
  CHECK(eight["algorithm"] == "nvls");
  CHECK(eight["protocol"] == "simple");
  CHECK(eight["channels"] == 16);
  CHECK(eight["busbw_gb_per_s"].get<double>() == Approx(nvls_8g_busbw(8)).epsilon(0.01));
  // Above the ring's 360 GB/s, as NCCL_ALGO=RING shows; NVLS forced costs the same as chosen.
  const double ring =
      rows_of("dgx-h100 -b 8G -e 8G --algo ring", "ring-8.json")["rows"][0]["busbw_gb_per_s"];
  CHECK(ring == Approx(450 * 0.8).epsilon(0.02));
  CHECK(eight["busbw_gb_per_s"].get<double>() > 1.2 * ring);
  CHECK(rows_of("dgx-h100 -b 8G -e 8G --algo nvls",
                "nvls-forced.json")["rows"][0]["busbw_gb_per_s"] == eight["busbw_gb_per_s"]);
  // Its busbw grows with the GPU count (the switch's reduction saves more, and each loop
  // carries more heads' chunks), the ring's does not.
  double previous = 0;
  for (int gpus : {3, 4, 6, 8}) {
    const nlohmann::json row =
        rows_of("dgx-h100 -b 8G -e 8G --algo nvls -g " + std::to_string(gpus),
                "nvls-" + std::to_string(gpus) + ".json")["rows"][0];
    INFO(gpus << " GPUs");
    CHECK(row["busbw_gb_per_s"].get<double>() == Approx(nvls_8g_busbw(gpus)).epsilon(0.01));
    CHECK(row["busbw_gb_per_s"].get<double>() > previous);
    previous = row["busbw_gb_per_s"].get<double>();
  }
  // A100s have no NVLS (NVSwitch gen2, no multicast): rings.
  CHECK(rows_of("dgx-a100 -b 8G -e 8G", "a100.json")["rows"][0]["algorithm"] == "ring");
}

TEST_CASE("collective --proto forces NCCL's protocol, LL128 needs NVLink") {
  // Forced, each protocol costs its own steps: LL at a quarter of the bandwidth for all-reduce,
  // against Simple on the same ring (left to choose, Simple takes NVLS on this NVSwitch, which
  // has no LL).
  const double simple = rows_of("dgx-h100 -b 1G -e 1G --proto simple --algo ring",
                                "simple.json")["rows"][0]["busbw_gb_per_s"];
  const nlohmann::json ll = rows_of("dgx-h100 -b 1G -e 1G --proto ll", "ll.json")["rows"][0];
  CHECK(ll["protocol"] == "ll");
  CHECK(ll["algorithm"] == "ring");
  CHECK(ll["busbw_gb_per_s"].get<double>() == Approx(simple / 4).epsilon(0.02));
  // 8 RTX 4090 over PCIe: NCCL leaves LL128 off (no NVLink, and Ada is not among its GPUs).
  for (const nlohmann::json& row :
       rows_of("rtx4090-8x-pcie -b 8 -e 1G -f 8", "pcie.json")["rows"]) {
    CHECK(row["protocol"] != "ll128");
  }
}

TEST_CASE("collective: flows and the analytic cost agree where no two transfers share a link") {
  const nlohmann::json flows = rows_of("dgx-h100 -b 64K -e 64M -f 32", "flows.json")["rows"];
  const nlohmann::json analytic =
      rows_of("dgx-h100 -b 64K -e 64M -f 32 --fidelity analytic", "analytic.json")["rows"];
  REQUIRE(flows.size() == analytic.size());
  for (std::size_t i = 0; i < flows.size(); ++i) {
    CHECK(flows[i]["time_us"].get<double>() ==
          Approx(analytic[i]["time_us"].get<double>()).epsilon(1e-3));  // flows tick in ns
  }
}

TEST_CASE("collective: -i steps by bytes, counts follow -d, each op has nccl-tests' factor") {
  const nlohmann::json stepped = rows_of("dgx-h100 -b 1K -e 4K -i 1K -d half", "half.json");
  CHECK(stepped["type"] == "half");
  REQUIRE(stepped["rows"].size() == 4);
  CHECK(stepped["rows"][2]["size_bytes"] == 3072);
  CHECK(stepped["rows"][2]["count"] == 1536);
  const struct {
    const char* op;
    double factor;
    const char* redop;
  } ops[] = {{"all_gather", 7.0 / 8, "none"},
             {"reduce_scatter", 7.0 / 8, "sum"},
             {"broadcast", 1, "none"},
             {"reduce", 1, "sum"},
             {"alltoall", 7.0 / 8, "none"}};
  for (const auto& o : ops) {
    INFO(o.op);
    const nlohmann::json out =
        rows_of(std::string("dgx-h100 -b 256M -e 256M --op ") + o.op, std::string(o.op) + ".json");
    CHECK(out["redop"] == o.redop);
    const nlohmann::json& row = out["rows"][0];
    CHECK(row["busbw_gb_per_s"].get<double>() ==
          Approx(row["algbw_gb_per_s"].get<double>() * o.factor));
    // None is faster than the NVSwitch link. (Broadcast and reduce, pipelined chains, pay a step
    // latency per chunk, a 512 KiB Simple step, and reach about a third of it: NCCL's channels
    // and chunk ramp, issue 17, are not modelled yet.)
    CHECK(row["busbw_gb_per_s"].get<double>() <= 450 * 0.8 * 1.001);
    CHECK(row["busbw_gb_per_s"].get<double>() > 450 * 0.8 * 0.3);
  }
}

TEST_CASE("collective across nodes: hierarchical, bounded by the NICs, 16 ranks' factor") {
  const nlohmann::json one = rows_of("dgx-h100-cluster -b 1G -e 1G", "one-node.json");
  const nlohmann::json two = rows_of("dgx-h100-cluster --nodes 2 -b 1G -e 1G", "two-nodes.json");
  CHECK(two["nodes"] == 2);
  const nlohmann::json& row = two["rows"][0];
  // H100 NVSwitch nodes: NVLS inside them, trees across (NCCL's NVLSTree), for a large message.
  CHECK(row["algorithm"] == "nvls tree");
  const nlohmann::json rings =
      rows_of("dgx-h100-cluster --nodes 2 -b 1G -e 1G --algo ring", "two-nodes-ring.json");
  CHECK(rings["rows"][0]["algorithm"] == "hierarchical ring");
  CHECK(rings["rows"][0]["busbw_gb_per_s"].get<double>() < row["busbw_gb_per_s"].get<double>());
  CHECK(row["busbw_gb_per_s"].get<double>() ==
        Approx(row["algbw_gb_per_s"].get<double>() * 2 * 15 / 16));
  CHECK(row["busbw_gb_per_s"].get<double>() < one["rows"][0]["busbw_gb_per_s"].get<double>());
}

TEST_CASE("collective --set moves a profile figure: half the link efficiency, half the busbw") {
  const double full =
      rows_of("dgx-h100 -b 4G -e 4G --algo ring", "full.json")["rows"][0]["busbw_gb_per_s"];
  const double half =
      rows_of("dgx-h100 -b 4G -e 4G --algo ring --set links.efficiency.nvswitch=0.4",
              "half-link.json")["rows"][0]["busbw_gb_per_s"];
  CHECK(half == Approx(full / 2).epsilon(0.02));
}

TEST_CASE("collective prints the table with nccl-tests' columns and the CSV the same rows") {
  const std::string csv = out_path("rows.csv");
  CommandResult r =
      run_command(epochcast_binary() + " collective dgx-a100 -b 8 -e 128 -f 4 --csv " + csv);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("# all_reduce on dgx-a100: 8 GPUs (1 node x 8)"));
  CHECK_THAT(r.output, Catch::Contains("size (B)  count  type   redop  time (us)  algbw (GB/s)  "
                                       "busbw (GB/s)  algorithm  protocol  channels"));
  CHECK_THAT(r.output, Catch::Contains("busbw = algbw x 1.75"));
  std::ifstream in(csv);
  std::string header, line;
  std::getline(in, header);
  CHECK(header ==
        "size_bytes,count,type,redop,time_us,algbw_gb_per_s,busbw_gb_per_s,algorithm,protocol,"
        "channels");
  int lines = 0;
  while (std::getline(in, line))
    ++lines;
  CHECK(lines == 3);  // 8, 32, 128
}

TEST_CASE("collective: bad sizes, ops, GPU counts and figures exit 2 with what was expected") {
  const struct {
    const char* args;
    const char* says;
  } cases[] = {
      {"dgx-h100 -b 1X", "'1X' is not a size"},
      {"dgx-h100 -b 1M -e 1K", "below the smallest"},
      {"dgx-h100 --op allreduce", "did you mean 'all_reduce'"},
      {"dgx-h100 -d flot", "did you mean 'float'"},
      {"dgx-h100 -g 9", "has 8 GPUs per node; expected 1 to 8"},
      {"dgx-h100 -g 1", "at least 2 GPUs"},
      {"dgx-h100 --algo collnet", "an all_reduce across nodes"},
      {"dgx-a100 --nodes 2 --algo collnet", "in_network_reduction: true"},
      {"dgx-h100-cluster --nodes 2 --algo collnet --proto ll", "collnet runs only"},
      {"dgx-a100 --algo nvls", "NVLS needs an all_reduce, all_gather or reduce_scatter"},
      {"dgx-h100 --algo nvls -g 2", "over 3 GPUs or more"},
      {"dgx-h100 --algo nvls --op broadcast", "NVLS needs"},
      {"dgx-h100 --algo nvls --proto ll", "only NCCL's Simple protocol"},
      {"dgx-h100 --nodes 2 --algo nvls", "is --algo nvlstree"},
      {"dgx-h100-cluster --nodes 2 --algo nvls --op all_gather", "all_reduce only"},
      {"dgx-h100-cluster --algo nvlstree", "across nodes (--nodes 2 or more)"},
      {"dgx-a100 --nodes 2 --algo nvlstree", "NVLSTree needs"},
      {"dgx-h100-cluster --nodes 2 --algo nvlstree --proto ll128", "nvlstree runs only NCCL's"},
      {"dgx-h100 --algo nvltree", "did you mean 'nvlstree'"},
      {"dgx-h100 --proto ll12", "did you mean 'll128'"},
      {"dgx-h100-cluster --nodes 2 --op broadcast -r 16", "0 to 15"},
      {"seed001-box --nodes 2", "no network section"},
      {"dgx-h100 --set links.efficiency.nvswich=0.5", "did you mean 'links.efficiency.nvswitch'"},
      {"dgx-h100 --set links.efficiency.nvswitch=2", "expected a number from 0.0001 to 1"},
      {"dgx-h100 -f 2 -i 1K", "not both"},
      {"dgx-h100 -b 1 -e 1G -i 1", "more than 10,000 sizes"},
      {"dgx-h100 -r 8 --op broadcast", "0 to 7"},
      {"dgx-h1000", "did you mean"},
  };
  for (const auto& c : cases) {
    CommandResult r = run_command(epochcast_binary() + " collective " + c.args);
    INFO(c.args << "\n" << r.output);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains(c.says));
  }
}

TEST_CASE("collective --algo collnet: the switches reduce across nodes, as NCCL's CollNet") {
  const nlohmann::json collnet =
      rows_of("dgx-h100-cluster --nodes 16 -b 1G -e 1G --algo collnet", "collnet.json");
  const nlohmann::json rings =
      rows_of("dgx-h100-cluster --nodes 16 -b 1G -e 1G --algo ring", "collnet-rings.json");
  CHECK(collnet["rows"][0]["algorithm"] == "collnet direct");
  CHECK(collnet["rows"][0]["protocol"] == "simple");
  // Sixteen nodes: a ring's NIC carries 2 x 15/16 of its shard, CollNet's the shard once.
  CHECK(collnet["rows"][0]["busbw_gb_per_s"].get<double>() >
        1.1 * rings["rows"][0]["busbw_gb_per_s"].get<double>());
  // NVLS inside the nodes with the switches reducing across them.
  const nlohmann::json nvls =
      rows_of("dgx-h100-cluster --nodes 16 -b 1G -e 1G --algo nvls", "nvls-sharp.json");
  CHECK(nvls["rows"][0]["algorithm"] == "nvls");
}

TEST_CASE(
    "collective across nodes: all_gather, reduce_scatter and alltoall with all ranks' factor") {
  for (const char* op : {"all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce"}) {
    const nlohmann::json rows =
        rows_of(std::string("dgx-h100-cluster --nodes 2 -b 256M -e 256M --op ") + op,
                std::string("across-") + op + ".json");
    INFO(op);
    const nlohmann::json& row = rows["rows"][0];
    const bool rooted = std::string(op) == "broadcast" || std::string(op) == "reduce";
    CHECK(row["busbw_gb_per_s"].get<double>() ==
          Approx(row["algbw_gb_per_s"].get<double>() * (rooted ? 1.0 : 15.0 / 16)));
    CHECK(row["algorithm"] == (std::string(op) == "alltoall" ? "direct" : "hierarchical ring"));
    CHECK(row["busbw_gb_per_s"].get<double>() > 0);
  }
}

namespace {

// A public nccl-tests table (tests/sim/data/nccl-tests/, each file citing its source): size and
// bus bandwidth per row.
std::vector<std::pair<double, double>> published_busbw(const std::string& file) {
  const auto table = commented_csv_rows(source_dir() / "tests/sim/data/nccl-tests" / file);
  REQUIRE(!table.empty());
  std::vector<std::pair<double, double>> rows;
  for (const std::vector<std::string>& cells : table)
    rows.emplace_back(std::stod(cells.front()), std::stod(cells.back()));
  return rows;
}

}  // namespace

TEST_CASE(
    "all-reduce against public nccl-tests tables of 8-GPU boxes, where the GPUs set the time") {
  // The bus bandwidth epochcast predicts for each size a table measured, one 8-GPU NVSwitch box
  // each, within 10% (5% from 1 GiB), from the size where the table times the GPUs:
  // - DGX H100, one rank per process: from 1 MiB, NVLS's loop (its figures were fitted to
  //   this table, default.yaml). Below, NCCL's rings under LL are known to be 13-23% off
  //   (issue 47: channels and threads by size, enqueue.cc, not modelled).
  // - Azure ND H200 v5, NCCL_ALGO=NVLS, one thread driving all eight GPUs (nccl-tests -g 8,
  //   Benchmarks/NVIDIA/NCCLBandwidth.py in the same repository): from 2 MiB; below, the
  //   thread's eight launches an iteration take about 30 us, which a simulator of the GPUs
  //   does not time. Not fitted to: it checks the H100 fit on another machine.
  // - Azure ND A100 v4 (-g 8): from 512 MiB; 2-128 MiB on its rings are predicted up to 1.5x
  //   fast (issue 47).
  struct Table {
    std::string file, arguments;
    double from_bytes;
  };
  for (const Table& t : {Table{"dgx-h100-all-reduce.csv", "dgx-h100", 1 << 20},
                         Table{"azure-nd-h200-v5-all-reduce.csv", "dgx-h200 --algo nvls", 2 << 20},
                         Table{"azure-nd-a100-v4-all-reduce.csv", "dgx-a100", 512.0 * (1 << 20)}}) {
    const std::string json = t.file.substr(0, t.file.find('.')) + "-predicted.json";
    const nlohmann::json predicted = rows_of(t.arguments + " -b 1M -e 8G -f 2", json);
    std::map<double, double> busbw;
    for (const nlohmann::json& row : predicted["rows"])
      busbw[row["size_bytes"].get<double>()] = row["busbw_gb_per_s"].get<double>();
    int compared = 0;
    for (const auto& [size, measured] : published_busbw(t.file)) {
      if (size < t.from_bytes || !busbw.contains(size)) continue;
      INFO(t.file << ": " << size << " B, measured " << measured << " GB/s, predicted "
                  << busbw[size]);
      CHECK(busbw[size] == Approx(measured).epsilon(size >= 1024.0 * (1 << 20) ? 0.05 : 0.10));
      ++compared;
    }
    CHECK(compared >= 5);
  }
}

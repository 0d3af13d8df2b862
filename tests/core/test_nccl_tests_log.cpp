// nccl-tests' logs: a public all_reduce_perf log read and written back byte for byte, the
// collective told from its figures, mpirun's prefixes and older layouts read, -J round trips,
// and malformed logs refused with their line and column.
#include <fstream>
#include <sstream>
#include <string>

#include <catch2/catch.hpp>

#include "core/input_error.h"
#include "core/measure/nccl_tests_log.h"
#include "support/paths.h"

namespace epochcast {
namespace {

const char* kFixture = "tests/cli/data/nccl-tests-logs/a3mega-2x8-h100-all_reduce_perf.txt";

std::string fixture_text() {
  std::ifstream in(test::source_file(kFixture));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST_CASE("a public all_reduce_perf log is read whole and written back byte for byte") {
  const std::string text = fixture_text();
  const NcclTestsRun run = parse_nccl_tests_log(text, kFixture);
  CHECK(run.collective == "all_reduce");  // from the file name
  CHECK(run.devices.size() == 16);
  CHECK(run.devices[8].host == "ztan-mig-gq73");
  CHECK(run.devices[0].name == "NVIDIA H100 80GB HBM3");
  REQUIRE(run.rows.size() == 31);
  CHECK(run.rows.back().bytes == 8589934592);
  CHECK(run.rows.back().out_of_place->time_us == 47535);
  CHECK(run.rows.back().in_place->busbw_gbps == 337.35);
  CHECK(run.rows.front().out_of_place->wrong == 0);
  CHECK(*run.average_busbw_gbps == 70.742);
  // nccl-tests prints "#" after the average; the published copy stops before it.
  CHECK(render_nccl_tests_text(run) == text + "#\n");
}

TEST_CASE("the collective is told from busbw over algbw with the reduction and the root") {
  const std::string text = fixture_text();
  CHECK(parse_nccl_tests_log(text, "log.txt").collective == "all_reduce");
  // The same rows as a reduce_scatter would print them: busbw = algbw x (n-1)/n.
  NcclTestsRun run = parse_nccl_tests_log(text, "log.txt");
  for (NcclTestsRow& row : run.rows) {
    for (auto* t : {&row.out_of_place, &row.in_place})
      (*t)->busbw_gbps = (*t)->algbw_gbps * 15 / 16;
  }
  CHECK(parse_nccl_tests_log(render_nccl_tests_text(run), "log.txt").collective ==
        "reduce_scatter");
  for (NcclTestsRow& row : run.rows)
    row.redop = "none";
  CHECK_THROWS_WITH(
      parse_nccl_tests_log(render_nccl_tests_text(run), "log.txt"),
      Catch::Contains("all_gather and alltoall alike") && Catch::Contains("all_gather_perf.log"));
  CHECK(parse_nccl_tests_log(render_nccl_tests_text(run), "all_gather_perf.log").collective ==
        "all_gather");
}

TEST_CASE("mpirun's output prefixes and NCCL's INFO lines are read past") {
  std::string prefixed;
  std::istringstream lines(fixture_text());
  for (std::string line; std::getline(lines, line);) {
    prefixed += "[1,0]<stdout>:" + line + "\n";
    prefixed += "node1:123:456 [0] NCCL INFO comm 0x7f rank 0 nranks 16 - Init COMPLETE\n";
  }
  const NcclTestsRun run = parse_nccl_tests_log(prefixed, "mpirun.log");
  CHECK(run.rows.size() == 31);
  CHECK(run.devices.size() == 16);
}

TEST_CASE("an older log without the root column is read") {
  // nccl-tests before the root column (NVIDIA/nccl-tests issue #107's output).
  const std::string text =
      "# nThread 1 nGpus 1 minBytes 1310720000 maxBytes 1310720000 step: 1048576(bytes) warmup "
      "iters: 5 iters: 20 validation: 1\n"
      "#\n# Using devices\n"
      "#   Rank  0 Pid   1320 on host-a device  0 [0x00] Tesla V100-SXM2-16GB\n"
      "#   Rank  1 Pid   2066 on host-b device  0 [0x00] Tesla V100-SXM2-16GB\n"
      "#\n"
      "#                                                       out-of-place                   "
      "    in-place\n"
      "#       size         count      type   redop     time   algbw   busbw  error     time   "
      "algbw   busbw  error\n"
      "#        (B)    (elements)                       (us)  (GB/s)  (GB/s)            (us)  "
      "(GB/s)  (GB/s)\n"
      "  1310720000     327680000     float     sum  1123456    1.17    1.17  0e+00  1123000    "
      "1.17    1.17  0e+00\n";
  const NcclTestsRun run = parse_nccl_tests_log(text, "old.log");
  REQUIRE(run.rows.size() == 1);
  CHECK(run.rows[0].root == -1);
  CHECK(run.rows[0].out_of_place->time_us == 1123456);
  CHECK(run.collective == "all_reduce");  // two ranks: busbw = algbw x 2(2-1)/2
  CHECK(!run.step_is_factor);
  CHECK(run.step == 1048576);
}

TEST_CASE("a -J file round trips and becomes collective microbenchmarks") {
  NcclTestsRun run = parse_nccl_tests_log(fixture_text(), kFixture);
  run.arguments = {"./build/all_reduce_perf", "-b", "8", "-e", "8G"};
  run.environment = {"NCCL_ALGO=Ring"};
  const std::string json = render_nccl_tests_json(run);
  CHECK(looks_like_nccl_tests_log(json));
  const NcclTestsRun back = parse_nccl_tests_log(json, "run.json");
  CHECK(back.collective == "all_reduce");  // from its command line
  CHECK(back.environment == run.environment);
  REQUIRE(back.rows.size() == run.rows.size());
  for (std::size_t i = 0; i < run.rows.size(); ++i) {
    CHECK(back.rows[i].bytes == run.rows[i].bytes);
    CHECK(back.rows[i].out_of_place->time_us == run.rows[i].out_of_place->time_us);
    CHECK(back.rows[i].in_place->busbw_gbps == run.rows[i].in_place->busbw_gbps);
  }
  const MeasurementFile file = measurements_from_nccl_tests(back);
  REQUIRE(file.benchmarks.collectives.size() == 31);
  CHECK(file.benchmarks.collectives.back().operation == "all_reduce");
  CHECK(file.benchmarks.collectives.back().ranks == 16);
  CHECK(file.benchmarks.collectives.back().time_s == Approx(47535e-6));
  CHECK(file.environment.device_name == "NVIDIA H100 80GB HBM3");
  CHECK(file.scenario_file.empty());
  // The NCCL variables it ran under, kept through a measurement file's round trip.
  CHECK(file.environment.nccl_settings == std::vector<std::string>{"NCCL_ALGO=Ring"});
  CHECK(load_measurements_from_string(to_json(file), "bench.json").environment.nccl_settings ==
        file.environment.nccl_settings);
  // Through the measurement-file reader, as calibrate reads its inputs.
  CHECK(load_measurements_from_string(json, "run.json").benchmarks.collectives.size() == 31);
  // How the run launched its kernels, which calibrate times with it: a process per GPU here
  // (nGpus 1); one thread's eight launches an iteration under -g 8, none under -G's graphs;
  // kept through a measurement file's round trip.
  CHECK(file.benchmarks.collectives.back().launches_per_iteration == 1);
  NcclTestsRun threaded = back;
  threaded.gpus = 8;
  const MeasurementFile eight = measurements_from_nccl_tests(threaded);
  CHECK(eight.benchmarks.collectives.back().launches_per_iteration == 8);
  CHECK(load_measurements_from_string(to_json(eight), "eight.json")
            .benchmarks.collectives.back()
            .launches_per_iteration == 8);
  threaded.graph = 1;
  CHECK(
      measurements_from_nccl_tests(threaded).benchmarks.collectives.back().launches_per_iteration ==
      0);
}

TEST_CASE("a malformed nccl-tests row is refused at its line and column") {
  std::string text = fixture_text();
  const std::size_t at = text.find("123.2");
  text.replace(at, 5, "12x.2");
  CHECK_THROWS_WITH(parse_nccl_tests_log(text, "bad.log"),
                    Catch::StartsWith("bad.log:25:") && Catch::Contains("'12x.2' is not a figure"));
  CHECK_THROWS_WITH(parse_nccl_tests_log("# nThread 1 nGpus 8\n", "empty.log"),
                    Catch::Contains("no rows of nccl-tests' table"));
}

}  // namespace
}  // namespace epochcast

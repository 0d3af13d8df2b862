// `epochcast run` and `epochcast bench` end to end on the CPU, including two ddp ranks under
// mpirun whose parameters must end bit-identical.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "support/paths.h"
#include "support/run_command.h"

using namespace epochcast::test;

namespace {

std::string scenario(const std::string& name) {
  return (source_dir() / "tests/runtime/scenarios" / (name + ".yaml")).string();
}
std::string out_path(const std::string& name) {
  return std::string(EPOCHCAST_TEST_BINARY_DIR) + "/" + name;
}
nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return nlohmann::json::parse(s.str());
}

const std::string kQuick = " --warmup 1 --iterations 3 --validation-iterations 1";

}  // namespace

TEST_CASE("run measures every sweep point on the CPU and writes a measurement file") {
  std::string out = out_path("run-mnist.json");
  std::filesystem::remove(out);
  CommandResult r = run_command(epochcast_binary() + " run " + scenario("mnist-cnn-cpu") + " -o " +
                                out + kQuick + " --profile-layers --batch 16,64");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("[2/2] 1 GPU, batch 64"));
  CHECK_THAT(r.output, Catch::Contains("about 00:00 left"));
  nlohmann::json j = read_json(out);
  CHECK(j["format"] == "epochcast-measurements");
  CHECK(j["version"] == 1);
  CHECK(j["environment"]["device_kind"] == "cpu");
  CHECK_FALSE(j["environment"]["torch_version"].get<std::string>().empty());
  CHECK(j["arguments"][0] == "--batch 16,64");
  REQUIRE(j["points"].size() == 2);
  for (const auto& p : j["points"]) {
    CHECK(p["status"] == "ok");
    CHECK(p["iteration_samples_s"].size() == 3);
    CHECK(p["layers"].size() > 5);
  }
}

TEST_CASE("run --resume keeps measured points and measures none of them again") {
  std::string out = out_path("run-resume.json");
  std::filesystem::remove(out);
  std::string command =
      epochcast_binary() + " run " + scenario("mnist-cnn-cpu") + " -o " + out + kQuick;
  REQUIRE(run_command(command + " --batch 16").exit_code == 0);
  CommandResult again = run_command(command + " --batch 16,64 --resume");
  INFO(again.output);
  REQUIRE(again.exit_code == 0);
  CHECK_THAT(again.output, Catch::Contains("1 point to measure"));
  CHECK_THAT(again.output, Catch::Contains("1 already measured"));
  CHECK(read_json(out)["points"].size() == 2);
}

TEST_CASE("run --rounds measures every point once per round and pools the rounds") {
  std::string out = out_path("run-rounds.json");
  std::filesystem::remove(out);
  CommandResult r = run_command(epochcast_binary() + " run " + scenario("mnist-cnn-cpu") + " -o " +
                                out + kQuick + " --profile-layers --batch 16,64 --rounds 2");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  // Interleaved: both points in round 1, then both again in round 2.
  std::size_t round_two = r.output.find("[round 2/2, 1/2] 1 GPU, batch 16");
  REQUIRE(round_two != std::string::npos);
  CHECK(r.output.find("[round 1/2, 2/2] 1 GPU, batch 64") < round_two);
  nlohmann::json j = read_json(out);
  CHECK(j["settings"]["rounds"] == 2);
  CHECK(j["environment"]["host_allocator"].get<std::string>().find("retained") !=
        std::string::npos);
  REQUIRE(j["points"].size() == 2);
  for (const auto& p : j["points"]) {
    CHECK(p["rounds"] == 2);
    CHECK(p["iteration_samples_s"].size() == 6);
    CHECK(p["iteration_s"]["count"] == 6);
  }
  // A point measured in fewer rounds than asked is measured again, in every round.
  CommandResult more = run_command(epochcast_binary() + " run " + scenario("mnist-cnn-cpu") +
                                   " -o " + out + kQuick + " --batch 16,64 --rounds 3 --resume");
  INFO(more.output);
  REQUIRE(more.exit_code == 0);
  CHECK_THAT(more.output, Catch::Contains("2 points to measure"));
  CHECK(read_json(out)["points"][0]["rounds"] == 3);
}

TEST_CASE("run refuses bad input with file:line:col and exit code 2") {
  CommandResult r = run_command(epochcast_binary() + " run " + scenario("mnist-cnn-cpu") +
                                " --set training.optimiser=adam -o " + out_path("bad.json"));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("did you mean 'optimizer'"));
  CommandResult flags =
      run_command(epochcast_binary() + " run " + scenario("mnist-cnn-cpu") + " --iterations 0");
  CHECK(flags.exit_code == 2);
}

TEST_CASE("run skips points the CPU cannot run and says why") {
  std::string out = out_path("run-skip.json");
  CommandResult r = run_command(epochcast_binary() + " run " + scenario("mnist-cnn-cpu") + " -o " +
                                out + kQuick + " --batch 16 --set training.precision=amp_fp16");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  nlohmann::json p = read_json(out)["points"][0];
  CHECK(p["status"] == "skipped");
  CHECK_THAT(p["reason"].get<std::string>(), Catch::Contains("needs a CUDA GPU"));
}

TEST_CASE("bench measures dispatch cost and GEMM/convolution throughput") {
  std::string out = out_path("bench.json");
  CommandResult r =
      run_command(epochcast_binary() + " bench --sections dispatch,throughput,copies -o " + out);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  nlohmann::json b = read_json(out)["benchmarks"];
  CHECK(b["dispatch"]["op_dispatch_s"].get<double>() > 0);
  CHECK(b["throughput"].size() == 4);  // 3 GEMM sizes and a convolution, fp32
  for (const auto& t : b["throughput"])
    CHECK(t["tflops"].get<double>() > 0);
  CHECK(b["copies"].size() == 5);
}

TEST_CASE("two ddp ranks under mpirun end with bit-identical parameters") {
  std::string out = out_path("run-ddp.json");
  std::filesystem::remove(out);
  // Open MPI refuses root unless told; CI runs as root. --oversubscribe: 2 ranks on any machine.
  CommandResult r = run_command(
      "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader "
      "OMPI_MCA_plm_rsh_agent=false mpirun --oversubscribe -np 2 " +
      epochcast_binary() + " run " + scenario("ddp-2rank-cpu") + " -o " + out + kQuick +
      " --bench --sections collectives --max-bytes 65536");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  nlohmann::json j = read_json(out);
  CHECK(j["environment"]["ranks"] == 2);
  REQUIRE(j["points"].size() == 2);
  CHECK(j["points"][0]["status"] == "ok");
  nlohmann::json two = j["points"][1];
  REQUIRE(two["status"] == "ok");
  CHECK(two["ranks"] == 2);
  CHECK(two["parameters_identical"] == true);
  // The collective benchmark checked its sums against the known answer at every size.
  REQUIRE(j["benchmarks"]["collectives"].size() == 7);  // 1 KiB ... 64 KiB
  for (const auto& c : j["benchmarks"]["collectives"]) {
    CHECK(c["correct"] == true);
    CHECK(c["busbw_gbps"].get<double>() == Approx(c["algbw_gbps"].get<double>()));  // n = 2
  }

  // The all-reduce sizes give the links' latency and bandwidth (α and β), with the fit's
  // residual, and the profile loads as an override on the scenario's machine.
  std::string profile = out_path("ddp-profile.yaml");
  CommandResult calibrate =
      run_command(epochcast_binary() + " calibrate " + out + " -o " + profile);
  INFO(calibrate.output);
  REQUIRE(calibrate.exit_code == 0);
  CHECK_THAT(calibrate.output, Catch::Contains("links.step_latency_us.pcie"));
  CHECK_THAT(calibrate.output, Catch::Contains("links.efficiency.pcie"));
  CHECK_THAT(calibrate.output, Catch::Contains("all-reduce over 2 ranks"));
  CommandResult predict =
      run_command(epochcast_binary() + " predict " + scenario("ddp-2rank-cpu") +
                  " --set 'hardware={base: " + "seed001-box, profile: " + profile + "}'");
  INFO(predict.output);
  CHECK(predict.exit_code == 0);
  CHECK_THAT(predict.output, Catch::Contains("seed001-box"));
}

TEST_CASE("a point that runs out of memory is recorded as OOM and the run goes on") {
  std::string out = out_path("run-oom.json");
  std::filesystem::remove(out);
  // A 2.5 GB address-space limit stands in for a small device.
  CommandResult r = run_command("ulimit -v 2500000 && " + epochcast_binary() + " run " +
                                scenario("resnet50-oom-cpu") + " -o " + out + kQuick);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  nlohmann::json p = read_json(out)["points"][0];
  CHECK(p["status"] == "oom");
  CHECK_THAT(p["reason"].get<std::string>(),
             Catch::Contains("out of memory at per-GPU batch 1024"));
}

TEST_CASE("a point that outlives its timeout is recorded as such") {
  std::string out = out_path("run-timeout.json");
  CommandResult r = run_command(epochcast_binary() + " run " + scenario("mnist-cnn-cpu") + " -o " +
                                out + " --batch 16 --warmup 3 --timeout 0.000001");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  nlohmann::json p = read_json(out)["points"][0];
  CHECK(p["status"] == "timeout");
}

TEST_CASE("bench searches the largest batch that fits, up to a cap") {
  std::string out = out_path("bench-fit.json");
  CommandResult r = run_command(epochcast_binary() + " bench " + scenario("mnist-cnn-cpu") +
                                " --sections fit --fit-cap 48 -o " + out);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  nlohmann::json fit = read_json(out)["benchmarks"]["largest_batch"];
  CHECK(fit["model"] == "mnist-cnn");
  CHECK(fit["largest_fitting"] == 48);  // doubling reaches 32, then the cap itself fits
  CHECK(fit["first_failing"] == 0);
}

// `epochcast run` and `epochcast bench` end to end on the CPU, including two ddp ranks under
// mpirun whose parameters must end bit-identical, campaigns stopped by SIGINT and SIGTERM, and
// measurement files written to standard output, a FIFO and through a symlink.
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <fcntl.h>
#include <nlohmann/json.hpp>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support/paths.h"
#include "support/run_command.h"

extern char** environ;

using namespace epochcast::test;

namespace {

std::string scenario(const std::string& name) {
  return (source_dir() / "tests/runtime/scenarios" / (name + ".yaml")).string();
}
std::string out_path(const std::string& name) {
  return epochcast::test::output_file(name);
}
std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}
nlohmann::json read_json(const std::string& path) {
  return nlohmann::json::parse(read_text(path));
}

const std::string kQuick = " --warmup 1 --iterations 3 --validation-iterations 1";
// Two ranks under mpirun. Open MPI refuses root unless told (CI runs as root); --oversubscribe:
// two ranks on any machine.
const std::string kTwoRanks =
    "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader "
    "OMPI_MCA_plm_rsh_agent=false mpirun --oversubscribe -np 2 ";

// A folder of its own under the build folder, empty.
std::string fresh_folder(const std::string& name) {
  std::string folder = out_path(name);
  std::filesystem::remove_all(folder);
  std::filesystem::create_directories(folder);
  return folder;
}

// The names in `folder` other than `expected`: temporaries left behind (core/io names them
// .NAME.epochcast- and six random characters).
std::vector<std::string> strays(const std::string& folder, const std::string& expected) {
  std::vector<std::string> found;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    std::string name = entry.path().filename().string();
    if (name != expected) found.push_back(name);
  }
  return found;
}

// `epochcast ARGUMENTS` started in the background, its standard output and error in files. It
// starts with SIGINT and SIGTERM at their default actions and unblocked, whatever the test runner
// had (a shell's `&` makes a background job ignore SIGINT).
class Background {
 public:
  Background(const std::vector<std::string>& arguments, const std::string& output_file,
             const std::string& error_file)
      : error_file_(error_file) {
    std::vector<std::string> words{epochcast_binary()};
    words.insert(words.end(), arguments.begin(), arguments.end());
    std::vector<char*> argv;
    for (std::string& w : words)
      argv.push_back(w.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t files;
    posix_spawn_file_actions_init(&files);
    posix_spawn_file_actions_addopen(&files, STDOUT_FILENO, output_file.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&files, STDERR_FILENO, error_file.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawnattr_t attributes;
    posix_spawnattr_init(&attributes);
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_setsigdefault(&attributes, &stop_signals);
    posix_spawnattr_setsigmask(&attributes, &none);
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
    if (posix_spawn(&pid_, argv[0], &files, &attributes, argv.data(), environ) != 0) pid_ = -1;
    posix_spawnattr_destroy(&attributes);
    posix_spawn_file_actions_destroy(&files);
  }
  ~Background() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  Background(const Background&) = delete;
  Background& operator=(const Background&) = delete;

  bool started() const { return pid_ > 0; }
  std::string error_output() const { return read_text(error_file_); }

  // Waits until standard error shows `text`; false if the command ended first, or after 120 s.
  bool wait_for(const std::string& text) {
    auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (std::chrono::steady_clock::now() < give_up) {
      if (error_output().find(text) != std::string::npos) return true;
      if (::waitpid(pid_, &status_, WNOHANG) == pid_) {
        pid_ = -1;
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return false;
  }

  void send(int signal_number) const {
    if (pid_ > 0) ::kill(pid_, signal_number);
  }

  // The exit code it ended with; -1 when a signal killed it or it outlived 120 s (then killed).
  int exit_code() {
    auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (pid_ > 0) {
      if (::waitpid(pid_, &status_, WNOHANG) == pid_) {
        pid_ = -1;
        break;
      }
      if (std::chrono::steady_clock::now() > give_up) return -1;  // the destructor kills it
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return WIFEXITED(status_) ? WEXITSTATUS(status_) : -1;
  }

 private:
  std::string error_file_;
  pid_t pid_ = -1;
  int status_ = 0;
};

// A campaign that cannot end on its own before the signal: two points, a hundred rounds.
std::vector<std::string> long_campaign(const std::string& output) {
  return {"run",
          scenario("mnist-cnn-cpu"),
          "-o",
          output,
          "--batch",
          "16,64",
          "--rounds",
          "100",
          "--warmup",
          "1",
          "--iterations",
          "3",
          "--validation-iterations",
          "1"};
}

struct Moment {
  std::string after;            // the progress line the signal waits for
  double delay_s;               // then this long: within the first second of that point
  std::size_t finished_points;  // at least this many are finished by then
};

// Stops a long campaign with `signal_number` at `moment` and checks what any stop must leave: the
// exit code, the message naming the file, a file holding only finished points, no temporary.
// Returns the file.
std::string check_stopped_campaign(int signal_number, int expected_exit, const Moment& moment) {
  const std::string name = "run-signal-" + std::to_string(signal_number);
  const std::string folder = fresh_folder(name);
  const std::string out = folder + "/m.json";
  Background run(long_campaign(out), out_path(name + ".out"), out_path(name + ".err"));
  REQUIRE(run.started());
  REQUIRE(run.wait_for(moment.after));
  std::this_thread::sleep_for(std::chrono::duration<double>(moment.delay_s));
  run.send(signal_number);
  int code = run.exit_code();
  std::string errors = run.error_output();
  INFO("signal " << signal_number << " " << moment.delay_s << " s after '" << moment.after << "':\n"
                 << errors);
  CHECK(code == expected_exit);
  CHECK_THAT(errors, Catch::Contains("interrupted; the points measured so far are in " + out +
                                     " (--resume continues)"));
  nlohmann::json j = read_json(out);
  CHECK(j["format"] == "epochcast-measurements");
  CHECK(j["points"].size() >= moment.finished_points);
  for (const auto& p : j["points"]) {
    CHECK(p["status"] == "ok");  // the point the signal cut short is not recorded
  }
  CHECK(strays(folder, "m.json").empty());
  return out;
}

}  // namespace

TEST_CASE("run measures every sweep point on the CPU and writes a measurement file") {
  std::string out = out_path("run-mnist.json");
  std::filesystem::remove(out);
  CommandResult r = run_command(epochcast_binary() + " run " + scenario("mnist-cnn-cpu") + " -o " +
                                out + kQuick + " --profile-layers --batch 16,64");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("[2/2] 1 GPU, batch 64"));
  CHECK_THAT(r.output, !Catch::Contains("left"));  // a pipe gets the results, no estimate
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
  // An output that cannot be written fails before anything is measured.
  CommandResult output = run_command(epochcast_binary() + " run " + scenario("mnist-cnn-cpu") +
                                     " -o " + out_path("no-such-folder/m.json"));
  CHECK(output.exit_code == 2);
  CHECK_THAT(output.output, Catch::Contains("does not exist"));
  CHECK_THAT(output.output, !Catch::Contains("to measure"));
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

TEST_CASE("zero1 zero2 and fsdp on two ranks under mpirun end with ddp's parameters bit for bit") {
  // Every strategy starts from the model as built and trains the same batches; FSDP's flat
  // parameters, ZeroRedundancyOptimizer's partition and the reduce-scatter change where the
  // arithmetic runs, not what it computes.
  auto trained = [](const std::string& settings) {
    std::string out = out_path("run-sharded.json");
    std::filesystem::remove(out);
    CommandResult r = run_command(kTwoRanks + epochcast_binary() + " run " +
                                  scenario("fsdp-2rank-cpu") + " -o " + out + kQuick + settings);
    INFO(settings << "\n" << r.output);
    REQUIRE(r.exit_code == 0);
    nlohmann::json point = read_json(out)["points"][0];
    REQUIRE(point["status"] == "ok");
    CHECK(point["ranks"] == 2);
    CHECK(point["parameters_identical"] == true);
    return point["parameters_hash"].get<std::string>();
  };
  const std::string ddp = trained(" --set training.strategy=ddp");
  CHECK(ddp.size() == 16);
  CHECK(trained(" --set training.strategy=zero1") == ddp);
  CHECK(trained(" --set training.strategy=zero2") == ddp);
  CHECK(trained("") == ddp);  // fsdp, a unit per transformer block
  CHECK(trained(" --set training.fsdp.wrap=layer --set training.fsdp.backward_prefetch=post "
                "--set training.fsdp.forward_prefetch=true") == ddp);
  // Two micro-batches a step: no_sync's accumulated gradients, reduced once.
  const std::string accumulated = trained(" --set training.gradient_accumulation=2");
  CHECK(accumulated != ddp);
  CHECK(trained(" --set training.gradient_accumulation=2 --set training.strategy=ddp") ==
        accumulated);
}

TEST_CASE("two ddp ranks under mpirun end with bit-identical parameters") {
  std::string out = out_path("run-ddp.json");
  std::filesystem::remove(out);
  CommandResult r =
      run_command(kTwoRanks + epochcast_binary() + " run " + scenario("ddp-2rank-cpu") + " -o " +
                  out + kQuick + " --bench --sections collectives --max-bytes 65536");
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
  // Seed 001's box joins its GPUs through the CPU's host bridge, where NCCL stages the ring's
  // steps through host memory: the shared-memory transport's figures are the ones the
  // all-reduce depends on. (Fitted, or, where this CPU's MPI all-reduce is far slower than any
  // step latency makes the GPU model, named as a gap.)
  CHECK_THAT(calibrate.output, Catch::Contains("links.step_latency_us.shm"));
  CHECK_THAT(calibrate.output, Catch::Contains("all_reduce over 2 ranks"));
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

TEST_CASE("a campaign stopped by SIGINT keeps its finished points and exits 130") {
  check_stopped_campaign(SIGINT, 130, {"[round 1/100, 1/2]", 0.0, 0});
  check_stopped_campaign(SIGINT, 130, {"[round 2/100, 1/2]", 0.6, 2});
}

TEST_CASE("a campaign stopped by SIGTERM keeps its finished points and exits 143") {
  check_stopped_campaign(SIGTERM, 143, {"[round 1/100, 2/2]", 0.3, 1});
  std::string out = check_stopped_campaign(SIGTERM, 143, {"[round 2/100, 2/2]", 0.0, 2});
  // What was kept is resumable: every point has a round, so one round measures nothing more.
  CommandResult again = run_command(epochcast_binary() + " run " + scenario("mnist-cnn-cpu") +
                                    " -o " + out + kQuick + " --batch 16,64 --resume");
  INFO(again.output);
  CHECK(again.exit_code == 0);
  CHECK_THAT(again.output, Catch::Contains("0 points to measure"));
}

TEST_CASE("on a terminal, run adds the time elapsed and left to each point's line") {
  if (std::system("command -v script > /dev/null 2>&1") != 0) {
    WARN("script(1) is missing: no terminal to test with");
    return;
  }
  std::string out = out_path("run-terminal.json");
  std::filesystem::remove(out);
  CommandResult r =
      run_command("script -qec '" + epochcast_binary() + " run " + scenario("mnist-cnn-cpu") +
                  " -o " + out + kQuick + " --batch 16,64' /dev/null");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("[2/2] 1 GPU, batch 64"));
  CHECK_THAT(r.output, Catch::Contains("about 00:00 left"));
}

TEST_CASE("a campaign with an output of - writes the JSON alone to standard output") {
  const std::string folder = fresh_folder("run-stdout");
  Background run({"run", scenario("mnist-cnn-cpu"), "-o", "-", "--batch", "16", "--warmup", "1",
                  "--iterations", "2", "--validation-iterations", "1"},
                 folder + "/out", folder + "/err");
  REQUIRE(run.started());
  int code = run.exit_code();
  INFO(run.error_output());
  REQUIRE(code == 0);
  nlohmann::json j = nlohmann::json::parse(read_text(folder + "/out"));  // nothing else there
  CHECK(j["points"].size() == 1);
  CHECK_THAT(run.error_output(), Catch::Contains("[1/1] 1 GPU, batch 16"));
  CHECK_THAT(run.error_output(), Catch::Contains("measurements written to standard output"));

  // Stopped, it still writes the file once, with the points finished so far.
  Background stopped(long_campaign("-"), folder + "/stopped.out", folder + "/stopped.err");
  REQUIRE(stopped.started());
  REQUIRE(stopped.wait_for("[round 1/100, 2/2]"));
  stopped.send(SIGINT);
  CHECK(stopped.exit_code() == 130);
  INFO(stopped.error_output());
  CHECK_THAT(stopped.error_output(),
             Catch::Contains("interrupted; the points measured so far were written to standard "
                             "output"));
  CHECK(nlohmann::json::parse(read_text(folder + "/stopped.out"))["points"].size() >= 1);

  // --resume must read the file back: refused before anything runs.
  CommandResult resume = run_command(epochcast_binary() + " run " + scenario("mnist-cnn-cpu") +
                                     " -o - --resume" + kQuick);
  CHECK(resume.exit_code == 2);
  CHECK_THAT(resume.output, Catch::Contains("--resume: needs -o to name a file"));
  CHECK_THAT(resume.output, !Catch::Contains("to measure"));
}

TEST_CASE("a campaign streams its file to a FIFO and writes through a symlink") {
  const std::string folder = fresh_folder("run-outputs");
  REQUIRE(::mkfifo((folder + "/pipe.json").c_str(), 0600) == 0);
  std::string streamed;
  std::thread reader([&] { streamed = read_text(folder + "/pipe.json"); });
  CommandResult to_fifo = run_command(epochcast_binary() + " run " + scenario("mnist-cnn-cpu") +
                                      " -o " + folder + "/pipe.json --batch 16" + kQuick);
  // A run that failed before opening the FIFO leaves the reader waiting for a writer: be one.
  int unblock = ::open((folder + "/pipe.json").c_str(), O_WRONLY | O_NONBLOCK);
  if (unblock >= 0) ::close(unblock);
  reader.join();
  INFO(to_fifo.output);
  REQUIRE(to_fifo.exit_code == 0);
  CHECK(nlohmann::json::parse(streamed)["points"].size() == 1);  // the whole file, once
  CHECK(std::filesystem::is_fifo(folder + "/pipe.json"));

  std::filesystem::create_directories(folder + "/data");
  std::filesystem::create_symlink("data/m.json", folder + "/link.json");
  CommandResult through = run_command(epochcast_binary() + " run " + scenario("mnist-cnn-cpu") +
                                      " -o " + folder + "/link.json --batch 16" + kQuick);
  INFO(through.output);
  REQUIRE(through.exit_code == 0);
  CHECK(std::filesystem::is_symlink(folder + "/link.json"));
  CHECK(read_json(folder + "/data/m.json")["points"].size() == 1);
  CHECK(strays(folder + "/data", "m.json").empty());
}

TEST_CASE("run's time-to-target options need --to-target, and say so") {
  const std::string fashion = (source_dir() / "scenarios/seed-003/fashion-mnist-cpu.yaml").string();
  CommandResult seeds =
      run_command(epochcast_binary() + " run " + fashion + " --seeds 2 -o " + out_path("x.json"));
  CHECK(seeds.exit_code == 2);
  CHECK_THAT(seeds.output, Catch::Contains("--seeds requires --to-target"));
  CommandResult batch = run_command(epochcast_binary() + " run " + fashion +
                                    " --to-target --noise-batch 64 -o " + out_path("x.json"));
  CHECK(batch.exit_code == 2);
  CHECK_THAT(batch.output, Catch::Contains("--noise-batch requires --noise-scale"));
}

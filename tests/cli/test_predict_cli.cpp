// `epochcast predict` end to end: the table, CSV/JSON/trace files, overrides and exit codes.
#include <cctype>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include <catch2/catch.hpp>
#include <fcntl.h>
#include <nlohmann/json.hpp>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

#include "support/paths.h"
#include "support/run_command.h"
#include "support/text.h"

using namespace epochcast::test;

namespace {

std::string seed(const std::string& name) {
  return (source_dir() / "scenarios/seed-001" / (name + ".yaml")).string();
}
std::string out_path(const std::string& name) {
  return epochcast::test::output_file(name);
}
}  // namespace

TEST_CASE("predict prints a row per sweep point with the breakdown and the bottleneck") {
  CommandResult r =
      run_command(epochcast_binary() + " predict " + seed("linear") + " --gpus 1 --wide");
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("  epoch  "));
  CHECK_THAT(r.output, Catch::Contains("samples/s"));
  CHECK_THAT(r.output, Catch::Contains("bwd (s)"));
  CHECK_THAT(r.output, Catch::Contains("max batch"));
  CHECK_THAT(r.output, Catch::Contains("input-bound"));
  // 12 batch sizes, one GPU count: 12 rows starting with "   1  ".
  std::size_t rows = 0;
  for (std::size_t at = r.output.find("\n   1 "); at != std::string::npos;
       at = r.output.find("\n   1 ", at + 1)) {
    ++rows;
  }
  CHECK(rows == 12);
}

TEST_CASE("the table fits the width COLUMNS gives, and --wide has every column at any width") {
  // A sweep over GPU counts (speedup, efficiency) whose bottlenecks are long sentences.
  const std::string command =
      epochcast_binary() + " predict " + seed("linear") + " --gpus 1,4 --batch 20,200";
  for (int width : {100, 80, 60}) {
    INFO("COLUMNS=" << width);
    CommandResult r = run_command("COLUMNS=" + std::to_string(width) + " " + command);
    REQUIRE(r.exit_code == 0);
    CHECK(widest_line(r.output) <= static_cast<std::size_t>(width));
    CHECK_THAT(r.output, Catch::Contains("gpus  batch"));
    CHECK_THAT(r.output, Catch::Contains("Fastest point that fits"));
  }
  // The columns that answer the question, the epoch in the unit a person reads.
  CommandResult narrow = run_command("COLUMNS=100 " + command);
  CHECK_THAT(narrow.output, Catch::Contains("speedup"));
  CHECK_THAT(narrow.output, Catch::Contains(" ms "));
  CHECK_THAT(narrow.output, !Catch::Contains("bwd (s)"));
  CHECK_THAT(narrow.output, Catch::Contains("--wide shows the whole breakdown"));
  // No terminal and no COLUMNS: no limit, so nothing is shortened or left out.
  CommandResult unlimited = run_command("env -u COLUMNS " + command);
  CHECK_THAT(unlimited.output, Catch::Contains("per-GPU"));
  CHECK_THAT(unlimited.output, Catch::Contains("mem (GiB)"));
  CHECK_THAT(unlimited.output, !Catch::Contains("..."));
  CommandResult wide = run_command("COLUMNS=100 " + command + " --wide");
  CHECK(widest_line(wide.output) > 100);
  for (const char* column : {"data (s)", "bwd (s)", "GPU busy", "max batch", "comm total (s)"})
    CHECK_THAT(wide.output, Catch::Contains(column));
  CHECK_THAT(wide.output, Catch::Contains("-bound: the GPU"));
}

TEST_CASE("predict writes CSV, JSON and a Chrome trace with named tracks") {
  std::string csv = out_path("p.csv"), json = out_path("p.json"), trace = out_path("p.trace.json");
  CommandResult r = run_command(epochcast_binary() + " predict " + seed("conv1d") +
                                " --gpus 1 --batch 50,100 --csv " + csv + " --json " + json +
                                " --trace " + trace + " --trace-point 2 --trace-iterations 2");
  REQUIRE(r.exit_code == 0);
  std::string table = read_file(csv);
  CHECK(std::count(table.begin(), table.end(), '\n') == 3);  // header + 2 points
  nlohmann::json j = nlohmann::json::parse(read_file(json));
  CHECK(j["schema"] == "epochcast.prediction/1");
  CHECK(j["points"].size() == 2);
  CHECK(j["points"][1]["global_batch"] == 100);
  nlohmann::json t = nlohmann::json::parse(read_file(trace));
  std::set<std::string> tracks;
  for (const auto& e : t["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") tracks.insert(e["args"]["name"]);
  }
  CHECK(tracks.count("CPU main thread") == 1);
  CHECK(tracks.count("GPU 0 compute stream") == 1);
  CHECK(tracks.count("GPU 0 copy engine") == 1);
  CHECK(t["otherData"]["global_batch"] == 100);
}

TEST_CASE("a multi-GPU trace has a communication track per GPU and link counters") {
  std::string trace = out_path("dp.trace.json"), json = out_path("dp.json");
  CommandResult r = run_command(epochcast_binary() + " predict " + seed("linear") +
                                " --gpus 1,4 --batch 100 --json " + json + " --trace " + trace +
                                " --trace-point 2 --trace-iterations 2");
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("speedup"));
  CHECK_THAT(r.output, Catch::Contains("efficiency"));
  nlohmann::json t = nlohmann::json::parse(read_file(trace));
  std::set<std::string> tracks;
  std::set<std::string> counters;
  for (const auto& e : t["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") tracks.insert(e["args"]["name"]);
    if (e["ph"] == "C") counters.insert(e["name"]);
  }
  for (int gpu = 0; gpu < 4; ++gpu) {
    INFO("GPU " << gpu);
    CHECK(tracks.count("GPU " + std::to_string(gpu) + " communication") == 1);
    CHECK(tracks.count("GPU " + std::to_string(gpu) + " compute stream") == 1);
  }
  CHECK_FALSE(counters.empty());
  nlohmann::json j = nlohmann::json::parse(read_file(json));
  const auto& four = j["points"][1];
  CHECK(four["gpus"] == 4);
  CHECK(four["communication"]["total_s"].get<double>() > 0);
  CHECK(four["communication"]["bytes"].get<double>() > 0);
  CHECK(four["speedup"].get<double>() > 0);
}

TEST_CASE("an override given with --set changes the scenario before it is checked") {
  std::string fp32 = out_path("fp32.csv"), momentum = out_path("sgd.csv");
  REQUIRE(run_command(epochcast_binary() + " predict " + seed("linear") +
                      " --gpus 1 --batch 100 --csv " + fp32)
              .exit_code == 0);
  REQUIRE(run_command(epochcast_binary() + " predict " + seed("linear") +
                      " --gpus 1 --batch 100 --set training.optimizer=sgd --csv " + momentum)
              .exit_code == 0);
  CHECK(read_file(fp32) != read_file(momentum));  // sgd moves far fewer optimizer bytes than adam
}

TEST_CASE("a bad --set exits 2 and names the override") {
  CommandResult r = run_command(epochcast_binary() + " predict " + seed("linear") +
                                " --set training.precison=amp_bf16");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::StartsWith("--set training.precison=amp_bf16: error: "
                                         "training.precison: unknown key (did you mean "
                                         "'precision'?)"));
}

TEST_CASE("asking with --gpus for more GPUs than the machine has exits 2 and names the option") {
  CommandResult r = run_command(epochcast_binary() + " predict " + seed("linear") + " --gpus 1,8");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::StartsWith("--gpus 1,8: error: sweep.gpus[1]: 8 GPUs asked for"));
}

TEST_CASE("an output file that cannot be written exits 2 and leaves nothing behind") {
  CommandResult r = run_command(epochcast_binary() + " predict " + seed("linear") +
                                " --gpus 1 --csv /nonexistent-dir/out.csv");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("/nonexistent-dir/out.csv: error: --csv: cannot write"));
  CHECK_FALSE(std::filesystem::exists("/nonexistent-dir/out.csv"));
}

TEST_CASE("a model file given to predict exits 2 with a clear message") {
  CommandResult r = run_command(epochcast_binary() + " predict " + zoo_model("mnist-cnn").string());
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("this is a model file, but a scenario file is expected"));
}

TEST_CASE("an unwritable output is refused before any point is simulated") {
  // Nothing was printed: the table comes after the simulation, the refusal before it.
  CommandResult r = run_command(epochcast_binary() + " predict " + seed("linear") +
                                " --gpus 1 --csv /nonexistent-dir/out.csv");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("the folder '/nonexistent-dir' does not exist"));
  CHECK_THAT(r.output, !Catch::Contains("samples/s"));
}

TEST_CASE("a JSON output of - goes alone to standard output and the table to standard error") {
  CommandResult r = run_command("( " + epochcast_binary() + " predict " + seed("linear") +
                                " --gpus 1 --batch 20,50 --json - 2>/dev/null )");
  REQUIRE(r.exit_code == 0);
  nlohmann::json j = nlohmann::json::parse(r.output);
  CHECK(j["points"].size() == 2);
  CommandResult table = run_command("( " + epochcast_binary() + " predict " + seed("linear") +
                                    " --gpus 1 --batch 20 --json - >/dev/null )");
  CHECK_THAT(table.output, Catch::Contains("samples/s"));
  CHECK(std::filesystem::exists("-") == false);
}

TEST_CASE("predict writes through a symlink and streams to a FIFO") {
  const std::string folder = out_path("outputs-links");
  std::filesystem::remove_all(folder);
  std::filesystem::create_directories(folder + "/data");
  std::filesystem::create_symlink("data/result.csv", folder + "/link.csv");
  REQUIRE(::mkfifo((folder + "/pipe.json").c_str(), 0600) == 0);
  std::string streamed;
  std::thread reader([&] { streamed = read_file(folder + "/pipe.json"); });
  CommandResult r = run_command(epochcast_binary() + " predict " + seed("linear") +
                                " --gpus 1 --batch 20 --csv " + folder + "/link.csv --json " +
                                folder + "/pipe.json");
  reader.join();
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(std::filesystem::is_symlink(folder + "/link.csv"));
  CHECK_THAT(read_file(folder + "/data/result.csv"), Catch::StartsWith("gpus,global_batch"));
  CHECK(nlohmann::json::parse(streamed)["points"].size() == 1);
  CHECK(std::filesystem::is_fifo(folder + "/pipe.json"));
}

TEST_CASE("two outputs naming the same file are refused before any work") {
  const std::string folder = out_path("outputs-clash");
  std::filesystem::remove_all(folder);
  std::filesystem::create_directories(folder);
  CommandResult r = run_command(epochcast_binary() + " predict " + seed("linear") +
                                " --gpus 1 --csv " + folder + "/same --json " + folder + "/./same");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("--json: '" + folder +
                                       "/./same' is already the output of "
                                       "--csv: give each output its own file"));
  CHECK(std::filesystem::is_empty(folder));
}

TEST_CASE("a terminated predict leaves no temporary file, whenever the signal lands") {
  // A long trace takes a while to write. SIGTERM lands once early (while simulating) and once as
  // soon as the temporary file appears (while writing); either way the folder ends with the
  // whole file or nothing, never a temporary.
  const std::string folder = out_path("outputs-terminated");
  const std::string predict = epochcast_binary() + " predict " + seed("conv1d") +
                              " --gpus 4 --batch 20 --set dataset.train_samples=6000 --trace " +
                              folder + "/trace.json --trace-iterations 300 >/dev/null & pid=$!; ";
  const std::string early = "sleep 0.1; kill -TERM $pid; ";
  const std::string mid_write = "while kill -0 $pid 2>/dev/null; do if ls " + folder +
                                "/.trace.json.epochcast-* >/dev/null 2>&1; then kill -TERM "
                                "$pid; break; fi; sleep 0.002; done; ";
  for (const std::string& when : {early, mid_write}) {
    std::filesystem::remove_all(folder);
    std::filesystem::create_directories(folder);
    CommandResult r =
        run_command("sh -c '" + predict + when + "wait $pid; echo status=$?' 2>/dev/null");
    INFO(when << ": " << r.output);
    bool ended = r.output.find("status=143") != std::string::npos ||
                 r.output.find("status=0") != std::string::npos;
    CHECK(ended);
    for (const auto& entry : std::filesystem::directory_iterator(folder)) {
      CHECK(entry.path().filename() == "trace.json");
      CHECK(nlohmann::json::accept(read_file(entry.path().string())));
    }
  }
}

TEST_CASE("the trace point and iteration options without --trace are refused") {
  for (const char* option : {"--trace-point 2", "--trace-iterations 5"}) {
    CommandResult r =
        run_command(epochcast_binary() + " predict " + seed("linear") + " --gpus 1 " + option);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains("goes with --trace FILE"));
  }
}

TEST_CASE("absurd --set values exit 2 naming the key and its range") {
  const std::string ddp = (source_dir() / "scenarios/what-if/dp-vs-ddp-seed001-box.yaml").string() +
                          " --set training.strategy=ddp --gpus 1 --batch 64";
  struct Case {
    std::string set, message;
  };
  for (const Case& c : {
           Case{"training.gradient_accumulation=2147483648",
                "training.gradient_accumulation: expected an integer from 1 to 1,024"},
           Case{"training.epochs=2147483648",
                "training.epochs: expected an integer from 1 to "
                "100,000, got 2,147,483,648"},
           Case{"loader.workers=4294967297", "loader.workers: expected an integer from 0 to 1,024"},
           Case{"dataset.train_samples=9007199254740992",
                "dataset.train_samples: expected an integer from 1 to 1,000,000,000,000"},
           Case{"contention.gpu_share=1e-9",
                "contention.gpu_share: expected a number from 0.001 "
                "to 1, got 1e-9"},
       }) {
    CommandResult r = run_command(epochcast_binary() + " predict " + ddp + " --set " + c.set);
    INFO(r.output);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::StartsWith("--set " + c.set + ": error: " + c.message));
  }
}

TEST_CASE("a sweep of a hundred thousand points is announced before its first point") {
  // Seed 001's linear model with one GPU and every batch size from 1 to 100,000.
  std::string text = read_file(seed("linear"));
  auto replace = [&text](const std::string& from, const std::string& to) {
    std::size_t at = text.find(from);
    REQUIRE(at != std::string::npos);
    text.replace(at, from.size(), to);
  };
  replace("train_samples: 2000", "train_samples: 100000");
  replace("gpus: [1, 2, 3, 4]", "gpus: [1]");
  std::string batches;
  for (int b = 1; b <= 100'000; ++b)
    batches += (b > 1 ? ", " : "") + std::to_string(b);
  replace("batch: [10, 20, 30, 50, 70, 100, 150, 200, 300, 400, 500, 600]",
          "batch: [" + batches + "]");
  std::string scenario = out_path("hundred-thousand-points.yaml");
  std::ofstream(scenario) << text;
  // Only the first line is read: the announcement comes before any point is simulated. The
  // sweep is then stopped (its process id written before it starts), not left to run.
  const std::string pid = out_path("hundred-thousand-points.pid");
  CommandResult r =
      run_command("sh -c 'echo $$ > " + pid + "; exec " + epochcast_binary() + " predict " +
                  scenario + " 2>&1 >/dev/null' | { head -n 1; kill $(cat " + pid + "); }");
  CHECK(r.output ==
        "predict: the sweep has 100,000 points; this may take a long time (Ctrl-C stops)\n");
}

TEST_CASE("predict --jobs gives the serial run's table, CSV, JSON and trace, byte for byte") {
  auto run = [](int jobs) {
    const std::string tag = std::to_string(jobs);
    const std::string csv = out_path("jobs" + tag + ".csv"),
                      json = out_path("jobs" + tag + ".json"),
                      trace = out_path("jobs" + tag + ".trace.json");
    CommandResult r =
        run_command(epochcast_binary() + " predict " + seed("conv1d") + " --jobs " + tag +
                    " --csv " + csv + " --json " + json + " --trace " + trace + " --trace-point 7");
    REQUIRE(r.exit_code == 0);
    return std::vector<std::string>{r.output, read_file(csv), read_file(json), read_file(trace)};
  };
  const std::vector<std::string> serial = run(1);
  for (int jobs : {2, 5}) {
    INFO(jobs << " jobs");
    CHECK(run(jobs) == serial);
  }
}

TEST_CASE("predict --every-rank simulates every node and says so in the table and the JSON") {
  const std::string json = out_path("every-rank.json");
  CommandResult r =
      run_command(epochcast_binary() + " predict " +
                  (source_dir() / "scenarios/what-if/ddp-resnet50-h100-cluster.yaml").string() +
                  " --gpus 16 --every-rank --json " + json);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("Simulated: every rank at 16 GPUs (as asked"));
  nlohmann::json j = nlohmann::json::parse(read_file(json));
  CHECK(j["settings"]["every_rank"] == true);
  CHECK(j["points"][0]["ranks_simulated"] == "every rank");
}

TEST_CASE("one's own GPUs come from a catalogue file given with --catalogue, and only with it") {
  const std::filesystem::path folder = out_path("own-catalogue");
  std::filesystem::create_directories(folder);
  // A catalogue of one GPU: the RTX 4090's entry under another id and name, as a user would
  // start from the closest entry.
  std::string bundled = read_file((source_dir() / "topologies" / "gpus.yaml").string());
  const std::size_t from = bundled.find("  rtx-4090:\n");
  const std::size_t to = bundled.find("\n  l4:\n");
  REQUIRE(from != std::string::npos);
  REQUIRE(to != std::string::npos);
  std::string entry = bundled.substr(from, to - from + 1);
  entry.replace(0, std::string("  rtx-4090:").size(), "  my-rtx-4090-oc:");
  std::ofstream(folder / "my-gpus.yaml") << "kind: gpu-catalogue\ngpus:\n" << entry;
  std::string machine = read_file((source_dir() / "topologies" / "rtx4090-8x-pcie.yaml").string());
  machine.replace(machine.find("gpu: rtx-4090"), std::string("gpu: rtx-4090").size(),
                  "gpu: my-rtx-4090-oc");
  std::ofstream(folder / "box.yaml") << machine;
  const std::string predict =
      epochcast_binary() + " predict " + seed("linear") +
      " --gpus 1 --batch 100 --set hardware=" + (folder / "box.yaml").string();
  CommandResult without = run_command(predict);
  CHECK(without.exit_code == 2);
  CHECK_THAT(without.output, Catch::Contains("'my-rtx-4090-oc' is not in the GPU catalogue"));
  CHECK_THAT(without.output, Catch::Contains("--catalogue FILE"));
  CommandResult with =
      run_command(predict + " --catalogue " + (folder / "my-gpus.yaml").string() + " --wide");
  INFO(with.output);
  CHECK(with.exit_code == 0);
  CHECK_THAT(with.output, Catch::Contains("NVIDIA GeForce RTX 4090"));
  // The same id as a bundled GPU with other figures is refused, naming both; an identical copy
  // of the entry is taken as the entry.
  std::ofstream(folder / "copy.yaml") << "kind: gpu-catalogue\ngpus:\n"
                                      << bundled.substr(from, to - from + 1);
  CHECK(run_command(epochcast_binary() + " topo rtx4090-8x-pcie --catalogue " +
                    (folder / "copy.yaml").string())
            .exit_code == 0);
  std::string other = bundled.substr(from, to - from + 1);
  other.replace(other.find("sm_count: 128"), std::string("sm_count: 128").size(), "sm_count: 144");
  std::ofstream(folder / "clash.yaml") << "kind: gpu-catalogue\ngpus:\n" << other;
  CommandResult clash = run_command(epochcast_binary() + " topo rtx4090-8x-pcie --catalogue " +
                                    (folder / "clash.yaml").string());
  CHECK(clash.exit_code == 2);
  CHECK_THAT(clash.output, Catch::Contains("the catalogue already has a GPU 'rtx-4090'"));
  std::filesystem::remove_all(folder);
}

namespace {

// The rows of a predict table (lines whose first word is a GPU count), each as its words, so
// that tables laid out differently compare by content. A wrapped line of text that starts with a
// figure ("0.25 to ...") is no row.
std::vector<std::vector<std::string>> table_rows(const std::string& output) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::istringstream words(line);
    std::vector<std::string> row{std::istream_iterator<std::string>(words),
                                 std::istream_iterator<std::string>()};
    if (row.empty() || row.front().find_first_not_of("0123456789") != std::string::npos) continue;
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace

TEST_CASE("on a terminal the rows come as points finish, the same rows a pipe gets at the end") {
  if (run_command("command -v script").exit_code != 0) {
    WARN("script(1) is missing: no terminal to test with");
    return;
  }
  // script(1) gives the command a terminal; what it printed comes back through a pipe.
  const std::string command =
      epochcast_binary() + " predict " + seed("linear") + " --gpus 1,2,4 --batch 20,200 --jobs 2";
  CommandResult terminal = run_command("COLUMNS=200 script -qec '" + command + "' /dev/null");
  CommandResult pipe = run_command("COLUMNS=200 " + command);
  REQUIRE(terminal.exit_code == 0);
  REQUIRE(pipe.exit_code == 0);
  const auto streamed = table_rows(terminal.output);
  CHECK(streamed.size() == 6);
  CHECK(streamed == table_rows(pipe.output));
  CHECK_THAT(terminal.output, Catch::Contains("Fastest point that fits"));
  // Rows of points that do not fit (their bottleneck's words longer than the widest a row was
  // expected to have) and one-GPU references the sweep lacks (per-GPU batches) come whole too.
  const std::string oom =
      epochcast_binary() + " predict " +
      (source_dir() / "scenarios/what-if/resnet50-rtx4090-or-h100.yaml").string() +
      " --gpus 1,2 --batch 256,512";
  CommandResult oom_terminal = run_command("COLUMNS=200 script -qec '" + oom + "' /dev/null");
  CommandResult oom_pipe = run_command("COLUMNS=200 " + oom);
  REQUIRE(oom_terminal.exit_code == 0);
  CHECK_THAT(oom_terminal.output, Catch::Contains("memory: fits"));
  CHECK(table_rows(oom_terminal.output) == table_rows(oom_pipe.output));
}

TEST_CASE("long work shows no progress line in a pipe, only the table") {
  // Two points of several seconds each, every rank of 64 and 128 GPUs.
  CommandResult r =
      run_command(epochcast_binary() + " predict " +
                  (source_dir() / "scenarios/what-if/ddp-resnet50-h100-cluster.yaml").string() +
                  " --gpus 64,128 --every-rank --jobs 1 2>&1");
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, !Catch::Contains("elapsed"));
  CHECK_THAT(r.output, !Catch::Contains("\r"));
  CHECK(table_rows(r.output).size() == 2);
}

namespace {

struct RunResult {
  int exit_code = -1;
  std::string errors;             // what it wrote to standard error
  std::uintmax_t peak_bytes = 0;  // its largest resident set
};

// Runs the CLI with `arguments` (standard output discarded) and measures its peak memory.
RunResult run_measured(const std::vector<std::string>& arguments) {
  const std::string errors = out_path("measured-run.err");
  std::vector<std::string> words = {epochcast_binary()};
  words.insert(words.end(), arguments.begin(), arguments.end());
  std::vector<char*> argv;
  for (std::string& word : words)
    argv.push_back(word.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_addopen(&files, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&files, STDERR_FILENO, errors.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t child = 0;
  const int spawned = posix_spawn(&child, argv[0], &files, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&files);
  RunResult result;
  if (spawned != 0) return result;
  int status = 0;
  rusage usage{};
  ::wait4(child, &status, 0, &usage);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.errors = read_file(errors);
  result.peak_bytes = static_cast<std::uintmax_t>(usage.ru_maxrss) * 1024;  // Linux: KiB
  return result;
}

// Runs the CLI with `arguments`, its standard output a pipe whose reader has already gone:
// every write there fails with EPIPE, whatever the timing. Returns the exit status and what it
// wrote to standard error.
std::pair<int, std::string> run_with_closed_stdout(const std::vector<std::string>& arguments) {
  const std::string errors = out_path("closed-stdout.err");
  int ends[2];
  REQUIRE(::pipe(ends) == 0);
  ::close(ends[0]);
  std::vector<std::string> words = {epochcast_binary()};
  words.insert(words.end(), arguments.begin(), arguments.end());
  std::vector<char*> argv;
  for (std::string& word : words)
    argv.push_back(word.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_adddup2(&files, ends[1], STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&files, STDERR_FILENO, errors.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t child = 0;
  const int spawned = posix_spawn(&child, argv[0], &files, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&files);
  ::close(ends[1]);
  REQUIRE(spawned == 0);
  int status = 0;
  ::waitpid(child, &status, 0);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_file(errors)};
}

}  // namespace

TEST_CASE("a reader that closes its pipe early: a message naming the output, exit status 141") {
  // Standard output: the table, or JSON given as '-'.
  auto [table_status, table_errors] =
      run_with_closed_stdout({"predict", seed("linear"), "--gpus", "1", "--batch", "50"});
  CHECK(table_status == 141);
  CHECK_THAT(table_errors, Catch::Contains("the reader of standard output closed it"));
  auto [json_status, json_errors] = run_with_closed_stdout(
      {"predict", seed("linear"), "--gpus", "1", "--batch", "50", "--json", "-"});
  CHECK(json_status == 141);
  CHECK_THAT(json_errors, Catch::Contains("--json: the reader of standard output closed it"));
  // A FIFO whose reader takes 100 bytes of a trace of megabytes, then goes.
  const std::string folder = out_path("fifo-closed-early");
  std::filesystem::remove_all(folder);
  std::filesystem::create_directories(folder);
  const std::string fifo = folder + "/trace.json";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CommandResult r =
      run_command("sh -c '(head -c 100 " + fifo + " > /dev/null) & " + epochcast_binary() +
                  " predict " + seed("conv1d") + " --gpus 4 --batch 20 --trace " + fifo +
                  " --trace-iterations 100 > /dev/null; echo status=$?'");
  INFO(r.output);
  CHECK_THAT(r.output, Catch::Contains("status=141"));
  CHECK_THAT(r.output, Catch::Contains("--trace: the reader of '" + fifo + "' closed it"));
}

TEST_CASE("a trace of a thousand iterations is written as it is rendered, valid and whole") {
  // --trace-iterations at its maximum over an epoch of 100 iterations of DDP ResNet-50 on 8
  // GPUs: a trace of about 200 MB. The events are held as indices into their names (32 bytes
  // each) and the JSON is never held whole, so the process stays below the file it writes.
  const std::string trace = out_path("long.trace.json");
  std::filesystem::remove(trace);
  const RunResult r = run_measured(
      {"predict", (source_dir() / "scenarios/what-if/ddp-resnet50-8gpu-boxes.yaml").string(),
       "--gpus", "8", "--batch", "256", "--set", "dataset.train_samples=204800", "--trace", trace,
       "--trace-iterations", "1000"});
  INFO(r.errors);
  REQUIRE(r.exit_code == 0);
  const std::uintmax_t bytes = std::filesystem::file_size(trace);
  CHECK(bytes > std::uintmax_t{150} << 20);
  CHECK(r.peak_bytes < bytes);
  // Valid JSON to its end: the last events and the closing block are there.
  const std::string whole = read_file(trace);
  CHECK(whole.find("\"otherData\"") != std::string::npos);
  CHECK(nlohmann::json::accept(whole));
  std::filesystem::remove(trace);
}

TEST_CASE("every rank of 524,288 GPUs is refused at once by name, with the memory it needs") {
  CommandResult r = run_command(
      epochcast_binary() + " predict " +
      (source_dir() / "scenarios/what-if/ddp-resnet50-h100-cluster.yaml").string() +
      " --set 'hardware={base: dgx-h100-cluster, nodes: 65536}' --gpus 524288 --batch 1 "
      "--every-rank --jobs 1 --max-memory 20");
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("the point 524288 GPUs, global batch 524288 needs at "
                                       "least"));
  CHECK_THAT(r.output, Catch::Contains("to simulate every rank (524,288 ranks x"));
  CHECK_THAT(r.output, Catch::Contains("more than --max-memory allows (20.0 GiB)"));
  CHECK_THAT(r.output, Catch::Contains("drop --every-rank"));
  CHECK_THAT(r.output, !Catch::Contains("internal error"));
}

TEST_CASE("a point that outgrows --max-memory while simulating is refused by name") {
  // Every rank of 4,096 GPUs takes about 2 GB: under a cap of 0.8 GiB it runs out while
  // simulating (the estimate made before building it is a lower bound, below the cap).
  CommandResult r =
      run_command(epochcast_binary() + " predict " +
                  (source_dir() / "scenarios/what-if/ddp-resnet50-h100-cluster.yaml").string() +
                  " --set 'hardware={base: dgx-h100-cluster, nodes: 512}' --gpus 4096 --batch 4 "
                  "--every-rank --jobs 1 --max-memory 0.8");
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("the point 4096 GPUs, global batch 16384 needs more "
                                       "memory to simulate than --max-memory allows (0.8 GiB)"));
  CHECK_THAT(r.output, !Catch::Contains("internal error"));
}

TEST_CASE("in a sweep of per-GPU batches, '1 GPU faster' says it compares the same global batch") {
  CommandResult r =
      run_command("env -u COLUMNS " + epochcast_binary() + " predict " + seed("linear") +
                  " --set sweep.batch_is=per_gpu --gpus 1,2 --batch 50,100");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("1 GPU faster at this global batch"));
  CHECK_THAT(r.output, Catch::Contains("at the same per-GPU batch"));
  CHECK_THAT(r.output, Catch::Contains("\"1 GPU faster\": one GPU trains the same global batch"));
}

TEST_CASE("predict --explain-scaling splits each ddp point's scaling loss after the table") {
  const std::string rtx =
      (source_dir() / "scenarios/what-if/resnet50-rtx4090-or-h100.yaml").string();
  CommandResult r = run_command("COLUMNS=200 " + epochcast_binary() + " predict " + rtx +
                                " --gpus 1,8 --batch 64 --explain-scaling");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("Scaling loss of each point with a process per GPU") &&
                           Catch::Contains("communication") && Catch::Contains("compute"));
  CHECK_THAT(r.output, Catch::Contains("strategy") && Catch::Contains("stragglers") &&
                           Catch::Contains("contention"));
  // One row, the 8-GPU point: its loss, then the parts (strategy, communication, compute, ...),
  // in seconds with shares of the epoch.
  std::smatch row;
  REQUIRE(std::regex_search(
      r.output, row,
      std::regex("\\n +8 +64 +[0-9.]+ s +[0-9.]+ s +([0-9.]+) s \\([0-9.]+%\\)"
                 " +([0-9.]+) s \\([0-9.]+%\\) +([0-9.]+) s \\([0-9.]+%\\) +([0-9.]+) s")));
  const double loss = std::stod(row[1]), strategy = std::stod(row[2]),
               communication = std::stod(row[3]), compute = std::stod(row[4]);
  CHECK(communication > strategy + compute);  // PCIe without peer-to-peer
  CHECK(strategy + communication + compute <= loss + 0.02);
  // A sweep without ddp says there is nothing to split.
  CHECK_THAT(
      run_command(epochcast_binary() + " predict " + seed("linear") + " --explain-scaling").output,
      Catch::Contains("Scaling loss: no point on several GPUs with a process per GPU"));
}

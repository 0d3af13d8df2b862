// epochcast-run: `epochcast run` and `epochcast bench`, executed for real with LibTorch (CUDA GPUs
// and NCCL when present, else the CPU), one process per rank under mpirun.
//
// Exit codes: 0 success; 1 a point failed or an internal error; 2 bad input; 124 a point hit the
// hard timeout; 130 / 143 a campaign stopped by SIGINT (Ctrl-C) / SIGTERM after its current
// iteration, with the finished points saved. Before the campaign (start-up, benchmarks), and on a
// second signal, the signal ends the process itself (130 / 143 to a shell too).
#include <atomic>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <optional>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <pthread.h>
#include <unistd.h>

#include "core/input_error.h"
#include "core/io/output_file.h"
#include "core/spec/limits.h"
#include "core/spec/scenario_spec.h"
#include "options/command_line.h"
#include "options/completion.h"
#include "options/scenario_options.h"
#include "runtime/bench/microbench.h"
#include "runtime/comm/communicator.h"
#include "runtime/cuda/cuda_api.h"
#include "runtime/measure/campaign.h"
#include "runtime/measure/cpu_threads.h"
#include "runtime/measure/environment.h"
#include "runtime/measure/host_memory.h"
#include "runtime/measure/watchdog.h"
#include "runtime/train/kernel_trace.h"
#include "runtime/train/to_target.h"

namespace {

// Set by the handler; the campaign reads it between iterations and between points and does
// everything else there.
epochcast::runtime::StopRequest stop;

// What a second signal runs: core/io's handler (remove_partial_outputs_on_signals), which removes
// the temporary of a write in progress and ends the process by the signal.
void (*end_by_signal)(int) = nullptr;

// Async-signal-safe: a compare-exchange on a lock-free atomic, else an async-signal-safe ending.
// It may interrupt any thread anywhere (a malloc inside oneDNN, the write of the file), so it
// allocates nothing, prints nothing and calls nothing of LibTorch, MPI or the C++ library.
extern "C" void remember_stop_signal(int signal_number) {
  int none = 0;
  if (stop.signal_number.compare_exchange_strong(none, signal_number)) {
    stop.requested.store(true);
    return;
  }
  // A second signal (Ctrl-C again, or a scheduler's SIGTERM after it) ends the process now.
  if (end_by_signal != nullptr) {
    end_by_signal(signal_number);  // raises the signal again, at its default action
    return;                        // which ends the process as this handler returns
  }
  ::_exit(128 + signal_number);
}

sigset_t stop_signal_set() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

// From here on the first SIGINT or SIGTERM stops the campaign after its current iteration. Called
// after remove_partial_outputs_on_signals(), whose handler then ends the process on a second.
void stop_campaign_on_signals() {
  struct sigaction ending {};
  sigaction(SIGINT, nullptr, &ending);
  if ((ending.sa_flags & SA_SIGINFO) == 0 && ending.sa_handler != SIG_DFL &&
      ending.sa_handler != SIG_IGN) {
    end_by_signal = ending.sa_handler;
  }
  struct sigaction action {};
  action.sa_handler = remember_stop_signal;
  action.sa_mask = stop_signal_set();  // one handler at a time
  // SA_RESTART: a read or write the signal lands in resumes rather than failing with EINTR.
  action.sa_flags = SA_RESTART;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

struct Arguments {
  std::string scenario;
  std::string output = "measurements.json";
  epochcast::options::ScenarioOptions scenario_options;
  epochcast::runtime::CampaignOptions campaign;
  std::string device = "auto";
  bool bench = false;
  std::vector<std::string> bench_sections;
  std::int64_t max_collective_bytes = 0;
  std::int64_t fit_cap = 0;
  double bench_timeout_s = 900;
  bool to_target = false;
  epochcast::runtime::ToTargetOptions target;
};

epochcast::runtime::DeviceChoice device_choice(const std::string& text) {
  if (text == "cpu") return epochcast::runtime::DeviceChoice::cpu;
  if (text == "cuda") return epochcast::runtime::DeviceChoice::cuda;
  return epochcast::runtime::DeviceChoice::automatic;
}

void add_bench_options(CLI::App& command, Arguments& a) {
  command
      .add_option("--sections", a.bench_sections,
                  "Which microbenchmarks: collectives, copies, dispatch, throughput, fit "
                  "(default: all but fit)")
      ->delimiter(',')
      ->check(CLI::IsMember({"collectives", "copies", "dispatch", "throughput", "fit"}));
  command
      .add_option("--max-bytes", a.max_collective_bytes,
                  "Largest collective message (default 1 GiB on GPUs, 64 MiB on the CPU)")
      ->check(epochcast::options::integer_within(1024, std::int64_t{1} << 34));
  command
      .add_option("--fit-cap", a.fit_cap,
                  "Largest batch the fit search tries (default: the data set's size)")
      ->check(epochcast::options::integer_within(1, epochcast::limits::kMaxSamples));
  command
      .add_option("--bench-timeout", a.bench_timeout_s,
                  "Seconds the microbenchmarks may take before the run is stopped (exit 124)")
      ->check(CLI::Range(1.0, 86400.0));
}

// The microbenchmarks under a watchdog: a collective that never returns (a rank without its
// peers, a hung NCCL) or a stuck driver call ends the process with the reason, exit 124, rather
// than holding the machine until someone notices.
epochcast::Benchmarks benchmarks_watched(const Arguments& a,
                                         const epochcast::runtime::BenchOptions& options,
                                         const epochcast::runtime::DevicePlan& devices,
                                         epochcast::runtime::World& world) {
  epochcast::runtime::Watchdog watchdog;
  const double limit = a.bench_timeout_s;
  const int rank = world.rank();
  watchdog.arm(limit, [limit, rank] {
    std::cerr << fmt::format(
        "\nepochcast: rank {}: the microbenchmarks did not finish within {:g} s (--bench-timeout): "
        "a collective waiting for a rank that is gone, or a stuck GPU; stopped\n",
        rank, limit);
  });
  epochcast::Benchmarks out = epochcast::runtime::run_benchmarks(options, devices, world);
  watchdog.disarm();
  return out;
}

epochcast::runtime::BenchOptions bench_options(const Arguments& a,
                                               const epochcast::ScenarioSpec* scenario) {
  epochcast::runtime::BenchOptions options;
  options.sections.insert(a.bench_sections.begin(), a.bench_sections.end());
  options.max_collective_bytes = a.max_collective_bytes;
  options.fit_cap = a.fit_cap;
  options.scenario = scenario;
  return options;
}

}  // namespace

int main(int argc, char** argv) {
  // Named as users reach it: `epochcast run`, `epochcast bench` (cli/runtime_handover.cpp).
  CLI::App app{"epochcast run / bench: measure data-parallel training and the machine for real",
               "epochcast"};
  epochcast::options::add_version_flag(app, "epochcast-run");
  app.require_subcommand(1);
  Arguments a;
  epochcast::runtime::RunOptions& run = a.campaign.run;

  CLI::App* run_command = app.add_subcommand(
      "run", "Execute every sweep point of a scenario for real and write measurements");
  run_command->add_option("scenario", a.scenario, "Scenario file (kind: scenario)")->required();
  run_command->add_option("-o,--output", a.output, "Measurement file to write (JSON)")
      ->capture_default_str();
  epochcast::options::add_scenario_options(*run_command, a.scenario_options, false);
  run_command->add_option("--warmup", run.warmup_iterations, "Warm-up iterations, not timed")
      ->capture_default_str()
      ->check(epochcast::options::integer_within(1, 1000));
  run_command->add_option("--iterations", run.timed_iterations, "Timed iterations per point")
      ->capture_default_str()
      ->check(epochcast::options::integer_within(1, 100000));
  run_command
      ->add_option("--rounds", a.campaign.rounds,
                   "Passes over the sweep, each measuring every point; a point's record pools "
                   "its rounds, so a shared machine's slow drifts reach all points alike")
      ->capture_default_str()
      ->check(epochcast::options::integer_within(1, 100));
  run_command
      ->add_option("--validation-iterations", run.validation_iterations,
                   "Timed forward-only iterations when the data set has validation samples")
      ->capture_default_str()
      ->check(epochcast::options::integer_within(0, 100000));
  run_command->add_flag("--full-epoch", run.full_epoch, "Also run and time one whole epoch");
  run_command->add_flag("--profile-layers", run.profile_layers,
                        "Time every layer's forward and backward in a separate pass");
  run_command
      ->add_option("--kernel-trace", run.kernel_trace,
                   "Directory for each point's kernel trace: a few steps under PyTorch's "
                   "profiler, every kernel's name, launch and GPU time (calibrate reads them)")
      ->check(CLI::ExistingDirectory);
  run_command->add_option("--timeout", run.timeout_s, "Seconds allowed per point")
      ->capture_default_str()
      ->check(epochcast::options::number_within(1e-6, 1e7));
  run_command->add_option("--seed", run.seed, "Seed of weights and synthetic data")
      ->capture_default_str();
  run_command->add_flag("--resume", a.campaign.resume,
                        "Keep the points already in the output file and measure the rest");
  run_command->add_flag("--quiet", a.campaign.quiet, "No progress on the terminal");
  run_command->add_option("--device", a.device, "Where to run: auto, cpu or cuda")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  run_command->add_flag("--bench", a.bench, "Also run the microbenchmarks into the same file");
  CLI::Option* to_target = run_command->add_flag(
      "--to-target", a.to_target,
      "Train on the real data set (dataset.files) until the scenario's target "
      "is reached, at every batch size, and write time-to-target runs");
  run_command->add_option("--seeds", a.target.seeds, "--to-target: seeds per batch size")
      ->capture_default_str()
      ->check(epochcast::options::integer_within(1, 100))
      ->needs(to_target);
  run_command
      ->add_option("--evaluate-every", a.target.evaluate_every_samples,
                   "--to-target: training samples between two evaluations")
      ->capture_default_str()
      ->check(epochcast::options::integer_within(1, 1'000'000'000))
      ->needs(to_target);
  run_command
      ->add_option("--max-epochs", a.target.max_epochs,
                   "--to-target: epochs after which a run stops, target unreached")
      ->capture_default_str()
      ->check(epochcast::options::number_within(1e-6, 1e6))
      ->needs(to_target);
  CLI::Option* noise_scale =
      run_command
          ->add_flag("--noise-scale", a.target.noise_scale,
                     "--to-target: also measure the gradient noise scale B_simple (one more "
                     "run, its batch split into micro-batches)")
          ->needs(to_target);
  run_command
      ->add_option("--noise-batch", a.target.noise_batch,
                   "--noise-scale: the batch it is measured at (default: the sweep's "
                   "median)")
      ->check(epochcast::options::integer_within(0, 1'000'000'000))
      ->needs(noise_scale);
  add_bench_options(*run_command, a);

  CLI::App* bench_command =
      app.add_subcommand("bench", "Microbenchmarks for calibration, written as a measurement file");
  bench_command->add_option("scenario", a.scenario, "Scenario whose model `fit` searches");
  bench_command->add_option("-o,--output", a.output, "Measurement file to write (JSON)")
      ->capture_default_str();
  epochcast::options::add_scenario_options(*bench_command, a.scenario_options, false);
  bench_command->add_option("--device", a.device, "Where to run: auto, cpu or cuda")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  add_bench_options(*bench_command, a);

  epochcast::options::show_defaults_in_help(app);
  if (argc > 1 && argv[1] == epochcast::options::kCompleteCommand) {
    return epochcast::options::print_completions(app, argc, argv);
  }
  if (auto code = epochcast::options::parse_command_line(app, argc, argv)) return *code;

  // Every way out of main() ends MPI, so mpirun sees the ranks finish cleanly.
  struct FinalizeOnExit {
    ~FinalizeOnExit() { epochcast::runtime::World::finalize(); }
  } finalize_on_exit;
  try {
    // MPI and CUDA start threads of their own while they initialise. Started with SIGINT and
    // SIGTERM blocked, those threads inherit the block: the signals never interrupt their system
    // calls, and one that arrives meanwhile waits until the handler below is in place.
    const sigset_t blocked = stop_signal_set();
    sigset_t unblocked;
    pthread_sigmask(SIG_BLOCK, &blocked, &unblocked);
    epochcast::runtime::World& world = epochcast::runtime::World::initialize(&argc, &argv);
    epochcast::cuda::set_error_context(world.rank(), world.host());
    run.device = device_choice(a.device);
    a.campaign.output = a.output;
    a.campaign.arguments = a.scenario_options.as_arguments();
    epochcast::runtime::DevicePlan devices = epochcast::runtime::plan_devices(run.device);
    // Installed after MPI_Init, so that nothing MPI installs replaces it. Benchmarks cannot stop
    // half-way and have nothing to save before they end, so while they run a signal ends the
    // process (removing the temporary of a write in progress); a campaign without them stops
    // cleanly from here on, a signal during its start-up before its first point. (One before
    // main, while LibTorch loads for about half a second, ends the process by its default.)
    epochcast::remove_partial_outputs_on_signals();
    const bool benchmarks_first = bench_command->parsed() || a.bench;
    if (!benchmarks_first) stop_campaign_on_signals();
    pthread_sigmask(SIG_SETMASK, &unblocked, nullptr);
    if (!devices.cuda) epochcast::runtime::retain_freed_host_memory();

    // -o is decided before anything runs, so a bad path fails at once. Only rank 0 writes; every
    // rank learns of a bad path, so that none waits in a collective for a rank 0 that has left.
    std::optional<epochcast::OutputFile> output;
    std::string output_error;
    if (world.rank() == 0) {
      try {
        output = bench_command->parsed()
                     ? epochcast::OutputFile::resolve(a.output, "-o")
                     : epochcast::runtime::resolve_measurement_output(a.output, a.campaign.resume);
      } catch (const epochcast::InputError& error) {
        output_error = error.what();
      }
    }
    if (!world.all(output_error.empty())) {
      if (world.rank() == 0) std::cerr << output_error << "\n";
      return 2;
    }
    a.campaign.output_file = output;

    std::optional<epochcast::ScenarioSpec> scenario;
    if (!a.scenario.empty()) {
      epochcast::options::extend_catalogue(a.scenario_options.catalogues);
      scenario = epochcast::load_scenario(a.scenario, a.scenario_options.overrides());
      if (!devices.cuda) {
        const std::string shared = epochcast::runtime::compute_on_device_cores(scenario->machine);
        if (!shared.empty() && world.rank() == 0) std::cerr << shared << "\n";
      }
    } else if (!a.scenario_options.overrides().empty()) {
      throw epochcast::InputError({"<command line>", 0, 0}, "--set",
                                  "--set, --gpus and --batch need a scenario file");
    }

    if (bench_command->parsed()) {
      epochcast::MeasurementFile file;
      file.arguments = a.campaign.arguments;
      file.environment = epochcast::runtime::describe_environment(devices, world);
      file.benchmarks =
          benchmarks_watched(a, bench_options(a, scenario ? &*scenario : nullptr), devices, world);
      if (world.rank() == 0) {
        epochcast::runtime::save_measurements(file, *output);
        std::cerr << "benchmarks written to "
                  << (output->kind() == epochcast::OutputFile::Kind::standard_output
                          ? std::string("standard output")
                          : a.output)
                  << "\n";
      }
      return 0;
    }
    if (a.to_target) {
      if (world.size() > 1) {
        throw epochcast::InputError({"<command line>", 0, 0}, "--to-target",
                                    "trains on one device: run it without mpirun");
      }
      a.target.device = devices.cuda ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU);
      a.target.quiet = a.campaign.quiet;
      a.target.arguments = a.campaign.arguments;
      const bool rewritable = output->kind() == epochcast::OutputFile::Kind::replace;
      epochcast::TargetRunsFile file = epochcast::runtime::run_to_target(
          *scenario, a.target,
          [&](const epochcast::TargetRunsFile& f) {
            if (rewritable) output->write(epochcast::to_json(f));
          },
          stop.requested);
      if (!rewritable) output->write(epochcast::to_json(file));
      if (!a.campaign.quiet) std::cerr << "time-to-target runs written to " << a.output << "\n";
      return stop.requested.load() ? 130 : 0;
    }
    if (!a.campaign.run.kernel_trace.empty()) {
      std::string why;
      if (!epochcast::runtime::kernel_tracing_available(why)) {
        throw epochcast::InputError(
            {"<command line>", 0, 0}, "--kernel-trace",
            fmt::format("this LibTorch cannot write profiler traces ({}); build epochcast-run "
                        "against PyTorch's own LibTorch (a pip wheel's, as "
                        "tools/calibration_loop.sh does on a GPU machine), or leave "
                        "--kernel-trace out",
                        why));
      }
    }
    std::optional<epochcast::Benchmarks> benchmarks;
    if (a.bench) {
      benchmarks = benchmarks_watched(a, bench_options(a, &*scenario), devices, world);
    }
    if (benchmarks_first) stop_campaign_on_signals();
    return epochcast::runtime::run_campaign(*scenario, a.campaign, devices, world, stop,
                                            benchmarks);
  } catch (const epochcast::InputError& error) {
    std::cerr << error.what() << "\n";
    return 2;
  } catch (const std::exception& error) {
    std::cerr << (bench_command->parsed() ? "epochcast bench: " : "epochcast run: ") << error.what()
              << "\n";
    return 1;
  }
}

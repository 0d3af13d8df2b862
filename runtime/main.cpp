// epochcast-run: `epochcast run` and `epochcast bench`, executed for real with LibTorch (CUDA GPUs
// and NCCL when present, else the CPU), one process per rank under mpirun.
//
// Exit codes: 0 success; 1 a point failed or an internal error; 2 bad input; 124 a point hit the
// hard timeout; 130 interrupted (Ctrl-C).
#include <csignal>
#include <cstdlib>
#include <iostream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/scenario_options.h"
#include "core/input_error.h"
#include "core/spec/scenario_spec.h"
#include "runtime/bench/microbench.h"
#include "runtime/comm/communicator.h"
#include "runtime/cuda/cuda_api.h"
#include "runtime/measure/campaign.h"
#include "runtime/measure/environment.h"
#include "runtime/measure/host_memory.h"

namespace {

std::atomic<bool> interrupted{false};

extern "C" void on_interrupt(int) {
  interrupted.store(true);
  std::signal(SIGINT, SIG_DFL);  // a second Ctrl-C ends the process at once
}

struct Arguments {
  std::string scenario;
  std::string output = "measurements.json";
  epochcast::cli::ScenarioOptions scenario_options;
  epochcast::runtime::CampaignOptions campaign;
  std::string device = "auto";
  bool bench = false;
  std::vector<std::string> bench_sections;
  std::int64_t max_collective_bytes = 0;
  std::int64_t fit_cap = 0;
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
      ->check(CLI::Range(std::int64_t{1024}, std::int64_t{1} << 34));
  command
      .add_option("--fit-cap", a.fit_cap,
                  "Largest batch the fit search tries (default: the data set's size)")
      ->check(CLI::PositiveNumber);
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
  CLI::App app{"epochcast run / bench: measure data-parallel training and the machine for real"};
  app.set_version_flag("--version", EPOCHCAST_VERSION);
  app.require_subcommand(1);
  Arguments a;
  epochcast::runtime::RunOptions& run = a.campaign.run;

  CLI::App* run_command = app.add_subcommand(
      "run", "Execute every sweep point of a scenario for real and write measurements");
  run_command->add_option("scenario", a.scenario, "Scenario file (kind: scenario)")->required();
  run_command->add_option("-o,--output", a.output, "Measurement file to write (JSON)")
      ->capture_default_str();
  epochcast::cli::add_scenario_options(*run_command, a.scenario_options, false);
  run_command->add_option("--warmup", run.warmup_iterations, "Warm-up iterations, not timed")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  run_command->add_option("--iterations", run.timed_iterations, "Timed iterations per point")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  run_command
      ->add_option("--rounds", a.campaign.rounds,
                   "Passes over the sweep, each measuring every point; a point's record pools "
                   "its rounds, so a shared machine's slow drifts reach all points alike")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  run_command
      ->add_option("--validation-iterations", run.validation_iterations,
                   "Timed forward-only iterations when the data set has validation samples")
      ->capture_default_str()
      ->check(CLI::Range(0, 100000));
  run_command->add_flag("--full-epoch", run.full_epoch, "Also run and time one whole epoch");
  run_command->add_flag("--profile-layers", run.profile_layers,
                        "Time every layer's forward and backward in a separate pass");
  run_command->add_option("--timeout", run.timeout_s, "Seconds allowed per point")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  run_command->add_option("--seed", run.seed, "Seed of weights and synthetic data")
      ->capture_default_str();
  run_command->add_flag("--resume", a.campaign.resume,
                        "Keep the points already in the output file and measure the rest");
  run_command->add_flag("--quiet", a.campaign.quiet, "No progress on the terminal");
  run_command->add_option("--device", a.device, "Where to run: auto, cpu or cuda")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  run_command->add_flag("--bench", a.bench, "Also run the microbenchmarks into the same file");
  add_bench_options(*run_command, a);

  CLI::App* bench_command =
      app.add_subcommand("bench", "Microbenchmarks for calibration, written as a measurement file");
  bench_command->add_option("scenario", a.scenario, "Scenario whose model `fit` searches");
  bench_command->add_option("-o,--output", a.output, "Measurement file to write (JSON)")
      ->capture_default_str();
  epochcast::cli::add_scenario_options(*bench_command, a.scenario_options, false);
  bench_command->add_option("--device", a.device, "Where to run: auto, cpu or cuda")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  add_bench_options(*bench_command, a);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    int code = app.exit(error);
    return code == 0 ? 0 : 2;
  }

  // Every way out of main() ends MPI, so mpirun sees the ranks finish cleanly.
  struct FinalizeOnExit {
    ~FinalizeOnExit() { epochcast::runtime::World::finalize(); }
  } finalize_on_exit;
  try {
    epochcast::runtime::World& world = epochcast::runtime::World::initialize(&argc, &argv);
    epochcast::cuda::set_error_context(world.rank(), world.host());
    std::signal(SIGINT, on_interrupt);
    run.device = device_choice(a.device);
    a.campaign.output = a.output;
    a.campaign.arguments = a.scenario_options.as_arguments();
    epochcast::runtime::DevicePlan devices = epochcast::runtime::plan_devices(run.device);
    if (!devices.cuda) epochcast::runtime::retain_freed_host_memory();

    std::optional<epochcast::ScenarioSpec> scenario;
    if (!a.scenario.empty()) {
      scenario = epochcast::load_scenario(a.scenario, a.scenario_options.overrides());
    } else if (!a.scenario_options.overrides().empty()) {
      throw epochcast::InputError({"<command line>", 0, 0}, "--set",
                                  "--set, --gpus and --batch need a scenario file");
    }

    if (bench_command->parsed()) {
      epochcast::MeasurementFile file;
      file.arguments = a.campaign.arguments;
      file.environment = epochcast::runtime::describe_environment(devices, world);
      file.benchmarks = epochcast::runtime::run_benchmarks(
          bench_options(a, scenario ? &*scenario : nullptr), devices, world);
      if (world.rank() == 0) {
        epochcast::runtime::save_measurements(file, a.output);
        std::cerr << "benchmarks written to " << a.output << "\n";
      }
      return 0;
    }
    std::optional<epochcast::Benchmarks> benchmarks;
    if (a.bench) {
      benchmarks = epochcast::runtime::run_benchmarks(bench_options(a, &*scenario), devices, world);
    }
    return epochcast::runtime::run_campaign(*scenario, a.campaign, devices, world, interrupted,
                                            benchmarks);
  } catch (const epochcast::InputError& error) {
    std::cerr << error.what() << "\n";
    return 2;
  } catch (const std::exception& error) {
    std::cerr << "epochcast run: " << error.what() << "\n";
    return 1;
  }
}

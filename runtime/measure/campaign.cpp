// The campaign loop: resume, measure, save, report progress, stop on request.
#include "runtime/measure/campaign.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>
#include <mutex>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <pthread.h>
#include <unistd.h>

#include "core/input_error.h"
#include "core/io/launcher_environment.h"
#include "core/io/output_file.h"
#include "runtime/measure/environment.h"
#include "runtime/measure/watchdog.h"
#include "runtime/train/precision.h"

namespace epochcast::runtime {

namespace {

bool finished(PointStatus status) {
  return status != PointStatus::failed;
}

bool same_point(const MeasuredPoint& m, const SweepPoint& p) {
  return m.gpus == p.gpus && m.global_batch == p.global_batch;
}

std::string clock_text(double seconds) {
  auto s = static_cast<long long>(seconds + 0.5);
  if (s >= 3600) return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
  return fmt::format("{:02}:{:02}", s / 60, s % 60);
}

std::string summary(const MeasuredPoint& p) {
  if (p.status != PointStatus::ok) return fmt::format("{}: {}", name_of(p.status), p.reason);
  return fmt::format(
      "{:.4g} s/iteration (p10 {:.4g}, p90 {:.4g}), epoch ~{:.4g} s, {:.4g} "
      "samples/s",
      p.iteration_s.mean, p.iteration_s.p10, p.iteration_s.p90, p.epoch_s_estimated,
      p.samples_per_s);
}

MeasurementFile start_file(const ScenarioSpec& scenario, const CampaignOptions& options,
                           const DevicePlan& devices, const World& world) {
  MeasurementFile file;
  file.scenario_name = scenario.name;
  file.scenario_file = scenario.source_file;
  file.model = scenario.model.name;
  file.strategy = std::string(name_of(scenario.training.strategy));
  file.precision = std::string(name_of(scenario.training.precision));
  file.optimizer = std::string(name_of(scenario.training.optimizer));
  file.arguments = options.arguments;
  file.settings.warmup_iterations = options.run.warmup_iterations;
  file.settings.timed_iterations = options.run.timed_iterations;
  file.settings.timeout_s = options.run.timeout_s;
  file.settings.full_epoch = options.run.full_epoch;
  file.settings.profile_layers = options.run.profile_layers;
  file.settings.seed = options.run.seed;
  file.settings.rounds = options.rounds;
  file.environment = describe_environment(devices, world);
  if (devices.cuda) {
    // The float32 math every point runs with (measure_point sets it): what makes fp32 on a GPU
    // mean one thing or another.
    MathFlags math = math_flags(scenario.training);
    file.environment.cublas_allow_tf32 = math.cublas_allow_tf32;
    file.environment.cudnn_allow_tf32 = math.cudnn_allow_tf32;
    file.environment.cudnn_benchmark = math.cudnn_benchmark;
  }
  return file;
}

// Where the file went, for messages.
std::string described(const OutputFile& output) {
  return output.kind() == OutputFile::Kind::standard_output ? "standard output" : output.given();
}

// Whether the ranks stop here: every rank calls it at the same places, so all stop at the same
// point even when the signal reached only some of them, or reached them at different moments.
bool stop_agreed(const World& world, const StopRequest& stop) {
  return !world.all(!stop.requested.load());
}

void put_in_sweep_order(std::vector<MeasuredPoint>& points, const std::vector<SweepPoint>& sweep) {
  std::vector<MeasuredPoint> ordered;
  for (const SweepPoint& p : sweep) {
    for (MeasuredPoint& m : points) {
      if (same_point(m, p)) ordered.push_back(std::move(m));
    }
  }
  points = std::move(ordered);
}

}  // namespace

void save_measurements(const MeasurementFile& file, const OutputFile& output) {
  output.write(to_json(file));
}

std::string resume_mismatch(const MeasuredEnvironment& previous, const MeasuredEnvironment& now) {
  const auto differ = [](std::string_view what, const auto& a, const auto& b) -> std::string {
    if (a == b) return "";
    return fmt::format("{} {}, where this run has {}", what, a, b);
  };
  const auto flag = [](const std::optional<bool>& v) -> std::string {
    return v ? (*v ? "true" : "false") : "unset";
  };
  for (std::string why :
       {differ("device kind", previous.device_kind, now.device_kind),
        differ("device", previous.device_name, now.device_name),
        differ("devices a rank", previous.device_count, now.device_count),
        differ("LibTorch", previous.torch_version, now.torch_version),
        differ("CUDA", previous.cuda_version, now.cuda_version),
        differ("NCCL", previous.nccl_version, now.nccl_version),
        differ("ranks", previous.ranks, now.ranks),
        differ("intra-op threads", previous.cpu_threads, now.cpu_threads),
        differ("the allocator", previous.host_allocator, now.host_allocator),
        differ("NCCL settings", fmt::format("[{}]", fmt::join(previous.nccl_settings, " ")),
               fmt::format("[{}]", fmt::join(now.nccl_settings, " "))),
        differ("cuBLAS TF32", flag(previous.cublas_allow_tf32), flag(now.cublas_allow_tf32)),
        differ("cuDNN TF32", flag(previous.cudnn_allow_tf32), flag(now.cudnn_allow_tf32)),
        differ("cudnn.benchmark", flag(previous.cudnn_benchmark), flag(now.cudnn_benchmark))}) {
    if (!why.empty()) return why;
  }
  return "";
}

OutputFile resolve_measurement_output(const std::string& path, bool resume) {
  OutputFile output = OutputFile::resolve(path, "-o");
  if (resume && output.kind() != OutputFile::Kind::replace) {
    throw InputError(SourceMark{"<command line>", 0, 0}, "--resume",
                     fmt::format("needs -o to name a file it can read back; '{}' is {}", path,
                                 output.kind() == OutputFile::Kind::standard_output
                                     ? "standard output"
                                     : "a stream (a FIFO or a device)"));
  }
  return output;
}

std::vector<SweepPoint> points_to_measure(const std::vector<SweepPoint>& sweep,
                                          const std::vector<MeasuredPoint>& existing, int rounds) {
  std::vector<SweepPoint> to_measure;
  for (const SweepPoint& p : sweep) {
    bool done = std::any_of(existing.begin(), existing.end(), [&](const MeasuredPoint& m) {
      // A point that did not end ok (OOM, skipped, timeout) is as finished after one round.
      return same_point(m, p) && finished(m.status) &&
             (m.status != PointStatus::ok || m.rounds >= rounds);
    });
    if (!done) to_measure.push_back(p);
  }
  return to_measure;
}

int run_campaign(const ScenarioSpec& scenario, const CampaignOptions& options,
                 const DevicePlan& devices, World& world, const StopRequest& stop,
                 const std::optional<Benchmarks>& benchmarks) {
  const bool writer = world.rank() == 0;
  if (writer && !options.output_file) {
    throw std::logic_error("run_campaign: rank 0 needs its resolved output file");
  }
  // A stream cannot be rewritten: it gets the file once, at the end (or on a stop or a timeout).
  const bool rewritable = writer && options.output_file->kind() == OutputFile::Kind::replace;
  MeasurementFile file = start_file(scenario, options, devices, world);
  if (options.resume && std::filesystem::exists(options.output)) {
    MeasurementFile previous = load_measurements(options.output);
    if (previous.scenario_name != scenario.name) {
      throw InputError(SourceMark{options.output, 0, 0}, "--resume",
                       fmt::format("the file holds measurements of scenario '{}', not '{}': "
                                   "choose another -o, or drop --resume to start afresh",
                                   previous.scenario_name, scenario.name));
    }
    const bool keeps_points =
        std::any_of(previous.points.begin(), previous.points.end(),
                    [](const MeasuredPoint& m) { return finished(m.status); });
    const std::string mismatch = resume_mismatch(previous.environment, file.environment);
    if (keeps_points && !mismatch.empty()) {
      throw InputError(SourceMark{options.output, 0, 0}, "--resume",
                       fmt::format("its points were measured with {}: points measured now "
                                   "would not compare with them; choose another -o, or drop "
                                   "--resume to measure every point afresh",
                                   mismatch));
    }
    for (MeasuredPoint& m : previous.points) {
      if (finished(m.status)) file.points.push_back(std::move(m));
    }
    // The file keeps the environment its first points were measured in (its start, the memory
    // the OS reported then): what it describes is the same by resume_mismatch.
    if (keeps_points) file.environment = previous.environment;
    if (!benchmarks) file.benchmarks = previous.benchmarks;
  }
  if (benchmarks) file.benchmarks = *benchmarks;

  std::vector<SweepPoint> sweep = expand_sweep(scenario);
  std::vector<SweepPoint> to_measure = points_to_measure(sweep, file.points, options.rounds);
  if (writer && !options.quiet) {
    std::cerr << fmt::format(
        "{}: {} point{} to measure on {} ({}{}){}\n", scenario.name, to_measure.size(),
        to_measure.size() == 1 ? "" : "s", file.environment.device_name,
        file.environment.device_kind,
        world.size() > 1 ? fmt::format(", {} ranks by {}", world.size(), name_of(world.launcher()))
                         : "",
        sweep.size() > to_measure.size()
            ? fmt::format("; {} already measured", sweep.size() - to_measure.size())
            : "");
  }
  if (rewritable) save_measurements(file, *options.output_file);

  auto start = std::chrono::steady_clock::now();
  bool any_failed = false;
  Watchdog watchdog;
  // The soft timeout plus as much again (at least a minute) for the work after timing.
  const double hard_limit = options.run.timeout_s + std::max(60.0, options.run.timeout_s);
  const int rounds = std::max(1, options.rounds);
  std::vector<std::vector<MeasuredPoint>> measured_rounds(to_measure.size());
  const std::size_t total = to_measure.size() * static_cast<std::size_t>(rounds);
  std::size_t done = 0;
  bool progress_line_open = false;  // "[k/n] ... " printed, its result not yet
  const bool terminal = ::isatty(STDERR_FILENO) != 0;
  // A signal that came while the run started up stops it before a point.
  bool stopping = stop_agreed(world, stop);
  for (std::size_t step = 0; step < total && !stopping; ++step) {
    const std::size_t i = step % to_measure.size();
    const int round = static_cast<int>(step / to_measure.size());
    const SweepPoint& p = to_measure[i];
    // A point that ran out of memory or was skipped in one round is not tried again.
    if (round > 0 && measured_rounds[i].back().status != PointStatus::ok) continue;
    if (writer && !options.quiet) {
      std::cerr << fmt::format("[{}{}/{}] {} GPU{}, batch {} ({} per GPU) ... ",
                               rounds > 1 ? fmt::format("round {}/{}, ", round + 1, rounds) : "",
                               i + 1, to_measure.size(), p.gpus, p.gpus == 1 ? "" : "s",
                               p.global_batch, p.per_gpu_batch)
                << std::flush;
      progress_line_open = true;
    }
    watchdog.arm(hard_limit, [&, p] {
      MeasuredPoint killed;
      killed.gpus = p.gpus;
      killed.global_batch = p.global_batch;
      killed.per_gpu_batch = p.per_gpu_batch;
      killed.device = devices.cuda ? "cuda" : "cpu";
      killed.status = PointStatus::timeout;
      killed.reason = fmt::format("did not finish within {:g} s; the run was stopped", hard_limit);
      std::cerr << "\n" << killed.reason << "\n";
      if (writer) {
        std::erase_if(file.points, [&](const MeasuredPoint& m) { return same_point(m, p); });
        file.points.push_back(killed);
        save_measurements(file, *options.output_file);
      }
    });
    // Layers are profiled in the first round only: the profile repeats each layer's calls
    // itself, and another round of it would double the campaign's cost for the layers'
    // medians alone (combine_rounds keeps the profiled round's).
    RunOptions run = options.run;
    if (round > 0) run.profile_layers = false;
    MeasuredPoint measured = measure_point(scenario, p, run, devices, world, stop.requested);
    watchdog.disarm();
    stopping = stop_agreed(world, stop);
    // A point the stop cut short is no measurement; one that finished before it is kept.
    if (stopping && measured.status == PointStatus::failed) break;
    any_failed = any_failed || measured.status == PointStatus::failed;
    ++done;
    double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    double left = elapsed / static_cast<double>(done) * static_cast<double>(total - step - 1);
    if (writer && !options.quiet) {
      // Each point's result is a record, in logs too; the time estimate is for a terminal.
      std::cerr << summary(measured)
                << (terminal ? fmt::format(" | elapsed {}, about {} left", clock_text(elapsed),
                                           clock_text(left))
                             : std::string())
                << "\n";
      progress_line_open = false;
    }
    // Replace an earlier failed record of the same point.
    std::erase_if(file.points, [&](const MeasuredPoint& m) { return same_point(m, p); });
    measured_rounds[i].push_back(std::move(measured));
    file.points.push_back(combine_rounds(measured_rounds[i]));
    if (rewritable) save_measurements(file, *options.output_file);
  }
  // Keep the file in sweep order, whatever order resumption produced.
  put_in_sweep_order(file.points, sweep);
  if (writer) {
    save_measurements(file, *options.output_file);
    if (stopping) {
      // Said even with --quiet: it answers the user's Ctrl-C (or the scheduler's SIGTERM).
      if (progress_line_open) std::cerr << "\n";
      std::cerr << (rewritable ? fmt::format("interrupted; the points measured so far are in {} "
                                             "(--resume continues)\n",
                                             described(*options.output_file))
                               : fmt::format("interrupted; the points measured so far were "
                                             "written to {}\n",
                                             described(*options.output_file)));
    } else if (!options.quiet) {
      std::cerr << "measurements written to " << described(*options.output_file) << "\n";
    }
  }
  if (stopping) {
    int signal_number = stop.signal_number.load();
    return 128 + (signal_number != 0 ? signal_number : SIGINT);
  }
  return any_failed ? 1 : 0;
}

}  // namespace epochcast::runtime

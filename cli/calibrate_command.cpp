// `epochcast calibrate MEASUREMENTS... -o PROFILE`: fit the simulator to measurements.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/commands.h"
#include "cli/holdout.h"
#include "cli/progress.h"
#include "cli/terminal.h"
#include "core/format/text_table.h"
#include "core/input_error.h"
#include "core/io/output_file.h"
#include "core/measure/target_runs.h"
#include "options/scenario_options.h"
#include "validate/calibration.h"
#include "validate/end_to_end_fit.h"
#include "validate/kernel_trace.h"
#include "validate/measurement_input.h"
#include "validate/time_to_target.h"

namespace epochcast::cli {

namespace {

struct CalibrateArgs {
  std::vector<std::string> measurements;
  std::string output;
  std::string scenario;
  std::string holdout;
  std::vector<std::string> catalogues;
};

// Time-to-target runs (run --to-target): the statistical figures of the noise-scale model, as a
// `statistical_efficiency:` block for the scenario: B_noise = the measured B_simple and S_min
// from the batch it was measured at, or (no noise scale measured) both fitted on every batch.
void calibrate_statistical_efficiency(const std::string& file, const OutputFile& output,
                                      std::FILE* out) {
  const TargetRunsFile runs = load_target_runs(file);
  std::vector<std::int64_t> batches;
  for (const TargetPoint& p : runs.points)
    batches.push_back(p.global_batch);
  const std::int64_t batch = validate::default_calibration_batch(runs);
  std::optional<validate::StatisticalFit> fit =
      runs.noise_scale && batch > 0 ? validate::fit_from_noise_scale(runs, batch) : std::nullopt;
  if (!fit) fit = validate::fit_from_steps(runs, batches);
  if (!fit) {
    throw InputError(SourceMark{file, 0, 0}, "points",
                     "no noise scale measured at a batch that reached the target, and fewer than "
                     "two batch sizes reached it: nothing to fit");
  }
  print_prose(out, fmt::format("Fit: {}.\n", fit->how));
  const std::string block = fmt::format(
      "# From {} ({} to {} {:g}; epochcast calibrate)\n"
      "statistical_efficiency:\n"
      "  noise_scale: {{value: {:.6g}, source: {}}}\n"
      "  min_steps: {{value: {:.6g}, source: calibrated}}\n",
      file, runs.model, runs.metric, runs.value, fit->noise_scale, name_of(fit->noise_source),
      fit->min_steps);
  if (output.kind() != OutputFile::Kind::standard_output) fmt::print(out, "{}", block);
  output.write(block);
}

// ", left out: not float32 3, ..." : the operators of a trace that are no rows, and why.
std::string skipped_text(const std::map<std::string, int>& skipped) {
  std::vector<std::string> parts;
  for (const auto& [why, count] : skipped)
    parts.push_back(fmt::format("{} {}", why, count));
  return parts.empty() ? "" : fmt::format(" (left out: {})", fmt::join(parts, ", "));
}

}  // namespace

// Every figure the end-to-end fit considered: prior, fitted value, spread before and after (as
// a factor: x1.05 is about +-5%), and what the points say about it.
void print_identifiability(std::FILE* out, const validate::EndToEndFit& fit) {
  print_prose(out,
              fmt::format("\nEnd-to-end fit of {} measured figures ({} start{}, {} simulations): "
                          "MAPE {:.1f}% with the prior, {:.1f}% fitted, {:.1f}% leave-one-out{}\n",
                          fit.points, fit.starts, fit.starts == 1 ? "" : "s", fit.simulations,
                          fit.prior_mape_pct, fit.fitted_mape_pct, fit.leave_one_out_mape_pct,
                          fit.noise_scale > 1
                              ? fmt::format(" (residuals {:.1f}x the assumed {:g}% noise: "
                                            "the points weigh that much less)",
                                            fit.noise_scale, validate::kAssumedRelativeNoise * 100)
                              : ""));
  // On a narrow terminal "the points" is cut short first, then the prior's spread and the
  // prior go, then the figures' names are cut short, and last the fitted spread goes.
  TextTable table;
  table.add_column("figure", TextTable::Align::left, {3, 0});
  table.add_column("prior", TextTable::Align::right, {0, 4});
  table.add_column("fitted");
  table.add_column("x spread 1 sd", TextTable::Align::right, {0, 2});
  table.add_column("prior x spread", TextTable::Align::right, {0, 5});
  table.add_column("the points", TextTable::Align::left, {6, 0});
  std::vector<std::string> fixed, unseen;
  for (const validate::FigureEstimate& e : fit.figures) {
    if (e.constraint == validate::Constraint::unseen) {
      unseen.push_back(e.key);
      continue;
    }
    if (e.constraint == validate::Constraint::fixed) fixed.push_back(e.key);
    table.add_row({e.key, fmt::format("{:.4g}", e.prior), fmt::format("{:.4g}", e.value),
                   fmt::format("x{:.3f}", std::exp(e.log_sd)),
                   fmt::format("x{:.2f}", std::exp(e.prior_log_sd)),
                   validate::constraint_name(e.constraint)});
  }
  if (fit.figures.size() > unseen.size()) fmt::print(out, "{}", table.render(output_width(out)));
  print_prose(out,
              fmt::format("  your {} points fix {}\n", fit.points,
                          fixed.empty() ? std::string("no figure to within half its prior spread")
                                        : fmt::format("{}", fmt::join(fixed, ", "))),
              4);
  if (!unseen.empty()) {
    print_prose(out,
                fmt::format("  not seen by these points, kept at their priors: {}\n",
                            fmt::join(unseen, ", ")),
                4);
  }
  if (fit.kept_prior) {
    print_prose(out,
                fmt::format("  the fit is not kept: refitted without it, each point is predicted "
                            "{:.1f}% off on average, worse than the prior's {:.1f}% (the fit "
                            "chases what these figures cannot explain)\n",
                            fit.leave_one_out_mape_pct, fit.prior_mape_pct),
                4);
  } else if (fit.effective_figures > 0) {
    print_prose(out,
                fmt::format("  kept: {:.1f} effective figures take the points from {:.1f}% to "
                            "{:.1f}%; refitted without it, each point is predicted {:.1f}% off "
                            "(the prior: {:.1f}%)\n",
                            fit.effective_figures, fit.prior_mape_pct, fit.fitted_mape_pct,
                            fit.leave_one_out_mape_pct, fit.prior_mape_pct),
                4);
  }
  for (const std::string& finding : fit.findings)
    print_prose(out, fmt::format("  gap: {}\n", finding), 4);
  if (fit.next_point) {
    print_prose(out,
                fmt::format("  measure next: {} at {} GPU{}, batch {} (predicted +-{:.1f}% now, "
                            "the most uncertain point of the sweep)\n",
                            fit.next_point->scenario, fit.next_point->gpus,
                            fit.next_point->gpus == 1 ? "" : "s", fit.next_point->global_batch,
                            fit.next_point->relative_sd * 100),
                4);
  }
}

void print_calibration(std::FILE* out, const validate::Calibration& c) {
  // On a narrow terminal "fitted to" is cut short first (the profile written keeps it whole in
  // its sources), then the point and residual columns go.
  TextTable table;
  table.add_column("parameter", TextTable::Align::left, {1, 0});
  table.add_column("value");
  table.add_column("points", TextTable::Align::right, {0, 2});
  table.add_column("rms resid", TextTable::Align::right, {0, 3});
  table.add_column("fitted to", TextTable::Align::left, {4, 0});
  for (const validate::FittedParameter& f : c.fitted) {
    table.add_row({f.key, fmt::format("{:.4g}", f.value), std::to_string(f.observations),
                   fmt::format("{:.1f}%", f.rms_relative_residual * 100), f.from});
  }
  fmt::print(out, "{}", table.render(output_width(out)));
  for (const std::string& note : c.notes)
    print_prose(out, fmt::format("  {}\n", note), 4);
  for (const std::string& gap : c.gaps)
    print_prose(out, fmt::format("  structural gap: {}\n", gap), 4);
  if (c.end_to_end && c.end_to_end->points > 0) print_identifiability(out, *c.end_to_end);
}

Command add_calibrate_command(CLI::App& app) {
  auto args = std::make_shared<CalibrateArgs>();
  CLI::App* command = app.add_subcommand(
      "calibrate",
      "Fit the simulator's free parameters (efficiencies, host and input costs, links) to "
      "measurements by least squares and write a hardware profile");
  command
      ->add_option("measurements", args->measurements,
                   "Measurement files (epochcast run/bench), results tables (.csv) or profiler "
                   "traces (kernel times: run --kernel-trace, torch.profiler); or one "
                   "time-to-target file (run --to-target): its statistical_efficiency block")
      ->required();
  command->add_option("-o,--output", args->output, "Profile to write (YAML)")->required();
  command->add_option("--scenario", args->scenario,
                      "Scenario the measurements ran (default: the one each file records)");
  add_holdout_option(*command, args->holdout);
  options::add_catalogue_option(*command, args->catalogues);
  return [args] {
    options::extend_catalogue(args->catalogues);
    OutputFile output = OutputFile::resolve(args->output, "-o");
    for (const std::string& file : args->measurements) {
      if (file != "-" && OutputFile::resolve(file, "measurements").same_as(output)) {
        throw InputError(SourceMark{"<command line>", 0, 0}, "-o",
                         fmt::format("'{}' is one of the measurement files read; write the "
                                     "profile to another file",
                                     args->output));
      }
    }
    std::FILE* out = output.kind() == OutputFile::Kind::standard_output ? stderr : stdout;
    if (args->measurements.size() == 1 && is_target_runs_file(args->measurements.front())) {
      calibrate_statistical_efficiency(args->measurements.front(), output, out);
      return 0;
    }
    // Profiler traces are kernel times; the other files are measured points and benchmarks.
    std::vector<std::string> traces, files;
    for (const std::string& file : args->measurements)
      (file != "-" && validate::is_kernel_trace(file) ? traces : files).push_back(file);
    const std::string scenario_file =
        args->scenario.empty() ? ""
                               : options::resolve_scenario_argument(args->scenario, "--scenario");
    std::vector<validate::MeasuredScenario> inputs;
    if (!files.empty()) {
      inputs = validate::load_measurement_inputs(files, scenario_file);
    } else if (!scenario_file.empty()) {
      // Kernel times alone: the scenario says which device and which profile they calibrate.
      validate::MeasuredScenario kernels_only;
      kernels_only.file = traces.front();
      kernels_only.scenario = load_scenario(scenario_file);
      inputs.push_back(std::move(kernels_only));
    } else {
      throw InputError(SourceMark{"<command line>", 0, 0}, "--scenario",
                       "profiler traces alone do not say which machine and profile they "
                       "calibrate: give --scenario (or the run files measured beside them)");
    }
    std::vector<validate::KernelMeasurement> kernels;
    for (const std::string& file : traces) {
      const validate::KernelTrace trace = validate::read_kernel_trace(
          file, bundled_gpu_catalogue(), inputs.front().scenario.machine.gpu.id);
      fmt::print(out,
                 "{}: {} kernels of {}, {} attributed to {} operator shapes the kernel model "
                 "fits{}\n",
                 file, trace.kernels, trace.device, trace.attributed, trace.rows.size(),
                 skipped_text(trace.skipped));
      kernels.insert(kernels.end(), trace.rows.begin(), trace.rows.end());
    }
    if (!traces.empty() && kernels.empty()) {
      throw InputError(SourceMark{traces.front(), 0, 0}, "traceEvents",
                       "no operator of the traces is one the kernel model fits (float32 linear, "
                       "bmm, conv2d, layer_norm, softmax, add, mul, relu, gelu or tanh with "
                       "record_shapes): record the trace in float32 (epochcast run "
                       "--kernel-trace, tools/pytorch_reference.py --kernel-trace)");
    }
    for (const validate::MeasuredScenario& m : inputs) {
      std::string note = validate::measured_device_note(m.scenario, m.measurements.environment);
      if (!note.empty()) fmt::print(stderr, "warning: {}: {}\n", m.file, note);
    }
    validate::PointFilter held_out = holdout_filter(args->holdout, inputs);
    validate::PointFilter use;
    if (held_out) use = [held_out](const MeasuredPoint& p) { return !held_out(p); };
    validate::Calibration c;
    {
      // On a terminal, after a couple of seconds: the fit's stage and an estimate of what is left.
      SweepProgress progress("calibrate", 0);
      c = validate::calibrate(
          inputs, use, args->measurements,
          [&progress](const std::string& stage, double fraction) {
            progress.stage(stage, fraction);
          },
          kernels);
      progress.clear();
    }
    print_calibration(out, c);
    // A fit that ran (some figure seen by the points) writes its profile even when it keeps the
    // prior's figures: the file records that they were checked against the points.
    const bool fit_ran =
        c.end_to_end && std::any_of(c.end_to_end->figures.begin(), c.end_to_end->figures.end(),
                                    [](const validate::FigureEstimate& e) {
                                      return e.constraint != validate::Constraint::unseen;
                                    });
    if (c.fitted.empty() && !fit_ran) {
      throw InputError(SourceMark{args->measurements.front(), 0, 0}, "",
                       "nothing to calibrate: no measured point or microbenchmark determines any "
                       "figure of the profile (points that ran out of memory, were skipped or "
                       "failed, and held-out points, are not used); no profile written");
    }
    output.write(profile_yaml(
        c.profile, fmt::format("Calibrated by epochcast calibrate on {} (measured {}).",
                               c.profile.calibration.device, c.profile.calibration.date)));
    fmt::print(out, "profile written to {}\n", args->output);
    return 0;
  };
}

}  // namespace epochcast::cli

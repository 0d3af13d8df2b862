// `epochcast validate SCENARIO MEASUREMENTS`: measured against predicted, point by point.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/gnuplot_figure.h"
#include "cli/holdout.h"
#include "cli/terminal.h"
#include "core/format/text_table.h"
#include "core/input_error.h"
#include "core/io/output_file.h"
#include "core/measure/results_csv.h"
#include "core/measure/round_drift.h"
#include "core/measure/target_runs.h"
#include "options/scenario_options.h"
#include "validate/calibration.h"
#include "validate/measurement_input.h"
#include "validate/time_to_target.h"
#include "validate/validation.h"

namespace epochcast::cli {

namespace {

struct ValidateArgs {
  std::vector<std::string> files;  // [scenario] measurements, as given
  std::string scenario;            // "" when the measurements name it
  std::string measurements;
  options::ScenarioOptions options;
  std::string holdout;
  std::string json;
  std::string plot;
  std::string calibrate_on;  // time-to-target runs: a batch, or "all"
};

// Time-to-target runs (run --to-target) against the noise-scale model: S_min and B_noise fitted
// on the measured noise scale and one batch (or on every batch), then every batch's epochs and
// time to the target, measured against predicted.
void validate_target_runs(const ValidateArgs& args, std::FILE* out,
                          const std::optional<OutputFile>& json) {
  if (args.scenario.empty()) {
    throw InputError(SourceMark{"<command line>", 0, 0}, "scenario",
                     fmt::format("time-to-target runs record their scenario's name only: give "
                                 "the scenario file first (validate SCENARIO {})",
                                 args.measurements));
  }
  ScenarioSpec scenario = load_scenario(args.scenario, args.options.overrides());
  args.options.apply_profile_option(scenario);
  const TargetRunsFile runs = load_target_runs(args.measurements);
  validate::check_runs_match(scenario, runs, args.measurements);
  std::optional<validate::StatisticalFit> fit;
  std::vector<std::int64_t> batches;
  for (const TargetPoint& p : runs.points)
    batches.push_back(p.global_batch);
  const std::int64_t default_batch = validate::default_calibration_batch(runs);
  const std::string on = !args.calibrate_on.empty()              ? args.calibrate_on
                         : runs.noise_scale && default_batch > 0 ? std::to_string(default_batch)
                                                                 : "all";
  if (on == "all") {
    fit = validate::fit_from_steps(runs, batches);
  } else {
    std::int64_t batch = 0;
    const bool digits =
        !on.empty() && on.size() < 12 &&
        std::all_of(on.begin(), on.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits) {
      throw InputError(SourceMark{"<command line>", 0, 0}, "--calibrate-on",
                       fmt::format("expected a batch size of the runs or 'all', got '{}'", on));
    }
    batch = std::stoll(on);
    if (std::find(batches.begin(), batches.end(), batch) == batches.end()) {
      throw InputError(SourceMark{"<command line>", 0, 0}, "--calibrate-on",
                       fmt::format("batch {} is not among the runs' batches ({})", batch,
                                   fmt::join(batches, ", ")));
    }
    fit = validate::fit_from_noise_scale(runs, batch);
    if (!fit) {
      throw InputError(SourceMark{args.measurements, 0, 0}, "noise_scale",
                       runs.noise_scale
                           ? fmt::format("batch {} never reached the target", batch)
                           : std::string("the runs measured no noise scale (run --noise-scale); "
                                         "--calibrate-on all fits both figures on the steps"));
    }
  }
  if (!fit) {
    throw InputError(SourceMark{args.measurements, 0, 0}, "points",
                     "fewer than two batch sizes reached the target, or their steps do not fall "
                     "with the batch: nothing to fit");
  }
  const validate::TargetValidation v = validate::validate_to_target(scenario, runs, *fit);
  print_prose(
      out, fmt::format("Scenario {}: {} to {} {:g}, {} seeds a batch, measured on {} (LibTorch "
                       "{})\n",
                       scenario.name, runs.model, runs.metric, runs.value,
                       runs.points.empty() ? 0 : runs.points.front().runs.size(), runs.device_name,
                       runs.torch_version));
  print_prose(out, fmt::format("Fit: {}: S_min {:.1f} steps, B_noise {:.0f} samples.\n", fit->how,
                               fit->min_steps, fit->noise_scale));
  if (runs.noise_scale) {
    print_prose(out, fmt::format("Measured noise scale: B_simple {:.0f} samples at batch {} ({} "
                                 "micro-batches; quartiles over {} windows of training: {}-{}).\n",
                                 runs.noise_scale->b_simple, runs.noise_scale->batch,
                                 runs.noise_scale->micro_batches, runs.noise_scale->windows,
                                 quartile_text(runs.noise_scale->low),
                                 quartile_text(runs.noise_scale->high)));
  }
  // On a narrow terminal the measured spreads and the "fitted on" column go first.
  TextTable table;
  table.add_column("batch");
  table.add_column("reached");
  table.add_column("epochs measured", TextTable::Align::right, {1, 0});
  table.add_column("predicted");
  table.add_column("error");
  table.add_column("time measured (s)", TextTable::Align::right, {2, 3});
  table.add_column("predicted (s)", TextTable::Align::right, {0, 4});
  table.add_column("fitted on", TextTable::Align::left, {0, 5});
  for (const validate::TargetRow& r : v.rows) {
    const std::string measured = r.reached > 0
                                     ? fmt::format("{:.3f} [{:.3f}-{:.3f}]", r.measured_epochs,
                                                   r.measured_epochs_low, r.measured_epochs_high)
                                     : std::string("not reached");
    const std::string seconds = r.reached > 0
                                    ? fmt::format("{:.1f} [{:.1f}-{:.1f}]", r.measured_seconds,
                                                  r.measured_seconds_low, r.measured_seconds_high)
                                    : std::string("-");
    table.add_row({std::to_string(r.batch), fmt::format("{}/{}", r.reached, r.runs), measured,
                   fmt::format("{:.3f}", r.predicted_epochs),
                   r.reached > 0 ? fmt::format("{:+.1f}%", r.epochs_error_pct) : std::string("-"),
                   seconds, fmt::format("{:.1f}", r.predicted_seconds),
                   r.calibration ? "yes" : "no"});
  }
  fmt::print(out, "\n{}", table.render(output_width(out)));
  const bool all_fitted =
      std::all_of(v.rows.begin(), v.rows.end(), [](const auto& r) { return r.calibration; });
  print_prose(
      out,
      fmt::format(
          "\nEpochs to target: {}.\n",
          all_fitted ? fmt::format("MAPE {:.1f}% (in sample: every batch was fitted on)",
                                   v.epochs_mape_all_pct)
                     : fmt::format("MAPE {:.1f}% over the batches not fitted on ({:.1f}% over all)",
                                   v.epochs_mape_pct, v.epochs_mape_all_pct)));
  print_prose(out,
              fmt::format("Fastest to target: measured batch {}, predicted batch {}{}.\n",
                          v.measured_fastest, v.predicted_fastest,
                          v.measured_fastest == v.predicted_fastest ? ""
                          : v.fastest_within_spread ? " (within the seeds' spread of the measured)"
                                                    : " (outside the seeds' spread)"));
  print_prose(out, fmt::format("Predicted time = predicted epochs x the simulated training epoch "
                               "on profile '{}'; measured time leaves the evaluations out.\n",
                               scenario.profile.name));
  if (json) {
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    for (const validate::TargetRow& r : v.rows) {
      rows.push_back({{"batch", r.batch},
                      {"fitted_on", r.calibration},
                      {"reached", r.reached},
                      {"runs", r.runs},
                      {"measured_epochs", r.measured_epochs},
                      {"measured_epochs_range", {r.measured_epochs_low, r.measured_epochs_high}},
                      {"predicted_epochs", r.predicted_epochs},
                      {"epochs_error_pct", r.epochs_error_pct},
                      {"measured_s", r.measured_seconds},
                      {"measured_s_range", {r.measured_seconds_low, r.measured_seconds_high}},
                      {"predicted_s", r.predicted_seconds}});
    }
    nlohmann::ordered_json j = {{"schema", "epochcast.target-validation/1"},
                                {"scenario", scenario.name},
                                {"fit",
                                 {{"min_steps", fit->min_steps},
                                  {"noise_scale", fit->noise_scale},
                                  {"noise_scale_source", name_of(fit->noise_source)},
                                  {"fitted_on", fit->fitted_on},
                                  {"how", fit->how}}},
                                {"rows", rows},
                                {"epochs_mape_pct", v.epochs_mape_pct},
                                {"epochs_mape_all_pct", v.epochs_mape_all_pct},
                                {"measured_fastest", v.measured_fastest},
                                {"predicted_fastest", v.predicted_fastest},
                                {"fastest_within_spread", v.fastest_within_spread}};
    json->write(j.dump(2) + "\n");
  }
}

void print_summary(std::FILE* out, const std::string& title, const validate::ValidationSummary& s) {
  print_prose(out,
              fmt::format("{}: {} points, MAPE {:.1f}%, worst {:+.1f}%, Spearman {:.2f}; best "
                          "configuration: {} (measured {}, predicted {}{})\n",
                          title, s.points, s.mape_pct, s.worst_pct, s.spearman,
                          s.best_matches ? "found" : "missed", s.measured_best, s.predicted_best,
                          s.best_within_spread ? ": within the measured spread" : ""));
  if (s.intervals > 0) {
    print_prose(out,
                fmt::format("  95% intervals hold {} of {} measured ({:.0f}%; nominally 95%)\n",
                            s.covered, s.intervals, 100.0 * s.covered / s.intervals),
                4);
  }
}

// Rounds further apart than this mark a machine whose load changed during the campaign, and a
// point's rounds straying further than this leave its figure uncertain: the 5% a calibrated
// prediction aims at (docs/models.md, "Calibration"), twice for the rounds' range.
constexpr double kSteadyRounds = 1.10;
constexpr double kSteadyScatter = 0.05;

// How steady the machine was: what a reader needs to tell the model's errors from the machine's.
std::string describe_round_drift(const RoundDrift& d) {
  std::string text = fmt::format(
      "the machine over {} interleaved rounds of {} points: the rounds took {:.2f}-{:.2f}x the "
      "typical round's time, and a point's round strayed {:.1f}% beyond what its round and its "
      "point say (robust sd)",
      d.rounds, d.points, d.fastest_round, d.slowest_round, 100 * d.point_scatter);
  // A shared machine's load changes more than its speed: caches and memory bandwidth go to the
  // neighbours unevenly, so the points' proportions move too, which no figure of the model
  // follows.
  const bool drifting = d.slowest_round / d.fastest_round > kSteadyRounds;
  if (drifting) {
    text += fmt::format("; rounds {:.0f}% apart mean a changing load",
                        100 * (d.slowest_round / d.fastest_round - 1));
  }
  // A median of n normal draws has a standard error of about 1.25 sd / sqrt(n).
  if (d.point_scatter > kSteadyScatter) {
    text += fmt::format(
        "; a point's figure, pooled over its rounds, is uncertain by about "
        "{:.0f}% from the machine alone",
        100 * 1.25 * d.point_scatter / std::sqrt(static_cast<double>(d.rounds)));
  }
  if (drifting || d.point_scatter > kSteadyScatter)
    text += ": errors of that size may be the machine's, so measure again when it is quiet";
  return text;
}

nlohmann::ordered_json summary_json(const validate::ValidationSummary& s) {
  return {{"points", s.points},
          {"mape_pct", s.mape_pct},
          {"worst_pct", s.worst_pct},
          {"spearman", s.spearman},
          {"best_matches", s.best_matches},
          {"best_within_spread", s.best_within_spread},
          {"measured_best", s.measured_best},
          {"predicted_best", s.predicted_best},
          {"intervals", s.intervals},
          {"intervals_covering", s.covered}};
}

// Epoch time against batch, a measured/predicted line pair per GPU count (measured solid with
// filled markers, predicted dashed with open ones, the pair in one colour); points held out of
// the calibration ringed in black, so a fit is judged on what it did not see.
void plot(const validate::ValidationReport& report, const std::string& image,
          const std::string& title) {
  checked_image_name(image, "--plot");
  std::map<int, std::vector<const validate::ValidatedPoint*>> by_gpus;
  for (const auto& p : report.points)
    by_gpus[p.gpus].push_back(&p);
  std::string data = "# gpus global_batch measured_s predicted_s\n";
  std::string plots;
  std::vector<double> batches, seconds;
  static constexpr int kFilled[] = {7, 5, 9, 11, 13, 15};
  int block = 0;
  for (const auto& [gpus, points] : by_gpus) {
    if (block > 0) data += "\n\n";
    for (const auto* p : points) {
      data += fmt::format("{} {} {} {}\n", p->gpus, p->global_batch, p->measured_s, p->predicted_s);
      batches.push_back(static_cast<double>(p->global_batch));
      seconds.push_back(p->measured_s);
      seconds.push_back(p->predicted_s);
    }
    const std::string label = fmt::format("{} GPU{}", gpus, gpus == 1 ? "" : "s");
    const int filled = kFilled[block % 6];
    plots += fmt::format(
        "{}data index {} using 2:3 with linespoints lw 2 lc {} pt {} dt 1 title '{} measured', "
        "data index {} using 2:4 with linespoints lw 2 lc {} pt {} dt 2 title '{} predicted'",
        block ? ", \\\n     " : "", block, block % 8 + 1, filled, label, block, block % 8 + 1,
        filled - 1, label);
    ++block;
  }
  std::string held_out;
  for (const auto& p : report.points) {
    if (p.held_out) held_out += fmt::format("{} {}\n", p.global_batch, p.measured_s);
  }
  if (!held_out.empty()) {
    data += "\n\n# held out of the calibration: global_batch measured_s\n" + held_out;
    plots += fmt::format(
        ", \\\n     data index {} using 1:2 with points pt 6 ps 2.6 lw 1.5 lc rgb 'black' "
        "title 'held out (measured)'",
        block);
  }
  draw_with_gnuplot(image, "--plot", data,
                    epoch_against_batch_commands(title, plots, batches, seconds));
}

}  // namespace

Command add_validate_command(CLI::App& app) {
  auto args = std::make_shared<ValidateArgs>();
  CLI::App* command = app.add_subcommand(
      "validate",
      "Compare measured epoch times with predictions, point by point: error, MAPE, rank "
      "correlation, and whether the predicted best configuration is the measured one");
  command
      ->add_option("files", args->files,
                   "[SCENARIO] MEASUREMENTS: the measurement file (epochcast run) or results "
                   "table (.csv), after the scenario it ran; without one, the scenario the file "
                   "records (a table: its scenario column)")
      ->expected(1, 2)
      ->required();
  options::add_scenario_options(*command, args->options);
  add_holdout_option(*command, args->holdout);
  command->add_option("--json", args->json, "Also write the comparison as JSON");
  command->add_option("--plot", args->plot,
                      "Draw measured and predicted epoch time against batch (.png or .svg)");
  command->add_option("--calibrate-on", args->calibrate_on,
                      "Time-to-target runs: the batch whose median steps fix S_min beside the "
                      "measured noise scale (default: the batch it was measured at), or 'all' to "
                      "fit both figures on every batch");
  return [args] {
    args->measurements = args->files.back();
    if (args->files.size() == 2) {
      args->scenario = options::resolve_scenario_argument(args->files.front());
    }
    // Each kind of measurement has options of its own: refused on the other, not ignored.
    const bool target_runs = is_target_runs_file(args->measurements);
    if (target_runs && !args->holdout.empty()) {
      throw InputError(SourceMark{"<command line>", 0, 0}, "--holdout",
                       "time-to-target runs are compared batch by batch with the noise-scale "
                       "model; --calibrate-on picks the batch (or 'all') the fit uses");
    }
    if (target_runs && !args->plot.empty()) {
      throw InputError(SourceMark{"<command line>", 0, 0}, "--plot",
                       "draws epoch measurements; for time to a target, predict --plot draws "
                       "the scenario's -target figure");
    }
    if (!target_runs && !args->calibrate_on.empty()) {
      throw InputError(SourceMark{"<command line>", 0, 0}, "--calibrate-on",
                       "applies to time-to-target runs (epochcast-run --to-target); epoch "
                       "measurements are calibrated on every point, or on those --holdout "
                       "keeps");
    }
    OutputFiles outputs;
    std::optional<OutputFile> json;
    if (!args->json.empty()) json = outputs.add(args->json, "--json");
    if (!args->plot.empty()) {
      checked_image_name(args->plot, "--plot");
      for (const std::string& file : figure_files(args->plot))
        outputs.add(file, "--plot");
    }
    // With the JSON on standard output, the report goes to standard error.
    std::FILE* out = outputs.to_standard_output() ? stderr : stdout;
    options::extend_catalogue(args->options.catalogues);
    if (target_runs) {
      validate_target_runs(*args, out, json);
      return 0;
    }
    validate::MeasuredScenario input;
    if (is_results_table(args->measurements)) {
      std::vector<validate::MeasuredScenario> groups = validate::load_measurement_input(
          args->measurements, args->scenario, args->options.overrides());
      if (groups.size() != 1) {
        throw InputError(SourceMark{args->measurements, 0, 0}, "",
                         fmt::format("validate compares one scenario at a time, and the rows' "
                                     "precision, strategy and set columns make {}: split the "
                                     "table, or calibrate on all of it",
                                     groups.size()));
      }
      input = std::move(groups.front());
      args->options.apply_profile_option(input.scenario);
    } else {
      // The file's recorded --set, --gpus and --batch first, then the command's own.
      input = validate::load_measured_scenario(args->measurements, args->scenario,
                                               args->options.overrides());
      args->options.apply_profile_option(input.scenario);
    }
    const std::string device_note =
        validate::measured_device_note(input.scenario, input.measurements.environment);
    if (!device_note.empty()) fmt::print(stderr, "warning: {}\n", device_note);
    ScenarioSpec scenario = input.scenario;
    validate::PointFilter held_out = holdout_filter(args->holdout, {input});
    std::optional<validate::ValidationReport> uncalibrated;
    // The input pipeline is the user's code, not the hardware: where the scenario states no
    // loader cost, the uncalibrated figure is also given with the cost the loader's own CPU clock
    // measured (a component's clock, not the end-to-end times being validated).
    std::optional<validate::ValidationReport> uncalibrated_measured_loader;
    std::optional<double> measured_sample_cpu;
    if (held_out) {
      // Calibrate on the points not held out, then validate everything with that profile.
      uncalibrated = validate::validate(scenario, input.measurements, held_out);
      std::vector<double> clocks;
      for (const MeasuredPoint& p : input.measurements.points) {
        // The calibration points' clocks only: the held-out points stay unseen.
        if (p.status == PointStatus::ok && p.loader_sample_cpu_s > 0 && !held_out(p))
          clocks.push_back(p.loader_sample_cpu_s);
      }
      if (!clocks.empty() && scenario.loader.sample_cpu.value() == 0) {
        std::sort(clocks.begin(), clocks.end());
        const std::size_t n = clocks.size();
        measured_sample_cpu =
            n % 2 == 1 ? clocks[n / 2] : 0.5 * (clocks[n / 2 - 1] + clocks[n / 2]);
        ScenarioSpec with_loader = scenario;
        with_loader.loader.sample_cpu = Seconds(*measured_sample_cpu);
        uncalibrated_measured_loader =
            validate::validate(with_loader, input.measurements, held_out);
      }
      validate::Calibration c =
          validate::calibrate({input}, [held_out](const MeasuredPoint& p) { return !held_out(p); },
                              {args->measurements});
      fmt::print(out, "Calibrated on the points not held out ({}):\n", args->holdout);
      print_calibration(out, c);
      fmt::print(out, "\n");
      apply_profile(scenario, c.profile);
    }
    validate::ValidationReport report = validate::validate(scenario, input.measurements, held_out);
    if (report.points.empty()) {
      const auto& points = input.measurements.points;
      auto ok = std::count_if(points.begin(), points.end(),
                              [](const MeasuredPoint& p) { return p.status == PointStatus::ok; });
      throw InputError(SourceMark{args->measurements, 0, 0}, "points",
                       fmt::format("no point to compare: the file holds {} point{}, {} ended ok{}",
                                   points.size(), points.size() == 1 ? "" : "s", ok,
                                   ok > 0 ? " and the scenario predicts each of them out of memory"
                                          : " (the others ran out of memory, timed out, failed "
                                            "or were skipped)"));
    }
    const MeasuredEnvironment& environment = input.measurements.environment;
    const std::string measured_on =
        environment.device_name.empty()
            ? "figures of a results table"
            : fmt::format("{} ({})", environment.device_name, environment.device_kind);
    print_prose(out, fmt::format("Scenario {} on {} — measured on {}, profile {}\n", scenario.name,
                                 scenario.machine.gpu.name, measured_on, scenario.profile.name));
    if (!report.cross_device.empty()) print_prose(out, report.cross_device + "\n");
    TextTable table;
    for (const char* column : {"gpus", "batch", "of", "measured (s)", "predicted (s)", "error"})
      table.add_column(column);
    if (held_out) table.add_column("held out", TextTable::Align::left);
    for (const auto& p : report.points) {
      std::vector<std::string> row = {std::to_string(p.gpus),
                                      std::to_string(p.global_batch),
                                      std::string(figure_name(p.figure)),
                                      fmt::format("{:.4g}", p.measured_s),
                                      fmt::format("{:.4g}", p.predicted_s),
                                      fmt::format("{:.1f}%", p.error_pct)};
      if (held_out) row.push_back(p.held_out ? "yes" : "no");
      table.add_row(std::move(row));
    }
    fmt::print(out, "\n{}\n", table.render(output_width(out)));
    print_summary(out, "all points", report.all);
    if (held_out) {
      print_summary(out, "calibration points", *report.calibration_points);
      print_summary(out, "held-out points", *report.held_out);
      print_prose(out, fmt::format("uncalibrated (profile '{}'): held-out MAPE {:.1f}%, all "
                                   "points {:.1f}%\n",
                                   input.scenario.profile.name, uncalibrated->held_out->mape_pct,
                                   uncalibrated->all.mape_pct));
      if (uncalibrated_measured_loader) {
        print_prose(out, fmt::format("uncalibrated, loader measured (profile '{}', the loader's "
                                     "own clock: {:.4g} us a sample): held-out MAPE {:.1f}%, all "
                                     "points {:.1f}%\n",
                                     input.scenario.profile.name, *measured_sample_cpu * 1e6,
                                     uncalibrated_measured_loader->held_out->mape_pct,
                                     uncalibrated_measured_loader->all.mape_pct));
      }
    }
    const std::optional<RoundDrift> drift = round_drift(input.measurements.points);
    if (drift) print_prose(out, describe_round_drift(*drift) + "\n");
    if (!args->json.empty()) {
      nlohmann::ordered_json j{{"schema", "epochcast.validation/1"},
                               {"scenario", scenario.name},
                               {"profile", scenario.profile.name},
                               {"measured_on", environment.device_name}};
      if (!report.cross_device.empty()) j["cross_device"] = report.cross_device;
      if (!device_note.empty()) j["measured_device"] = device_note;
      nlohmann::ordered_json points = nlohmann::ordered_json::array();
      for (const auto& p : report.points) {
        points.push_back({{"gpus", p.gpus},
                          {"global_batch", p.global_batch},
                          {"figure", figure_name(p.figure)},
                          {"measured_s", p.measured_s},
                          {"predicted_s", p.predicted_s},
                          {"error_pct", p.error_pct},
                          {"held_out", p.held_out}});
        if (p.interval) points.back()["interval_s"] = {p.interval->first, p.interval->second};
      }
      j["points"] = std::move(points);
      j["all"] = summary_json(report.all);
      if (held_out) {
        j["calibration_points"] = summary_json(*report.calibration_points);
        j["held_out"] = summary_json(*report.held_out);
        j["uncalibrated_held_out"] = summary_json(*uncalibrated->held_out);
        if (uncalibrated_measured_loader) {
          j["uncalibrated_measured_loader_held_out"] =
              summary_json(*uncalibrated_measured_loader->held_out);
          j["measured_sample_cpu_s"] = *measured_sample_cpu;
        }
      }
      if (drift) {
        j["round_drift"] = {{"rounds", drift->rounds},
                            {"points", drift->points},
                            {"slowest_round", drift->slowest_round},
                            {"fastest_round", drift->fastest_round},
                            {"point_scatter", drift->point_scatter}};
      }
      json->write(j.dump(2) + "\n");
    }
    if (!args->plot.empty()) {
      plot(report, args->plot,
           fmt::format("{}: measured vs predicted ({})", scenario.name, scenario.profile.name));
      fmt::print(stderr, "{}\n", plotted_message(args->plot));
    }
    return 0;
  };
}

}  // namespace epochcast::cli

// `epochcast calibrate MEASUREMENTS... -o PROFILE`: fit the simulator to measurements.
#include <cstdio>
#include <iostream>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/holdout.h"
#include "core/input_error.h"
#include "core/io/output_file.h"
#include "validate/calibration.h"
#include "validate/measurement_input.h"

namespace epochcast::cli {

namespace {

struct CalibrateArgs {
  std::vector<std::string> measurements;
  std::string output;
  std::string scenario;
  std::string holdout;
};

}  // namespace

void print_calibration(std::FILE* out, const validate::Calibration& c) {
  fmt::print(out, "{:<52} {:>12} {:>6} {:>10}  {}\n", "parameter", "value", "points", "rms resid",
             "fitted to");
  for (const validate::FittedParameter& f : c.fitted) {
    fmt::print(out, "{:<52} {:>12.4g} {:>6} {:>9.1f}%  {}\n", f.key, f.value, f.observations,
               f.rms_relative_residual * 100, f.from);
  }
  for (const std::string& note : c.notes)
    fmt::print(out, "  {}\n", note);
}

Command add_calibrate_command(CLI::App& app) {
  auto args = std::make_shared<CalibrateArgs>();
  CLI::App* command = app.add_subcommand(
      "calibrate",
      "Fit the simulator's free parameters (efficiencies, host and input costs, links) to "
      "measurements by least squares and write a hardware profile");
  command
      ->add_option("measurements", args->measurements,
                   "Measurement files (epochcast run/bench) or results tables (.csv)")
      ->required();
  command->add_option("-o,--output", args->output, "Profile to write (YAML)")->required();
  command->add_option("--scenario", args->scenario,
                      "Scenario the measurements ran (default: the one each file records)");
  add_holdout_option(*command, args->holdout);
  return [args] {
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
    std::vector<validate::MeasuredScenario> inputs;
    for (const std::string& file : args->measurements) {
      for (validate::MeasuredScenario& m : validate::load_measurement_input(file, args->scenario)) {
        std::string note = validate::measured_device_note(m.scenario, m.measurements.environment);
        if (!note.empty()) fmt::print(stderr, "warning: {}: {}\n", file, note);
        inputs.push_back(std::move(m));
      }
    }
    validate::PointFilter held_out = holdout_filter(args->holdout, inputs);
    validate::PointFilter use;
    if (held_out) use = [held_out](const MeasuredPoint& p) { return !held_out(p); };
    validate::Calibration c = validate::calibrate(inputs, use, args->measurements);
    print_calibration(out, c);
    if (c.fitted.empty()) {
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

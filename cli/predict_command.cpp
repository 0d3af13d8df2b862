// `epochcast predict SCENARIO`: simulate every sweep point and print what it costs.
#include <cstdio>
#include <iostream>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/commands.h"
#include "cli/gnuplot_figure.h"
#include "cli/prediction_plots.h"
#include "cli/progress.h"
#include "cli/sweep_options.h"
#include "cli/sweep_processes.h"
#include "cli/sweep_shards.h"
#include "cli/terminal.h"
#include "core/build_info.h"
#include "core/io/output_file.h"
#include "core/spec/scenario_spec.h"
#include "core/yaml/strict_yaml.h"
#include "options/command_line.h"
#include "options/scenario_options.h"
#include "options/shard_option.h"
#include "sim/predict/point_pool.h"
#include "sim/predict/predict.h"
#include "sim/predict/uncertainty.h"
#include "sim/report/report.h"

namespace epochcast::cli {

namespace {

struct PredictArgs {
  std::string scenario;
  options::ScenarioOptions options;
  std::string csv;
  std::string json;
  std::string trace;
  std::string plot;
  std::int64_t trace_point = 1;
  int trace_iterations = 3;
  bool exact = false;
  bool wide = false;
  bool explain_scaling = false;
  SweepSimulation simulation;
  options::ShardOptions shard;
};

// predict's options, declared on `command`: the subcommand, or merge's parser of the arguments
// a shard recorded. Returns --trace-point and --trace-iterations (which go with --trace).
std::pair<CLI::Option*, CLI::Option*> declare_predict_options(CLI::App& command,
                                                              PredictArgs& args) {
  command.add_option("scenario", args.scenario, "Scenario file")->required();
  options::add_scenario_options(command, args.options);
  command.add_option("--csv", args.csv, "Also write the results as CSV to this file");
  command.add_option("--json", args.json, "Also write the results as JSON to this file");
  command.add_option("--plot", args.plot,
                     "Draw epoch time against batch (a line per GPU count) to this .png or "
                     ".svg, with the breakdown (<name>-breakdown) and, for several GPU counts, "
                     "scaling efficiency (<name>-scaling) beside it; each with its gnuplot data "
                     "and script");
  command.add_option("--trace", args.trace,
                     "Write a Chrome trace (Perfetto, chrome://tracing) of the first iterations "
                     "of one point to this file");
  CLI::Option* trace_point =
      command
          .add_option("--trace-point", args.trace_point,
                      "Which point (row of the table, from 1) to trace; with --trace")
          ->check(options::integer_within(1, 1'000'000'000));
  CLI::Option* trace_iterations = command
                                      .add_option("--trace-iterations", args.trace_iterations,
                                                  "How many training iterations to trace")
                                      ->check(options::integer_within(1, 1000));
  command.add_flag("--exact", args.exact,
                   "Simulate every iteration instead of skipping exactly repeating periods "
                   "(same result, slower; for checking)");
  command.add_flag("--wide", args.wide,
                   "Print every column (where GPU 0's epoch went, the largest batch that fits, "
                   "the bottleneck in words) whatever the terminal's width");
  command.add_flag(
      "--explain-scaling", args.explain_scaling,
      "After the table, where each point of a process per GPU (ddp, zero1, zero2, fsdp) on "
      "several GPUs loses its scaling: "
      "exposed communication, longer or extra kernels, input, host");
  add_sweep_simulation_options(command, args.simulation);
  options::add_shard_options(command, args.shard);
  return {trace_point, trace_iterations};
}

// The sweep predict simulates, loaded from its arguments.
struct PredictSweep {
  ScenarioSpec scenario;
  std::vector<SweepPoint> points;
  sim::PredictOptions options;
  std::string inputs;  // the digest of the files loading read (yaml::InputRecord)
};

PredictSweep load_sweep(const PredictArgs& args) {
  PredictSweep sweep;
  {
    yaml::InputRecord record;
    sweep.scenario = args.options.load(args.scenario);
    sweep.inputs = record.digest();
  }
  sweep.points = expand_sweep(sweep.scenario);
  sweep.options.steady_state_shortcut = !args.exact;
  sweep.options.memory_limit_bytes = args.simulation.cap_memory();
  if (args.simulation.every_rank) sweep.scenario.training.every_rank = true;
  return sweep;
}

// What a shard records of the command: every argument that changes a point's result.
sim::SweepIdentity identity_of(const PredictArgs& args, const PredictSweep& sweep) {
  sim::SweepIdentity id;
  id.epochcast = version_line("epochcast");
  id.command = "predict";
  id.arguments = {args.scenario};
  for (std::string& word : args.options.words())
    id.arguments.push_back(std::move(word));
  if (args.exact) id.arguments.emplace_back("--exact");
  if (args.simulation.every_rank) id.arguments.emplace_back("--every-rank");
  id.inputs = sweep.inputs;
  id.points = sweep.points.size();
  return id;
}

// A point of the sweep, as every path simulates it (`trace_iterations` for the traced point).
sim::PointResult simulate_point(const PredictSweep& sweep, std::size_t i, int trace_iterations) {
  sim::PredictOptions options = sweep.options;
  options.trace_iterations = trace_iterations;
  sim::PointResult r = sim::predict_point(sweep.scenario, sweep.points[i], options);
  sim::add_epoch_interval(sweep.scenario, r, sweep.options);
  return r;
}

// Where the results go besides the table, every output registered before any work.
struct PredictOutputs {
  std::optional<OutputFile> csv, json, trace;
  std::string plot;
  std::int64_t trace_point = 1;
  bool explain_scaling = false;
};

// The end of every predict — the serial run, process 0 of an MPI run, merge: the one-GPU
// comparison, the table (or the close of the one streamed so far), the scaling losses, the CSV,
// JSON, trace and plots.
void report_predictions(const PredictSweep& sweep, std::vector<sim::PointResult>& results,
                        sim::OneGpuComparison& comparison, const PredictOutputs& out,
                        const sim::TableLayout& layout, std::FILE* table,
                        const sim::StreamedTable* streamed) {
  const ScenarioSpec& scenario = sweep.scenario;
  // What the streamed rows showed, for every output (references simulated once).
  for (const sim::PointResult& r : results)
    comparison.offer(r);
  for (sim::PointResult& r : results)
    comparison.apply(r);
  if (streamed) {
    fmt::print(table, "{}", streamed->closing(results));
  } else {
    fmt::print(table, "{}", sim::render_table(scenario, results, layout));
  }
  if (out.explain_scaling)
    fmt::print(table, "{}", sim::render_scaling_loss(results, layout.wide ? 0 : layout.width));
  std::fflush(table);
  if (out.csv) out.csv->write(sim::render_csv(scenario, results));
  if (out.json) out.json->write(sim::render_json(scenario, results));
  if (out.trace) {
    const sim::PointResult& traced = results[static_cast<std::size_t>(out.trace_point - 1)];
    if (!traced.simulated) {
      throw InputError(SourceMark{"<command line>", 0, 0}, "--trace-point",
                       "that point does not fit in memory, so there is nothing to trace");
    }
    OutputWriter writer(*out.trace);
    sim::write_chrome_trace(scenario, traced,
                            [&writer](std::string_view piece) { writer.append(piece); });
    writer.commit();
  }
  if (!out.plot.empty()) {
    for (const std::string& image : plot_predictions(scenario, results, out.plot))
      std::cerr << plotted_message(image) << "\n";
  }
}

// Registers --csv, --json and --plot (and --trace) in `outputs`, each checked before any work.
PredictOutputs register_outputs(OutputFiles& outputs, const std::string& csv,
                                const std::string& json, const std::string& plot,
                                const std::string& trace) {
  PredictOutputs out;
  if (!csv.empty()) out.csv = outputs.add(csv, "--csv");
  if (!json.empty()) out.json = outputs.add(json, "--json");
  if (!trace.empty()) out.trace = outputs.add(trace, "--trace");
  if (!plot.empty()) {
    checked_image_name(plot, "--plot");
    for (const std::string& file : prediction_plot_files(plot))
      outputs.add(file, "--plot");
  }
  out.plot = plot;
  return out;
}

}  // namespace

Command add_predict_command(CLI::App& app) {
  auto args = std::make_shared<PredictArgs>();
  CLI::App* command = app.add_subcommand(
      "predict",
      "Predict epoch time, throughput, breakdown, memory and bottleneck for every "
      "point of a scenario's sweep");
  const auto [trace_point, trace_iterations] = declare_predict_options(*command, *args);
  return [args, command, trace_point, trace_iterations] {
    // Under mpirun: this process's share of the points, gathered on process 0, which alone
    // speaks (before anything can fail, so that an error is reported once).
    SweepProcesses processes("predict");
    for (const CLI::Option* option : {trace_point, trace_iterations}) {
      if (option->count() > 0 && args->trace.empty()) {
        throw InputError(SourceMark{"<command line>", 0, 0}, option->get_name(),
                         "goes with --trace FILE (what to write there)");
      }
    }
    const std::optional<options::Shard> shard =
        shard_to_compute(*command, args->shard,
                         {"--csv", "--json", "--plot", "--trace", "--trace-point",
                          "--trace-iterations", "--wide", "--explain-scaling"});
    // Every output is checked before any work: a bad path fails now, not after the sweep.
    OutputFiles outputs;
    PredictOutputs out = register_outputs(outputs, args->csv, args->json, args->plot, args->trace);
    out.trace_point = args->trace_point;
    out.explain_scaling = args->explain_scaling;
    std::optional<OutputFile> shard_output;
    if (shard) shard_output = outputs.add(args->shard.output, "--shard-output");
    // With an output on standard output, the table goes to standard error.
    std::FILE* table = outputs.to_standard_output() ? stderr : stdout;

    const PredictSweep sweep = load_sweep(*args);
    const std::vector<SweepPoint>& points = sweep.points;
    if (shard) {
      compute_shard(
          processes, *shard, *shard_output, identity_of(*args, sweep), args->simulation,
          [&](std::size_t i) { return simulate_point(sweep, i, 0); }, table);
      return 0;
    }
    if (out.trace && args->trace_point > static_cast<std::int64_t>(points.size())) {
      throw InputError(
          SourceMark{"<command line>", 0, 0}, "--trace-point",
          fmt::format("the sweep has {} points; expected 1 to {}", points.size(), points.size()));
    }
    SweepProgress progress("predict", processes.share(points.size()));
    const int jobs = args->simulation.jobs_for(processes.share(points.size()));
    const sim::TableLayout layout{output_width(table), args->wide};
    // On a terminal (one process), rows appear as points finish, in sweep order: a point's row
    // waits for the points before it and for the one-GPU points it is compared with.
    std::optional<sim::StreamedTable> streamed;
    // (--wide rows are too wide for a terminal anyway; they come as one table.)
    if (is_terminal(table) && processes.size() == 1 && !args->wide) {
      streamed.emplace(sweep.scenario, points, layout);
      progress.above(streamed->opening(), table);
    }
    sim::OneGpuComparison comparison(sweep.scenario, sweep.options, points);
    // The one-GPU references the sweep lacks, first: a row then never waits on a simulation
    // inside another point's completion.
    if (streamed) comparison.prepare(jobs);
    std::vector<std::optional<sim::PointResult>> finished(streamed ? points.size() : 0);
    std::size_t printed = 0;
    auto print_ready_rows = [&] {
      while (printed < finished.size() && finished[printed] &&
             comparison.ready(*finished[printed])) {
        sim::PointResult row = *finished[printed];
        comparison.apply(row);
        progress.above(streamed->row(row), table);
        ++printed;
      }
    };
    std::vector<sim::PointResult> results = processes.simulate(
        points.size(), jobs,
        [&](std::size_t i) {
          const bool traced = out.trace && static_cast<std::int64_t>(i) + 1 == args->trace_point;
          return simulate_point(sweep, i, traced ? args->trace_iterations : 0);
        },
        [&](std::size_t i, const sim::PointResult& r) {
          progress.point_done();
          if (!streamed) return;
          finished[i] = r;
          comparison.offer(r);
          print_ready_rows();
        });
    if (!processes.writes_output()) return 0;
    if (streamed) progress.clear();
    report_predictions(sweep, results, comparison, out, layout, table,
                       streamed ? &*streamed : nullptr);
    return 0;
  };
}

int merge_predictions(const MergedSweep& merged, const MergeOptions& options) {
  PredictArgs args;
  CLI::App parser("predict", "predict");
  declare_predict_options(parser, args);
  parse_recorded_arguments(parser, merged);
  if (options.details) {
    throw InputError(SourceMark{"<command line>", 0, 0}, "--details",
                     "is compare's, and these are shards of predict");
  }
  OutputFiles outputs;
  PredictOutputs out = register_outputs(outputs, options.csv, options.json, options.plot, "");
  out.explain_scaling = options.explain_scaling;
  std::FILE* table = outputs.to_standard_output() ? stderr : stdout;
  const PredictSweep sweep = reload_sweep(merged, [&] { return load_sweep(args); });
  check_same_inputs(merged, sweep.inputs, sweep.points.size());
  // The serial run's results, or its first failure raised as it raised it.
  std::vector<sim::PointResult> results;
  for (const sim::PointOutcome& o : merged.outcomes)
    results.push_back(sim::PointOutcome(o).take());
  sim::OneGpuComparison comparison(sweep.scenario, sweep.options, sweep.points);
  report_predictions(sweep, results, comparison, out,
                     sim::TableLayout{output_width(table), options.wide}, table, nullptr);
  return 0;
}

}  // namespace epochcast::cli

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
#include "cli/terminal.h"
#include "core/io/output_file.h"
#include "core/spec/scenario_spec.h"
#include "options/command_line.h"
#include "options/scenario_options.h"
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
};

}  // namespace

Command add_predict_command(CLI::App& app) {
  auto args = std::make_shared<PredictArgs>();
  CLI::App* command = app.add_subcommand(
      "predict",
      "Predict epoch time, throughput, breakdown, memory and bottleneck for every "
      "point of a scenario's sweep");
  command->add_option("scenario", args->scenario, "Scenario file")->required();
  options::add_scenario_options(*command, args->options);
  command->add_option("--csv", args->csv, "Also write the results as CSV to this file");
  command->add_option("--json", args->json, "Also write the results as JSON to this file");
  command->add_option("--plot", args->plot,
                      "Draw epoch time against batch (a line per GPU count) to this .png or "
                      ".svg, with the breakdown (<name>-breakdown) and, for several GPU counts, "
                      "scaling efficiency (<name>-scaling) beside it; each with its gnuplot data "
                      "and script");
  command->add_option("--trace", args->trace,
                      "Write a Chrome trace (Perfetto, chrome://tracing) of the first iterations "
                      "of one point to this file");
  CLI::Option* trace_point =
      command
          ->add_option("--trace-point", args->trace_point,
                       "Which point (row of the table, from 1) to trace; with --trace")
          ->check(options::integer_within(1, 1'000'000'000));
  CLI::Option* trace_iterations = command
                                      ->add_option("--trace-iterations", args->trace_iterations,
                                                   "How many training iterations to trace")
                                      ->check(options::integer_within(1, 1000));
  command->add_flag("--exact", args->exact,
                    "Simulate every iteration instead of skipping exactly repeating periods "
                    "(same result, slower; for checking)");
  command->add_flag("--wide", args->wide,
                    "Print every column (where GPU 0's epoch went, the largest batch that fits, "
                    "the bottleneck in words) whatever the terminal's width");
  command->add_flag(
      "--explain-scaling", args->explain_scaling,
      "After the table, where each point of a process per GPU (ddp, zero1, zero2, fsdp) on "
      "several GPUs loses its scaling: "
      "exposed communication, longer or extra kernels, input, host");
  add_sweep_simulation_options(*command, args->simulation);
  return [args, trace_point, trace_iterations] {
    // Under mpirun: this process's share of the points, gathered on process 0, which alone
    // speaks (before anything can fail, so that an error is reported once).
    SweepProcesses processes("predict");
    for (const CLI::Option* option : {trace_point, trace_iterations}) {
      if (option->count() > 0 && args->trace.empty()) {
        throw InputError(SourceMark{"<command line>", 0, 0}, option->get_name(),
                         "goes with --trace FILE (what to write there)");
      }
    }
    // Every output is checked before any work: a bad path fails now, not after the sweep.
    OutputFiles outputs;
    std::optional<OutputFile> csv, json, trace;
    if (!args->csv.empty()) csv = outputs.add(args->csv, "--csv");
    if (!args->json.empty()) json = outputs.add(args->json, "--json");
    if (!args->trace.empty()) trace = outputs.add(args->trace, "--trace");
    if (!args->plot.empty()) {
      checked_image_name(args->plot, "--plot");
      for (const std::string& file : prediction_plot_files(args->plot))
        outputs.add(file, "--plot");
    }
    // With an output on standard output, the table goes to standard error.
    std::FILE* table = outputs.to_standard_output() ? stderr : stdout;

    ScenarioSpec scenario = args->options.load(args->scenario);
    std::vector<SweepPoint> points = expand_sweep(scenario);
    if (trace && args->trace_point > static_cast<std::int64_t>(points.size())) {
      throw InputError(
          SourceMark{"<command line>", 0, 0}, "--trace-point",
          fmt::format("the sweep has {} points; expected 1 to {}", points.size(), points.size()));
    }
    sim::PredictOptions options;
    options.steady_state_shortcut = !args->exact;
    options.memory_limit_bytes = args->simulation.cap_memory();
    if (args->simulation.every_rank) scenario.training.every_rank = true;
    SweepProgress progress("predict", processes.share(points.size()));
    const int jobs = args->simulation.jobs_for(processes.share(points.size()));
    const sim::TableLayout layout{output_width(table), args->wide};
    // On a terminal (one process), rows appear as points finish, in sweep order: a point's row
    // waits for the points before it and for the one-GPU points it is compared with.
    std::optional<sim::StreamedTable> streamed;
    // (--wide rows are too wide for a terminal anyway; they come as one table.)
    if (is_terminal(table) && processes.size() == 1 && !args->wide) {
      streamed.emplace(scenario, points, layout);
      progress.above(streamed->opening(), table);
    }
    sim::OneGpuComparison comparison(scenario, options, points);
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
          sim::PredictOptions point_options = options;
          if (trace && static_cast<std::int64_t>(i) + 1 == args->trace_point) {
            point_options.trace_iterations = args->trace_iterations;
          }
          sim::PointResult r = sim::predict_point(scenario, points[i], point_options);
          sim::add_epoch_interval(scenario, r, options);
          return r;
        },
        [&](std::size_t i, const sim::PointResult& r) {
          progress.point_done();
          if (!streamed) return;
          finished[i] = r;
          comparison.offer(r);
          print_ready_rows();
        });
    if (!processes.writes_output()) return 0;
    // What the streamed rows showed, for every output (references simulated once).
    for (const sim::PointResult& r : results)
      comparison.offer(r);
    for (sim::PointResult& r : results)
      comparison.apply(r);
    if (streamed) {
      progress.clear();
      fmt::print(table, "{}", streamed->closing(results));
    } else {
      fmt::print(table, "{}", sim::render_table(scenario, results, layout));
    }
    if (args->explain_scaling)
      fmt::print(table, "{}", sim::render_scaling_loss(results, layout.wide ? 0 : layout.width));
    std::fflush(table);
    if (csv) csv->write(sim::render_csv(scenario, results));
    if (json) json->write(sim::render_json(scenario, results));
    if (trace) {
      const sim::PointResult& traced = results[static_cast<std::size_t>(args->trace_point - 1)];
      if (!traced.simulated) {
        throw InputError(SourceMark{"<command line>", 0, 0}, "--trace-point",
                         "that point does not fit in memory, so there is nothing to trace");
      }
      OutputWriter writer(*trace);
      sim::write_chrome_trace(scenario, traced,
                              [&writer](std::string_view piece) { writer.append(piece); });
      writer.commit();
    }
    if (!args->plot.empty()) {
      for (const std::string& image : plot_predictions(scenario, results, args->plot))
        std::cerr << plotted_message(image) << "\n";
    }
    return 0;
  };
}

}  // namespace epochcast::cli

// `epochcast compare SCENARIO --hardware A B ...`: the same model and sweep on several machines;
// per machine its fastest point, the time and (with a price) the cost of an epoch and of the
// whole training, and a recommendation in one sentence.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <optional>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/progress.h"
#include "cli/sweep_options.h"
#include "cli/sweep_processes.h"
#include "cli/terminal.h"
#include "core/format/text_table.h"
#include "core/io/output_file.h"
#include "core/spec/data_paths.h"
#include "core/spec/scenario_spec.h"
#include "options/command_line.h"
#include "options/scenario_options.h"
#include "sim/predict/point_pool.h"
#include "sim/predict/predict.h"
#include "sim/predict/time_to_target.h"
#include "sim/report/report.h"

namespace epochcast::cli {

namespace {

struct CompareArgs {
  std::string scenario;
  options::ScenarioOptions options;
  std::vector<std::string> hardware;
  std::string csv;
  std::string json;
  bool details = false;
  bool wide = false;
  SweepSimulation simulation;
};

// One machine's outcome.
struct MachineResult {
  MachineSpec machine;
  std::vector<int> gpus;  // the sweep's GPU counts this machine can run
  std::vector<sim::PointResult> points;
  std::string why_not;  // when nothing ran

  double cost_per_epoch(const sim::PointResult& r) const {
    return machine.price->per_gpu_hour * r.point.gpus * r.epoch_seconds / 3600.0;
  }
  // The point with the lowest epoch time that fits; null when none does.
  const sim::PointResult* fastest() const { return sim::fastest_point(points); }
  // The point with the lowest cost per epoch that fits; null without a price.
  const sim::PointResult* cheapest() const {
    if (!machine.price) return nullptr;
    const sim::PointResult* best = nullptr;
    for (const sim::PointResult& r : points) {
      if (r.simulated && (!best || cost_per_epoch(r) < cost_per_epoch(*best))) best = &r;
    }
    return best;
  }
};

// The sweep's GPU counts that the strategy can run on this machine.
std::vector<int> runnable_gpu_counts(const ScenarioSpec& scenario, const MachineSpec& m) {
  std::vector<int> gpus;
  for (int g : scenario.sweep.gpus) {
    if (g > m.total_gpus()) continue;
    if (scenario.training.strategy == Strategy::dp && g > m.gpus_per_node) continue;
    if (process_per_gpu(scenario.training.strategy) && g > m.gpus_per_node &&
        g % m.gpus_per_node != 0)
      continue;
    gpus.push_back(g);
  }
  return gpus;
}

std::string point_words(const sim::PointResult& r) {
  if (r.point.gpus == 1) return fmt::format("1 GPU at batch {}", r.point.global_batch);
  return fmt::format("{} GPUs at batch {} ({} per GPU)", r.point.gpus, r.point.global_batch,
                     r.point.per_gpu_batch);
}

// Dollars with at least two significant digits: cents for large sums, more places for the
// fractions of a cent a small job costs ($0.00042).
std::string money(double value) {
  if (!(value > 0)) return "$0";
  if (value >= 10) return fmt::format("${:.2f}", value);
  if (value >= 0.01) return fmt::format("${:.3f}", value);
  const int places = static_cast<int>(std::ceil(-std::log10(value))) + 1;
  return fmt::format("${:.{}f}", value, places);
}

std::string recommendation(const std::vector<MachineResult>& machines) {
  std::vector<const MachineResult*> ran;
  for (const MachineResult& m : machines) {
    if (m.fastest()) ran.push_back(&m);
  }
  if (ran.empty()) return "None of the machines can run any point of this sweep.";
  std::sort(ran.begin(), ran.end(), [](const MachineResult* a, const MachineResult* b) {
    return a->fastest()->epoch_seconds < b->fastest()->epoch_seconds;
  });
  const MachineResult& fast = *ran.front();
  std::string epoch_words =
      fmt::format("an epoch in {} with {}", readable_duration(fast.fastest()->epoch_seconds),
                  point_words(*fast.fastest()));
  std::string fast_words = fast.machine.name + " trains " + epoch_words;
  if (ran.size() == 1) {
    return fmt::format("Recommendation: {}; it is the only machine here that can run the sweep.",
                       fast_words);
  }
  const MachineResult& second = *ran[1];
  double faster = second.fastest()->epoch_seconds / fast.fastest()->epoch_seconds;
  // Within half a percent the machines are a tie as far as time goes.
  std::string faster_words =
      faster < 1.005 ? fmt::format("as fast as {}", second.machine.name)
                     : fmt::format("{:.2f}x faster than {}", faster, second.machine.name);
  // Cost is weighed among the machines that have a price; those without one are named.
  std::vector<const MachineResult*> priced;
  std::vector<std::string> unpriced;
  for (const MachineResult* m : ran) {
    if (m->machine.price) {
      priced.push_back(m);
    } else {
      unpriced.push_back(m->machine.name);
    }
  }
  if (priced.empty()) {
    return fmt::format(
        "Recommendation: {}, {}; give the machine files a price (price: {{per_gpu_hour, "
        "source}}) to weigh cost as well.",
        fast_words, faster_words);
  }
  const std::string unpriced_words =
      unpriced.empty() ? ""
                       : fmt::format(
                             " {} {} no price (price: {{per_gpu_hour, source}}), so cost "
                             "is weighed among the others.",
                             fmt::join(unpriced, " and "), unpriced.size() == 1 ? "has" : "have");
  const MachineResult* cheap = priced.front();
  for (const MachineResult* m : priced) {
    if (m->cost_per_epoch(*m->cheapest()) < cheap->cost_per_epoch(*cheap->cheapest())) cheap = m;
  }
  if (cheap == &fast) {
    return fmt::format(
        "Recommendation: {}; it is both the fastest ({}) and the cheapest ({} per epoch at {}).{}",
        fast_words, faster_words, money(fast.cost_per_epoch(*fast.cheapest())),
        point_words(*fast.cheapest()), unpriced_words);
  }
  const double cheap_cost = cheap->cost_per_epoch(*cheap->cheapest());
  const std::string against =
      fast.machine.price
          ? fmt::format(", against {} for {}'s fastest",
                        money(fast.cost_per_epoch(*fast.fastest())), fast.machine.name)
          : "";
  return fmt::format(
      "Recommendation: {} when time matters most ({}, {}); {} when cost does ({} per epoch at "
      "{}{}).{}",
      fast.machine.name, epoch_words, faster_words, cheap->machine.name, money(cheap_cost),
      point_words(*cheap->cheapest()), against, unpriced_words);
}

// With a target: each machine's point that reaches it first, its time and (with a price) its
// cost, and the machines ranked by that time; the statistical figures are the scenario's, so
// only the machines' step times differ.
std::string target_lines(const ScenarioSpec& base, const std::vector<MachineResult>& all) {
  if (!base.target) return "";
  struct Ranked {
    const MachineResult* machine;
    const sim::PointResult* point;
    sim::TargetPrediction prediction;
  };
  std::vector<Ranked> ranked;
  for (const MachineResult& m : all) {
    if (const sim::PointResult* best = sim::fastest_to_target(base, m.points)) {
      ranked.push_back({&m, best, *sim::predict_to_target(base, *best)});
    }
  }
  if (ranked.empty()) return "";
  std::stable_sort(ranked.begin(), ranked.end(), [](const Ranked& a, const Ranked& b) {
    return a.prediction.seconds < b.prediction.seconds;
  });
  std::string out =
      fmt::format("\nTo the target ({} {:g}), fastest first:\n",
                  kTargetMetricNames[static_cast<int>(base.target->metric)], base.target->value);
  for (const Ranked& r : ranked) {
    const double cost = r.machine->machine.price
                            ? r.machine->machine.price->per_gpu_hour * r.point->point.gpus *
                                  r.prediction.seconds / 3600.0
                            : -1;
    out += fmt::format("  {}: {} with {} ({:.0f} steps, {:.2f} epochs){}\n",
                       r.machine->machine.name, readable_duration(r.prediction.seconds),
                       point_words(*r.point), r.prediction.steps, r.prediction.epochs,
                       cost >= 0 ? fmt::format(", {}", money(cost)) : "");
  }
  return out + fmt::format("Assumed: {}.\n", sim::target_assumption(base));
}

std::string render_comparison(const ScenarioSpec& base, const std::vector<MachineResult>& all,
                              const sim::TableLayout& layout) {
  const int epochs = base.training.epochs;
  std::string out = fmt::format(
      "Comparing {}: {} ({} {} {}), {} training samples, {} epochs; sweep: {} GPUs x batch {} "
      "({})\n",
      base.name, base.model.name, kStrategyNames[static_cast<int>(base.training.strategy)],
      kOptimizerNames[static_cast<int>(base.training.optimizer)],
      kTrainingPrecisionNames[static_cast<int>(base.training.precision)],
      base.dataset.train_samples, base.training.epochs, fmt::join(base.sweep.gpus, ","),
      fmt::join(base.sweep.batch, ","), kBatchMeaningNames[static_cast<int>(base.sweep.batch_is)]);
  out = wrap_lines(out, layout.width) + "\n";
  using Align = TextTable::Align;
  using Fit = TextTable::Fit;
  // On a narrow terminal the price per GPU-hour goes first, then the cheapest point, the GPU
  // and throughput; the fastest point's words are shortened before the bottleneck goes.
  struct ColumnSpec {
    const char* header;
    Align align;
    Fit fit;
  };
  static constexpr ColumnSpec kColumns[] = {
      {"machine", Align::left, {}},       {"GPU", Align::left, {0, 4}},
      {"GPUs", Align::right, {}},         {"fastest point", Align::left, {2, 0}},
      {"epoch", Align::right, {}},        {"samples/s", Align::right, {0, 3}},
      {"$/GPU-h", Align::right, {0, 6}},  {"$/epoch", Align::right, {}},
      {"all epochs", Align::right, {}},   {"cheapest point ($/epoch)", Align::left, {0, 5}},
      {"bottleneck", Align::left, {0, 1}}};
  TextTable table;
  for (const ColumnSpec& c : kColumns)
    table.add_column(c.header, c.align, c.fit);
  for (const MachineResult& m : all) {
    std::vector<std::string> row = {m.machine.name, m.machine.gpu.name,
                                    std::to_string(m.machine.total_gpus())};
    if (!m.fastest()) {
      // Dashes up to the last column, which says why.
      while (row.size() + 1 < std::size(kColumns))
        row.push_back("-");
      row.push_back(m.why_not);
      table.add_row(std::move(row));
      continue;
    }
    const sim::PointResult& f = *m.fastest();
    double all_epochs = f.epoch_seconds * epochs;
    row.push_back(point_words(f));
    row.push_back(readable_duration(f.epoch_seconds));
    row.push_back(sim::throughput_text(f.samples_per_second));
    if (m.machine.price) {
      row.push_back(fmt::format("{:.2f}", m.machine.price->per_gpu_hour));
      row.push_back(money(m.cost_per_epoch(f)));
      row.push_back(fmt::format("{}, {}", readable_duration(all_epochs),
                                money(m.cost_per_epoch(f) * epochs)));
      row.push_back(fmt::format("{} ({})", point_words(*m.cheapest()),
                                money(m.cost_per_epoch(*m.cheapest()))));
    } else {
      row.push_back("-");
      row.push_back("-");
      row.push_back(readable_duration(all_epochs));
      row.push_back("-");
    }
    row.push_back(f.bottleneck);
    table.add_row(std::move(row));
  }
  out += table.render(layout.wide ? 0 : layout.width);
  out += "\n" + wrap_lines(recommendation(all), layout.width, 0) + "\n";
  out += wrap_lines(target_lines(base, all), layout.width, 4);
  constexpr std::size_t kProse = 100;
  out += wrap_lines(
      "\nfastest point is the sweep point with the lowest epoch time that fits in memory; all "
      "epochs is its time (and cost) for the scenario's epochs. Prices come from the machine "
      "files (price: per_gpu_hour, with its source); cost counts the GPUs a point uses.\n",
      layout.width == 0 ? kProse : std::min(layout.width, kProse), 0);
  return out;
}

nlohmann::ordered_json point_json(const MachineResult& m, const sim::PointResult& r) {
  nlohmann::ordered_json j = {{"gpus", r.point.gpus},
                              {"global_batch", r.point.global_batch},
                              {"per_gpu_batch", r.point.per_gpu_batch},
                              {"epoch_s", r.epoch_seconds},
                              {"samples_per_s", r.samples_per_second},
                              {"bottleneck", r.bottleneck}};
  if (m.machine.price) j["cost_per_epoch"] = m.cost_per_epoch(r);
  return j;
}

std::string render_json(const ScenarioSpec& base, const std::vector<MachineResult>& all) {
  nlohmann::ordered_json machines = nlohmann::ordered_json::array();
  for (const MachineResult& m : all) {
    nlohmann::ordered_json j = {{"machine", m.machine.name},
                                {"file", m.machine.source_file},
                                {"gpu", m.machine.gpu.id},
                                {"gpus", m.machine.total_gpus()}};
    if (m.machine.price) {
      j["price_per_gpu_hour"] = m.machine.price->per_gpu_hour;
      j["price_source"] = m.machine.price->source;
    }
    if (const sim::PointResult* first = sim::fastest_to_target(base, m.points)) {
      const sim::TargetPrediction t = *sim::predict_to_target(base, *first);
      j["fastest_to_target"] = point_json(m, *first);
      j["fastest_to_target"]["time_to_target_s"] = t.seconds;
      j["fastest_to_target"]["epochs_to_target"] = t.epochs;
      j["fastest_to_target"]["steps_to_target"] = t.steps;
      if (m.machine.price) {
        j["fastest_to_target"]["cost_to_target"] =
            m.machine.price->per_gpu_hour * first->point.gpus * t.seconds / 3600.0;
      }
    }
    if (m.fastest()) {
      j["fastest"] = point_json(m, *m.fastest());
      if (m.cheapest()) j["cheapest"] = point_json(m, *m.cheapest());
      nlohmann::ordered_json points = nlohmann::ordered_json::array();
      for (const sim::PointResult& r : m.points) {
        if (r.simulated) points.push_back(point_json(m, r));
      }
      j["points"] = std::move(points);
    } else {
      j["not_run"] = m.why_not;
    }
    machines.push_back(std::move(j));
  }
  nlohmann::ordered_json out = {
      {"schema", "epochcast.comparison/1"}, {"scenario", base.name},
      {"model", base.model.name},           {"epochs", base.training.epochs},
      {"machines", std::move(machines)},    {"recommendation", recommendation(all)}};
  return out.dump(2) + "\n";
}

std::string render_csv(const std::vector<MachineResult>& all) {
  std::string out =
      "machine,gpu,gpus,global_batch,per_gpu_batch,epoch_s,samples_per_s,price_per_gpu_hour,"
      "cost_per_epoch,fastest,cheapest\n";
  for (const MachineResult& m : all) {
    for (const sim::PointResult& r : m.points) {
      if (!r.simulated) continue;
      out += fmt::format("{},{},{},{},{},{:.9f},{:.3f},", m.machine.name, m.machine.gpu.id,
                         r.point.gpus, r.point.global_batch, r.point.per_gpu_batch, r.epoch_seconds,
                         r.samples_per_second);
      out += m.machine.price
                 ? fmt::format("{},{:.6f},", m.machine.price->per_gpu_hour, m.cost_per_epoch(r))
                 : ",,";
      out += fmt::format("{},{}\n", &r == m.fastest() ? "true" : "false",
                         &r == m.cheapest() ? "true" : "false");
    }
  }
  return out;
}

}  // namespace

Command add_compare_command(CLI::App& app) {
  auto args = std::make_shared<CompareArgs>();
  CLI::App* command = app.add_subcommand(
      "compare",
      "Predict the same model and sweep on several machines: the fastest point of each, time "
      "and cost per epoch, and a recommendation");
  command->add_option("scenario", args->scenario, "Scenario file (its model, data and sweep)")
      ->required();
  command
      ->add_option("--hardware", args->hardware,
                   "Machines to compare: bundled names (topologies/) or machine files")
      ->required();
  options::add_scenario_options(*command, args->options, /*with_profile=*/false);
  command->add_option("--csv", args->csv, "Also write every point of every machine as CSV");
  command->add_option("--json", args->json, "Also write the comparison as JSON");
  command->add_flag("--details", args->details, "Also print each machine's full predict table");
  command->add_flag("--wide", args->wide,
                    "Print every column of every table whatever the terminal's width");
  add_sweep_simulation_options(*command, args->simulation);
  return [args] {
    // Under mpirun: this process's share of the points, gathered on process 0, which alone
    // speaks (before anything can fail, so that an error is reported once).
    SweepProcesses processes("compare");
    OutputFiles outputs;
    std::optional<OutputFile> csv, json;
    if (!args->csv.empty()) csv = outputs.add(args->csv, "--csv");
    if (!args->json.empty()) json = outputs.add(args->json, "--json");
    std::FILE* table = outputs.to_standard_output() ? stderr : stdout;
    const sim::TableLayout layout{output_width(table), args->wide};
    args->scenario = options::resolve_scenario_argument(args->scenario);
    ScenarioSpec base = args->options.load(args->scenario);
    std::vector<MachineResult> all;
    all.reserve(args->hardware.size());
    for (const std::string& reference : args->hardware) {
      MachineResult m;
      std::filesystem::path file = std::filesystem::absolute(resolve_data_file(
          reference, ".", "topologies", SourceMark{"<command line>", 0, 0}, "--hardware"));
      m.machine = load_machine(file, bundled_gpu_catalogue());
      m.gpus = runnable_gpu_counts(base, m.machine);
      if (m.gpus.empty()) {
        m.why_not = fmt::format("none of the sweep's GPU counts runs on its {} GPUs",
                                m.machine.total_gpus());
        all.push_back(std::move(m));
        continue;
      }
      std::vector<yaml::Override> overrides = args->options.overrides();
      std::string origin = "--hardware " + reference;
      overrides.push_back({"hardware", file.string(), origin});
      overrides.push_back({"sweep.gpus", fmt::format("[{}]", fmt::join(m.gpus, ",")), origin});
      // What the scenario says of its own cluster (a straggler's rank, a faulty NIC) may not
      // exist on another machine: that machine is then not compared, and says why.
      std::optional<ScenarioSpec> loaded;
      try {
        loaded = load_scenario(args->scenario, overrides);
      } catch (const InputError& e) {
        if (base.conditions.any() &&
            (e.key().rfind("stragglers", 0) == 0 || e.key().rfind("faults", 0) == 0)) {
          m.why_not = fmt::format("its {} does not exist there ({})", e.key(), e.problem());
          all.push_back(std::move(m));
          continue;
        }
        throw;
      }
      ScenarioSpec scenario = std::move(*loaded);
      std::vector<SweepPoint> points = expand_sweep(scenario);
      SweepProgress progress("compare: " + m.machine.name, processes.share(points.size()));
      if (args->simulation.every_rank) scenario.training.every_rank = true;
      sim::PredictOptions options;
      options.memory_limit_bytes = args->simulation.cap_memory();
      m.points = processes.simulate(
          points.size(), args->simulation.jobs_for(processes.share(points.size())),
          [&](std::size_t i) { return sim::predict_point(scenario, points[i], options); },
          [&](std::size_t, const sim::PointResult&) { progress.point_done(); });
      if (!processes.writes_output()) continue;
      sim::compare_with_one_gpu(scenario, m.points, options);
      if (!m.fastest()) m.why_not = "no point fits in memory";
      if (args->details) fmt::print(table, "{}\n", sim::render_table(scenario, m.points, layout));
      all.push_back(std::move(m));
    }
    if (!processes.writes_output()) return 0;
    fmt::print(table, "{}", render_comparison(base, all, layout));
    std::fflush(table);
    if (csv) csv->write(render_csv(all));
    if (json) json->write(render_json(base, all));
    return 0;
  };
}

}  // namespace epochcast::cli

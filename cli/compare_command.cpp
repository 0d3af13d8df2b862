// `epochcast compare SCENARIO --hardware A B ...`: the same model and sweep on several machines;
// per machine its fastest point, the time and (with a price) the cost of an epoch and of the
// whole training, and a recommendation in one sentence.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <functional>
#include <iostream>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/progress.h"
#include "cli/sweep_options.h"
#include "cli/sweep_processes.h"
#include "cli/sweep_shards.h"
#include "cli/terminal.h"
#include "core/build_info.h"
#include "core/format/text_table.h"
#include "core/io/output_file.h"
#include "core/spec/data_paths.h"
#include "core/spec/scenario_spec.h"
#include "core/yaml/strict_yaml.h"
#include "options/command_line.h"
#include "options/scenario_options.h"
#include "options/shard_option.h"
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
  options::ShardOptions shard;
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
  std::string out = fmt::format("\nTo the target ({} {:g}), fastest first:\n",
                                name_of(base.target->metric), base.target->value);
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
      base.name, base.model.name, name_of(base.training.strategy), name_of(base.training.optimizer),
      name_of(base.training.precision), base.dataset.train_samples, base.training.epochs,
      fmt::join(base.sweep.gpus, ","), fmt::join(base.sweep.batch, ","),
      name_of(base.sweep.batch_is));
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

// compare's options, declared on `command`: the subcommand, or merge's parser of the arguments
// a shard recorded.
void declare_compare_options(CLI::App& command, CompareArgs& args) {
  command.add_option("scenario", args.scenario, "Scenario file (its model, data and sweep)")
      ->required();
  command
      .add_option("--hardware", args.hardware,
                  "Machines to compare: bundled names (topologies/) or machine files")
      ->required();
  options::add_scenario_options(command, args.options, /*with_profile=*/false);
  command.add_option("--csv", args.csv, "Also write every point of every machine as CSV");
  command.add_option("--json", args.json, "Also write the comparison as JSON");
  command.add_flag("--details", args.details, "Also print each machine's full predict table");
  command.add_flag("--wide", args.wide,
                   "Print every column of every table whatever the terminal's width");
  add_sweep_simulation_options(command, args.simulation);
  options::add_shard_options(command, args.shard);
}

// One machine of --hardware as loaded: what it is and, when it is compared, its scenario and
// its points.
struct MachineSweep {
  MachineResult result;  // the machine, the GPU counts it runs, why it is not compared
  std::optional<ScenarioSpec> scenario;
  std::vector<SweepPoint> points;
  std::size_t first = 0;  // its first point's place in the whole sweep
};

// The sweep compare simulates: every machine's points, machine after machine.
struct CompareSweep {
  ScenarioSpec base;
  std::vector<MachineSweep> machines;  // in --hardware order, up to one that fails to load
  // That machine's error: raised once the machines before it are simulated and printed, where
  // the machine-by-machine run meets it.
  std::exception_ptr load_failure;
  sim::PredictOptions options;
  std::string inputs;  // the digest of the files loading read (yaml::InputRecord)
  std::size_t points = 0;
};

CompareSweep load_sweep(const CompareArgs& args) {
  CompareSweep sweep;
  yaml::InputRecord record;
  const std::string scenario_file = options::resolve_scenario_argument(args.scenario);
  sweep.base = args.options.load(scenario_file);
  sweep.options.memory_limit_bytes = args.simulation.cap_memory();
  for (const std::string& reference : args.hardware) {
    MachineSweep m;
    MachineResult& r = m.result;
    try {
      std::filesystem::path file = std::filesystem::absolute(resolve_data_file(
          reference, ".", "topologies", SourceMark{"<command line>", 0, 0}, "--hardware"));
      r.machine = load_machine(file, bundled_gpu_catalogue());
      r.gpus = runnable_gpu_counts(sweep.base, r.machine);
      if (r.gpus.empty()) {
        r.why_not = fmt::format("none of the sweep's GPU counts runs on its {} GPUs",
                                r.machine.total_gpus());
        sweep.machines.push_back(std::move(m));
        continue;
      }
      std::vector<yaml::Override> overrides = args.options.overrides();
      std::string origin = "--hardware " + reference;
      overrides.push_back({"hardware", file.string(), origin});
      overrides.push_back({"sweep.gpus", fmt::format("[{}]", fmt::join(r.gpus, ",")), origin});
      // What the scenario says of its own cluster (a straggler's rank, a faulty NIC) may not
      // exist on another machine: that machine is then not compared, and says why.
      try {
        m.scenario = load_scenario(scenario_file, overrides);
      } catch (const InputError& e) {
        if (sweep.base.conditions.any() &&
            (e.key().rfind("stragglers", 0) == 0 || e.key().rfind("faults", 0) == 0)) {
          r.why_not = fmt::format("its {} does not exist there ({})", e.key(), e.problem());
          sweep.machines.push_back(std::move(m));
          continue;
        }
        throw;
      }
    } catch (...) {
      sweep.load_failure = std::current_exception();
      break;
    }
    if (args.simulation.every_rank) m.scenario->training.every_rank = true;
    m.points = expand_sweep(*m.scenario);
    m.first = sweep.points;
    sweep.points += m.points.size();
    sweep.machines.push_back(std::move(m));
  }
  sweep.inputs = record.digest();
  return sweep;
}

// What a shard records of the command: every argument that changes a point's result.
sim::SweepIdentity identity_of(const CompareArgs& args, const CompareSweep& sweep) {
  sim::SweepIdentity id;
  id.epochcast = version_line("epochcast");
  id.command = "compare";
  id.arguments = {args.scenario};
  for (const std::string& machine : args.hardware)
    id.arguments.insert(id.arguments.end(), {"--hardware", machine});
  for (std::string& word : args.options.words())
    id.arguments.push_back(std::move(word));
  if (args.simulation.every_rank) id.arguments.emplace_back("--every-rank");
  id.inputs = sweep.inputs;
  id.points = sweep.points;
  return id;
}

// Point `i` of the whole sweep: the machine it belongs to, and its place there.
sim::PointResult simulate_point(const CompareSweep& sweep, std::size_t i) {
  for (const MachineSweep& m : sweep.machines) {
    if (m.scenario && i >= m.first && i < m.first + m.points.size())
      return sim::predict_point(*m.scenario, m.points[i - m.first], sweep.options);
  }
  throw std::logic_error("compare: a point outside the sweep");
}

// The end of every compare — the serial run, every process of an MPI run, merge: machine after
// machine, its points' results (`results_of`, which simulates them or takes them from the
// shards, raising a point's error as the serial run would), compared with one GPU, and its
// table with --details; then the comparison, the CSV and the JSON. Processes other than
// `writes` get results from results_of only to take part in it.
void report_comparison(
    CompareSweep& sweep,
    const std::function<std::vector<sim::PointResult>(const MachineSweep&)>& results_of,
    bool writes, bool details, const sim::TableLayout& layout, std::FILE* table,
    const std::optional<OutputFile>& csv, const std::optional<OutputFile>& json) {
  std::vector<MachineResult> all;
  all.reserve(sweep.machines.size());
  for (MachineSweep& machine : sweep.machines) {
    MachineResult& m = machine.result;
    if (!machine.scenario) {
      all.push_back(std::move(m));
      continue;
    }
    m.points = results_of(machine);
    if (!writes) continue;
    sim::compare_with_one_gpu(*machine.scenario, m.points, sweep.options);
    if (!m.fastest()) m.why_not = "no point fits in memory";
    if (details) fmt::print(table, "{}\n", sim::render_table(*machine.scenario, m.points, layout));
    all.push_back(std::move(m));
  }
  if (sweep.load_failure) std::rethrow_exception(sweep.load_failure);
  if (!writes) return;
  fmt::print(table, "{}", render_comparison(sweep.base, all, layout));
  std::fflush(table);
  if (csv) csv->write(render_csv(all));
  if (json) json->write(render_json(sweep.base, all));
}

}  // namespace

Command add_compare_command(CLI::App& app) {
  auto args = std::make_shared<CompareArgs>();
  CLI::App* command = app.add_subcommand(
      "compare",
      "Predict the same model and sweep on several machines: the fastest point of each, time "
      "and cost per epoch, and a recommendation");
  declare_compare_options(*command, *args);
  return [args, command] {
    // Under mpirun: this process's share of the points, gathered on process 0, which alone
    // speaks (before anything can fail, so that an error is reported once).
    SweepProcesses processes("compare");
    const std::optional<options::Shard> shard =
        shard_to_compute(*command, args->shard, {"--csv", "--json", "--details", "--wide"});
    OutputFiles outputs;
    std::optional<OutputFile> csv, json, shard_output;
    if (!args->csv.empty()) csv = outputs.add(args->csv, "--csv");
    if (!args->json.empty()) json = outputs.add(args->json, "--json");
    if (shard) shard_output = outputs.add(args->shard.output, "--shard-output");
    std::FILE* table = outputs.to_standard_output() ? stderr : stdout;
    const sim::TableLayout layout{output_width(table), args->wide};
    CompareSweep sweep = load_sweep(*args);
    if (shard) {
      compute_shard(
          processes, *shard, *shard_output, identity_of(*args, sweep), args->simulation,
          [&](std::size_t i) { return simulate_point(sweep, i); }, table);
      if (sweep.load_failure) {
        try {
          std::rethrow_exception(sweep.load_failure);
        } catch (const std::exception& e) {
          fmt::print(stderr,
                     "A machine of --hardware fails to load after the {} before it; merge meets "
                     "it too, and reports it where the whole run would: {}\n",
                     sweep.machines.size(), e.what());
        }
      }
      return 0;
    }
    report_comparison(
        sweep,
        [&](const MachineSweep& m) {
          SweepProgress progress("compare: " + m.result.machine.name,
                                 processes.share(m.points.size()));
          return processes.simulate(
              m.points.size(), args->simulation.jobs_for(processes.share(m.points.size())),
              [&](std::size_t i) { return simulate_point(sweep, m.first + i); },
              [&](std::size_t, const sim::PointResult&) { progress.point_done(); });
        },
        processes.writes_output(), args->details, layout, table, csv, json);
    return 0;
  };
}

int merge_comparisons(const MergedSweep& merged, const MergeOptions& options) {
  CompareArgs args;
  CLI::App parser("compare", "compare");
  declare_compare_options(parser, args);
  parse_recorded_arguments(parser, merged);
  for (const auto& [given, name] : {std::pair{!options.plot.empty(), "--plot"},
                                    std::pair{options.explain_scaling, "--explain-scaling"}}) {
    if (given) {
      throw InputError(SourceMark{"<command line>", 0, 0}, name,
                       "is predict's, and these are shards of compare");
    }
  }
  OutputFiles outputs;
  std::optional<OutputFile> csv, json;
  if (!options.csv.empty()) csv = outputs.add(options.csv, "--csv");
  if (!options.json.empty()) json = outputs.add(options.json, "--json");
  std::FILE* table = outputs.to_standard_output() ? stderr : stdout;
  const sim::TableLayout layout{output_width(table), options.wide};
  CompareSweep sweep = reload_sweep(merged, [&] { return load_sweep(args); });
  check_same_inputs(merged, sweep.inputs, sweep.points);
  report_comparison(
      sweep,
      [&](const MachineSweep& m) {
        // The machine's results, or its first failure raised as the serial run raised it.
        std::vector<sim::PointResult> results;
        for (std::size_t i = 0; i < m.points.size(); ++i)
          results.push_back(sim::PointOutcome(merged.outcomes[m.first + i]).take());
        return results;
      },
      true, options.details, layout, table, csv, json);
  return 0;
}

}  // namespace epochcast::cli

// Measurement files and results tables as measured scenarios.
#include "validate/measurement_input.h"

#include <filesystem>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/measure/results_csv.h"
#include "core/spec/data_paths.h"
#include "core/yaml/strict_yaml.h"

namespace epochcast::validate {

namespace {

// A row's scenario and overrides, as written: rows that agree on all four share a scenario.
using GroupKey = std::tuple<std::string, std::string, std::string, std::string>;

std::string text_of(const std::optional<ResultCell>& cell) {
  return cell ? cell->text : "";
}

// The overrides a row's precision, strategy and set cells stand for; errors in them point at
// the cell.
std::vector<yaml::Override> row_overrides(const ResultRow& row) {
  std::vector<yaml::Override> overrides;
  auto origin = [](const ResultCell& cell, std::string_view column) {
    return fmt::format("{} ({} '{}')", cell.mark.str(), column, cell.text);
  };
  if (row.precision) {
    overrides.push_back(
        {"training.precision", row.precision->text, origin(*row.precision, "precision")});
  }
  if (row.strategy) {
    overrides.push_back(
        {"training.strategy", row.strategy->text, origin(*row.strategy, "strategy")});
  }
  if (row.set) {
    std::string_view all = row.set->text;
    while (!all.empty()) {
      std::size_t end = all.find(';');
      std::string_view one = all.substr(0, end);
      while (!one.empty() && one.front() == ' ')
        one.remove_prefix(1);
      if (!one.empty()) {
        yaml::Override o;
        try {
          o = yaml::parse_override(one);
        } catch (const InputError& error) {
          throw InputError(
              row.set->mark, "set",
              fmt::format("'{}': {} (expected key=value;key=value)", one, error.problem()));
        }
        o.origin = origin(*row.set, "set");
        overrides.push_back(std::move(o));
      }
      if (end == std::string_view::npos) break;
      all.remove_prefix(end + 1);
    }
  }
  return overrides;
}

MeasuredPoint point_of(const ResultRow& row) {
  MeasuredPoint p;
  p.gpus = row.gpus;
  p.global_batch = row.global_batch ? *row.global_batch : *row.per_gpu_batch * row.gpus;
  p.per_gpu_batch = row.per_gpu_batch ? *row.per_gpu_batch : p.global_batch / row.gpus;
  p.status = PointStatus::ok;
  p.ranks = row.gpus;
  if (row.epoch_s) p.epoch_s_measured = *row.epoch_s;
  if (row.iteration_s) {
    // One figure, no spread: count 0 says no repeated measurement stands behind it.
    p.iteration_s.median = p.iteration_s.p10 = p.iteration_s.p90 = p.iteration_s.mean =
        p.iteration_s.min = p.iteration_s.max = *row.iteration_s;
  }
  if (row.samples_per_s) p.samples_per_s = *row.samples_per_s;
  return p;
}

std::vector<MeasuredScenario> load_results_table(const std::string& file,
                                                 const std::string& scenario_override,
                                                 const std::vector<yaml::Override>& extra) {
  ResultsTable table = read_results_csv(file);
  if (scenario_override.empty() && !table.has_scenario_column) {
    throw InputError(SourceMark{file, 0, 0}, "scenario",
                     "the table names no scenario: add a column 'scenario' (a path relative to "
                     "the table, or a bundled name) or pass the scenario on the command line");
  }
  const std::filesystem::path folder = std::filesystem::path(file).parent_path();
  // Rows by scenario and overrides, in the order of their first row.
  std::map<GroupKey, std::size_t> index;
  std::vector<std::string> scenario_files;
  std::vector<std::vector<const ResultRow*>> groups;
  for (const ResultRow& row : table.rows) {
    std::string scenario_file = scenario_override;
    if (scenario_file.empty()) {
      if (!row.scenario) throw InputError(row.mark, "scenario", "this row names no scenario");
      scenario_file =
          resolve_data_file(row.scenario->text, folder, "scenarios", row.scenario->mark, "scenario")
              .string();
    }
    GroupKey key{scenario_file, text_of(row.precision), text_of(row.strategy), text_of(row.set)};
    auto [at, added] = index.try_emplace(key, groups.size());
    if (added) {
      scenario_files.push_back(scenario_file);
      groups.emplace_back();
    }
    groups[at->second].push_back(&row);
  }

  std::vector<MeasuredScenario> out;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const std::vector<const ResultRow*>& rows = groups[g];
    // The rows are the points: the scenario's own sweep gives way to their GPU counts.
    std::set<int> gpus;
    for (const ResultRow* row : rows)
      gpus.insert(row->gpus);
    std::vector<yaml::Override> overrides = row_overrides(*rows.front());
    overrides.push_back({"sweep.gpus", fmt::format("[{}]", fmt::join(gpus, ", ")),
                         fmt::format("{} (the GPU counts of its rows)", file)});
    overrides.insert(overrides.end(), extra.begin(), extra.end());
    MeasuredScenario m;
    m.file = file;
    m.scenario = load_scenario(scenario_files[g], overrides);
    m.measurements.scenario_name = m.scenario.name;
    m.measurements.scenario_file = scenario_files[g];
    for (const ResultRow* row : rows) {
      MeasuredPoint point = point_of(*row);
      std::string problem = point_problem(
          m.scenario, SweepPoint{point.gpus, point.global_batch, point.per_gpu_batch});
      if (!problem.empty()) {
        throw InputError(row->mark, "gpus",
                         fmt::format("the point {} GPU{}, global batch {} cannot run in scenario "
                                     "'{}': {}",
                                     point.gpus, point.gpus == 1 ? "" : "s", point.global_batch,
                                     m.scenario.name, problem));
      }
      for (std::size_t i = 0; i < m.measurements.points.size(); ++i) {
        const MeasuredPoint& e = m.measurements.points[i];
        if (e.gpus == point.gpus && e.global_batch == point.global_batch) {
          throw InputError(row->mark, "gpus",
                           fmt::format("the point {} GPU{}, global batch {} is already given on "
                                       "line {}; keep one row per point",
                                       point.gpus, point.gpus == 1 ? "" : "s", point.global_batch,
                                       rows[i]->mark.line));
        }
      }
      m.measurements.points.push_back(point);
    }
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace

std::vector<MeasuredScenario> load_measurement_input(const std::string& file,
                                                     const std::string& scenario_override,
                                                     const std::vector<yaml::Override>& extra) {
  if (is_results_table(file)) return load_results_table(file, scenario_override, extra);
  return {load_measured_scenario(file, scenario_override)};
}

}  // namespace epochcast::validate

// Measurement files and results tables as measured scenarios.
#include "validate/measurement_input.h"

#include <algorithm>
#include <cctype>
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

// The letters-and-digits words of a device name, upper-cased ("A100-SXM4-40GB": A100, SXM4,
// 40GB).
std::vector<std::string> upper_words(const std::string& name) {
  std::vector<std::string> out;
  std::string word;
  for (char c : name + " ") {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      word += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    } else if (!word.empty()) {
      out.push_back(std::move(word));
      word.clear();
    }
  }
  return out;
}

// A catalogue name's model: its first word with a digit that is not a memory size ("H100" of
// "NVIDIA H100 SXM5 80GB"), else its first word past the brand ("TITAN" of "NVIDIA TITAN RTX").
std::string model_word(const std::string& catalogue_name) {
  const std::vector<std::string> words = upper_words(catalogue_name);
  for (const std::string& w : words) {
    const bool digit = std::any_of(w.begin(), w.end(), [](char c) { return std::isdigit(c) != 0; });
    const bool size = w.size() > 2 && w.ends_with("GB");
    if (digit && !size) return w;
  }
  for (const std::string& w : words)
    if (w != "NVIDIA" && w != "GEFORCE" && w != "TESLA") return w;
  return "";
}

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
  // The largest share when the batch does not divide evenly (as the sweep counts it).
  p.per_gpu_batch =
      row.per_gpu_batch ? *row.per_gpu_batch : (p.global_batch + row.gpus - 1) / row.gpus;
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

void check_measured_points(const MeasuredScenario& measured) {
  for (std::size_t i = 0; i < measured.measurements.points.size(); ++i) {
    const MeasuredPoint& p = measured.measurements.points[i];
    if (p.status != PointStatus::ok) continue;
    std::string problem =
        point_problem(measured.scenario, SweepPoint{p.gpus, p.global_batch, p.per_gpu_batch});
    if (!problem.empty()) {
      throw InputError(SourceMark{measured.file, 0, 0}, fmt::format("points[{}]", i),
                       fmt::format("the point {} GPU{}, global batch {} cannot run in scenario "
                                   "'{}': {}",
                                   p.gpus, p.gpus == 1 ? "" : "s", p.global_batch,
                                   measured.scenario.name, problem));
    }
  }
}

MeasuredScenario load_measured_scenario(const std::string& measurement_file,
                                        const std::string& scenario_override,
                                        const std::vector<yaml::Override>& extra) {
  MeasuredScenario m;
  m.file = measurement_file;
  m.measurements = load_measurements(measurement_file);
  std::string scenario_file = scenario_override;
  if (scenario_file.empty()) {
    const std::string& recorded = m.measurements.scenario_file;
    if (recorded.empty()) {
      throw InputError(SourceMark{measurement_file, 0, 0}, "scenario_file",
                       "the file records no scenario (benchmarks alone?); pass the scenario");
    }
    // Recorded as given to `run`, relative to where it ran: found from here when this is the
    // same folder, else beside the measurement file, else among the bundled scenarios.
    std::error_code ignored;
    scenario_file =
        std::filesystem::is_regular_file(recorded, ignored)
            ? recorded
            : resolve_data_file(recorded, std::filesystem::path(measurement_file).parent_path(),
                                "scenarios", SourceMark{measurement_file, 0, 0}, "scenario_file")
                  .string();
  }
  std::vector<yaml::Override> overrides;
  for (const std::string& argument : m.measurements.arguments) {
    std::size_t space = argument.find(' ');
    std::string option = argument.substr(0, space);
    std::string value = space == std::string::npos ? "" : argument.substr(space + 1);
    if (option == "--set") {
      overrides.push_back(yaml::parse_override(value));
    } else if (option == "--gpus" || option == "--batch") {
      overrides.push_back(
          {option == "--gpus" ? "sweep.gpus" : "sweep.batch", "[" + value + "]", argument});
    } else if (option == "--catalogue") {
      // The GPUs the run's machine may name, where the file is still found (from here, or
      // beside the measurement file); else the command's own --catalogue must give them, and
      // loading the machine says so.
      std::error_code ignored;
      const std::filesystem::path beside =
          std::filesystem::path(measurement_file).parent_path() / value;
      if (std::filesystem::is_regular_file(value, ignored)) {
        extend_gpu_catalogue(value);
      } else if (std::filesystem::is_regular_file(beside, ignored)) {
        extend_gpu_catalogue(beside);
      }
    }
  }
  overrides.insert(overrides.end(), extra.begin(), extra.end());
  m.scenario = load_scenario(scenario_file, overrides);
  // epochcast-run's step is a C++ loop on LibTorch, whatever the scenario says users run.
  m.scenario.training.loop = TrainingLoop::libtorch;
  check_measured_points(m);
  return m;
}

std::string measured_device_note(const ScenarioSpec& scenario,
                                 const MeasuredEnvironment& environment) {
  const GpuSpec& gpu = scenario.machine.gpu;
  if (environment.device_kind.empty() || environment.device_name.empty()) return "";
  const bool scenario_is_cpu = is_cpu_architecture(gpu.architecture);
  const bool measured_on_cpu = environment.device_kind == "cpu";
  std::string mismatch;
  if (scenario_is_cpu != measured_on_cpu) {
    mismatch = measured_on_cpu ? "the CPU" : "a GPU";
  } else if (!scenario_is_cpu) {
    const std::string model = model_word(gpu.name);
    std::vector<std::string> measured = upper_words(environment.device_name);
    if (!model.empty() && std::find(measured.begin(), measured.end(), model) == measured.end())
      mismatch = "another device";
  }
  if (mismatch.empty() && scenario_is_cpu && environment.cpu_threads > 0 &&
      environment.cpu_threads != gpu.sm_count) {
    // A CPU device is its cores (a core an SM): steps on more or fewer threads measure another.
    return fmt::format(
        "measured on {} thread{} of {}, but the scenario's device, {}, has {} core{}: the "
        "comparison is across devices",
        environment.cpu_threads, environment.cpu_threads == 1 ? "" : "s", environment.device_name,
        gpu.name, gpu.sm_count, gpu.sm_count == 1 ? "" : "s");
  }
  if (mismatch.empty()) return "";
  return fmt::format(
      "measured on {} ({}), but the scenario's machine has {}: the comparison is "
      "across devices",
      environment.device_name, mismatch, gpu.name);
}

std::vector<MeasuredScenario> load_measurement_input(const std::string& file,
                                                     const std::string& scenario_override,
                                                     const std::vector<yaml::Override>& extra) {
  if (is_results_table(file)) return load_results_table(file, scenario_override, extra);
  return {load_measured_scenario(file, scenario_override)};
}

std::vector<MeasuredScenario> load_measurement_inputs(const std::vector<std::string>& files,
                                                      const std::string& scenario_override) {
  // Files that record no scenario (`epochcast bench` alone) wait for the others; the result
  // keeps the command line's order (the end-to-end fit sums the points in it).
  std::vector<std::vector<MeasuredScenario>> loaded(files.size());
  std::vector<std::size_t> unnamed;
  std::set<std::string> ran;  // the scenario files the others ran, as found
  for (std::size_t i = 0; i < files.size(); ++i) {
    if (scenario_override.empty() && !is_results_table(files[i]) &&
        load_measurements(files[i]).scenario_file.empty()) {
      unnamed.push_back(i);
      continue;
    }
    loaded[i] = load_measurement_input(files[i], scenario_override);
    for (const MeasuredScenario& m : loaded[i])
      ran.insert(m.scenario.source_file);
  }
  if (!unnamed.empty() && ran.size() != 1) {
    throw InputError(
        SourceMark{files[unnamed.front()], 0, 0}, "scenario_file",
        ran.empty()
            ? std::string("the file records no scenario (benchmarks alone): give a measurement "
                          "file of the scenario with it, or --scenario")
            : fmt::format("the file records no scenario, and the other files ran {}: say which "
                          "with --scenario",
                          fmt::join(ran, ", ")));
  }
  for (std::size_t i : unnamed)
    loaded[i].push_back(load_measured_scenario(files[i], *ran.begin()));
  std::vector<MeasuredScenario> out;
  for (std::vector<MeasuredScenario>& of_file : loaded) {
    for (MeasuredScenario& m : of_file)
      out.push_back(std::move(m));
  }
  return out;
}

}  // namespace epochcast::validate

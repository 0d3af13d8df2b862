// --set / --gpus / --batch for every scenario-loading command.
#include "options/scenario_options.h"

#include <filesystem>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/spec/data_paths.h"
#include "core/spec/hardware_spec.h"

namespace epochcast::options {

namespace {

std::string yaml_list(const std::vector<std::string>& values) {
  return fmt::format("[{}]", fmt::join(values, ","));
}

}  // namespace

std::vector<yaml::Override> ScenarioOptions::overrides() const {
  std::vector<yaml::Override> result;
  for (const std::string& text : sets)
    result.push_back(yaml::parse_override(text));
  if (!gpus.empty()) {
    result.push_back(
        {"sweep.gpus", yaml_list(gpus), "--gpus " + fmt::format("{}", fmt::join(gpus, ","))});
  }
  if (!batches.empty()) {
    result.push_back({"sweep.batch", yaml_list(batches),
                      "--batch " + fmt::format("{}", fmt::join(batches, ","))});
  }
  return result;
}

std::vector<std::string> ScenarioOptions::as_arguments() const {
  std::vector<std::string> arguments;
  for (const std::string& file : catalogues)
    arguments.push_back("--catalogue " + file);
  for (const std::string& text : sets)
    arguments.push_back("--set " + text);
  if (!gpus.empty()) arguments.push_back(fmt::format("--gpus {}", fmt::join(gpus, ",")));
  if (!batches.empty()) arguments.push_back(fmt::format("--batch {}", fmt::join(batches, ",")));
  return arguments;
}

std::vector<std::string> ScenarioOptions::words() const {
  std::vector<std::string> out;
  for (const std::string& file : catalogues)
    out.insert(out.end(), {"--catalogue", file});
  for (const std::string& text : sets)
    out.insert(out.end(), {"--set", text});
  if (!gpus.empty()) out.insert(out.end(), {"--gpus", fmt::format("{}", fmt::join(gpus, ","))});
  if (!batches.empty())
    out.insert(out.end(), {"--batch", fmt::format("{}", fmt::join(batches, ","))});
  if (!profile.empty()) out.insert(out.end(), {"--profile", profile});
  return out;
}

void add_catalogue_option(CLI::App& command, std::vector<std::string>& catalogues) {
  command.add_option("--catalogue", catalogues,
                     "A GPU catalogue file (kind: gpu-catalogue) whose GPUs machine files may "
                     "name, beside the bundled topologies/gpus.yaml (repeatable)");
}

void extend_catalogue(const std::vector<std::string>& catalogues) {
  for (const std::string& file : catalogues) {
    extend_gpu_catalogue(resolve_data_file(file, ".", "topologies",
                                           SourceMark{"<command line>", 0, 0}, "--catalogue"));
  }
}

std::string resolve_scenario_argument(const std::string& given, const std::string& key) {
  return resolve_data_file(given, ".", "scenarios", SourceMark{"<command line>", 0, 0}, key)
      .string();
}

ScenarioSpec ScenarioOptions::load(const std::string& file) const {
  extend_catalogue(catalogues);
  ScenarioSpec scenario = load_scenario(resolve_scenario_argument(file), overrides());
  apply_profile_option(scenario);
  return scenario;
}

void ScenarioOptions::apply_profile_option(ScenarioSpec& scenario) const {
  if (profile.empty()) return;
  apply_profile(scenario,
                load_profile(resolve_data_file(profile, ".", "topologies/profiles",
                                               SourceMark{"<command line>", 0, 0}, "--profile")));
}

void add_scenario_options(CLI::App& command, ScenarioOptions& options, bool with_profile) {
  if (with_profile) {
    command.add_option("--profile", options.profile,
                       "Hardware profile to use instead of the machine's (e.g. one written by "
                       "epochcast calibrate)");
  }
  add_catalogue_option(command, options.catalogues);
  command.add_option("--set", options.sets,
                     "Override a scenario value before it is checked, e.g. "
                     "--set training.precision=amp_bf16 (repeatable)");
  command
      .add_option("--gpus", options.gpus,
                  "GPU counts to sweep instead of the scenario's, e.g. 1,2,4")
      ->delimiter(',');
  command.add_option("--batch", options.batches, "Batch sizes to sweep instead of the scenario's")
      ->delimiter(',');
}

}  // namespace epochcast::options

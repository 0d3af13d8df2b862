// Command-line options shared by every command that loads a scenario (predict, run, validate):
// --set PATH=VALUE, --gpus LIST, --batch LIST, turned into overrides applied before checking.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "core/spec/scenario_spec.h"
#include "core/yaml/override.h"

namespace epochcast::options {

// A scenario named on the command line: a file (from the working directory), else a bundled one
// by its path in the data folder (scenarios/seed-001/linear.yaml) or its name (seed-001/linear),
// so that an installed epochcast runs README's examples from any folder. Throws InputError
// naming `key` when nothing matches.
std::string resolve_scenario_argument(const std::string& given,
                                      const std::string& key = "scenario");

struct ScenarioOptions {
  std::vector<std::string> sets;
  std::vector<std::string> gpus;
  std::vector<std::string> batches;
  std::string profile;                  // --profile: a hardware profile replacing the machine's
  std::vector<std::string> catalogues;  // --catalogue: GPU catalogue files added to the bundled

  // Loads the scenario (resolve_scenario_argument) with the overrides, then applies --profile.
  ScenarioSpec load(const std::string& file) const;
  // Applies --profile, when given, to a scenario loaded otherwise.
  void apply_profile_option(ScenarioSpec& scenario) const;

  // The overrides in the order given, each naming the option it came from.
  std::vector<yaml::Override> overrides() const;
  // The options as the user wrote them (for recording in output files).
  std::vector<std::string> as_arguments() const;
  // The options as separate words that parse back to the same options (--profile included): a
  // command recorded to be loaded again (a shard file's sweep, for epochcast merge).
  std::vector<std::string> words() const;
};

// `with_profile`: also offer --profile (commands that predict).
void add_scenario_options(CLI::App& command, ScenarioOptions& options, bool with_profile = true);

// --catalogue FILE (repeatable), for commands that load a machine without a scenario.
void add_catalogue_option(CLI::App& command, std::vector<std::string>& catalogues);
// Adds each file's GPUs to the catalogue machines are read against (each file once).
void extend_catalogue(const std::vector<std::string>& catalogues);

}  // namespace epochcast::options

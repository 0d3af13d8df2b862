// The `epochcast` subcommands. Each registers its options on the app and returns the function
// that runs it; main() parses, runs, and turns errors into exit codes.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "core/yaml/strict_yaml.h"

namespace epochcast::cli {

// Runs the chosen subcommand; returns the process exit code.
using Command = std::function<int()>;

Command add_inspect_command(CLI::App& app);
Command add_predict_command(CLI::App& app);
Command add_topo_command(CLI::App& app);

// --set / --gpus / --batch, shared by the commands that load scenarios.
void add_override_options(CLI::App& command, std::vector<std::string>& sets,
                          std::vector<std::string>& gpus, std::vector<std::string>& batches);
std::vector<yaml::Override> overrides_from(const std::vector<std::string>& sets,
                                           const std::vector<std::string>& gpus,
                                           const std::vector<std::string>& batches);

}  // namespace epochcast::cli

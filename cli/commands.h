// The `epochcast` subcommands. Each registers its options on the app and returns the function
// that runs it; main() parses, runs, and turns errors into exit codes.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace epochcast::cli {

// Runs the chosen subcommand; returns the process exit code.
using Command = std::function<int()>;

Command add_inspect_command(CLI::App& app);
Command add_predict_command(CLI::App& app);
Command add_topo_command(CLI::App& app);
Command add_calibrate_command(CLI::App& app);
Command add_validate_command(CLI::App& app);
Command add_compare_command(CLI::App& app);
Command add_collective_command(CLI::App& app);
Command add_kernels_command(CLI::App& app);
Command add_import_command(CLI::App& app);
Command add_merge_command(CLI::App& app);

// `run` and `bench` execute on devices, in the epochcast-run binary: when argv asks for one of
// them, this hands the process over (and returns only if that fails, with the exit code).
std::optional<int> run_on_devices_if_asked(int argc, char** argv);
// Lists `run` and `bench` in `epochcast --help`.
void describe_runtime_commands(CLI::App& app);

}  // namespace epochcast::cli

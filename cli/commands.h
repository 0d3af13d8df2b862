// The `epochcast` subcommands. Each registers its options on the app and returns the function
// that runs it; main() parses, runs, and turns errors into exit codes.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace epochcast::cli {

// Runs the chosen subcommand; returns the process exit code.
using Command = std::function<int()>;

Command add_inspect_command(CLI::App& app);

}  // namespace epochcast::cli

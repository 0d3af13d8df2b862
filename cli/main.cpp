// epochcast: predicts how long data-parallel training takes, and measures it.
//
// Exit codes: 0 success; 1 internal failure; 2 bad input (files, values, command line).
#include <iostream>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "core/input_error.h"
#include "core/io/output_file.h"
#include "options/command_line.h"

int main(int argc, char** argv) {
  if (auto handed_over = epochcast::cli::run_on_devices_if_asked(argc, argv)) return *handed_over;

  CLI::App app{
      "epochcast predicts epoch time, throughput, memory and bottlenecks of data-parallel "
      "training against batch size and GPU count, and measures them on real devices."};
  app.set_version_flag("--version", EPOCHCAST_VERSION);
  app.require_subcommand(1);
  std::vector<std::pair<CLI::App*, epochcast::cli::Command>> commands;
  auto remember = [&](epochcast::cli::Command command) {
    commands.emplace_back(app.get_subcommands({}).back(), std::move(command));
  };
  remember(epochcast::cli::add_inspect_command(app));
  remember(epochcast::cli::add_predict_command(app));
  remember(epochcast::cli::add_compare_command(app));
  remember(epochcast::cli::add_topo_command(app));
  remember(epochcast::cli::add_collective_command(app));
  remember(epochcast::cli::add_calibrate_command(app));
  remember(epochcast::cli::add_validate_command(app));
  epochcast::cli::describe_runtime_commands(app);

  epochcast::options::show_defaults_in_help(app);
  if (auto code = epochcast::options::parse_command_line(app, argc, argv)) return *code;
  // Ctrl-C or a kill while a file is being written leaves no temporary behind.
  epochcast::remove_partial_outputs_on_signals();
  try {
    for (auto& [subcommand, run] : commands) {
      if (subcommand->parsed()) return run();
    }
    return 2;
  } catch (const epochcast::InputError& error) {
    std::cerr << error.what() << "\n";
    return 2;
  } catch (const std::exception& error) {
    std::cerr << "epochcast: internal error: " << error.what() << "\n";
    return 1;
  }
}

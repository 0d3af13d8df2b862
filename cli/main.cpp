// epochcast: predicts how long data-parallel training takes, and measures it.
//
// Exit codes: 0 success; 1 internal failure; 2 bad input (files, values, command line); 141 a
// reader closed a pipe we were writing to (an output, or standard output piped to `head`).
#include <csignal>
#include <cstdio>
#include <iostream>
#include <system_error>

#include <CLI/CLI.hpp>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/commands.h"
#include "core/input_error.h"
#include "core/io/output_file.h"
#include "core/system_failure.h"
#include "options/command_line.h"
#include "options/completion.h"

namespace {

// Whether `fd` is a pipe whose reading end is closed.
bool reader_gone(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISFIFO(st.st_mode)) return false;
  pollfd query{fd, POLLOUT, 0};
  return ::poll(&query, 1, 0) == 1 && (query.revents & POLLERR) != 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (auto handed_over = epochcast::cli::run_on_devices_if_asked(argc, argv)) return *handed_over;

  // Named, so that usage lines say `epochcast` however the binary was reached (a path, a link).
  CLI::App app{
      "epochcast predicts epoch time, throughput, memory and bottlenecks of data-parallel "
      "training against batch size and GPU count, and measures them on real devices.",
      "epochcast"};
  epochcast::options::add_version_flag(app, "epochcast");
  app.require_subcommand(1);
  std::vector<std::pair<CLI::App*, epochcast::cli::Command>> commands;
  auto remember = [&](epochcast::cli::Command command) {
    commands.emplace_back(app.get_subcommands({}).back(), std::move(command));
  };
  remember(epochcast::cli::add_inspect_command(app));
  remember(epochcast::cli::add_predict_command(app));
  remember(epochcast::cli::add_compare_command(app));
  remember(epochcast::cli::add_merge_command(app));
  remember(epochcast::cli::add_topo_command(app));
  remember(epochcast::cli::add_collective_command(app));
  remember(epochcast::cli::add_calibrate_command(app));
  remember(epochcast::cli::add_validate_command(app));
  remember(epochcast::cli::add_kernels_command(app));
  remember(epochcast::cli::add_import_command(app));
  epochcast::cli::describe_runtime_commands(app);

  epochcast::options::show_defaults_in_help(app);
  if (argc > 1 && argv[1] == epochcast::options::kCompleteCommand) {
    return epochcast::options::print_completions(app, argc, argv);
  }
  if (auto code = epochcast::options::parse_command_line(app, argc, argv)) return *code;
  // Ctrl-C or a kill while a file is being written leaves no temporary behind.
  epochcast::remove_partial_outputs_on_signals();
  // A reader that closes its pipe early makes writes fail with EPIPE instead of killing the
  // process unannounced: the command says which output it was and exits with 141.
  std::signal(SIGPIPE, SIG_IGN);
  auto broken_pipe = [](const std::string& what) {
    std::cerr << "epochcast: " << what << "\n";
    return epochcast::kBrokenPipeExit;
  };
  try {
    for (auto& [subcommand, run] : commands) {
      if (!subcommand->parsed()) continue;
      const int code = run();
      // The table on standard output: printed with stdio, whose failures only set its error
      // flag. A pipe whose reader has gone reports POLLERR; anything else is another failure.
      std::fflush(stdout);
      if (std::ferror(stdout) != 0) {
        if (reader_gone(STDOUT_FILENO)) {
          return broken_pipe(
              "the reader of standard output closed it before everything was written (a broken "
              "pipe)");
        }
        std::cerr << "epochcast: cannot write to standard output\n";
        return 1;
      }
      return code;
    }
    return 2;
  } catch (const epochcast::InputError& error) {
    std::cerr << error.what() << "\n";
    return 2;
  } catch (const epochcast::BrokenPipe& error) {
    return broken_pipe(error.what());
  } catch (const epochcast::SystemFailure& error) {
    std::cerr << "epochcast: " << error.what() << "\n";
    return 1;
  } catch (const std::system_error& error) {
    // fmt's print to a closed pipe.
    if (error.code() == std::errc::broken_pipe) {
      return broken_pipe(
          "the reader of standard output closed it before everything was written (a broken "
          "pipe)");
    }
    std::cerr << "epochcast: internal error: " << error.what() << "\n";
    return 1;
  } catch (const std::exception& error) {
    std::cerr << "epochcast: internal error: " << error.what() << "\n";
    return 1;
  }
}

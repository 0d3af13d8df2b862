// `epochcast run` and `epochcast bench` are served by epochcast-run, the LibTorch binary built
// beside `epochcast`: keeping LibTorch out of this binary keeps predictions light and lets the
// simulator build where LibTorch is absent. The handover replaces this process (execv), so
// mpirun's environment and the exit code pass through untouched.
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include <unistd.h>

#include "cli/commands.h"
#include "options/completion.h"

namespace epochcast::cli {

namespace {

std::filesystem::path runtime_binary(const char* argv0) {
  std::error_code error;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) self = std::filesystem::absolute(argv0);
  return self.parent_path() / "epochcast-run";
}

int hand_over(int argc, char** argv) {
  std::filesystem::path binary = runtime_binary(argv[0]);
  if (!std::filesystem::exists(binary)) {
    std::cerr << "epochcast " << argv[1]
              << ": this build has no runtime: LibTorch was not found when epochcast was built ("
              << binary.string()
              << " is missing). Install libtorch-dev (Debian) or point CMAKE_PREFIX_PATH at "
                 "PyTorch's LibTorch, and rebuild.\n";
    return 2;
  }
  std::vector<char*> arguments;
  std::string program = binary.string();
  arguments.push_back(program.data());
  for (int i = 1; i < argc; ++i)
    arguments.push_back(argv[i]);
  arguments.push_back(nullptr);
  execv(program.c_str(), arguments.data());
  std::cerr << "epochcast " << argv[1] << ": cannot start " << program << ": "
            << std::strerror(errno) << "\n";
  return 1;
}

bool is_runtime_command(const std::string& word) {
  return word == "run" || word == "bench";
}

}  // namespace

std::optional<int> run_on_devices_if_asked(int argc, char** argv) {
  if (argc < 2) return std::nullopt;
  std::string command = argv[1];
  // Completing a word after `run` or `bench` (`__complete run --it`): their options are
  // epochcast-run's. Without it there is nothing to offer, and nothing to say on a Tab.
  if (command == options::kCompleteCommand && argc > 3 && is_runtime_command(argv[2])) {
    if (!std::filesystem::exists(runtime_binary(argv[0]))) return 0;
    return hand_over(argc, argv);
  }
  if (!is_runtime_command(command)) return std::nullopt;
  return hand_over(argc, argv);
}

void describe_runtime_commands(CLI::App& app) {
  app.add_subcommand("run",
                     "Execute a scenario's sweep for real (LibTorch on GPUs or the CPU) and write "
                     "measurements; see `epochcast run --help`");
  app.add_subcommand("bench",
                     "Microbenchmarks for calibration: collectives, copies, launch and dispatch "
                     "cost, GEMM and convolution throughput; see `epochcast bench --help`");
}

}  // namespace epochcast::cli

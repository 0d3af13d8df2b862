// Runs a shell command for end-to-end CLI tests, capturing its output and exit code.
#pragma once

#include <array>
#include <cstdio>
#include <string>

#include <sys/wait.h>

#include "support/paths.h"  // epochcast_binary()

namespace epochcast::test {

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

inline CommandResult run_command(const std::string& command) {
  CommandResult result;
  std::string with_stderr = command + " 2>&1";
  FILE* pipe = popen(with_stderr.c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> buffer{};
  std::size_t n = 0;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0)
    result.output.append(buffer.data(), n);
  int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

}  // namespace epochcast::test

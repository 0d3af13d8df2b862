// Starting another program without a shell: the arguments reach it as they are, so nothing in
// them (a name from an input file, a path) is ever read as shell syntax.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace epochcast {

struct ChildOptions {
  std::string directory;        // the child's working directory (empty: ours)
  bool discard_errors = false;  // its standard error to /dev/null (else it shares ours)
};

struct ChildResult {
  bool started = false;          // false: the program was not found or could not start
  std::optional<int> exit_code;  // its exit status, when it exited (not killed by a signal)
  std::string output;            // everything it wrote to its standard output

  bool succeeded() const { return exit_code == 0; }
};

// Runs `argv[0]` (looked up on PATH like execvp) with `argv`, waits for it and returns what it
// wrote to its standard output. Its standard input is /dev/null. Never throws for the child's
// failure; `argv` must not be empty.
ChildResult run_program(const std::vector<std::string>& argv, const ChildOptions& options = {});

}  // namespace epochcast

// Shell completion for both binaries: `epochcast __complete WORD...` prints, one a line, what
// the last WORD (the one being typed, possibly empty) may become: a command, an option of the
// command typed so far, or a value (a bundled scenario, model, machine or profile name where an
// argument takes one). cli/completion.bash asks it on every Tab.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

namespace epochcast::options {

// The hidden command's name: argv[1] of a completion request.
inline constexpr std::string_view kCompleteCommand = "__complete";

// The candidates for `words.back()` after `words` (the words after the program's name), sorted.
std::vector<std::string> complete(const CLI::App& app, const std::vector<std::string>& words);

// Answers a completion request (argv[1] == kCompleteCommand): prints the candidates and returns
// the exit code (0).
int print_completions(const CLI::App& app, int argc, char** argv);

}  // namespace epochcast::options

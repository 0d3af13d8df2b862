// What every epochcast binary does with its command line: parse it with CLI11, show defaults in
// --help, suggest the closest command or option for a misspelt one, and check numbers against
// ranges that read as numbers ("from 1 to 1,000", not CLI11's 300-digit double limits).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

namespace epochcast::options {

// --version: "<program> 0.1.0 (git <revision>)", then the folders bundled data is read from.
void add_version_flag(CLI::App& app, const std::string& program);

// Call once every option is declared: each option's help then shows its default.
void show_defaults_in_help(CLI::App& app);

// Parses the command line. Returns nullopt when the chosen command should run, else the exit
// code: 0 after --help or --version, 2 after an error, which is printed on standard error with
// "did you mean" for a misspelt command or option.
std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv);

// Checks that an option's value is a number in [minimum, maximum].
CLI::Validator number_within(double minimum, double maximum);
// Checks that an option's value is an integer in [minimum, maximum].
CLI::Validator integer_within(std::int64_t minimum, std::int64_t maximum);

}  // namespace epochcast::options

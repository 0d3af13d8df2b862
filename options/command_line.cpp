// Command-line parsing shared by epochcast and epochcast-run.
#include "options/command_line.h"

#include <charconv>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "core/build_info.h"
#include "core/input_error.h"
#include "core/spec/data_paths.h"
#include "core/yaml/strict_yaml.h"

namespace epochcast::options {

namespace {

bool is_number(std::string_view text) {
  double value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  return error == std::errc() && end == text.data() + text.size();
}

std::string number_text(double value) {
  if (value == static_cast<double>(static_cast<std::int64_t>(value)) && std::abs(value) < 1e15) {
    return yaml::readable_integer(static_cast<std::int64_t>(value));
  }
  return fmt::format("{:g}", value);
}

// The options `command` accepts, as written on a command line ("--json", "-o").
std::vector<std::string> option_names(const CLI::App& command) {
  std::vector<std::string> names;
  for (const CLI::Option* option : command.get_options()) {
    for (const std::string& name : option->get_lnames())
      names.push_back("--" + name);
    for (const std::string& name : option->get_snames())
      names.push_back("-" + name);
  }
  return names;
}

std::vector<std::string> subcommand_names(const CLI::App& command) {
  std::vector<std::string> names;
  for (const CLI::App* sub : command.get_subcommands({}))
    names.push_back(sub->get_name());
  return names;
}

std::string suggestion(std::string_view word, const std::vector<std::string>& candidates) {
  std::vector<std::string_view> views(candidates.begin(), candidates.end());
  return did_you_mean(word, views);
}

// A message for the first misspelt command or unknown option in argv, or "" when there is none
// (the error is then CLI11's own).
std::string misspelling(CLI::App& app, int argc, char** argv) {
  CLI::App* command = &app;
  // The name users type: epochcast-run is reached as `epochcast run`.
  std::string path = "epochcast";
  bool positional_seen = false;
  for (int i = 1; i < argc; ++i) {
    std::string_view token = argv[i];
    if (token == "--") break;
    if (token.size() > 1 && token[0] == '-' && !is_number(token)) {
      std::string_view name = token.substr(0, token.find('='));
      std::vector<std::string> known = option_names(*command);
      if (command != &app) {
        for (std::string& global : option_names(app))
          known.push_back(std::move(global));
      }
      if (std::find(known.begin(), known.end(), name) == known.end()) {
        return fmt::format("{}: unknown option '{}'{}; see '{} --help'", path, name,
                           suggestion(name, known), path);
      }
      continue;
    }
    std::vector<std::string> subcommands = subcommand_names(*command);
    if (std::find(subcommands.begin(), subcommands.end(), token) != subcommands.end()) {
      command = command->get_subcommand(std::string(token));
      path += " " + std::string(token);
      positional_seen = false;
      continue;
    }
    // A word where a command is expected: the first word after a program that needs one.
    if (!subcommands.empty() && !positional_seen && command->get_require_subcommand_min() > 0) {
      return fmt::format("{}: '{}' is not a command{}; the commands are {}; see '{} --help'", path,
                         token, suggestion(token, subcommands), fmt::join(subcommands, ", "), path);
    }
    positional_seen = true;
  }
  return "";
}

}  // namespace

void add_version_flag(CLI::App& app, const std::string& program) {
  app.set_version_flag("--version", [program] {
    std::string text = version_line(program) + "\n" + describe_data_directories();
    text.pop_back();  // CLI11 ends the message with its own newline
    return text;
  });
}

void show_defaults_in_help(CLI::App& app) {
  for (CLI::Option* option : app.get_options()) {
    // Flags have no value to show, an empty list or text is no default worth printing, and a
    // description may already say what its default means ("default: the data set's size").
    if (option->get_type_size() == 0 || option->get_required() ||
        option->get_description().find("default") != std::string::npos) {
      continue;
    }
    std::string shown = option->get_default_str();
    if (shown.empty()) {
      option->capture_default_str();
      shown = option->get_default_str();
    }
    // In the description, where it reads as a sentence, instead of CLI11's "TYPE=default".
    option->default_str("");
    if (shown.empty() || shown == "[]" || shown == "\"\"") continue;
    option->description(fmt::format("{} (default: {})", option->get_description(), shown));
  }
  for (CLI::App* sub : app.get_subcommands({}))
    show_defaults_in_help(*sub);
}

std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
    return std::nullopt;
  } catch (const CLI::CallForHelp& help) {
    return app.exit(help);
  } catch (const CLI::CallForAllHelp& help) {
    return app.exit(help);
  } catch (const CLI::CallForVersion& version) {
    return app.exit(version);
  } catch (const CLI::ParseError& error) {
    std::string better = misspelling(app, argc, argv);
    if (better.empty()) {
      app.exit(error);
    } else {
      std::cerr << better << "\n";
    }
    return 2;
  }
}

CLI::Validator number_within(double minimum, double maximum) {
  std::string range = fmt::format("{} to {}", number_text(minimum), number_text(maximum));
  return CLI::Validator(
      [minimum, maximum, range](std::string& text) -> std::string {
        double value = 0;
        auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (error != std::errc() || end != text.data() + text.size() || !(value >= minimum) ||
            !(value <= maximum)) {
          return fmt::format("expected a number from {}, got '{}'", range, text);
        }
        return "";
      },
      range);
}

CLI::Validator integer_within(std::int64_t minimum, std::int64_t maximum) {
  std::string range =
      fmt::format("{} to {}", yaml::readable_integer(minimum), yaml::readable_integer(maximum));
  return CLI::Validator(
      [minimum, maximum, range](std::string& text) -> std::string {
        std::int64_t value = 0;
        auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (error != std::errc() || end != text.data() + text.size() || value < minimum ||
            value > maximum) {
          return fmt::format("expected an integer from {}, got '{}'", range, text);
        }
        return "";
      },
      range);
}

}  // namespace epochcast::options

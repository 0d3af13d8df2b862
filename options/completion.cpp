// Completion candidates from the CLI11 definition of the commands and the bundled data.
#include "options/completion.h"

#include <algorithm>
#include <iostream>
#include <iterator>

#include "core/spec/data_paths.h"
#include "core/spec/hardware_spec.h"
#include "core/spec/scenario_spec.h"

namespace epochcast::options {

namespace {

std::vector<std::string> names_in(std::string_view subdir) {
  return bundled_names(subdir);
}

// The GPU catalogue's ids (topo --from-nvidia-smi --gpu, kernels --gpu); none where the bundled
// catalogue cannot be read, as a Tab must never fail.
std::vector<std::string> gpu_ids() {
  std::vector<std::string> ids;
  try {
    for (const GpuSpec& gpu : bundled_gpu_catalogue().gpus) {
      if (!is_cpu_architecture(gpu.architecture)) ids.push_back(gpu.id);
    }
  } catch (const InputError&) {
    ids.clear();
  }
  return ids;
}

std::vector<std::string> with_prefix(const std::string& prefix,
                                     const std::vector<std::string>& values) {
  std::vector<std::string> out;
  for (const std::string& v : values)
    out.push_back(prefix + v);
  return out;
}

// The values an argument takes, by the argument's name: a positional's ("scenario") or an
// option's long name without its dashes ("hardware"). Files are the shell's to complete.
std::vector<std::string> values_of(std::string_view argument) {
  if (argument == "scenario") return names_in("scenarios");
  if (argument == "model") return names_in("scenarios/models");
  if (argument == "machine" || argument == "hardware") return names_in("topologies");
  if (argument == "profile") return names_in("topologies/profiles");
  if (argument == "shard") return {"auto"};  // or K/N, typed by hand
  if (argument == "gpu") return gpu_ids();
  if (argument == "precision") {
    return {std::begin(kTrainingPrecisionNames), std::end(kTrainingPrecisionNames)};
  }
  if (argument == "set") {
    // The overrides that name bundled files; any other key=value is typed by hand.
    std::vector<std::string> out = with_prefix("hardware=", names_in("topologies"));
    for (std::string& model : with_prefix("model=", names_in("scenarios/models")))
      out.push_back(std::move(model));
    for (std::string_view precision : kTrainingPrecisionNames)
      out.push_back("training.precision=" + std::string(precision));
    return out;
  }
  return {};
}

// The long name ("hardware") of the option `token` ("--hardware", "-o") names in `command` or
// its parents, or nullptr when it names none.
const CLI::Option* option_named(const CLI::App* command, std::string_view token) {
  for (const CLI::App* at = command; at != nullptr; at = at->get_parent()) {
    for (const CLI::Option* option : at->get_options()) {
      if (option->get_positional()) continue;
      for (const std::string& name : option->get_lnames())
        if (token == "--" + name) return option;
      for (const std::string& name : option->get_snames())
        if (token == "-" + name) return option;
    }
  }
  return nullptr;
}

std::string argument_name(const CLI::Option* option) {
  if (!option->get_lnames().empty()) return option->get_lnames().front();
  return option->get_name();
}

}  // namespace

std::vector<std::string> complete(const CLI::App& app, const std::vector<std::string>& words) {
  const std::string current = words.empty() ? "" : words.back();
  const CLI::App* command = &app;
  const CLI::Option* awaiting = nullptr;  // an option whose value the next word is
  std::size_t positionals = 0;            // positional words of `command` so far
  for (std::size_t i = 0; i + 1 < words.size(); ++i) {
    const std::string& word = words[i];
    if (awaiting != nullptr) {
      awaiting = nullptr;
      continue;
    }
    if (word.size() > 1 && word[0] == '-') {
      const CLI::Option* option = option_named(command, word.substr(0, word.find('=')));
      if (option != nullptr && option->get_type_size() != 0 &&
          word.find('=') == std::string::npos) {
        awaiting = option;
      }
      continue;
    }
    bool entered = false;
    for (const CLI::App* sub : command->get_subcommands({})) {
      if (sub->get_name() == word) {
        command = sub;
        positionals = 0;
        entered = true;
        break;
      }
    }
    if (!entered) ++positionals;
  }

  std::vector<std::string> candidates;
  if (awaiting != nullptr) {
    candidates = values_of(argument_name(awaiting));
  } else if (!current.empty() && current[0] == '-') {
    for (const CLI::App* at = command; at != nullptr; at = at->get_parent()) {
      for (const CLI::Option* option : at->get_options()) {
        if (option->get_positional()) continue;
        for (const std::string& name : option->get_lnames())
          candidates.push_back("--" + name);
        for (const std::string& name : option->get_snames())
          candidates.push_back("-" + name);
      }
    }
  } else {
    for (const CLI::App* sub : command->get_subcommands({})) {
      if (!sub->get_group().empty()) candidates.push_back(sub->get_name());
    }
    // The positional this word is: the next in order, or the last when it takes several.
    std::vector<const CLI::Option*> declared =
        command->get_options([](const CLI::Option* option) { return option->get_positional(); });
    if (!declared.empty()) {
      const CLI::Option* positional = positionals < declared.size() ? declared[positionals]
                                      : declared.back()->get_items_expected_max() > 1
                                          ? declared.back()
                                          : nullptr;
      if (positional != nullptr) {
        for (std::string& value : values_of(positional->get_name()))
          candidates.push_back(std::move(value));
      }
    }
  }
  std::vector<std::string> matching;
  for (std::string& candidate : candidates) {
    if (candidate.compare(0, current.size(), current) == 0)
      matching.push_back(std::move(candidate));
  }
  std::sort(matching.begin(), matching.end());
  matching.erase(std::unique(matching.begin(), matching.end()), matching.end());
  return matching;
}

int print_completions(const CLI::App& app, int argc, char** argv) {
  std::vector<std::string> words(argv + 2, argv + argc);
  if (words.empty()) words.emplace_back();
  for (const std::string& candidate : complete(app, words))
    std::cout << candidate << "\n";
  return 0;
}

}  // namespace epochcast::options

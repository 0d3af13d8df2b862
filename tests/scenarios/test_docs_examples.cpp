// Every YAML example in the docs that is a whole file (it has a `kind:`) loads with the loader
// its kind names, so an example copied from the docs is never invalid. Examples without a kind
// are fragments of a larger file (a `topology:` block, a profile excerpt) and are parsed as YAML.
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>

#include <catch2/catch.hpp>
#include <unistd.h>

#include "core/model/model_spec.h"
#include "core/spec/hardware_spec.h"
#include "core/spec/profile_spec.h"
#include "core/spec/scenario_spec.h"
#include "core/yaml/strict_yaml.h"
#include "support/paths.h"

using namespace epochcast;

namespace {

struct Example {
  std::string file;
  int line = 0;  // of the opening fence
  std::string text;
  std::string saved_as;  // "save it as `x.yaml`" just before it (the guide's tutorial files)
};

std::vector<Example> yaml_examples(const std::string& relative) {
  std::ifstream in(test::source_dir() / relative);
  REQUIRE(in.good());
  std::vector<Example> out;
  std::string line;
  int number = 0;
  std::optional<Example> open;
  std::string before;  // the lines just before a fence
  const std::regex save("[Ss]ave (it|this) as `([^`]+)`");
  while (std::getline(in, line)) {
    ++number;
    if (!open && line == "```yaml") {
      open = Example{relative, number, "", ""};
      std::smatch name;
      if (std::regex_search(before, name, save)) open->saved_as = name[2];
    } else if (!open) {
      before = line.empty() ? before : line;  // the last line of text before the fence
    } else if (open && line == "```") {
      out.push_back(*open);
      open.reset();
      before.clear();
    } else if (open) {
      open->text += line + "\n";
    }
  }
  INFO(relative << ": a yaml example is never closed");
  CHECK_FALSE(open.has_value());
  return out;
}

// A folder removed however the test ends.
struct TemporaryFolder {
  std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("epochcast-docs-" + std::to_string(::getpid()));
  TemporaryFolder() { std::filesystem::create_directories(path); }
  ~TemporaryFolder() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
};

}  // namespace

TEST_CASE("every YAML example in the docs loads as the kind of file it shows") {
  // The tutorial's files are saved where its scenario finds them, as a reader would.
  TemporaryFolder temporary;
  const std::filesystem::path& folder = temporary.path;
  // Whole files (with a kind) per document, at least: an example lost to a broken fence shows.
  const std::pair<const char*, int> docs[] = {{"docs/formats.md", 6}, {"docs/guide.md", 3}};
  for (const auto& [doc, least] : docs) {
    int whole = 0;
    for (const Example& e : yaml_examples(doc)) {
      if (!e.saved_as.empty()) std::ofstream(folder / e.saved_as) << e.text;
      INFO(e.file << ":" << e.line << "\n" << e.text);
      std::smatch kind;
      const std::regex kind_line("(^|\\n)kind: *([a-z-]+)");
      if (!std::regex_search(e.text, kind, kind_line)) {
        CHECK_NOTHROW(yaml::Document::load_string(e.text, e.file));
        continue;
      }
      ++whole;
      const std::string name = e.file + ":" + std::to_string(e.line);
      const std::string k = kind[2];
      if (k == "model") {
        CHECK_NOTHROW(load_model_from_string(e.text, name));
      } else if (k == "gpu-catalogue") {
        CHECK_NOTHROW(load_gpu_catalogue_from_string(e.text, name));
      } else if (k == "machine") {
        CHECK_NOTHROW(load_machine_from_string(e.text, name, bundled_gpu_catalogue()));
      } else if (k == "profile") {
        CHECK_NOTHROW(load_profile_from_string(e.text, name));
      } else if (k == "scenario") {
        // Bundled models and machines by name, the tutorial's own files beside it.
        CHECK_NOTHROW(load_scenario_from_string(e.text, name, folder));
      } else {
        FAIL("an example of an unknown kind: " << k);
      }
    }
    INFO(doc);
    CHECK(whole >= least);
  }
}

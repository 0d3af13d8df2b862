// docs/ARCHITECTURE.md stays a true map: every repository path it names in backticks exists (a
// folder, written with a trailing '/', is a folder), and its Recipes section says what to touch
// to add a layer, a GPU, a machine, a collective algorithm, a strategy, ... A file moved or
// renamed without the map fails here, with the path the map still names.
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <catch2/catch.hpp>

#include "support/paths.h"

namespace {

std::string architecture_map() {
  std::ifstream in(epochcast::test::source_dir() / "docs" / "ARCHITECTURE.md");
  REQUIRE(in.good());
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

bool ends_with(std::string_view text, std::string_view ending) {
  return text.size() >= ending.size() && text.substr(text.size() - ending.size()) == ending;
}

// A backticked token that names a file or folder of the repository: it has a '/' or a file's
// ending, and no spaces, glob characters or placeholders (`<name>`). Options (`--set/--gpus`),
// CMake targets (`epochcast::sim`) and paths outside the repository (`../shared/`) are not.
bool looks_like_path(const std::string& token) {
  if (token.empty() || token.front() == '-' || token.rfind("../", 0) == 0) return false;
  if (token.find_first_of(" \t*?[]<>{}|=:$'\"") != std::string::npos) return false;
  if (token.find('/') != std::string::npos) return true;
  for (std::string_view ending :
       {".h", ".cpp", ".yaml", ".md", ".sh", ".txt", ".py", ".json", ".cmake"}) {
    if (ends_with(token, ending)) return true;
  }
  return false;
}

// The paths the map names in its prose and tables (fenced blocks are pictures, not paths).
std::vector<std::string> named_paths(const std::string& text) {
  std::vector<std::string> paths;
  std::istringstream lines(text);
  std::string line;
  bool fenced = false;
  const std::regex backticked("`([^`]+)`");
  while (std::getline(lines, line)) {
    if (line.rfind("```", 0) == 0) {
      fenced = !fenced;
      continue;
    }
    if (fenced) continue;
    for (std::sregex_iterator match(line.begin(), line.end(), backticked), end; match != end;
         ++match) {
      const std::string token = (*match)[1];
      if (looks_like_path(token)) paths.push_back(token);
    }
  }
  return paths;
}

}  // namespace

TEST_CASE("every repository path that docs/ARCHITECTURE.md names exists") {
  const std::vector<std::string> paths = named_paths(architecture_map());
  // A map that names few paths has lost its folders or its recipes.
  CHECK(paths.size() >= 40);
  for (const std::string& path : paths) {
    INFO("docs/ARCHITECTURE.md names `" << path << "`");
    const std::filesystem::path where = epochcast::test::source_dir() / path;
    if (ends_with(path, "/")) {
      CHECK(std::filesystem::is_directory(where));
    } else {
      CHECK(std::filesystem::exists(where));
    }
  }
}

TEST_CASE("docs/ARCHITECTURE.md has a Recipes section with at least five recipes") {
  const std::string text = architecture_map();
  const std::size_t recipes = text.find("\n## Recipes\n");
  REQUIRE(recipes != std::string::npos);
  const std::size_t next_section = text.find("\n## ", recipes + 1);
  const std::string section = text.substr(
      recipes, next_section == std::string::npos ? std::string::npos : next_section - recipes);
  // Each recipe opens a paragraph with "**To add ...**" and names files to touch.
  int count = 0;
  for (std::size_t at = section.find("\n**To add "); at != std::string::npos;
       at = section.find("\n**To add ", at + 1)) {
    ++count;
  }
  CHECK(count >= 5);
  CHECK(named_paths(section).size() >= 5 * 3);
}

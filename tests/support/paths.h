// Paths the tests need: the source tree (for bundled data and test inputs), the folder tests
// write into, and the built CLI. Defined in paths.cpp, the one test source that holds the build's
// absolute paths (every other one is the same in any clone, which ccache shares).
#pragma once

#include <filesystem>
#include <string>

namespace epochcast::test {

std::filesystem::path source_dir();
// A file of the source tree, `relative` to its root, as a string for command lines.
std::string source_file(const std::string& relative);
// build/tests: where tests write their files.
std::filesystem::path output_dir();
std::string output_file(const std::string& name);
// build/cli/epochcast (empty in a runtime-only build, which has no CLI).
std::string epochcast_binary();

inline std::filesystem::path zoo_model(const std::string& name) {
  return source_dir() / "scenarios" / "models" / (name + ".yaml");
}

}  // namespace epochcast::test

// Paths the tests need: the source tree (for bundled data) and the built CLI.
#pragma once

#include <filesystem>
#include <string>

namespace epochcast::test {

inline std::filesystem::path source_dir() {
  return EPOCHCAST_TEST_SOURCE_DIR;
}
inline std::filesystem::path zoo_model(const std::string& name) {
  return source_dir() / "scenarios" / "models" / (name + ".yaml");
}

}  // namespace epochcast::test

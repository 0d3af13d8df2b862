// The build's absolute paths, given by tests/CMakeLists.txt to this file alone.
#include "support/paths.h"

namespace epochcast::test {

std::filesystem::path source_dir() {
  return EPOCHCAST_TEST_SOURCE_DIR;
}
std::string source_file(const std::string& relative) {
  return (source_dir() / relative).string();
}
std::filesystem::path output_dir() {
  return EPOCHCAST_TEST_OUTPUT_DIR;
}
std::string output_file(const std::string& name) {
  return (output_dir() / name).string();
}
std::string epochcast_binary() {
  return EPOCHCAST_TEST_BINARY;
}

}  // namespace epochcast::test

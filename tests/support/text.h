// Reading what commands wrote, for the tests' checks.
#pragma once

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace epochcast::test {

// A whole file, byte for byte (images too); empty when it cannot be read.
inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The length of the longest line of `text` (a table's width).
inline std::size_t widest_line(const std::string& text) {
  std::size_t widest = 0;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    widest = std::max(widest, line.size());
  return widest;
}

}  // namespace epochcast::test

// Reading what commands wrote, for the tests' checks.
#pragma once

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

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

// The rows of a small CSV table kept for a test, its cells split at commas: lines starting
// with '#' (the table's source) and blank lines skipped, the first remaining line taken as the
// header and left out. Empty when the file cannot be read.
inline std::vector<std::vector<std::string>> commented_csv_rows(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::vector<std::vector<std::string>> rows;
  bool header = true;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line.front() == '#') continue;
    if (std::exchange(header, false)) continue;
    std::vector<std::string> cells;
    std::stringstream split(line);
    for (std::string cell; std::getline(split, cell, ',');)
      cells.push_back(cell);
    rows.push_back(std::move(cells));
  }
  return rows;
}

}  // namespace epochcast::test

// Aligned plain-text tables and the number formats epochcast prints.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace epochcast {

class TextTable {
 public:
  enum class Align { left, right };

  void add_column(std::string header, Align align = Align::right);
  void add_row(std::vector<std::string> cells);
  // A horizontal rule between the rows added before and after.
  void add_rule();
  std::string render() const;

 private:
  struct Column {
    std::string header;
    Align align;
  };
  std::vector<Column> columns_;
  std::vector<std::vector<std::string>> rows_;  // an empty row is a rule
};

// 12,102,220
std::string with_thousands(std::int64_t value);
// 1.23 G / 45.6 M / 789 k — for FLOP counts in tables.
std::string si_count(double value);

}  // namespace epochcast

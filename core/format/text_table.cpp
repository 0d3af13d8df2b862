// Plain-text table rendering.
#include "core/format/text_table.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace epochcast {

void TextTable::add_column(std::string header, Align align) {
  columns_.push_back({std::move(header), align});
}

void TextTable::add_row(std::vector<std::string> cells) {
  cells.resize(columns_.size());
  rows_.push_back(std::move(cells));
}

void TextTable::add_rule() {
  rows_.emplace_back();
}

std::string TextTable::render() const {
  std::vector<std::size_t> widths;
  for (const Column& c : columns_)
    widths.push_back(c.header.size());
  for (const auto& row : rows_) {
    for (std::size_t i = 0; i < row.size(); ++i)
      widths[i] = std::max(widths[i], row[i].size());
  }
  std::size_t total = 0;
  for (std::size_t w : widths)
    total += w;
  total += columns_.empty() ? 0 : 2 * (columns_.size() - 1);

  auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (std::size_t i = 0; i < columns_.size(); ++i) {
      if (i > 0) out += "  ";
      bool left = columns_[i].align == Align::left;
      out += left ? fmt::format("{:<{}}", cells[i], widths[i])
                  : fmt::format("{:>{}}", cells[i], widths[i]);
    }
    while (!out.empty() && out.back() == ' ')
      out.pop_back();
    return out + "\n";
  };
  std::vector<std::string> headers;
  for (const Column& c : columns_)
    headers.push_back(c.header);
  std::string out = line(headers) + std::string(total, '-') + "\n";
  for (const auto& row : rows_)
    out += row.empty() ? std::string(total, '-') + "\n" : line(row);
  return out;
}

std::string with_thousands(std::int64_t value) {
  std::string digits = std::to_string(value < 0 ? -value : value);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return value < 0 ? "-" + out : out;
}

std::string si_count(double value) {
  static constexpr const char* kSuffix[] = {"", " k", " M", " G", " T", " P", " E"};
  int level = 0;
  while (std::fabs(value) >= 1000.0 && level < 6) {
    value /= 1000.0;
    ++level;
  }
  return level == 0 ? fmt::format("{:.0f}", value) : fmt::format("{:.2f}{}", value, kSuffix[level]);
}

}  // namespace epochcast

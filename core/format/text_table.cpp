// Plain-text table rendering.
#include "core/format/text_table.h"

#include <algorithm>
#include <cmath>
#include <string_view>

#include <fmt/format.h>

namespace epochcast {

void TextTable::add_column(std::string header, Align align) {
  add_column(std::move(header), align, Fit{});
}

void TextTable::add_column(std::string header, Align align, Fit fit) {
  columns_.push_back({std::move(header), align, fit});
}

void TextTable::add_row(std::vector<std::string> cells) {
  cells.resize(columns_.size());
  rows_.push_back(std::move(cells));
}

void TextTable::add_rule() {
  rows_.emplace_back();
}

TextTable::Layout TextTable::layout(std::size_t width) const {
  std::vector<std::size_t> widths;
  for (const Column& c : columns_)
    widths.push_back(c.header.size());
  for (const auto& row : rows_) {
    for (std::size_t i = 0; i < row.size(); ++i)
      widths[i] = std::max(widths[i], row[i].size());
  }
  const std::vector<std::size_t> natural = widths;
  std::vector<bool> kept(columns_.size(), true);
  auto total = [&] {
    std::size_t sum = 0, count = 0;
    for (std::size_t i = 0; i < columns_.size(); ++i) {
      if (!kept[i]) continue;
      sum += widths[i];
      ++count;
    }
    return sum + (count == 0 ? 0 : 2 * (count - 1));
  };
  if (width > 0) {
    // Every shortening and leaving out the columns allow, the highest rank first (the rightmost
    // column among equals), each only while the table is still too wide.
    struct Give {
      int rank;
      std::size_t column;
      bool drop;
    };
    std::vector<Give> gives;
    for (std::size_t i = 0; i < columns_.size(); ++i) {
      if (columns_[i].fit.shorten > 0) gives.push_back({columns_[i].fit.shorten, i, false});
      if (columns_[i].fit.drop > 0) gives.push_back({columns_[i].fit.drop, i, true});
    }
    std::stable_sort(gives.begin(), gives.end(), [](const Give& a, const Give& b) {
      return a.rank != b.rank ? a.rank > b.rank : a.column > b.column;
    });
    constexpr std::size_t kShortest = 12;  // a shortened column keeps this much, or its header
    for (const Give& give : gives) {
      if (total() <= width) break;
      if (!kept[give.column]) continue;
      if (give.drop) {
        kept[give.column] = false;
        continue;
      }
      const std::size_t floor = std::max(columns_[give.column].header.size(), kShortest);
      std::size_t& w = widths[give.column];
      if (w > floor) w -= std::min(w - floor, total() - width);
    }
    // A column left out after another was shortened leaves room: the shortened get it back.
    for (std::size_t i = 0; i < columns_.size() && total() < width; ++i) {
      if (kept[i] && widths[i] < natural[i])
        widths[i] += std::min(natural[i] - widths[i], width - total());
    }
  }
  std::vector<bool> shortened(columns_.size(), false);
  for (std::size_t i = 0; i < columns_.size(); ++i)
    shortened[i] = widths[i] < natural[i];
  return Layout{kept, shortened, widths, total()};
}

std::string TextTable::render_row(const std::vector<std::string>& cells,
                                  const Layout& layout) const {
  std::string out;
  bool first = true;
  for (std::size_t i = 0; i < columns_.size(); ++i) {
    if (!layout.kept[i]) continue;
    if (!first) out += "  ";
    first = false;
    std::string cell = i < cells.size() ? cells[i] : std::string();
    // Shortened columns cut their cells; the others keep them whole (a later, wider cell
    // overflows its column).
    if (layout.shortened[i] && cell.size() > layout.widths[i])
      cell = layout.widths[i] > 3 ? cell.substr(0, layout.widths[i] - 3) + "..." : "...";
    bool left = columns_[i].align == Align::left;
    out += left ? fmt::format("{:<{}}", cell, layout.widths[i])
                : fmt::format("{:>{}}", cell, layout.widths[i]);
  }
  while (!out.empty() && out.back() == ' ')
    out.pop_back();
  return out + "\n";
}

std::string TextTable::render_header(const Layout& layout) const {
  std::vector<std::string> headers;
  for (const Column& c : columns_)
    headers.push_back(c.header);
  return render_row(headers, layout) + std::string(layout.rule, '-') + "\n";
}

std::string TextTable::render(std::size_t width) const {
  const Layout fitted = layout(width);
  std::string out = render_header(fitted);
  for (const auto& row : rows_)
    out += row.empty() ? std::string(fitted.rule, '-') + "\n" : render_row(row, fitted);
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

namespace {

// The unit a duration reads in, and its size in seconds.
struct DurationUnit {
  double seconds;
  const char* name;
};

DurationUnit unit_for(double seconds) {
  const double magnitude = std::fabs(seconds);
  if (magnitude < 1e-3) return {1e-6, "us"};
  if (magnitude < 1) return {1e-3, "ms"};
  if (magnitude < 120) return {1, "s"};
  if (magnitude < 2 * 3600) return {60, "min"};
  if (magnitude < 2 * 86400) return {3600, "h"};
  return {86400, "days"};
}

// Decimals that give `value` (in its unit) four significant digits: 1.806, 36.67, 812.4, 1815.
int decimals_for(double value) {
  const double v = std::fabs(value);
  return v < 10 ? 3 : v < 100 ? 2 : v < 1000 ? 1 : 0;
}

}  // namespace

std::string readable_duration(double seconds) {
  if (!std::isfinite(seconds)) return "forever";
  if (seconds == 0) return "0 s";
  // Beyond a trillion days (and so beyond what an integer holds in any unit): say so.
  constexpr double kLongest = 1e12 * 86400;
  if (std::fabs(seconds) >= kLongest) return seconds > 0 ? "over 10^12 days" : "-over 10^12 days";
  DurationUnit unit = unit_for(seconds);
  // Rounded to four significant digits, a value can reach the next unit ("1000 ms", "120.0 s"):
  // then it reads in that one.
  for (int pass = 0; pass < 2; ++pass) {
    const double value = seconds / unit.seconds;
    const int decimals = decimals_for(value);
    const double scale = std::pow(10.0, decimals);
    const double rounded = std::round(value * scale) / scale;
    const DurationUnit next = unit_for(rounded * unit.seconds);
    if (next.seconds != unit.seconds && pass == 0) {
      unit = next;
      continue;
    }
    if (std::fabs(rounded) >= 10'000)
      return with_thousands(static_cast<std::int64_t>(std::llround(rounded))) + " " + unit.name;
    return fmt::format("{:.{}f} {}", rounded, decimals_for(rounded), unit.name);
  }
  return "";  // not reached: the second pass returns
}

std::string readable_duration_range(double low, double high) {
  if (!std::isfinite(low) || !std::isfinite(high) || high == 0 || std::fabs(high) >= 1e12 * 86400) {
    return readable_duration(low) + "-" + readable_duration(high);
  }
  const DurationUnit unit = unit_for(high);
  const int decimals = decimals_for(high / unit.seconds);
  return fmt::format("{:.{}f}-{:.{}f} {}", low / unit.seconds, decimals, high / unit.seconds,
                     decimals, unit.name);
}

std::string wrap_lines(const std::string& text, std::size_t width, std::size_t indent) {
  if (width == 0) return text;
  const std::size_t continuation = std::min(indent, width / 2);
  std::string out;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    const bool newline = end != std::string::npos;
    if (!newline) end = text.size();
    std::string_view line(text.data() + start, end - start);
    // The pieces of the line: the first keeps the line's own start, the others are indented.
    std::vector<std::string_view> pieces;
    for (std::size_t lead = 0; line.size() + lead > width; lead = continuation) {
      // The last space that leaves the piece within the width, past the line's own leading
      // spaces; none: the first space after it (a word longer than the width stays whole).
      const std::size_t own = line.find_first_not_of(' ');
      if (own == std::string_view::npos) break;
      const std::size_t room = width > lead ? width - lead : 1;
      std::size_t cut = line.rfind(' ', room);
      if (cut == std::string_view::npos || cut <= own) cut = line.find(' ', std::max(room, own));
      if (cut == std::string_view::npos) break;
      std::string_view piece = line.substr(0, cut);
      while (!piece.empty() && piece.back() == ' ')
        piece.remove_suffix(1);
      pieces.push_back(piece);
      line.remove_prefix(cut + 1);
      while (!line.empty() && line.front() == ' ')
        line.remove_prefix(1);
    }
    if (!pieces.empty()) {
      while (!line.empty() && line.back() == ' ')
        line.remove_suffix(1);
    }
    if (!line.empty() || pieces.empty()) pieces.push_back(line);
    for (std::size_t p = 0; p < pieces.size(); ++p) {
      if (p > 0) out.append("\n").append(continuation, ' ');
      out.append(pieces[p]);
    }
    if (newline) out += '\n';
    start = end + 1;
  }
  return out;
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

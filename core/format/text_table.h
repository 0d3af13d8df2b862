// Aligned plain-text tables and the number formats epochcast prints.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace epochcast {

class TextTable {
 public:
  enum class Align { left, right };
  // What render(width) may do to a column of a table wider than `width`: cut its cells short
  // (ending them in "..."), and leave it out. Each is a rank (0: never); the table gives up
  // the highest ranks first, across its columns, until it fits.
  struct Fit {
    int shorten = 0;
    int drop = 0;
  };

  void add_column(std::string header, Align align = Align::right);
  void add_column(std::string header, Align align, Fit fit);
  void add_row(std::vector<std::string> cells);
  // A horizontal rule between the rows added before and after.
  void add_rule();
  // `width`: the most characters a line may take (0: no limit). Columns are shortened, then
  // dropped, as their Fit allows; a table that cannot fit even so is printed as narrow as that.
  std::string render(std::size_t width = 0) const;

  // The same in parts, for rows printed as they come (a table streamed to a terminal): the
  // layout is decided from the rows added so far (widest plausible cells), then the header and
  // each row are formatted with it; a later cell wider than its column overflows it.
  struct Layout {
    std::vector<bool> kept;
    std::vector<bool> shortened;  // cells wider than these columns are cut ("...")
    std::vector<std::size_t> widths;
    std::size_t rule = 0;
  };
  Layout layout(std::size_t width = 0) const;
  std::string render_header(const Layout& layout) const;  // the header line and the rule
  std::string render_row(const std::vector<std::string>& cells, const Layout& layout) const;

 private:
  struct Column {
    std::string header;
    Align align;
    Fit fit;
  };
  std::vector<Column> columns_;
  std::vector<std::vector<std::string>> rows_;  // an empty row is a rule
};

// 12,102,220
std::string with_thousands(std::int64_t value);
// A duration in the unit a person reads, four significant digits: "12.34 ms", "1.806 s",
// "36.67 min", "1.403 h", "1815 days", "11,574,074 days".
std::string readable_duration(double seconds);
// Two durations in the unit of the larger: "784.0-847.6 ms", "0.982-1.055 s".
std::string readable_duration_range(double low, double high);
// Each line of `text` longer than `width` broken at its spaces (0: no limit); a line's
// continuation is indented by `indent` spaces.
std::string wrap_lines(const std::string& text, std::size_t width, std::size_t indent = 2);
// 1.23 G / 45.6 M / 789 k — for FLOP counts in tables.
std::string si_count(double value);

}  // namespace epochcast

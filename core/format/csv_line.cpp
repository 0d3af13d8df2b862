// Splitting one CSV line into cells, each with where it starts.
#include "core/format/csv_line.h"

namespace epochcast {

std::vector<CsvCell> split_csv_line(std::string_view line, const std::string& file, int number) {
  std::vector<CsvCell> cells;
  std::size_t i = 0;
  while (true) {
    std::size_t start = i;
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t'))
      ++i;
    CsvCell cell;
    cell.mark = SourceMark{file, number, static_cast<int>(i) + 1};
    if (i < line.size() && line[i] == '"') {
      ++i;
      while (true) {
        if (i >= line.size()) {
          throw InputError(SourceMark{file, number, static_cast<int>(start) + 1}, "",
                           "a quoted field does not end on its line (a '\"' is missing)");
        }
        if (line[i] == '"') {
          if (i + 1 < line.size() && line[i + 1] == '"') {
            cell.text += '"';
            i += 2;
            continue;
          }
          ++i;
          break;
        }
        cell.text += line[i++];
      }
      while (i < line.size() && (line[i] == ' ' || line[i] == '\t'))
        ++i;
      if (i < line.size() && line[i] != ',') {
        throw InputError(SourceMark{file, number, static_cast<int>(i) + 1}, "",
                         "expected ',' after a quoted field");
      }
    } else {
      std::size_t end = line.find(',', i);
      if (end == std::string_view::npos) end = line.size();
      std::string_view text = line.substr(i, end - i);
      while (!text.empty() && (text.back() == ' ' || text.back() == '\t'))
        text.remove_suffix(1);
      cell.text = std::string(text);
      i = end;
    }
    cells.push_back(std::move(cell));
    if (i >= line.size()) break;
    ++i;  // the comma
  }
  return cells;
}

}  // namespace epochcast

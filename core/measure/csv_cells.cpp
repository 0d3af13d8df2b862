// Typed cells of CSV files, checked against their column's range.
#include "core/measure/csv_cells.h"

#include <charconv>
#include <cmath>

#include <fmt/format.h>

#include "core/yaml/strict_yaml.h"

namespace epochcast {

std::int64_t integer_cell(const CsvCell& cell, std::string_view column, std::int64_t low,
                          std::int64_t high) {
  std::int64_t value = 0;
  const char* end = cell.text.data() + cell.text.size();
  auto [stop, error] = std::from_chars(cell.text.data(), end, value);
  if (error == std::errc::result_out_of_range ||
      (error == std::errc() && stop == end && (value < low || value > high))) {
    throw InputError(
        cell.mark, std::string(column),
        fmt::format("expected an integer from {} to {}, got {}", yaml::readable_integer(low),
                    yaml::readable_integer(high), cell.text));
  }
  if (error != std::errc() || stop != end) {
    throw InputError(
        cell.mark, std::string(column),
        fmt::format("expected an integer from {} to {}, got '{}'", yaml::readable_integer(low),
                    yaml::readable_integer(high), cell.text));
  }
  return value;
}

double positive_cell(const CsvCell& cell, std::string_view column, double high,
                     std::string_view what) {
  double value = 0;
  const char* end = cell.text.data() + cell.text.size();
  auto [stop, error] = std::from_chars(cell.text.data(), end, value);
  if (error != std::errc() || stop != end || !std::isfinite(value) || !(value > 0) ||
      value > high) {
    throw InputError(
        cell.mark, std::string(column),
        fmt::format("expected {} above 0 and at most {:g}, got '{}'", what, high, cell.text));
  }
  return value;
}

}  // namespace epochcast

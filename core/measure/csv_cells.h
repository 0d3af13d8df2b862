// Typed cells of the CSV files epochcast reads (results tables, kernel measurements): a number
// in its column's range, or InputError at the cell naming the column and the range.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/format/csv_line.h"

namespace epochcast {

// A whole number from `low` to `high`.
std::int64_t integer_cell(const CsvCell& cell, std::string_view column, std::int64_t low,
                          std::int64_t high);
// A finite number above 0 and at most `high`; `what` names it in the message ("an epoch time
// in seconds").
double positive_cell(const CsvCell& cell, std::string_view column, double high,
                     std::string_view what);

}  // namespace epochcast

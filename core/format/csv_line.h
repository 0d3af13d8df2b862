// One line of a CSV file as cells, each with the file position it starts at, so that a reader
// can name the cell a problem is in. Quoted cells may hold commas and doubled quotes ("");
// a quote must close on its line (InputError otherwise). Spaces and tabs around a cell go.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/input_error.h"

namespace epochcast {

struct CsvCell {
  std::string text;
  SourceMark mark;  // file, line `number`, 1-based column
};

std::vector<CsvCell> split_csv_line(std::string_view line, const std::string& file, int number);

}  // namespace epochcast

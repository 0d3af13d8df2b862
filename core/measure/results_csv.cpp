// Results tables (CSV): split into cells with their positions, then each cell checked against
// its column.
#include "core/measure/results_csv.h"

#include <algorithm>
#include <array>
#include <filesystem>
#include <string_view>

#include <fmt/format.h>

#include "core/format/csv_line.h"
#include "core/measure/csv_cells.h"
#include "core/spec/limits.h"
#include "core/yaml/strict_yaml.h"

namespace epochcast {

namespace {

constexpr std::string_view kColumns[] = {
    "scenario",      "gpus",      "global_batch", "per_gpu_batch", "epoch_s", "iteration_s",
    "samples_per_s", "precision", "strategy",     "set",           "note"};
constexpr std::string_view kFigures[] = {"epoch_s", "iteration_s", "samples_per_s"};

// The same limits as measurement files: a time above 0 and at most 1e9 s (32 years).
constexpr double kMaxSeconds = 1e9;
// A throughput of at most the largest data set a scenario may hold per second: a bound that
// refuses only nonsense (a unit slip), not a figure of any machine.
constexpr double kMaxSamplesPerSecond = static_cast<double>(limits::kMaxSamples);

}  // namespace

bool is_results_table(const std::string& path) {
  std::string extension = std::filesystem::path(path).extension().string();
  std::transform(extension.begin(), extension.end(), extension.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return extension == ".csv";
}

ResultsTable parse_results_csv(const std::string& text, const std::string& file) {
  ResultsTable table;
  table.file = file;
  std::vector<std::string> header;  // column name per position
  SourceMark header_mark{file, 0, 0};
  int number = 0;
  // A byte-order mark, as spreadsheets write before the first cell, is not part of it.
  std::size_t at = text.rfind("\xEF\xBB\xBF", 0) == 0 ? 3 : 0;
  while (at < text.size()) {
    std::size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + at, end - at);
    at = end + 1;
    ++number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    std::size_t first = line.find_first_not_of(" \t");
    if (first == std::string_view::npos || line[first] == '#') continue;
    std::vector<ResultCell> cells = split_csv_line(line, file, number);

    if (header.empty()) {
      header_mark = SourceMark{file, number, 1};
      for (const ResultCell& cell : cells) {
        if (std::find(std::begin(kColumns), std::end(kColumns), cell.text) == std::end(kColumns)) {
          const bool other_separator = cell.text.find_first_of(";\t") != std::string::npos;
          throw InputError(
              cell.mark, cell.text,
              fmt::format("unknown column '{}'{}; the columns are {}{}", cell.text,
                          did_you_mean(cell.text, kColumns), join_alternatives(kColumns),
                          other_separator ? " (cells are separated by commas)" : ""));
        }
        if (std::find(header.begin(), header.end(), cell.text) != header.end()) {
          throw InputError(cell.mark, cell.text, "this column is named twice in the header");
        }
        header.push_back(cell.text);
      }
      auto has = [&](std::string_view name) {
        return std::find(header.begin(), header.end(), name) != header.end();
      };
      if (!has("gpus")) throw InputError(header_mark, "gpus", "the header has no column 'gpus'");
      if (!has("global_batch") && !has("per_gpu_batch")) {
        throw InputError(header_mark, "global_batch",
                         "the header needs a column 'global_batch' or 'per_gpu_batch'");
      }
      if (std::none_of(std::begin(kFigures), std::end(kFigures), has)) {
        throw InputError(header_mark, "epoch_s",
                         "the header needs a measured figure: a column 'epoch_s', "
                         "'iteration_s' or 'samples_per_s'");
      }
      table.has_scenario_column = has("scenario");
      continue;
    }

    if (cells.size() != header.size()) {
      throw InputError(SourceMark{file, number, 1}, "",
                       fmt::format("expected {} cells as in the header (line {}), got {}",
                                   header.size(), header_mark.line, cells.size()));
    }
    ResultRow row;
    row.mark = SourceMark{file, number, 1};
    std::optional<ResultCell> gpus_cell;
    for (std::size_t c = 0; c < cells.size(); ++c) {
      const ResultCell& cell = cells[c];
      const std::string& column = header[c];
      if (cell.text.empty() || column == "note") continue;  // unknown, or not read
      if (column == "gpus") {
        row.gpus = static_cast<int>(integer_cell(cell, column, 1, limits::kMaxGpus));
        gpus_cell = cell;
      } else if (column == "global_batch") {
        row.global_batch = integer_cell(cell, column, 1, limits::kMaxSamples);
      } else if (column == "per_gpu_batch") {
        row.per_gpu_batch = integer_cell(cell, column, 1, limits::kMaxSamples);
      } else if (column == "epoch_s") {
        row.epoch_s = positive_cell(cell, column, kMaxSeconds, "an epoch time in seconds");
      } else if (column == "iteration_s") {
        row.iteration_s = positive_cell(cell, column, kMaxSeconds, "an iteration time in seconds");
      } else if (column == "samples_per_s") {
        row.samples_per_s =
            positive_cell(cell, column, kMaxSamplesPerSecond, "a throughput in samples/s");
      } else if (column == "scenario") {
        row.scenario = cell;
      } else if (column == "precision") {
        row.precision = cell;
      } else if (column == "strategy") {
        row.strategy = cell;
      } else if (column == "set") {
        row.set = cell;
      }
    }
    if (!gpus_cell) throw InputError(row.mark, "gpus", "this row gives no GPU count");
    if (!row.global_batch && !row.per_gpu_batch) {
      throw InputError(row.mark, "global_batch", "this row gives no batch size");
    }
    if (row.global_batch && row.per_gpu_batch &&
        *row.global_batch != *row.per_gpu_batch * row.gpus) {
      throw InputError(row.mark, "per_gpu_batch",
                       fmt::format("global_batch {} is not per_gpu_batch {} x gpus {}",
                                   *row.global_batch, *row.per_gpu_batch, row.gpus));
    }
    if (!row.epoch_s && !row.iteration_s && !row.samples_per_s) {
      throw InputError(row.mark, "epoch_s",
                       "this row gives no measured figure (epoch_s, iteration_s or "
                       "samples_per_s)");
    }
    table.rows.push_back(std::move(row));
  }
  if (header.empty()) throw InputError(SourceMark{file, 0, 0}, "", "no header line and no rows");
  if (table.rows.empty()) throw InputError(header_mark, "", "the table has a header but no rows");
  return table;
}

ResultsTable read_results_csv(const std::string& path) {
  return parse_results_csv(yaml::read_input_file(path), path);
}

}  // namespace epochcast

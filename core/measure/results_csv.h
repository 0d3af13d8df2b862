// End-to-end results as a plain CSV table: what a user timed by hand or copied from a paper,
// one (gpus, batch) point a row, with only the figures they have. The runtime's measurement
// files hold far more; this format holds what can honestly be written down (docs/formats.md,
// "Results tables").
//
//   # ResNet-50 on the 4-GPU box, Table 3 of the study
//   scenario,gpus,global_batch,epoch_s,set
//   resnet50.yaml,1,64,812.5,
//   resnet50.yaml,4,256,240.1,training.precision=amp_fp16;loader.workers=8
//
// Columns (in any order, named once each in the header):
//   gpus                         required
//   global_batch, per_gpu_batch  at least one (both must agree: global = per-GPU x gpus)
//   epoch_s, iteration_s, samples_per_s
//                                at least one column; each row gives at least one figure
//   scenario                     a path relative to the CSV, an absolute path or a bundled name;
//                                required unless the command names the scenario itself
//   precision, strategy          shorthands for --set training.precision / training.strategy
//   set                          further overrides, "key=value;key=value"
//   note                         free text (where the figure comes from); not read
// An empty cell is unknown, never zero. Lines starting with '#' and blank lines are skipped;
// fields may be double-quoted ("" for a quote inside) to hold commas.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/format/csv_line.h"
#include "core/input_error.h"

namespace epochcast {

// One cell as written, with where it was.
using ResultCell = CsvCell;

struct ResultRow {
  SourceMark mark;  // the row's first cell
  int gpus = 1;
  std::optional<std::int64_t> global_batch;
  std::optional<std::int64_t> per_gpu_batch;
  std::optional<double> epoch_s;
  std::optional<double> iteration_s;
  std::optional<double> samples_per_s;
  std::optional<ResultCell> scenario;
  std::optional<ResultCell> precision;
  std::optional<ResultCell> strategy;
  std::optional<ResultCell> set;
};

struct ResultsTable {
  std::string file;
  std::vector<ResultRow> rows;
  bool has_scenario_column = false;
};

// Whether `path` names a results table (by its extension, .csv) rather than a measurement file.
bool is_results_table(const std::string& path);

// Reads and checks a results table; InputError at file:line:col on anything malformed.
ResultsTable read_results_csv(const std::string& path);
// The same from text already read (`file` names it in messages).
ResultsTable parse_results_csv(const std::string& text, const std::string& file);

}  // namespace epochcast

// Turning predictions into what users read: an aligned table, CSV and JSON for tools, and a
// Chrome trace-event file (opens in Perfetto or chrome://tracing).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/spec/scenario_spec.h"
#include "sim/predict/predict.h"

namespace epochcast::sim {

// The point with the lowest epoch time among those that fit (the first of equals); null when
// none fits.
const PointResult* fastest_point(const std::vector<PointResult>& results);

// Samples per second for tables: whole numbers, and three significant digits below one, so
// that a very slow point never reads as 0.
std::string throughput_text(double samples_per_second);

// How a table is laid out: at most `width` characters a line (0: no limit; prose lines are
// wrapped to it, table columns shortened or left out), and `wide`: every column, at any width.
struct TableLayout {
  std::size_t width = 0;
  bool wide = false;
};
// The bottleneck in a few words: "compute 94%", "comm 31%", "input 62%, 1 GPU faster".
std::string short_bottleneck(const PointResult& result, BatchMeaning batch_is);
std::string render_table(const ScenarioSpec& scenario, const std::vector<PointResult>& results,
                         const TableLayout& layout = {});

// The same table with its rows printed as points finish (predict on a terminal): the columns
// are laid out before the first point from the sweep and the widest figures a point plausibly
// has; lines that depend on every point (which were simulated with every rank, the fastest
// point) come after the rows.
class StreamedTable {
 public:
  StreamedTable(const ScenarioSpec& scenario, const std::vector<SweepPoint>& points,
                const TableLayout& layout);
  StreamedTable(const StreamedTable&) = delete;
  StreamedTable& operator=(const StreamedTable&) = delete;
  ~StreamedTable();
  std::string opening() const;  // the scenario's lines, the table's header
  std::string row(const PointResult& result) const;
  std::string closing(const std::vector<PointResult>& results) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};
// Where each ddp point on several GPUs loses its scaling (PointResult::scaling_loss): the ideal
// epoch, the loss and its parts, in seconds and as shares of the epoch; a line saying so when
// no point has one.
std::string render_scaling_loss(const std::vector<PointResult>& results, std::size_t width = 0);

// One row per point; with a scenario `target`, the way to it in the last columns (empty where
// the point does not run or a figure has no spread), as the JSON has it.
std::string render_csv(const ScenarioSpec& scenario, const std::vector<PointResult>& results);
std::string render_json(const ScenarioSpec& scenario, const std::vector<PointResult>& results);
// The trace of one point's first iterations (Chrome's JSON trace format): a track per CPU
// thread, loader worker, GPU stream and copy engine, link utilisations as counters. Written to
// `write` in pieces of about a megabyte as it is rendered; render_chrome_trace returns it whole.
void write_chrome_trace(const ScenarioSpec& scenario, const PointResult& result,
                        const std::function<void(std::string_view)>& write);
std::string render_chrome_trace(const ScenarioSpec& scenario, const PointResult& result);

}  // namespace epochcast::sim

// nccl-tests' output (all_reduce_perf and its siblings): its text log and its -J JSON, read and
// written. `epochcast collective --format nccl-tests` writes what the binaries print, so the two
// can be diffed and parsed by the same scripts; `calibrate` reads the logs clusters already have.
//
// The text follows nccl-tests 2.13's layout (NVIDIA/nccl-tests src/common.cu): the `# nThread`
// line, one `#  Rank` line per rank, a three-line header, one row per size with the out-of-place
// and in-place groups (time, algbw, busbw, #wrong), and the `# Out of bounds values` and
// `# Avg bus bandwidth` footer. The JSON follows -J's version 2 (src/util.cu).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/measure/measurements.h"

namespace epochcast {

struct NcclTestsTiming {
  double time_us = 0;
  double algbw_gbps = 0;  // GB/s = 1e9 B/s
  double busbw_gbps = 0;
  std::optional<double> wrong;  // elements found wrong; nullopt: not checked (N/A)
};

struct NcclTestsRow {
  std::int64_t bytes = 0;  // the size column: the larger of the send and receive buffers
  std::int64_t count = 0;  // elements per rank, as nccl-tests prints them
  std::string type;        // "float"
  std::string redop;       // "sum", or "none" for collectives that do not reduce
  int root = -1;           // -1 for collectives without a root
  std::optional<NcclTestsTiming> out_of_place;
  std::optional<NcclTestsTiming> in_place;
};

struct NcclTestsDevice {
  int rank = 0;
  int group = 0;
  int pid = 0;
  std::string host;
  int device = 0;
  std::string bus;  // "0x1b", or "0000:1b:00" in newer releases
  std::string name;
};

struct NcclTestsRun {
  // The binary without "_perf" ("all_reduce", "alltoall", ...); empty where the log does not say
  // and its figures cannot tell (parse_nccl_tests_log).
  std::string collective;
  int threads = 1;
  int gpus = 1;  // per thread
  std::int64_t min_bytes = 0;
  std::int64_t max_bytes = 0;
  std::int64_t step = 2;  // the factor or the increment
  bool step_is_factor = true;
  int warmup_iterations = 5;
  int iterations = 20;
  int aggregated_iterations = 1;
  int validation = 1;
  int graph = 0;
  std::vector<NcclTestsDevice> devices;  // one per rank
  std::vector<NcclTestsRow> rows;
  int out_of_bounds = 0;
  std::optional<double> average_busbw_gbps;
  // What -J records beside the figures: the command line, and the environment's NCCL_*
  // variables that decided the run.
  std::vector<std::string> arguments;
  std::vector<std::string> environment;
  int nccl_version = 0;  // NCCL_VERSION_CODE (e.g. 22105), 0 unknown
};

// The log as an nccl-tests binary prints it.
std::string render_nccl_tests_text(const NcclTestsRun& run);
// The run as -J writes it (version 2), minus its wall-clock start and end times.
std::string render_nccl_tests_json(const NcclTestsRun& run);

// Whether `text` looks like an nccl-tests text log or -J file (for commands that take several
// kinds of measurement file).
bool looks_like_nccl_tests_log(const std::string& text);

// Reads a text log (lines may carry mpirun's "[1,0]<stdout>:" prefix; NCCL's INFO lines and
// anything else that is not the table are skipped) or a -J file. The collective comes from
// "# Collective test starting:", the JSON's command line, or the file name ("all_gather_perf"
// in it), else from the figures: busbw/algbw, the reduction and the root tell every collective
// apart but all_gather from alltoall. Raises InputError with file:line:col on a malformed row,
// a log without rows, or a collective it cannot tell.
NcclTestsRun parse_nccl_tests_log(const std::string& text, const std::string& name);

// The rows as the collective microbenchmarks of a measurement file (benchmarks.collectives),
// one per size: the out-of-place time where there is one, else the in-place; with the ranks
// and device name in `environment`. No scenario is recorded (like `epochcast bench` alone).
MeasurementFile measurements_from_nccl_tests(const NcclTestsRun& run);

}  // namespace epochcast

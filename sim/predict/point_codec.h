// A point's result as bytes and back, so that points simulated in other processes (an MPI
// sweep: `mpirun -np N epochcast predict ...`) reach the process that writes the output exactly
// as its own would be. Every field of PointResult travels, doubles bit for bit; a test checks
// that the table, CSV and JSON of decoded results equal the originals'.
#pragma once

#include <string>
#include <string_view>

#include "sim/predict/predict.h"

namespace epochcast::sim {

std::string encode_point(const PointResult& result);
// Raises std::runtime_error on bytes that encode_point did not write (truncated, or another
// version's layout).
PointResult decode_point(std::string_view bytes);

}  // namespace epochcast::sim

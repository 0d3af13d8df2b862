// Small dense least squares for calibration: non-negative solutions of min |A x - b|.
#pragma once

#include <vector>

namespace epochcast::validate {

// The non-negative x minimising |A x - b|, exactly: Lawson and Hanson's active-set method, each
// subproblem by QR. Columns that are all zero stay 0. `rows` is row-major, each of `columns`
// entries.
std::vector<double> non_negative_least_squares(const std::vector<std::vector<double>>& rows,
                                               const std::vector<double>& targets,
                                               std::size_t columns);

// Fits t = alpha + beta_inverse x bytes to (bytes, seconds) pairs, each weighted by 1/t so that
// every size counts by its relative error. Returns {alpha, beta_inverse}, both >= 0.
std::pair<double, double> fit_latency_bandwidth(const std::vector<double>& bytes,
                                                const std::vector<double>& seconds);

}  // namespace epochcast::validate

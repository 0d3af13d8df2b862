// Lawson and Hanson's active-set NNLS ("Solving Least Squares Problems", 1974, ch. 23), each
// subproblem solved by a column-pivoted QR of the passive columns (no normal equations, whose
// squared condition number loses the small coefficients).
#include "validate/least_squares.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <Eigen/Dense>

namespace epochcast::validate {

namespace {

// The least-squares solution on the passive columns, zero elsewhere.
Eigen::VectorXd solve_passive(const Eigen::MatrixXd& a, const Eigen::VectorXd& b,
                              const std::vector<bool>& passive) {
  std::vector<Eigen::Index> index;
  for (std::size_t j = 0; j < passive.size(); ++j)
    if (passive[j]) index.push_back(static_cast<Eigen::Index>(j));
  Eigen::VectorXd x = Eigen::VectorXd::Zero(a.cols());
  if (index.empty()) return x;
  Eigen::MatrixXd sub(a.rows(), static_cast<Eigen::Index>(index.size()));
  for (std::size_t k = 0; k < index.size(); ++k)
    sub.col(static_cast<Eigen::Index>(k)) = a.col(index[k]);
  const Eigen::VectorXd s = sub.colPivHouseholderQr().solve(b);
  for (std::size_t k = 0; k < index.size(); ++k)
    x(index[k]) = s(static_cast<Eigen::Index>(k));
  return x;
}

}  // namespace

std::vector<double> non_negative_least_squares(const std::vector<std::vector<double>>& rows,
                                               const std::vector<double>& targets,
                                               std::size_t columns) {
  const auto m = static_cast<Eigen::Index>(rows.size());
  const auto n = static_cast<Eigen::Index>(columns);
  Eigen::MatrixXd a(m, n);
  Eigen::VectorXd b(m);
  for (Eigen::Index i = 0; i < m; ++i) {
    for (Eigen::Index j = 0; j < n; ++j)
      a(i, j) = rows[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)];
    b(i) = targets[static_cast<std::size_t>(i)];
  }
  // Columns scaled to unit length (x_j scaled back at the end): calibration's columns differ by
  // many orders of magnitude (a latency beside a time per byte), and the tolerance below must
  // mean the same for each. An all-zero column stays out, and its coefficient 0.
  Eigen::VectorXd scale = Eigen::VectorXd::Zero(n);
  for (Eigen::Index j = 0; j < n; ++j) {
    const double norm = a.col(j).norm();
    if (norm > 0) {
      scale(j) = 1 / norm;
      a.col(j) *= scale(j);
    }
  }
  // A gradient component below this is zero (MATLAB's lsqnonneg takes the same).
  const double tolerance = 10 * std::numeric_limits<double>::epsilon() *
                           a.cwiseAbs().colwise().sum().maxCoeff() *
                           static_cast<double>(std::max(m, n));
  std::vector<bool> passive(columns, false);
  // A column freed again by the step it was added for, with no gain, is not offered again until
  // the solution moves: in floating point that is how Lawson and Hanson's loop would cycle.
  std::vector<bool> stalled(columns, false);
  Eigen::VectorXd x = Eigen::VectorXd::Zero(n);
  double residual = b.squaredNorm();
  // Lawson and Hanson bound the passes in exact arithmetic; this bound is far above what any
  // calibration needs, and every pass keeps x feasible and its residual falling.
  for (std::size_t pass = 0; pass < 100 * (columns + 1); ++pass) {
    const Eigen::VectorXd w = a.transpose() * (b - a * x);
    Eigen::Index best = -1;
    for (Eigen::Index j = 0; j < n; ++j) {
      const auto k = static_cast<std::size_t>(j);
      if (!passive[k] && !stalled[k] && scale(j) > 0 && w(j) > tolerance &&
          (best < 0 || w(j) > w(best)))
        best = j;
    }
    if (best < 0) break;
    passive[static_cast<std::size_t>(best)] = true;
    // Inner loop: step toward the passive least-squares solution until it is feasible, freeing
    // the columns that reach zero on the way (the one that limits the step exactly).
    for (std::size_t inner = 0; inner <= columns; ++inner) {
      const Eigen::VectorXd s = solve_passive(a, b, passive);
      double step = 1;
      Eigen::Index limiting = -1;
      for (Eigen::Index j = 0; j < n; ++j) {
        if (!passive[static_cast<std::size_t>(j)] || s(j) > 0) continue;
        const double denominator = x(j) - s(j);
        const double reach = denominator > 0 ? x(j) / denominator : 0;
        if (limiting < 0 || reach < step) {
          step = std::min(step, reach);
          limiting = j;
        }
      }
      if (limiting < 0) {
        x = s;
        break;
      }
      x += step * (s - x);
      x(limiting) = 0;
      const double largest = x.cwiseAbs().maxCoeff();
      for (Eigen::Index j = 0; j < n; ++j) {
        if (passive[static_cast<std::size_t>(j)] && x(j) <= 1e-14 * largest) {
          passive[static_cast<std::size_t>(j)] = false;
          x(j) = 0;
        }
      }
    }
    const double now = (b - a * x).squaredNorm();
    if (!passive[static_cast<std::size_t>(best)] && now >= residual * (1 - 1e-15)) {
      stalled[static_cast<std::size_t>(best)] = true;
    } else {
      std::fill(stalled.begin(), stalled.end(), false);
    }
    residual = std::min(residual, now);
  }
  std::vector<double> out(columns);
  for (std::size_t j = 0; j < columns; ++j) {
    const auto k = static_cast<Eigen::Index>(j);
    out[j] = std::max(0.0, x(k)) * scale(k);
  }
  return out;
}

std::pair<double, double> fit_latency_bandwidth(const std::vector<double>& bytes,
                                                const std::vector<double>& seconds) {
  std::vector<std::vector<double>> rows;
  std::vector<double> targets;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (seconds[i] <= 0) continue;
    rows.push_back({1.0 / seconds[i], bytes[i] / seconds[i]});
    targets.push_back(1.0);
  }
  std::vector<double> x = non_negative_least_squares(rows, targets, 2);
  return {x[0], x[1]};
}

}  // namespace epochcast::validate

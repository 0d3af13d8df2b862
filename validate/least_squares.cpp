// Lawson and Hanson's active-set NNLS ("Solving Least Squares Problems", 1974, ch. 23), each
// subproblem solved by a column-pivoted QR of the passive columns (no normal equations, whose
// squared condition number loses the small coefficients).
#include "validate/least_squares.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

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
  // A gradient component below this is zero (MATLAB's lsqnonneg takes the same).
  const double tolerance = 10 * std::numeric_limits<double>::epsilon() *
                           a.cwiseAbs().colwise().sum().maxCoeff() *
                           static_cast<double>(std::max(m, n));
  std::vector<bool> passive(columns, false);
  Eigen::VectorXd x = Eigen::VectorXd::Zero(n);
  // Each outer pass frees one column; Lawson and Hanson bound the passes, 3n is ample.
  for (std::size_t pass = 0; pass <= 3 * columns + 3; ++pass) {
    const Eigen::VectorXd w = a.transpose() * (b - a * x);
    Eigen::Index best = -1;
    for (Eigen::Index j = 0; j < n; ++j) {
      if (!passive[static_cast<std::size_t>(j)] && w(j) > tolerance && (best < 0 || w(j) > w(best)))
        best = j;
    }
    if (best < 0) {
      std::vector<double> out(columns);
      for (std::size_t j = 0; j < columns; ++j)
        out[j] = std::max(0.0, x(static_cast<Eigen::Index>(j)));
      return out;
    }
    passive[static_cast<std::size_t>(best)] = true;
    // Inner loop: step toward the passive least-squares solution until it is feasible, freeing
    // the columns that reach zero on the way.
    for (std::size_t inner = 0; inner <= columns; ++inner) {
      const Eigen::VectorXd s = solve_passive(a, b, passive);
      double step = 1;
      bool feasible = true;
      for (Eigen::Index j = 0; j < n; ++j) {
        if (!passive[static_cast<std::size_t>(j)] || s(j) > tolerance) continue;
        feasible = false;
        const double denominator = x(j) - s(j);
        if (denominator > 0) step = std::min(step, x(j) / denominator);
      }
      if (feasible) {
        x = s;
        break;
      }
      x += step * (s - x);
      for (Eigen::Index j = 0; j < n; ++j) {
        if (passive[static_cast<std::size_t>(j)] && x(j) <= tolerance) {
          passive[static_cast<std::size_t>(j)] = false;
          x(j) = 0;
        }
      }
    }
  }
  throw std::logic_error("non_negative_least_squares did not converge");
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

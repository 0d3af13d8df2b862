// Non-negative least squares against the true optimum: on random problems, small enough that
// every set of free columns can be tried, the solver's residual equals the best one.
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include <Eigen/Dense>
#include <catch2/catch.hpp>

#include "validate/least_squares.h"

using namespace epochcast::validate;

namespace {

double squared_residual(const std::vector<std::vector<double>>& rows,
                        const std::vector<double>& targets, const std::vector<double>& x) {
  double sum = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    double r = -targets[i];
    for (std::size_t j = 0; j < x.size(); ++j)
      r += rows[i][j] * x[j];
    sum += r * r;
  }
  return sum;
}

// The optimum by exhaustion: the NNLS solution is the unconstrained least-squares solution on its
// own support, so the best residual over every support whose solution is non-negative is the
// optimum (each such solution is feasible, and one of them is the optimum).
double optimal_squared_residual(const std::vector<std::vector<double>>& rows,
                                const std::vector<double>& targets, std::size_t columns) {
  double best = squared_residual(rows, targets, std::vector<double>(columns, 0.0));
  for (std::uint32_t mask = 1; mask < (1u << columns); ++mask) {
    std::vector<std::size_t> support;
    for (std::size_t j = 0; j < columns; ++j)
      if (mask & (1u << j)) support.push_back(j);
    Eigen::MatrixXd a(static_cast<Eigen::Index>(rows.size()),
                      static_cast<Eigen::Index>(support.size()));
    Eigen::VectorXd b(static_cast<Eigen::Index>(rows.size()));
    for (std::size_t i = 0; i < rows.size(); ++i) {
      for (std::size_t k = 0; k < support.size(); ++k)
        a(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(k)) = rows[i][support[k]];
      b(static_cast<Eigen::Index>(i)) = targets[i];
    }
    // A complete orthogonal decomposition: the minimum-norm solution where columns are dependent.
    const Eigen::VectorXd s = a.completeOrthogonalDecomposition().solve(b);
    if (s.minCoeff() < 0) continue;
    std::vector<double> x(columns, 0.0);
    for (std::size_t k = 0; k < support.size(); ++k)
      x[support[k]] = s(static_cast<Eigen::Index>(k));
    best = std::min(best, squared_residual(rows, targets, x));
  }
  return best;
}

}  // namespace

TEST_CASE("non-negative least squares reaches the optimum on 2000 random problems") {
  std::mt19937_64 random(20261130);
  std::uniform_real_distribution<double> entry(-1, 1);
  int exact_fits = 0;
  for (int problem = 0; problem < 2000; ++problem) {
    const std::size_t columns = 1 + problem % 6;
    const std::size_t rows_count = columns + problem % 7;  // square to tall
    std::vector<std::vector<double>> rows(rows_count, std::vector<double>(columns));
    std::vector<double> targets(rows_count);
    for (std::size_t i = 0; i < rows_count; ++i) {
      for (std::size_t j = 0; j < columns; ++j)
        rows[i][j] = entry(random);
      targets[i] = entry(random);
    }
    // Some problems with columns of very different scales, and some with a repeated column.
    if (problem % 5 == 1) {
      for (auto& row : rows)
        row[0] *= 1e4;
    }
    if (problem % 7 == 3 && columns > 1) {
      for (auto& row : rows)
        row[columns - 1] = row[0];
    }
    const std::vector<double> x = non_negative_least_squares(rows, targets, columns);
    INFO("problem " << problem << ": " << rows_count << " x " << columns);
    for (double v : x)
      REQUIRE(v >= 0);
    const double ours = squared_residual(rows, targets, x);
    const double optimum = optimal_squared_residual(rows, targets, columns);
    double scale = 0;
    for (double t : targets)
      scale += t * t;
    if (optimum <= 1e-20 * scale) ++exact_fits;
    // Never better than the optimum (beyond rounding), and no worse than it by 1e-9 relative.
    CHECK(ours >= optimum - 1e-12 * scale);
    CHECK(ours - optimum <= 1e-9 * std::max(optimum, 1e-12 * scale));
  }
  CHECK(exact_fits > 0);  // square systems with a non-negative solution are among them
}

// Normal equations solved by Gaussian elimination with partial pivoting: the systems have a
// dozen unknowns at most.
#include "validate/least_squares.h"

#include <cmath>
#include <stdexcept>

namespace epochcast::validate {

namespace {

// Solves M x = v for the columns in `active`; others are 0.
std::vector<double> solve_active(const std::vector<std::vector<double>>& normal,
                                 const std::vector<double>& rhs, const std::vector<bool>& active) {
  std::vector<std::size_t> index;
  for (std::size_t j = 0; j < active.size(); ++j)
    if (active[j]) index.push_back(j);
  std::size_t n = index.size();
  std::vector<std::vector<double>> m(n, std::vector<double>(n + 1));
  for (std::size_t r = 0; r < n; ++r) {
    for (std::size_t c = 0; c < n; ++c)
      m[r][c] = normal[index[r]][index[c]];
    m[r][r] *= 1 + 1e-12;  // a whisper of ridge keeps nearly collinear columns solvable
    m[r][n] = rhs[index[r]];
  }
  for (std::size_t col = 0; col < n; ++col) {
    std::size_t pivot = col;
    for (std::size_t r = col + 1; r < n; ++r)
      if (std::abs(m[r][col]) > std::abs(m[pivot][col])) pivot = r;
    std::swap(m[col], m[pivot]);
    if (std::abs(m[col][col]) < 1e-300) continue;
    for (std::size_t r = 0; r < n; ++r) {
      if (r == col) continue;
      double f = m[r][col] / m[col][col];
      for (std::size_t c = col; c <= n; ++c)
        m[r][c] -= f * m[col][c];
    }
  }
  std::vector<double> x(active.size(), 0.0);
  for (std::size_t r = 0; r < n; ++r)
    x[index[r]] = std::abs(m[r][r]) < 1e-300 ? 0.0 : m[r][n] / m[r][r];
  return x;
}

}  // namespace

std::vector<double> non_negative_least_squares(const std::vector<std::vector<double>>& rows,
                                               const std::vector<double>& targets,
                                               std::size_t columns) {
  std::vector<std::vector<double>> normal(columns, std::vector<double>(columns, 0.0));
  std::vector<double> rhs(columns, 0.0);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    for (std::size_t a = 0; a < columns; ++a) {
      if (rows[i][a] == 0) continue;
      rhs[a] += rows[i][a] * targets[i];
      for (std::size_t b = 0; b < columns; ++b)
        normal[a][b] += rows[i][a] * rows[i][b];
    }
  }
  std::vector<bool> active(columns);
  for (std::size_t j = 0; j < columns; ++j)
    active[j] = normal[j][j] > 0;
  // Drop the most negative coefficient until none is left (each pass removes one column).
  for (std::size_t pass = 0; pass <= columns; ++pass) {
    std::vector<double> x = solve_active(normal, rhs, active);
    std::size_t worst = columns;
    for (std::size_t j = 0; j < columns; ++j)
      if (active[j] && x[j] < 0 && (worst == columns || x[j] < x[worst])) worst = j;
    if (worst == columns) return x;
    active[worst] = false;
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

#include "core/measure/round_drift.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace epochcast {

namespace {

double median_of(std::vector<double> values) {
  return spread_of(std::move(values)).median;
}

// Sweeps of the polish: Tukey's two to four settle a table this small; more change nothing that
// a report prints, and a fixed count keeps the result the same on every machine.
constexpr int kPolishSweeps = 10;

}  // namespace

std::optional<RoundDrift> round_drift(const std::vector<MeasuredPoint>& points) {
  int rounds = 0;
  for (const MeasuredPoint& p : points)
    if (p.status == PointStatus::ok) rounds = std::max(rounds, p.rounds);
  if (rounds < 2) return std::nullopt;

  // cell[point][round]: the log of the point's median iteration in that round. combine_rounds
  // keeps each round's samples together, in the order the rounds ran.
  std::vector<std::vector<double>> cell;
  for (const MeasuredPoint& p : points) {
    const std::size_t n = p.iteration_samples_s.size();
    if (p.status != PointStatus::ok || p.rounds != rounds || n == 0 ||
        n % static_cast<std::size_t>(rounds) != 0)
      continue;
    const std::size_t per_round = n / static_cast<std::size_t>(rounds);
    std::vector<double> row;
    for (int r = 0; r < rounds; ++r) {
      const auto first = p.iteration_samples_s.begin() + static_cast<std::ptrdiff_t>(r * per_round);
      const double median = median_of({first, first + static_cast<std::ptrdiff_t>(per_round)});
      if (!(median > 0)) break;
      row.push_back(std::log(median));
    }
    if (row.size() == static_cast<std::size_t>(rounds)) cell.push_back(std::move(row));
  }
  if (cell.size() < 2) return std::nullopt;

  // Median polish: take each row's median out into the point effects, then each column's into
  // the round effects, and again; what stays in `cell` is the residual.
  std::vector<double> round_effect(static_cast<std::size_t>(rounds), 0.0);
  for (int sweep = 0; sweep < kPolishSweeps; ++sweep) {
    for (std::vector<double>& row : cell) {
      const double m = median_of(row);
      for (double& x : row)
        x -= m;
    }
    for (std::size_t r = 0; r < round_effect.size(); ++r) {
      std::vector<double> column;
      for (const std::vector<double>& row : cell)
        column.push_back(row[r]);
      const double m = median_of(column);
      round_effect[r] += m;
      for (std::vector<double>& row : cell)
        row[r] -= m;
    }
  }
  // Round effects about their median: the typical round is 1.
  const double typical = median_of(round_effect);
  std::vector<double> residuals;
  for (const std::vector<double>& row : cell)
    for (double x : row)
      residuals.push_back(std::abs(x));

  RoundDrift drift;
  drift.rounds = rounds;
  drift.points = static_cast<int>(cell.size());
  drift.slowest_round =
      std::exp(*std::max_element(round_effect.begin(), round_effect.end()) - typical);
  drift.fastest_round =
      std::exp(*std::min_element(round_effect.begin(), round_effect.end()) - typical);
  // The polish sets each row's and each column's median residual to zero: points + rounds - 1
  // of them carry nothing of the scatter (with three rounds, a third of the table). The scatter
  // is the robust standard deviation of the others: 1.4826 x their median absolute value, the
  // ratio of the two for a normal sample.
  std::sort(residuals.begin(), residuals.end());
  const std::size_t fitted = std::min(cell.size() + round_effect.size() - 1, residuals.size() - 1);
  residuals.erase(residuals.begin(), residuals.begin() + static_cast<std::ptrdiff_t>(fitted));
  drift.point_scatter = std::expm1(1.4826 * median_of(residuals));
  return drift;
}

}  // namespace epochcast

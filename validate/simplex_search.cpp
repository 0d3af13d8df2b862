// Nelder-Mead: reflect the worst vertex through the others' centroid, expand when that is the
// new best, contract when it is not better than the second worst, shrink towards the best when
// even the contraction fails.
#include "validate/simplex_search.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace epochcast::validate {

SimplexResult simplex_search(const std::function<double(const std::vector<double>&)>& cost,
                             std::vector<double> start, double step, double tolerance,
                             std::size_t max_evaluations) {
  const std::size_t n = start.size();
  SimplexResult result;
  auto evaluate = [&](const std::vector<double>& x) {
    ++result.evaluations;
    const double value = cost(x);
    return std::isfinite(value) ? value : std::numeric_limits<double>::max();
  };
  if (n == 0) {
    result.value = evaluate(start);
    return result;
  }
  std::vector<std::vector<double>> points(n + 1, start);
  for (std::size_t i = 0; i < n; ++i)
    points[i + 1][i] += step;
  std::vector<double> values;
  for (const auto& p : points)
    values.push_back(evaluate(p));
  std::vector<std::size_t> order(n + 1);
  auto along = [&](const std::vector<double>& from, const std::vector<double>& to, double t) {
    std::vector<double> x(n);
    for (std::size_t i = 0; i < n; ++i)
      x[i] = from[i] + t * (to[i] - from[i]);
    return x;
  };
  while (result.evaluations < max_evaluations) {
    std::iota(order.begin(), order.end(), 0);
    // Ties broken by index: the same path on every run.
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return values[a] < values[b]; });
    const std::size_t best = order.front(), worst = order.back(), second = order[n - 1];
    if (values[worst] - values[best] < tolerance) break;
    std::vector<double> centroid(n, 0.0);
    for (std::size_t v : order) {
      if (v == worst) continue;
      for (std::size_t i = 0; i < n; ++i)
        centroid[i] += points[v][i] / static_cast<double>(n);
    }
    const std::vector<double> reflected = along(centroid, points[worst], -1.0);
    const double reflected_value = evaluate(reflected);
    if (reflected_value < values[best]) {
      const std::vector<double> expanded = along(centroid, points[worst], -2.0);
      const double expanded_value = evaluate(expanded);
      if (expanded_value < reflected_value) {
        points[worst] = expanded;
        values[worst] = expanded_value;
      } else {
        points[worst] = reflected;
        values[worst] = reflected_value;
      }
      continue;
    }
    if (reflected_value < values[second]) {
      points[worst] = reflected;
      values[worst] = reflected_value;
      continue;
    }
    // Contract: outside when the reflection beat the worst, else inside.
    const bool outside = reflected_value < values[worst];
    const std::vector<double> contracted = along(centroid, points[worst], outside ? -0.5 : 0.5);
    const double contracted_value = evaluate(contracted);
    if (contracted_value < (outside ? reflected_value : values[worst])) {
      points[worst] = contracted;
      values[worst] = contracted_value;
      continue;
    }
    for (std::size_t v = 0; v <= n; ++v) {
      if (v == best) continue;
      points[v] = along(points[best], points[v], 0.5);
      values[v] = evaluate(points[v]);
    }
  }
  const std::size_t best =
      static_cast<std::size_t>(std::min_element(values.begin(), values.end()) - values.begin());
  result.x = points[best];
  result.value = values[best];
  return result;
}

}  // namespace epochcast::validate

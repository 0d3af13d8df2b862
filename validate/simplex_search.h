// Derivative-free minimisation (Nelder and Mead's simplex, "A simplex method for function
// minimization", Computer Journal 7, 1965, with the usual coefficients 1, 2, 1/2, 1/2), for
// costs that are continuous but not smooth: a roofline's max() of two bounds has kinks that
// trouble gradient methods.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

namespace epochcast::validate {

struct SimplexResult {
  std::vector<double> x;
  double value = 0;
  std::size_t evaluations = 0;
};

// Minimises `cost` from `start`, the first simplex stepping `step` along each axis; stops when
// the simplex's values differ by less than `tolerance` (absolute) or after `max_evaluations`.
// Deterministic: the same inputs take the same path.
SimplexResult simplex_search(const std::function<double(const std::vector<double>&)>& cost,
                             std::vector<double> start, double step, double tolerance,
                             std::size_t max_evaluations);

}  // namespace epochcast::validate

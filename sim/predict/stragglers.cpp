// Expected maximum of normal draws, for the slowest-GPU model.
#include "sim/predict/stragglers.h"

#include <cmath>

namespace epochcast::sim {

double expected_normal_maximum(int n) {
  if (n <= 1) return 0;
  // E[max] = integral of x n phi(x) Phi(x)^(n-1) dx, by Simpson's rule on [-9, 9]: beyond, the
  // integrand is below 2e-10 for any n up to 2^24 (n phi(9) x 9).
  constexpr int kIntervals = 3600;
  constexpr double kLow = -9, kHigh = 9;
  const double h = (kHigh - kLow) / kIntervals;
  const double inverse_sqrt_2pi = 1 / std::sqrt(2 * M_PI);
  auto integrand = [&](double x) {
    const double phi = inverse_sqrt_2pi * std::exp(-0.5 * x * x);
    const double cdf = 0.5 * std::erfc(-x / std::sqrt(2.0));
    return x * n * phi * std::pow(cdf, n - 1);
  };
  double sum = integrand(kLow) + integrand(kHigh);
  for (int i = 1; i < kIntervals; ++i) {
    sum += integrand(kLow + i * h) * (i % 2 == 1 ? 4 : 2);
  }
  return sum * h / 3;
}

double slowest_gpu_factor(int gpus, double spread) {
  if (gpus <= 1 || spread <= 0) return 1;
  return 1 + spread * expected_normal_maximum(gpus);
}

}  // namespace epochcast::sim

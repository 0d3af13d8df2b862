// The rounds x points table of an interleaved campaign: its round effects and the points'
// scatter recovered from a synthetic machine whose speed drifts between rounds.
#include <cmath>
#include <vector>

#include <catch2/catch.hpp>

#include "core/measure/round_drift.h"

namespace epochcast {
namespace {

// A point measured in `rounds` rounds of 5 samples, each round's samples at `base` times the
// round's speed factor and times `stray` for that point's own round (1: none).
MeasuredPoint measured(double base, const std::vector<double>& round_factor,
                       const std::vector<double>& stray) {
  MeasuredPoint p;
  p.rounds = static_cast<int>(round_factor.size());
  for (std::size_t r = 0; r < round_factor.size(); ++r)
    for (double jitter : {0.99, 0.995, 1.0, 1.005, 1.01})
      p.iteration_samples_s.push_back(base * round_factor[r] * stray[r] * jitter);
  p.iteration_s = spread_of(p.iteration_samples_s);
  return p;
}

}  // namespace

TEST_CASE("round drift: a machine's slow and fast rounds, apart from each point's own strays") {
  const std::vector<double> speed = {1.0, 0.8, 1.1, 1.0, 1.05};
  const std::vector<double> none(speed.size(), 1.0);
  std::vector<MeasuredPoint> points = {measured(0.002, speed, none), measured(0.005, speed, none),
                                       measured(0.011, speed, none), measured(0.030, speed, none)};
  std::optional<RoundDrift> d = round_drift(points);
  REQUIRE(d);
  CHECK(d->rounds == 5);
  CHECK(d->points == 4);
  // Against the typical (median) round, 1.0.
  CHECK(d->fastest_round == Approx(0.8));
  CHECK(d->slowest_round == Approx(1.1));
  CHECK(d->point_scatter == Approx(0).margin(1e-9));

  // One point's round 12% slow, alone: a stray, not the machine. The polish is robust to it.
  points[1] = measured(0.005, speed, {1.0, 1.0, 1.12, 1.0, 1.0});
  d = round_drift(points);
  REQUIRE(d);
  CHECK(d->slowest_round == Approx(1.1));
  CHECK(d->point_scatter < 0.01);

  // Every point straying in every round, 4% a standard deviation (a fixed draw of normal
  // deviates): the scatter says about that much, the round effects stay.
  const double deviates[4][5] = {{0.35, -1.2, 0.8, -0.1, 1.6},
                                 {-0.7, 0.2, -1.9, 1.1, 0.5},
                                 {1.3, -0.4, 0.05, -0.9, -1.5},
                                 {-0.25, 0.9, 0.6, -0.6, -1.0}};
  for (std::size_t i = 0; i < points.size(); ++i) {
    std::vector<double> stray;
    for (double z : deviates[i])
      stray.push_back(std::exp(0.04 * z));
    points[i] = measured(0.002 * static_cast<double>(i + 1), speed, stray);
  }
  d = round_drift(points);
  REQUIRE(d);
  CHECK(d->point_scatter > 0.02);
  CHECK(d->point_scatter < 0.06);
  CHECK(d->slowest_round == Approx(1.1).epsilon(0.05));
  CHECK(d->fastest_round == Approx(0.8).epsilon(0.05));
}

TEST_CASE("round drift needs two rounds of two points, measured alike") {
  const std::vector<double> speed = {1.0, 0.9};
  std::vector<MeasuredPoint> points = {measured(0.002, speed, {1, 1})};
  CHECK_FALSE(round_drift(points));  // one point
  points.push_back(measured(0.004, {1.0}, {1}));
  CHECK_FALSE(round_drift(points));  // the second has one round
  points.push_back(measured(0.004, speed, {1, 1}));
  points.back().iteration_samples_s.pop_back();  // 9 samples do not split into 2 rounds
  CHECK_FALSE(round_drift(points));
  points.push_back(measured(0.008, speed, {1, 1}));
  points.back().status = PointStatus::oom;
  CHECK_FALSE(round_drift(points));
  points.push_back(measured(0.008, speed, {1, 1}));
  std::optional<RoundDrift> d = round_drift(points);
  REQUIRE(d);
  CHECK(d->points == 2);
  CHECK(d->fastest_round == Approx(std::sqrt(0.9)));  // two rounds: their median is between
}

}  // namespace epochcast

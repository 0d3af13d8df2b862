// How steady the machine was while a campaign measured it. `epochcast run --rounds N` measures
// every point once a round, the points in turn, N rounds in all, so that a slow spell of a shared
// machine reaches every point alike; the rounds' per-point medians then form a rounds x points
// table. Tukey's median polish splits its logarithm into
//
//   log t[round][point] = overall + point effect + round effect + residual,
//
// robustly (Tukey, "Exploratory Data Analysis", 1977, ch. 11). The round effects are how much
// faster or slower the whole machine ran in a round; the residuals are what moved one point in
// one round and not the others (a neighbour's burst during that point). A model cannot explain
// either: they bound how closely any prediction can be checked against the campaign.
#pragma once

#include <optional>
#include <vector>

#include "core/measure/measurements.h"

namespace epochcast {

struct RoundDrift {
  int rounds = 0;  // rounds in the table
  int points = 0;  // points in it: those measured ok in every round, with as many samples in each
  // The slowest and the fastest round's time over the typical round's (the rounds' median).
  double slowest_round = 1;
  double fastest_round = 1;
  // The residuals' robust standard deviation (1.4826 x the median absolute value of those the
  // polish did not set to zero), as a fraction of the time: how far one point's round strays
  // from what its point and its round say.
  double point_scatter = 0;
};

// The table of `points` (a campaign's, in any order) and its polish; nullopt when fewer than two
// rounds or two points can be tabled.
std::optional<RoundDrift> round_drift(const std::vector<MeasuredPoint>& points);

}  // namespace epochcast

// The end-to-end fit: nonlinear least squares with the simulator in the loop. Every free figure
// of the profile that the measured epochs (or iterations) depend on is moved, in log space and
// within physical bounds, to minimise the points' relative errors, with the prior profile as a
// regulariser: each figure costs ((log value - log prior) / prior spread)^2, so a figure the
// points cannot see stays at its prior. Figures fitted earlier from per-layer times,
// microbenchmarks or the loaders' clocks enter with those fits as their priors and the fits'
// standard errors as their spreads, so those measurements keep their weight in the same fit.
//
// At the solution the Jacobian gives each figure's standard error and whether the points
// constrain it, the covariance stored in the profile, and the sweep point that would shrink the
// predicted uncertainty most. Each point is then predicted by a refit without it (the prior
// still in place); a fit that predicts the points it did not see worse than the prior predicts
// them is reported and not kept.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/spec/profile_spec.h"
#include "validate/calibration.h"

namespace epochcast::validate {

// Relative noise assumed of a measured figure without a spread of its own (run-to-run variation
// of an epoch time; a published figure is rounded to a few digits).
inline constexpr double kAssumedRelativeNoise = 0.02;

// A figure's prior: its value (in the key's unit) and spread (standard deviation of its natural
// logarithm), and where they come from.
struct FigurePrior {
  std::string key;
  double value = 0;
  double log_sd = 0;
  std::string from;
};

enum class Constraint {
  fixed,          // the points determine it: its spread fell below half the prior's
  partly,         // they narrow it
  unconstrained,  // they hardly inform it: it stays near its prior
  unseen,         // no measured point depends on it: kept at its prior, not fitted
};
const char* constraint_name(Constraint c);

struct FigureEstimate {
  std::string key;
  double prior = 0;  // in the key's unit
  double prior_log_sd = 0;
  double value = 0;
  double log_sd = 0;  // after the fit (the prior's for unseen figures)
  Constraint constraint = Constraint::unseen;
  std::string prior_from;
};

struct NextPoint {
  std::string scenario;
  int gpus = 1;
  std::int64_t global_batch = 0;
  double relative_sd = 0;  // of its predicted figure now
};

struct EndToEndFit {
  int points = 0;
  HardwareProfile profile;              // the fitted profile, or the start when the prior is kept
  std::vector<FigureEstimate> figures;  // every candidate, fitted ones first
  ProfileUncertainty uncertainty;       // over the fitted figures
  double prior_mape_pct = 0;            // of the start profile on the points
  double fitted_mape_pct = 0;
  // Each point predicted by a refit without it (beyond 12 points, by twelve folds).
  double leave_one_out_mape_pct = 0;
  // What the points determine beyond the priors, in figures: the trace of the points' share of
  // the posterior information.
  double effective_figures = 0;
  bool kept_prior = false;
  std::optional<NextPoint> next_point;
  int starts = 0;
  int simulations = 0;     // simulated points, all stages of the fit
  double noise_scale = 1;  // residuals' spread over the assumed measurement noise, when above 1
  // What the fit could not absorb, in words: figures held at a bound of their physical range,
  // and structure left in the points' errors (one sign everywhere, a trend with the batch or
  // the GPU count), each with the mechanism that would explain it.
  std::vector<std::string> findings;
};

// The points of `inputs` that `use` admits, fitted from `start` with `priors` replacing the
// default prior of the figures they name (see above).
EndToEndFit fit_end_to_end(const std::vector<MeasuredScenario>& inputs, const PointFilter& use,
                           const HardwareProfile& start, const std::vector<FigurePrior>& priors,
                           const FitProgress& progress = {});

// The default prior spread of a figure that no measurement fitted: a factor 2 for efficiencies,
// 3 for host and link times.
double default_log_sd(const std::string& key);

}  // namespace epochcast::validate

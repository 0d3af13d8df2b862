// The end-to-end fit of end_to_end_fit.h: Ceres' Levenberg-Marquardt over whitened log figures,
// the residuals computed by simulating every measured point.
#include "validate/end_to_end_fit.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <thread>

#include <Eigen/Dense>
#include <ceres/ceres.h>
#include <fmt/format.h>

#include "core/spec/profile_figures.h"
#include "validate/validation.h"

namespace epochcast::validate {

namespace {

// A p10-p90 range is 2.563 standard deviations of a normal distribution.
constexpr double kSpreadToSd = 1 / 2.563;
// Finite-difference step for the Jacobian, in prior spreads: large enough that the
// discrete-event simulator's event reordering does not pass for a slope.
constexpr double kStep = 0.01;
// A figure is seen when moving it by its prior spread moves some point by a tenth of its noise.
constexpr double kSeenThreshold = 0.1;
// A fitted figure's spread over its prior's below which the points fix it, or constrain it.
constexpr double kFixedSpread = 0.5, kConstrainedSpread = 0.9;
// Solver iterations of a fit.
constexpr int kMaxIterations = 50;
// Candidates for the next measured point, at most, per fit.
constexpr std::size_t kMaxCandidates = 64;
// Refits of the cross-validation, at most: leave-one-out up to this many points, folds beyond.
constexpr std::size_t kMaxFolds = 12;
// Solver iterations of a refit: it starts at the solution, a point or a fold away from its own.
constexpr int kMaxRefitIterations = 4;
constexpr double kNoiseFloor = kAssumedRelativeNoise;

// fn(i) for i in [0, count), spread over the machine's cores: the points of one evaluation are
// independent simulations (each on its own copy of the scenario), and each result lands in its
// own slot, so the outcome does not depend on the number of threads.
std::vector<double> parallel_map(std::size_t count, const std::function<double(std::size_t)>& fn) {
  std::vector<double> out(count);
  const std::size_t threads =
      std::min<std::size_t>(count, std::max(1u, std::thread::hardware_concurrency()));
  if (threads <= 1) {
    for (std::size_t i = 0; i < count; ++i)
      out[i] = fn(i);
    return out;
  }
  std::vector<std::exception_ptr> errors(threads);
  std::vector<std::thread> workers;
  for (std::size_t t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      try {
        for (std::size_t i = t; i < count; i += threads)
          out[i] = fn(i);
      } catch (...) {
        errors[t] = std::current_exception();
      }
    });
  }
  for (std::thread& w : workers)
    w.join();
  for (const std::exception_ptr& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  return out;
}

struct FitPoint {
  std::size_t input = 0;
  MeasuredPoint point;
  Figure figure = Figure::epoch;
  double measured = 0;
  double sigma = kNoiseFloor;
};

// A figure the fit moves, whitened: x = (log value - log prior) / log_sd.
struct FreeFigure {
  std::string key;
  double prior = 0;
  double log_sd = 1;
  double lower = 0, upper = 0;     // bounds of x
  double lowest = 0, highest = 0;  // the same bounds on the value, in the key's unit
};

// The finite-difference step for figure `f` at x: forward, or backward at its upper bound.
double difference_step(const FreeFigure& f, double x) {
  return x + kStep <= f.upper ? kStep : -kStep;
}

// The simulator as a function of the free figures: relative error of every point.
class PointModel {
 public:
  PointModel(const std::vector<MeasuredScenario>& inputs, const std::vector<FitPoint>& points,
             const HardwareProfile& start)
      : inputs_(inputs), points_(points), start_(start) {}

  void set_free(std::vector<FreeFigure> free) { free_ = std::move(free); }
  const std::vector<FreeFigure>& free() const { return free_; }

  HardwareProfile profile_at(const double* x) const {
    HardwareProfile p = start_;
    for (std::size_t k = 0; k < free_.size(); ++k)
      // Clamped: exp(log) can land a rounding step outside a bound the loader checks.
      set_profile_figure(p, free_[k].key,
                         std::clamp(free_[k].prior * std::exp(x[k] * free_[k].log_sd),
                                    free_[k].lowest, free_[k].highest));
    return p;
  }

  // Predicted over measured, minus one, for each point (NaN where it does not simulate).
  std::vector<double> relative_errors(const HardwareProfile& profile) const {
    std::vector<ScenarioSpec> scenarios;
    for (const MeasuredScenario& input : inputs_) {
      scenarios.push_back(input.scenario);
      apply_profile(scenarios.back(), profile);
    }
    simulations_ += static_cast<int>(points_.size());
    return parallel_map(points_.size(), [&](std::size_t i) {
      const FitPoint& p = points_[i];
      PredictedFigure r = predict_figure(scenarios[p.input], p.point, p.figure);
      return r.simulated ? r.seconds / p.measured - 1 : std::numeric_limits<double>::quiet_NaN();
    });
  }

  // Whitened data residuals: relative error over noise.
  std::vector<double> residuals(const double* x) const {
    std::vector<double> r = relative_errors(profile_at(x));
    for (std::size_t i = 0; i < r.size(); ++i)
      r[i] = r[i] / points_[i].sigma;
    return r;
  }

  const std::vector<FitPoint>& points() const { return points_; }
  const std::vector<MeasuredScenario>& inputs() const { return inputs_; }
  int simulations() const { return simulations_; }
  void count(int n) const { simulations_ += n; }

 private:
  const std::vector<MeasuredScenario>& inputs_;
  const std::vector<FitPoint>& points_;
  const HardwareProfile& start_;
  std::vector<FreeFigure> free_;
  mutable int simulations_ = 0;
};

// Residuals: the points' whitened errors, then one prior term per free figure (x itself).
// Jacobian by forward differences through the simulator.
class EndToEndCost : public ceres::CostFunction {
 public:
  explicit EndToEndCost(const PointModel& model) : model_(model) {
    set_num_residuals(static_cast<int>(model.points().size() + model.free().size()));
    mutable_parameter_block_sizes()->push_back(static_cast<int>(model.free().size()));
  }

  bool Evaluate(double const* const* parameters, double* residuals,
                double** jacobians) const override {
    const double* x = parameters[0];
    const std::size_t n = model_.free().size(), m = model_.points().size();
    std::vector<double> r = model_.residuals(x);
    for (double v : r) {
      if (!std::isfinite(v)) return false;  // a point stopped simulating: reject the step
    }
    std::copy(r.begin(), r.end(), residuals);
    for (std::size_t k = 0; k < n; ++k)
      residuals[m + k] = x[k];
    if (jacobians == nullptr || jacobians[0] == nullptr) return true;
    double* J = jacobians[0];
    std::fill(J, J + (m + n) * n, 0.0);
    std::vector<double> moved(x, x + n);
    for (std::size_t k = 0; k < n; ++k) {
      const double step = difference_step(model_.free()[k], x[k]);
      moved[k] = x[k] + step;
      std::vector<double> rk = model_.residuals(moved.data());
      moved[k] = x[k];
      for (std::size_t i = 0; i < m; ++i)
        J[i * n + k] = std::isfinite(rk[i]) ? (rk[i] - r[i]) / step : 0.0;
      J[(m + k) * n + k] = 1.0;
    }
    return true;
  }

 private:
  const PointModel& model_;
};

struct Solution {
  std::vector<double> x;
  double cost = std::numeric_limits<double>::infinity();
};

// Stops when an iteration improves the cost by less than 0.01%, or moves no figure by more than
// 0.1% of its prior spread: finer than the measurements' noise, coarser than the simulator's
// event-ordering ripple (which would otherwise keep the solver crawling).
// Reports each iteration to a progress callback.
class IterationReport : public ceres::IterationCallback {
 public:
  explicit IterationReport(std::function<void(int)> report) : report_(std::move(report)) {}
  ceres::CallbackReturnType operator()(const ceres::IterationSummary& summary) override {
    report_(summary.iteration);
    return ceres::SOLVER_CONTINUE;
  }

 private:
  std::function<void(int)> report_;
};

Solution solve(const PointModel& model, std::vector<double> x,
               const std::function<void(int)>& on_iteration, int iterations = kMaxIterations) {
  // The points see no figure (too noisy, or too few): nothing to fit, and Ceres aborts the
  // process on a residual block without parameters. The cost only ranks the starts, and with no
  // figure there is one start (starts(0)), so it is not simulated.
  if (x.empty()) return {std::move(x), 0.0};
  EndToEndCost cost(model);
  ceres::Problem::Options problem_options;
  problem_options.cost_function_ownership = ceres::DO_NOT_TAKE_OWNERSHIP;
  ceres::Problem problem(problem_options);
  problem.AddResidualBlock(&cost, nullptr, x.data());
  for (std::size_t k = 0; k < x.size(); ++k) {
    const FreeFigure& f = model.free()[k];
    x[k] = std::clamp(x[k], f.lower, f.upper);
    problem.SetParameterLowerBound(x.data(), static_cast<int>(k), f.lower);
    problem.SetParameterUpperBound(x.data(), static_cast<int>(k), f.upper);
  }
  ceres::Solver::Options options;
  options.linear_solver_type = ceres::DENSE_QR;
  options.max_num_iterations = iterations;
  options.function_tolerance = 1e-4;
  options.parameter_tolerance = 1e-3;
  options.logging_type = ceres::SILENT;
  options.num_threads = 1;
  IterationReport report(on_iteration);
  if (on_iteration) options.callbacks.push_back(&report);
  ceres::Solver::Summary summary;
  ceres::Solve(options, &problem, &summary);
  return {std::move(x), summary.final_cost};
}

// The Jacobian of the whitened residuals (points, then priors) at x.
Eigen::MatrixXd jacobian(const PointModel& model, const std::vector<double>& x) {
  EndToEndCost cost(model);
  const std::size_t rows = model.points().size() + x.size();
  std::vector<double> residuals(rows), J(rows * x.size());
  const double* parameters[] = {x.data()};
  double* jacobians[] = {J.data()};
  if (!cost.Evaluate(parameters, residuals.data(), jacobians))
    throw std::logic_error("the fitted point no longer simulates");
  Eigen::MatrixXd out(static_cast<Eigen::Index>(rows), static_cast<Eigen::Index>(x.size()));
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t k = 0; k < x.size(); ++k)
      out(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(k)) = J[i * x.size() + k];
  return out;
}

// The covariance of x at the solution from the Jacobian J (the points' m rows, then one identity
// row per figure for its prior). With the points scattering `noise_scale` times the assumed
// noise, their information is divided by its square and the priors' is not, so no figure ends
// less certain than its prior.
Eigen::MatrixXd posterior_covariance(const Eigen::MatrixXd& J, std::size_t m, double noise_scale) {
  const auto n = J.cols();
  const Eigen::MatrixXd identity = Eigen::MatrixXd::Identity(n, n);
  if (noise_scale <= 1) return (J.transpose() * J).ldlt().solve(identity);
  const Eigen::MatrixXd data = J.topRows(static_cast<Eigen::Index>(m));
  const Eigen::MatrixXd information =
      data.transpose() * data / (noise_scale * noise_scale) + identity;
  return information.ldlt().solve(identity);
}

// The sum of the points' squared whitened errors (NaN-free: every fitted point simulates).
double squared_sum(const std::vector<double>& relative_errors,
                   const std::vector<FitPoint>& points) {
  double sum = 0;
  for (std::size_t i = 0; i < points.size(); ++i)
    sum += std::pow(relative_errors[i] / points[i].sigma, 2);
  return sum;
}

double mape_pct(const std::vector<double>& relative_errors) {
  double sum = 0;
  for (double e : relative_errors)
    sum += std::abs(e);
  return relative_errors.empty() ? 0 : sum / static_cast<double>(relative_errors.size()) * 100;
}

std::vector<FitPoint> fit_points(const std::vector<MeasuredScenario>& inputs,
                                 const PointFilter& use, const HardwareProfile& start) {
  std::vector<FitPoint> points;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    ScenarioSpec s = inputs[i].scenario;
    apply_profile(s, start);
    for (const MeasuredPoint& p : inputs[i].measurements.points) {
      if (p.status != PointStatus::ok || (use && !use(p))) continue;
      const MeasuredFigure figure = measured_figure(p);
      if (figure.seconds <= 0) continue;
      // A point the simulator says does not fit in memory is not comparable (as in validate).
      if (!predict_figure(s, p, figure.figure).simulated) continue;
      FitPoint f{i, p, figure.figure, figure.seconds, kNoiseFloor};
      if (p.iteration_s.count > 1 && p.iteration_s.median > 0) {
        const double spread = (p.iteration_s.p90 - p.iteration_s.p10) / p.iteration_s.median;
        f.sigma = std::max(kNoiseFloor, spread * kSpreadToSd);
      }
      points.push_back(f);
    }
  }
  return points;
}

// The candidates' priors: given ones, else the start profile's value and the default spread.
// The loader's cost per sample is one figure of the profile: a candidate only when every
// scenario reads the same data set (name and sample shape) at the same prior cost.
std::vector<FreeFigure> candidates(const std::vector<MeasuredScenario>& inputs,
                                   const HardwareProfile& start,
                                   const std::vector<FigurePrior>& priors,
                                   std::map<std::string, std::string>& prior_from) {
  const ScenarioSpec& first = inputs.front().scenario;
  bool one_pipeline = true;
  for (const MeasuredScenario& m : inputs) {
    one_pipeline = one_pipeline && m.scenario.dataset.name == first.dataset.name &&
                   m.scenario.dataset.sample_shape == first.dataset.sample_shape &&
                   m.scenario.loader.sample_cpu.value() == first.loader.sample_cpu.value();
  }
  // On a GPU each figure stays within its physical range (profile_figures.h).
  const bool gpu = std::none_of(inputs.begin(), inputs.end(), [](const MeasuredScenario& m) {
    return is_cpu_architecture(m.scenario.machine.gpu.architecture);
  });
  std::vector<FreeFigure> out;
  for (ProfileFigure figure : profile_figures()) {
    if (const std::optional<PhysicalRange> range = gpu_physical_range(figure.key); gpu && range) {
      figure.lower = range->lower;
      figure.upper = range->upper;
    }
    std::optional<double> value = profile_figure_value(start, figure.key);
    if (figure.key == "input.sample_cpu_us") {
      if (!one_pipeline) continue;
      if (!value) value = first.loader.sample_cpu.value() * 1e6;
    }
    if (!value || *value <= 0) continue;
    // Kernel-level figures (a GEMM tile's costs, which epochcast kernels fits; a CPU's serial
    // random draws, which the per-layer fit sets): epoch times cannot tell them from the
    // figures of the kernels around them.
    if (figure.kernel_level) continue;
    FreeFigure f{figure.key, *value, default_log_sd(figure.key), 0, 0, figure.lower, figure.upper};
    prior_from[figure.key] = "prior profile";
    for (const FigurePrior& p : priors) {
      if (p.key != figure.key) continue;
      f.prior = p.value;
      f.log_sd = p.log_sd;
      prior_from[figure.key] = p.from;
    }
    f.prior = std::clamp(f.prior, figure.lower, figure.upper);
    f.lower = std::log(figure.lower / f.prior) / f.log_sd;
    f.upper = std::log(figure.upper / f.prior) / f.log_sd;
    out.push_back(f);
  }
  return out;
}

// Starts of the multi-start: the prior, then every free figure a prior spread up, down, and
// alternately (the bottleneck a point sits at can switch, so the problem is not convex).
std::vector<std::vector<double>> starts(std::size_t n) {
  std::vector<std::vector<double>> out{std::vector<double>(n, 0.0)};
  if (n == 0) return out;
  out.emplace_back(n, 1.0);
  out.emplace_back(n, -1.0);
  std::vector<double> alternate(n);
  for (std::size_t k = 0; k < n; ++k)
    alternate[k] = k % 2 ? 1.0 : -1.0;
  out.push_back(alternate);
  return out;
}

struct Candidate {
  std::size_t input = 0;
  MeasuredPoint point;
  Figure figure = Figure::epoch;
};

// Sweep points of the measured scenarios that were not measured.
std::vector<Candidate> next_point_candidates(const std::vector<MeasuredScenario>& inputs,
                                             const std::vector<FitPoint>& measured) {
  std::vector<Candidate> out;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    Figure figure = Figure::iteration;
    for (const FitPoint& p : measured) {
      if (p.input == i && p.figure == Figure::epoch) figure = Figure::epoch;
    }
    std::set<std::pair<int, std::int64_t>> seen;
    for (const MeasuredScenario& other : inputs) {
      if (other.scenario.name != inputs[i].scenario.name) continue;
      for (const MeasuredPoint& p : other.measurements.points)
        seen.insert({p.gpus, p.global_batch});
    }
    for (const SweepPoint& s : expand_sweep(inputs[i].scenario)) {
      if (seen.count({s.gpus, s.global_batch})) continue;
      if (!point_problem(inputs[i].scenario, s).empty()) continue;
      MeasuredPoint p;
      p.gpus = s.gpus;
      p.global_batch = s.global_batch;
      p.per_gpu_batch = s.per_gpu_batch;
      out.push_back({i, p, figure});
    }
  }
  if (out.size() > kMaxCandidates) {  // evenly thinned, deterministically
    std::vector<Candidate> thinned;
    for (std::size_t k = 0; k < kMaxCandidates; ++k)
      thinned.push_back(out[k * out.size() / kMaxCandidates]);
    out = std::move(thinned);
  }
  return out;
}

// The candidate whose predicted figure is most uncertain: measuring it shrinks the predicted
// uncertainty most (for one added point, the largest variance gains the most information).
std::optional<NextPoint> suggest_next_point(const PointModel& model, const std::vector<double>& x,
                                            const Eigen::MatrixXd& covariance) {
  const std::vector<Candidate> candidates = next_point_candidates(model.inputs(), model.points());
  if (candidates.empty() || x.empty()) return std::nullopt;
  auto log_predictions = [&](const HardwareProfile& profile) {
    std::vector<ScenarioSpec> scenarios;
    for (const MeasuredScenario& input : model.inputs()) {
      scenarios.push_back(input.scenario);
      apply_profile(scenarios.back(), profile);
    }
    model.count(static_cast<int>(candidates.size()));
    return parallel_map(candidates.size(), [&](std::size_t i) {
      const Candidate& c = candidates[i];
      PredictedFigure r = predict_figure(scenarios[c.input], c.point, c.figure);
      return r.simulated && r.seconds > 0 ? std::log(r.seconds)
                                          : std::numeric_limits<double>::quiet_NaN();
    });
  };
  const std::vector<double> base = log_predictions(model.profile_at(x.data()));
  Eigen::MatrixXd G(static_cast<Eigen::Index>(candidates.size()),
                    static_cast<Eigen::Index>(x.size()));
  std::vector<double> moved = x;
  for (std::size_t k = 0; k < x.size(); ++k) {
    const double step = difference_step(model.free()[k], x[k]);
    moved[k] = x[k] + step;
    const std::vector<double> shifted = log_predictions(model.profile_at(moved.data()));
    moved[k] = x[k];
    for (std::size_t c = 0; c < candidates.size(); ++c)
      G(static_cast<Eigen::Index>(c), static_cast<Eigen::Index>(k)) =
          std::isfinite(base[c]) && std::isfinite(shifted[c]) ? (shifted[c] - base[c]) / step : 0.0;
  }
  std::optional<NextPoint> best;
  for (std::size_t c = 0; c < candidates.size(); ++c) {
    if (!std::isfinite(base[c])) continue;
    Eigen::VectorXd g = G.row(static_cast<Eigen::Index>(c)).transpose();
    const double sd = std::sqrt(std::max(0.0, g.dot(covariance * g)));
    if (!best || sd > best->relative_sd * (1 + 1e-9)) {
      const Candidate& k = candidates[c];
      best =
          NextPoint{model.inputs()[k.input].scenario.name, k.point.gpus, k.point.global_batch, sd};
    }
  }
  return best;
}

// A move of more than this many prior spreads is reported: a figure pushed that far is more
// often absorbing a mechanism the model lacks than correcting a prior.
constexpr double kFarFromPrior = 3;

// Figures the fit left at a bound of their range (the points wanted them beyond it), or moved
// far from their prior.
void held_at_bounds(const std::vector<FreeFigure>& free, const std::vector<double>& x,
                    std::vector<std::string>& findings) {
  for (std::size_t k = 0; k < free.size(); ++k) {
    const FreeFigure& f = free[k];
    const bool low = x[k] <= f.lower + 1e-6, high = x[k] >= f.upper - 1e-6;
    if (!low && !high) {
      if (std::abs(x[k]) > kFarFromPrior) {
        findings.push_back(fmt::format(
            "{} moved {:.1f} prior spreads from its prior ({:.4g} -> {:.4g}): check that the "
            "value is physical; a figure pushed that far often stands in for a mechanism the "
            "model lacks",
            f.key, std::abs(x[k]), f.prior, f.prior * std::exp(x[k] * f.log_sd)));
      }
      continue;
    }
    const std::optional<PhysicalRange> range = gpu_physical_range(f.key);
    findings.push_back(fmt::format(
        "{} is held at the {} of its range ({:g}-{:g}{}): the points want it beyond, so what "
        "they show there is a mechanism the model lacks, not this figure",
        f.key, low ? "floor" : "ceiling", f.lowest, f.highest,
        range && range->lower == f.lowest && range->upper == f.highest
            ? fmt::format(": {}", range->why)
            : std::string()));
  }
}

// Structure in the fitted points' relative errors that no figure took up: one sign at every
// point, or a monotone trend with the per-GPU batch or the GPU count, each beyond the points'
// noise.
void residual_structure(const std::vector<FitPoint>& points, const std::vector<double>& errors,
                        std::vector<std::string>& findings) {
  const std::size_t m = points.size();
  if (m < 3) return;
  double noise = 0, lowest = errors[0], highest = errors[0];
  for (std::size_t i = 0; i < m; ++i) {
    noise = std::max(noise, points[i].sigma);
    lowest = std::min(lowest, errors[i]);
    highest = std::max(highest, errors[i]);
  }
  if (lowest > noise || highest < -noise) {
    const bool slow = lowest > 0;
    findings.push_back(fmt::format(
        "every point is predicted too {} after the fit ({:+.1f}% to {:+.1f}%): {} at every point "
        "that no figure within its range takes up",
        slow ? "slow" : "fast", lowest * 100, highest * 100,
        slow ? "the model charges a cost the runs do not pay"
             : "the runs pay a cost the model lacks"));
  }
  if (highest - lowest < 2 * noise || m < 4) return;
  auto trend = [&](auto value, const char* name) {
    std::vector<double> v, e;
    std::set<double> distinct;
    for (std::size_t i = 0; i < m; ++i) {
      v.push_back(value(points[i]));
      e.push_back(errors[i]);
      distinct.insert(v.back());
    }
    if (distinct.size() < 3) return 0.0;
    const double rho = spearman(v, e);
    if (std::abs(rho) < 0.8) return 0.0;
    const auto [first, last] = std::minmax_element(v.begin(), v.end());
    findings.push_back(fmt::format(
        "the errors {} with the {} (Spearman {:.2f}; {:+.1f}% at {:g}, {:+.1f}% at {:g})",
        rho > 0 ? "rise" : "fall", name, rho, e[static_cast<std::size_t>(first - v.begin())] * 100,
        *first, e[static_cast<std::size_t>(last - v.begin())] * 100, *last));
    return rho;
  };
  const double batch =
      trend([](const FitPoint& p) { return static_cast<double>(p.point.per_gpu_batch); },
            "per-GPU batch");
  if (batch > 0) {
    findings.back() +=
        ": small batches run slower than predicted, large ones faster: a cost per step the model "
        "lacks (a per-step floor, host dispatch the steps wait for), or too much per sample";
  } else if (batch < 0) {
    findings.back() +=
        ": the model charges too much per step or too little per sample (a per-sample cost such "
        "as the loader's, or memory traffic that grows with the batch)";
  }
  const double gpus =
      trend([](const FitPoint& p) { return static_cast<double>(p.point.gpus); }, "GPU count");
  if (gpus != 0) {
    findings.back() += gpus > 0 ? ": more GPUs run faster than predicted: communication or "
                                  "synchronisation counted too dear"
                                : ": more GPUs run slower than predicted: communication, "
                                  "synchronisation or stragglers the model lacks";
  }
}

}  // namespace

const char* constraint_name(Constraint c) {
  switch (c) {
    case Constraint::fixed:
      return "fixed by the points";
    case Constraint::partly:
      return "partly constrained";
    case Constraint::unconstrained:
      return "unconstrained, stays near its prior";
    case Constraint::unseen:
      return "not seen by the points, kept at its prior";
  }
  return "";
}

double default_log_sd(const std::string& key) {
  const ProfileFigure* f = find_profile_figure(key);
  return f && f->kind != FigureKind::microseconds ? std::log(2.0) : std::log(3.0);
}

EndToEndFit fit_end_to_end(const std::vector<MeasuredScenario>& inputs, const PointFilter& use,
                           const HardwareProfile& start, const std::vector<FigurePrior>& priors,
                           const FitProgress& progress) {
  // Shares of the work, for the progress line: screening the figures, the starts, the checks.
  auto report = [&](const std::string& stage, double fraction) {
    if (progress) progress(stage, std::clamp(fraction, 0.0, 1.0));
  };
  EndToEndFit out;
  out.profile = start;
  const std::vector<FitPoint> points = fit_points(inputs, use, start);
  out.points = static_cast<int>(points.size());
  std::map<std::string, std::string> prior_from;
  std::vector<FreeFigure> all = candidates(inputs, start, priors, prior_from);
  PointModel model(inputs, points, start);
  if (points.empty()) return out;

  // Which figures the points depend on at all: the rest are not fitted.
  const std::vector<double> at_prior = model.relative_errors(start);
  out.prior_mape_pct = mape_pct(at_prior);
  std::vector<FreeFigure> free;
  std::vector<FigureEstimate> unseen;
  for (const FreeFigure& f : all) {
    report(
        fmt::format("screening {} figures against {} points", all.size(), points.size()),
        0.1 * static_cast<double>(free.size() + unseen.size()) / static_cast<double>(all.size()));
    HardwareProfile moved = start;
    const double direction = f.upper >= 1 ? 1.0 : -1.0;  // stay inside the bounds
    set_profile_figure(moved, f.key, f.prior * std::exp(direction * f.log_sd));
    const std::vector<double> errors = model.relative_errors(moved);
    double largest = 0;
    for (std::size_t i = 0; i < points.size(); ++i) {
      if (std::isfinite(errors[i]))
        largest = std::max(largest, std::abs(errors[i] - at_prior[i]) / points[i].sigma);
    }
    if (largest >= kSeenThreshold) {
      free.push_back(f);
    } else {
      unseen.push_back(
          {f.key, f.prior, f.log_sd, f.prior, f.log_sd, Constraint::unseen, prior_from[f.key]});
    }
  }
  model.set_free(free);

  Solution best;
  const std::vector<std::vector<double>> start_points = starts(free.size());
  for (const std::vector<double>& x0 : start_points) {
    ++out.starts;
    const int number = out.starts;
    const auto count = static_cast<double>(start_points.size());
    auto on_iteration = [&](int iteration) {
      // An iteration's share of its start: most starts end well before the cap.
      const double within = std::min(0.9, static_cast<double>(iteration) / kMaxIterations * 3);
      report(fmt::format("fitting {} figures: start {} of {}, iteration {}", free.size(), number,
                         start_points.size(), iteration),
             0.1 + 0.75 * (number - 1 + within) / count);
    };
    on_iteration(0);
    Solution s = solve(model, x0, on_iteration);
    if (s.cost < best.cost * (1 - 1e-9)) best = std::move(s);
  }
  out.profile = model.profile_at(best.x.data());
  const std::vector<double> fitted = model.relative_errors(out.profile);
  out.fitted_mape_pct = mape_pct(fitted);
  held_at_bounds(free, best.x, out.findings);
  residual_structure(points, fitted, out.findings);

  // The points' scatter against the assumed noise, over the degrees of freedom the priors leave.
  const std::size_t n = free.size(), m = points.size();
  const auto N = static_cast<Eigen::Index>(n);
  Eigen::MatrixXd covariance = Eigen::MatrixXd::Zero(N, N);
  Eigen::MatrixXd J;
  if (n > 0) {
    J = jacobian(model, best.x);
    covariance = posterior_covariance(J, m, 1);
    const Eigen::MatrixXd data = J.topRows(static_cast<Eigen::Index>(m));
    out.effective_figures = (data.transpose() * data * covariance).trace();
    const double dof = static_cast<double>(m) - out.effective_figures;
    if (dof > 0.5) out.noise_scale = std::max(1.0, std::sqrt(squared_sum(fitted, points) / dof));
  }

  // Cross-validation: each point predicted by the fit to the others, refitted from the solution
  // (beyond kMaxFolds points, each of kMaxFolds folds of every kMaxFolds-th point left out
  // together). The prior stays in every refit, so a figure that rested on the left-out points
  // falls back towards it: the fit is judged as the prior is, on points it did not see. The
  // refits move the figures the points constrain (their spread below 0.9 of the prior's); the
  // others, which all the points together hardly move, keep their fitted values.
  std::vector<double> left_out(m, std::numeric_limits<double>::quiet_NaN());
  const std::size_t folds = m >= 2 ? std::min(m, kMaxFolds) : 0;
  std::vector<FreeFigure> constrained;
  std::vector<double> constrained_x;
  for (std::size_t k = 0; k < n; ++k) {
    const auto K = static_cast<Eigen::Index>(k);
    if (covariance(K, K) >= kConstrainedSpread * kConstrainedSpread) continue;
    constrained.push_back(free[k]);
    constrained_x.push_back(best.x[k]);
  }
  for (std::size_t fold = 0; fold < folds; ++fold) {
    report(fmt::format("leaving points out to check the fit: {} of {}", fold + 1, folds),
           0.85 + 0.15 * static_cast<double>(fold) / static_cast<double>(folds));
    std::vector<FitPoint> kept;
    for (std::size_t i = 0; i < m; ++i) {
      if (i % folds != fold) kept.push_back(points[i]);
    }
    PointModel without(inputs, kept, out.profile);
    without.set_free(constrained);
    const Solution refit = solve(without, constrained_x, {}, kMaxRefitIterations);
    model.count(without.simulations());
    const std::vector<double> errors = model.relative_errors(without.profile_at(refit.x.data()));
    for (std::size_t i = fold; i < m; i += folds)
      left_out[i] = errors[i];
  }
  // A point that does not simulate under its refit (it would not fit in memory there) is left
  // out of both figures below.
  std::erase_if(left_out, [](double e) { return !std::isfinite(e); });
  out.leave_one_out_mape_pct = left_out.empty() ? out.fitted_mape_pct : mape_pct(left_out);
  // What refits without a point get wrong about it is the model's error at a point it has not
  // seen: the intervals carry it beside the figures' covariance.
  double model_variance = 0;
  for (double e : left_out)
    model_variance += std::pow(std::log1p(e), 2) / static_cast<double>(left_out.size());
  if (n > 0 && out.noise_scale > 1) covariance = posterior_covariance(J, m, out.noise_scale);
  // Like with like: a fit that predicts the points it did not see worse than the prior predicts
  // them (it never saw any) is not kept.
  out.kept_prior = n > 0 && !left_out.empty() && out.leave_one_out_mape_pct >= out.prior_mape_pct;

  for (std::size_t k = 0; k < n; ++k) {
    const FreeFigure& f = free[k];
    const double sd_ratio = std::sqrt(
        std::max(0.0, covariance(static_cast<Eigen::Index>(k), static_cast<Eigen::Index>(k))));
    const Constraint constraint = sd_ratio < kFixedSpread         ? Constraint::fixed
                                  : sd_ratio < kConstrainedSpread ? Constraint::partly
                                                                  : Constraint::unconstrained;
    out.figures.push_back({f.key, f.prior, f.log_sd, *profile_figure_value(out.profile, f.key),
                           sd_ratio * f.log_sd, constraint, prior_from[f.key]});
    out.uncertainty.figures.push_back(f.key);
  }
  out.uncertainty.model_log_sd = std::sqrt(model_variance);
  for (std::size_t a = 0; a < n; ++a) {
    std::vector<double> row;
    for (std::size_t b = 0; b < n; ++b)
      row.push_back(covariance(static_cast<Eigen::Index>(a), static_cast<Eigen::Index>(b)) *
                    free[a].log_sd * free[b].log_sd);
    out.uncertainty.log_covariance.push_back(std::move(row));
  }
  out.figures.insert(out.figures.end(), unseen.begin(), unseen.end());
  if (out.kept_prior) {
    out.profile = start;
    out.uncertainty = {};
  } else {
    out.next_point = suggest_next_point(model, best.x, covariance);
  }
  out.simulations = model.simulations();
  return out;
}

}  // namespace epochcast::validate

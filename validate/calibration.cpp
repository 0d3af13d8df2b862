// The fits of calibration.h, one free parameter group at a time.
#include "validate/calibration.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/input_error.h"
#include "core/spec/profile_figures.h"
#include "sim/collectives/alpha_beta.h"
#include "sim/compute/device_model.h"
#include "sim/network/topology.h"
#include "sim/predict/predict.h"
#include "sim/strategy/strategy.h"
#include "validate/end_to_end_fit.h"
#include "validate/kernel_fit.h"
#include "validate/least_squares.h"
#include "validate/link_fit.h"
#include "validate/validation.h"

namespace epochcast::validate {

namespace {

// The dispatch microbenchmark gives one per-op cost for the three host op figures; they are
// reported together under this key and enter the end-to-end fit one by one.
constexpr const char* kHostOpsKey = "host.forward_op_us, backward_op_us, optimizer_op_us";
constexpr const char* kHostOpFigures[] = {"host.forward_op_us", "host.backward_op_us",
                                          "host.optimizer_op_us"};
// The least spread a fitted figure enters the end-to-end fit with: the model's own
// approximations, as the noise assumed of a measured figure.
constexpr double kLeastMeasuredSpread = kAssumedRelativeNoise;

// Columns of the bound fit: an inverse compute efficiency per op class; the inverse streaming
// bandwidth (gpu.memory_efficiency); the inverse bandwidth of each kind with its own
// (kBandwidthKinds: memory efficiency times relative bandwidth); the minimum kernel time; a
// CPU's nanoseconds per serially drawn mask element (gpu.cpu_bernoulli_ns).
constexpr std::size_t kMemoryColumn = kOpClassCount;
constexpr std::size_t kFirstKindColumn = kMemoryColumn + 1;
constexpr std::size_t kMinKernelColumn = kFirstKindColumn + std::size(kBandwidthKinds);
constexpr std::size_t kBernoulliColumn = kMinKernelColumn + 1;
constexpr std::size_t kColumns = kBernoulliColumn + 1;

// The memory column whose bandwidth a kernel of `op_class` streams at.
std::size_t memory_column(std::size_t op_class) {
  for (std::size_t i = 0; i < std::size(kBandwidthKinds); ++i) {
    if (static_cast<std::size_t>(kBandwidthKinds[i]) == op_class) return kFirstKindColumn + i;
  }
  return kMemoryColumn;
}
bool is_memory_column(std::size_t column) {
  return column >= kMemoryColumn && column < kMinKernelColumn;
}
// The least inverse efficiency a column may take: the nominal peak (1), or for a kind with its
// own bandwidth, the highest relative bandwidth a profile allows; the serial draws' least time.
double least_inverse(std::size_t column) {
  if (column == kBernoulliColumn) return GpuEfficiency::kCpuBernoulliNsLow;
  return column >= kFirstKindColumn && column < kMinKernelColumn ? 1.0 / kBandwidthRelativeHigh
                                                                 : 1.0;
}

// One kernel costed with every efficiency at 1: its compute and memory time, so that with
// inverse efficiencies x (compute, per class) and y (memory, per memory column) its time is
// max(c x, m y, z), or max(c x + m y, z) where the two add (a CPU BLAS's packed GEMM); a
// CPU's serial mask draws add d w to the bound (d: their time at 1 ns an element; w: the
// nanoseconds an element, gpu.cpu_bernoulli_ns).
struct UnitKernel {
  std::size_t op_class = 0;
  std::size_t memory_column = kMemoryColumn;
  double compute_s = 0;
  double memory_s = 0;
  bool packed = false;
  double draws_s = 0;  // its serial draws at 1 ns each
};

// A measured time and the kernels it covers (a layer's forward, or its backward).
struct Observation {
  double seconds = 0;
  std::vector<UnitKernel> kernels;
  // On a device that computes inline (a CPU), the dispatch of its kernels, which the thread pays
  // before each of them: a known time, not fitted here.
  double inline_s = 0;
  std::string what;          // the layer's type and pass, e.g. maxpool2d forward
  double point_seconds = 0;  // the sum of all layer times of its point (see weight_scale)
  std::size_t point = 0;     // which measured point it belongs to (numbered across files)
  // Which layer pass it times (numbered across files): the same kernels at every batch, so the
  // model's misfit for them repeats in each of its measurements (clustered_spread).
  std::size_t pass = 0;
  int layer = 0;  // the layer's index in its model
};

HardwareProfile unit_profile(HardwareProfile p) {
  p.gpu.compute.fill(1.0);
  p.gpu.memory = 1.0;
  p.gpu.bandwidth_relative.fill(1.0);
  p.gpu.min_kernel = Seconds(0);
  p.gpu.cpu_bernoulli_ns = 1.0;
  return p;
}

std::int64_t layer_batch(const ScenarioSpec& s, const MeasuredPoint& p) {
  // A process per GPU runs its own share; one process drives the global batch.
  return sim::strategy_model(s.training.strategy).process_per_gpu() ? p.per_gpu_batch
                                                                    : p.global_batch;
}

// `dispatch`: a CPU op's dispatch, where measured (else the loop's host costs).
std::vector<Observation> layer_observations(const MeasuredScenario& input, const PointFilter& use,
                                            std::optional<double> dispatch) {
  std::vector<Observation> observations;
  const ScenarioSpec& s = input.scenario;
  sim::DeviceModel unit(s.machine.gpu, unit_profile(s.profile), s.training.precision,
                        s.training.convolution);
  const bool inline_ops = unit.computes_inline();
  const double forward_op = dispatch.value_or(loop_host_costs(s).forward_op.value());
  const double backward_op = dispatch.value_or(loop_host_costs(s).backward_op.value());
  ModelAnalysis analysis = analyze_model(s.model, sim::cost_options(s.training.precision));
  auto cost = [&](const std::vector<KernelWork>& kernels, std::int64_t batch,
                  std::vector<UnitKernel>& out) {
    for (const KernelWork& k : kernels) {
      // At unit efficiencies the model's compute and memory times are the inverse-efficiency
      // coefficients (an algorithm of several kernels adds its kernels' times).
      const sim::KernelExplanation e = unit.explain(k, batch);
      UnitKernel u;
      u.op_class = static_cast<std::size_t>(k.op_class);
      u.memory_column = memory_column(u.op_class);
      u.compute_s = e.compute_s;
      u.memory_s = e.memory_s;
      u.packed = e.packed;
      u.draws_s = e.serial_draws_s;
      out.push_back(u);
    }
  };
  std::size_t point = 0;
  for (const MeasuredPoint& p : input.measurements.points) {
    if (p.status != PointStatus::ok || p.layers.empty() || (use && !use(p))) continue;
    std::int64_t batch = layer_batch(s, p);
    std::size_t first = observations.size();
    double point_seconds = 0;
    for (const LayerTiming& t : p.layers)
      point_seconds += t.forward_s + t.backward_s;
    for (const LayerTiming& t : p.layers) {
      if (t.index < 0 || static_cast<std::size_t>(t.index) >= analysis.layers.size()) continue;
      const LayerCosts& layer = analysis.layers[static_cast<std::size_t>(t.index)];
      const std::string type(name_of(layer.layer.type));
      // A layer's forward is pass 2 x its index, its backward the next.
      const std::size_t pass = 2 * static_cast<std::size_t>(t.index);
      Observation forward{t.forward_s, {}, 0, type + " forward"};
      forward.pass = pass;
      forward.layer = t.index;
      cost(layer.forward, batch, forward.kernels);
      if (inline_ops) forward.inline_s = forward_op * static_cast<double>(forward.kernels.size());
      if (forward.seconds > 0 && !forward.kernels.empty()) observations.push_back(forward);
      Observation backward{t.backward_s, {}, 0, type + " backward"};
      backward.pass = pass + 1;
      backward.layer = t.index;
      cost(layer.backward_input, batch, backward.kernels);
      cost(layer.backward_weight, batch, backward.kernels);
      if (inline_ops)
        backward.inline_s = backward_op * static_cast<double>(backward.kernels.size());
      if (backward.seconds > 0 && !backward.kernels.empty()) observations.push_back(backward);
    }
    for (std::size_t i = first; i < observations.size(); ++i) {
      observations[i].point_seconds = point_seconds;
      observations[i].point = point;
    }
    ++point;
  }
  return observations;
}

// Residuals are divided by the geometric mean of the layer's own time and its step's: between
// relative errors (every layer alike: the many small memory-bound layers then decide memory
// efficiency, as they decide the optimizer's and other unprofiled kernels' times) and shares of
// the step (the large layers decide what the epoch takes). Either extreme alone misfits one of
// the two on CPUs, where one bandwidth figure serves very different kernels.
double weight_scale(const Observation& o) {
  return std::sqrt(o.seconds * o.point_seconds);
}

// The kernel's compute and memory bounds as they combine, without its serial draws.
double bounds_time(const UnitKernel& k, const std::vector<double>& theta) {
  const double c = k.compute_s * theta[k.op_class], m = k.memory_s * theta[k.memory_column];
  return k.packed ? c + m : std::max(c, m);
}

double kernel_time(const UnitKernel& k, const std::vector<double>& theta) {
  return std::max(bounds_time(k, theta) + k.draws_s * theta[kBernoulliColumn],
                  theta[kMinKernelColumn]);
}

// What the fit makes of an observation: its kernels' times, and their dispatch where it is paid
// inline.
double fitted_time(const Observation& o, const std::vector<double>& theta) {
  double t = o.inline_s;
  for (const UnitKernel& k : o.kernels)
    t += kernel_time(k, theta);
  return t;
}

double rms_relative(const std::vector<Observation>& obs, const std::vector<double>& theta,
                    const std::function<bool(const Observation&)>& counts) {
  double sum = 0;
  int n = 0;
  for (const Observation& o : obs) {
    if (!counts(o)) continue;
    const double predicted = fitted_time(o, theta);
    sum += std::pow((predicted - o.seconds) / weight_scale(o), 2);
    ++n;
  }
  return n > 0 ? std::sqrt(sum / n) : 0;
}

// The inverse efficiencies and, for each column, how many kernels it bounds.
struct BoundFit {
  std::vector<double> theta;
  std::vector<int> active_count;
  double rms = 0;  // weighted, over all observations
};

// Iterated least squares on the kernels' active bounds (see calibration.h), from `theta`.
BoundFit solve_active_bounds(const std::vector<Observation>& observations,
                             std::vector<double> theta) {
  std::vector<int> active_count(kColumns, 0);
  for (int iteration = 0; iteration < 50; ++iteration) {
    std::vector<std::vector<double>> rows;
    std::vector<double> targets;
    std::fill(active_count.begin(), active_count.end(), 0);
    for (const Observation& o : observations) {
      std::vector<double> row(kColumns, 0.0);
      double floor_seconds = 0;
      for (const UnitKernel& k : o.kernels) {
        double c = k.compute_s * theta[k.op_class], m = k.memory_s * theta[k.memory_column];
        double z = theta[kMinKernelColumn];
        // A CPU's serial draws come on top of whichever bound is paid.
        const double d = k.draws_s * theta[kBernoulliColumn];
        bool above_floor = true;
        if (k.packed && c + m + d >= z) {
          // Both bounds are paid, one after the other.
          row[k.op_class] += k.compute_s;
          row[k.memory_column] += k.memory_s;
          ++active_count[k.op_class];
          ++active_count[k.memory_column];
        } else if (!k.packed && c >= m && c + d >= z) {
          row[k.op_class] += k.compute_s;
          ++active_count[k.op_class];
        } else if (!k.packed && c < m && m + d >= z) {
          row[k.memory_column] += k.memory_s;
          ++active_count[k.memory_column];
        } else {
          floor_seconds += z;  // a known constant in this solve
          ++active_count[kMinKernelColumn];
          above_floor = false;
        }
        if (above_floor && k.draws_s > 0) {
          row[kBernoulliColumn] += k.draws_s;
          ++active_count[kBernoulliColumn];
        }
      }
      const double scale = weight_scale(o);
      for (double& v : row)
        v /= scale;
      rows.push_back(std::move(row));
      targets.push_back((o.seconds - o.inline_s - floor_seconds) / scale);
    }
    std::vector<double> solved = non_negative_least_squares(rows, targets, kColumns);
    double change = 0;
    for (std::size_t j = 0; j < kColumns; ++j) {
      if (active_count[j] == 0) continue;  // not determined by these measurements
      // The minimum kernel time is fitted apart (below): in this solve it would soak up every
      // misfit of small layers and then floor every kernel of the step at that value.
      if (j == kMinKernelColumn) continue;
      // An inverse efficiency below 1 would beat the nominal peak: clamp to the peak (and a
      // serial draw to its physical range).
      double value = j == kMinKernelColumn ? solved[j] : std::max(solved[j], least_inverse(j));
      if (j == kBernoulliColumn) value = std::min(value, GpuEfficiency::kCpuBernoulliNsHigh);
      change = std::max(change, std::abs(value - theta[j]) / std::max(theta[j], 1e-12));
      theta[j] = value;
    }
    if (change < 1e-6) break;
  }
  double rms = rms_relative(observations, theta, [](const Observation&) { return true; });
  return {std::move(theta), std::move(active_count), rms};
}

// Which bound a kernel sits at is itself fitted, and the iterated solve only moves between
// neighbouring active sets: from the prior, where pooling and elementwise kernels are
// memory-bound, it never finds that a CPU's max-pooling or dropout (random numbers) is bound by
// its arithmetic. So the solve also starts from each op class taken as compute-bound (its
// prior inverse efficiency times 1000), and from all of them at once, and keeps the start with
// the smallest weighted residual (the prior wins ties: it comes first).
// Whether `column` of theta is the bound that sets kernel `k`'s time.
bool bound_by(const UnitKernel& k, const std::vector<double>& theta, std::size_t column) {
  const double t = kernel_time(k, theta);
  if (column == kMinKernelColumn) return t == theta[column];
  // Above the floor, serial draws are paid beside the bound, and a packed GEMM pays both bounds.
  const bool above_floor = t > theta[kMinKernelColumn];
  if (column == kBernoulliColumn) return above_floor && k.draws_s > 0;
  if (k.packed && above_floor) return column == k.op_class || column == k.memory_column;
  if (k.draws_s > 0 && !above_floor) return false;
  const double b = k.draws_s > 0 ? bounds_time(k, theta) : t;
  if (is_memory_column(column)) return k.memory_column == column && b == k.memory_s * theta[column];
  return k.op_class == column && b == k.compute_s * theta[column];
}

// The relative standard error of the figure of `column`, from the fit's residuals as they are
// clustered: the layer times of one measured point share its conditions (a busier host slows all
// of them), and one layer pass's times at every batch share the model's misfit for its kernels
// (one efficiency serving GEMMs of different shapes), so neither set is independent evidence. The
// sandwich estimator with two-way clustering (Cameron, Gelbach & Miller, "Robust Inference With
// Multiway Clustering", J. Business & Economic Statistics 29(2), 2011): V = V_point + V_pass -
// V_each, each cluster sum scaled by G / (G - 1) for its G clusters, over the column's one-figure
// information sum t^2 (t: the part of an observation's fitted time the column sets, weighted as
// the fit weighs it). A misfit that repeats pass by pass is then as uncertain as the few passes
// that show it, and the end-to-end fit may move the figure that far.
double clustered_spread(const std::vector<Observation>& observations,
                        const std::vector<double>& theta, std::size_t column) {
  std::map<std::size_t, double> by_point, by_pass;
  double each = 0, information = 0;
  std::size_t counted = 0;
  for (const Observation& o : observations) {
    double part = 0;
    for (const UnitKernel& k : o.kernels) {
      if (!bound_by(k, theta, column)) continue;
      if (column == kBernoulliColumn)
        part += k.draws_s * theta[column];
      else if (column == k.op_class)
        part += k.compute_s * theta[column];
      else
        part += k.memory_s * theta[column];
    }
    if (part <= 0) continue;
    const double scale = weight_scale(o);
    const double t = part / scale;
    const double score = t * (fitted_time(o, theta) - o.seconds) / scale;
    by_point[o.point] += score;
    by_pass[o.pass] += score;
    each += score * score;
    information += t * t;
    ++counted;
  }
  if (information <= 0) return 0;
  auto clustered = [](const std::map<std::size_t, double>& sums) {
    double v = 0;
    for (const auto& [cluster, sum] : sums)
      v += sum * sum;
    const double g = static_cast<double>(sums.size());
    return g > 1 ? v * g / (g - 1) : v;
  };
  const double n = static_cast<double>(counted);
  const double v_each = n > 1 ? each * n / (n - 1) : each;
  const double v_point = clustered(by_point), v_pass = clustered(by_pass);
  // The two-way sum can fall below either one-way variance by sampling: keep the larger.
  const double v = std::max({v_point + v_pass - v_each, v_point, v_pass});
  return std::sqrt(v) / information;
}

// Where a figure's clustered spread is well above what its residuals give as independent ones,
// its layer passes disagree the same way at every batch: the note names the passes furthest
// from the fit (their median measured time over the fit's), so that the loose prior is read as
// what it is, kernels one figure cannot cost alike.
constexpr double kPassMisfitRatio = 1.15;  // a pass this far from the fit, either way, is named
constexpr double kPassMisfitSpread = 2;    // clustered over independent spread that calls for it
constexpr std::size_t kPassMisfitsNamed = 4;
std::optional<std::string> pass_misfit_note(const std::vector<Observation>& observations,
                                            const std::vector<double>& theta, std::size_t column,
                                            const std::string& key, double spread) {
  std::map<std::size_t, std::vector<double>> ratios;
  std::map<std::size_t, const Observation*> first;
  for (const Observation& o : observations) {
    const bool bound = std::any_of(o.kernels.begin(), o.kernels.end(),
                                   [&](const UnitKernel& k) { return bound_by(k, theta, column); });
    const double fitted = fitted_time(o, theta);
    if (!bound || fitted <= 0 || o.seconds <= 0) continue;
    ratios[o.pass].push_back(o.seconds / fitted);
    first.emplace(o.pass, &o);
  }
  std::vector<std::pair<double, std::string>> named;
  for (auto& [pass, r] : ratios) {
    std::sort(r.begin(), r.end());
    const double ratio = r[r.size() / 2];
    if (std::abs(std::log(ratio)) < std::log(kPassMisfitRatio)) continue;
    named.emplace_back(
        std::abs(std::log(ratio)),
        fmt::format("{} of layer {} at {:.2g}x", first[pass]->what, first[pass]->layer, ratio));
  }
  if (named.empty()) return std::nullopt;
  std::stable_sort(named.begin(), named.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  if (named.size() > kPassMisfitsNamed) named.resize(kPassMisfitsNamed);
  std::vector<std::string> parts;
  for (const auto& [size, text] : named)
    parts.push_back(text);
  return fmt::format(
      "{}: its layer passes disagree the same way at every batch ({} the fit's time): one figure "
      "serves kernels the model costs unevenly, so it enters the end-to-end fit with a spread of "
      "x{:.2f} (clustered by layer pass) and the epochs, which weigh each pass by its time, set it",
      key, fmt::join(parts, ", "), std::exp(std::min(spread, default_log_sd(key))));
}

// A figure of the layer fit held to its GPU range: what the layers wanted, what is kept, and
// its column of theta.
struct HeldFigure {
  std::string key;
  double wanted = 0, kept = 0;
  std::size_t column = 0;
};

// The observations a column bounded as the layers wanted it (`wanted`), by what they are, with
// the median ratio of their measured time to the fit's with the figure held (`theta`), and
// their time beyond it per measured point.
std::string unexplained_layers(const std::vector<Observation>& observations,
                               const std::vector<double>& wanted, const std::vector<double>& theta,
                               std::size_t column) {
  std::map<std::string, std::vector<double>> ratios;
  double excess = 0, measured = 0;
  std::set<std::size_t> points;
  for (const Observation& o : observations) {
    points.insert(o.point);
    measured += o.seconds;
    bool bound = false;
    const double predicted = fitted_time(o, theta);
    for (const UnitKernel& k : o.kernels)
      bound = bound || bound_by(k, wanted, column);
    if (!bound || predicted <= 0) continue;
    ratios[o.what].push_back(o.seconds / predicted);
    excess += std::max(0.0, o.seconds - predicted);
  }
  std::vector<std::string> parts;
  for (auto& [what, r] : ratios) {
    std::sort(r.begin(), r.end());
    parts.push_back(
        fmt::format("{} ({} measured, {:.2g}x the fit's time)", what, r.size(), r[r.size() / 2]));
  }
  const double steps = static_cast<double>(std::max<std::size_t>(1, points.size()));
  return fmt::format("{}; {:.3g} ms a measured point ({:.0f}% of its layer time) left unexplained",
                     fmt::join(parts, ", "), excess / steps * 1e3,
                     measured > 0 ? excess / measured * 100 : 0.0);
}

// Layers whose measured times sit on one side of the fit's, far from it, in every measurement:
// the figures of their classes serve the other layers too, and what is left is a mechanism the
// model lacks for them (another kernel, another library path, a cache), not noise.
// Layers already named by a figure held at its bound (`skip`) are not repeated.
constexpr double kLayerGapRatio = 1.5;         // measured over fitted, or its inverse
constexpr int kLayerGapLeastObservations = 3;  // fewer cannot show "every time"
constexpr double kLayerGapLeastShare = 0.01;   // of the measured layer time
void report_layer_gaps(const std::vector<Observation>& observations,
                       const std::vector<double>& theta,
                       const std::function<bool(const Observation&)>& skip, Calibration& out) {
  struct Group {
    std::vector<double> ratios;
    double measured = 0, fitted = 0;
    std::set<std::size_t> points;
  };
  std::map<std::string, Group> groups;
  double measured = 0;
  std::set<std::size_t> points;
  for (const Observation& o : observations) {
    measured += o.seconds;
    points.insert(o.point);
    if (skip(o)) continue;
    const double fitted = fitted_time(o, theta);
    if (fitted <= 0) continue;
    Group& g = groups[o.what];
    g.ratios.push_back(o.seconds / fitted);
    g.measured += o.seconds;
    g.fitted += fitted;
    g.points.insert(o.point);
  }
  for (auto& [what, g] : groups) {
    if (static_cast<int>(g.ratios.size()) < kLayerGapLeastObservations) continue;
    std::sort(g.ratios.begin(), g.ratios.end());
    const double low = g.ratios.front(), high = g.ratios.back();
    const bool slower = low >= kLayerGapRatio, faster = high <= 1 / kLayerGapRatio;
    if (!(slower || faster) || std::abs(g.measured - g.fitted) < kLayerGapLeastShare * measured)
      continue;
    const double steps = static_cast<double>(std::max<std::size_t>(1, points.size()));
    out.gaps.push_back(fmt::format(
        "{}: measured {:.2g}x its fitted time in all {} of its measurements ({:.2g}-{:.2g}x, over "
        "{} measured points): one sign and far beyond the noise, so the model lacks something for "
        "this layer's kernels; {:.3g} ms a measured point ({:.0f}% of the layer time) {}",
        what, g.ratios[g.ratios.size() / 2], g.ratios.size(), low, high, g.points.size(),
        std::abs(g.measured - g.fitted) / steps * 1e3,
        measured > 0 ? std::abs(g.measured - g.fitted) / measured * 100 : 0.0,
        slower ? "left unexplained" : "predicted beyond what was measured"));
  }
}

void fit_efficiencies(const std::vector<Observation>& observations, bool gpu, Calibration& out) {
  HardwareProfile& p = out.profile;
  std::vector<double> prior(kColumns);
  for (std::size_t c = 0; c < kOpClassCount; ++c)
    prior[c] = 1.0 / p.gpu.compute[c];
  prior[kMemoryColumn] = 1.0 / p.gpu.memory_or_default();
  for (OpClass kind : kBandwidthKinds) {
    const std::size_t c = static_cast<std::size_t>(kind);
    prior[memory_column(c)] = 1.0 / (p.gpu.memory_or_default() * p.gpu.bandwidth_relative[c]);
  }
  prior[kMinKernelColumn] = p.gpu.min_kernel.value();
  prior[kBernoulliColumn] = p.gpu.cpu_bernoulli_ns_or_default();
  constexpr double kComputeBoundStart = 1000;
  std::vector<std::vector<double>> starts{prior};
  for (std::size_t c = 0; c <= kOpClassCount; ++c) {
    std::vector<double> start = prior;
    for (std::size_t k = 0; k < kOpClassCount; ++k)
      if (k == c || c == kOpClassCount) start[k] *= kComputeBoundStart;
    starts.push_back(std::move(start));
  }
  BoundFit best;
  for (const std::vector<double>& start : starts) {
    BoundFit fit = solve_active_bounds(observations, start);
    if (best.theta.empty() || fit.rms < best.rms * (1 - 1e-9)) best = std::move(fit);
  }
  std::vector<double>& theta = best.theta;
  std::vector<int>& active_count = best.active_count;

  // The minimum kernel time: the median time of the fastest measured layers (those whose
  // kernels all sit at the floor), per kernel.
  std::vector<double> floors;
  for (const Observation& o : observations) {
    bool all_floor = std::all_of(o.kernels.begin(), o.kernels.end(), [&](const UnitKernel& k) {
      return kernel_time(k, theta) == theta[kMinKernelColumn];
    });
    if (all_floor)
      floors.push_back((o.seconds - o.inline_s) / static_cast<double>(o.kernels.size()));
  }
  if (!floors.empty()) {
    std::sort(floors.begin(), floors.end());
    theta[kMinKernelColumn] = floors[floors.size() / 2];
    active_count[kMinKernelColumn] = static_cast<int>(floors.size());
  }

  // On a GPU, every figure within its physical range (gpu_physical_range): where the layers want
  // one outside, its bound is kept and the layers that wanted more are named as a structural gap.
  std::vector<HeldFigure> held;
  const std::vector<double> wanted_theta = theta;
  // The figure is `scale` / theta (inverse efficiencies), or theta in microseconds when
  // `scale` is 0 (the minimum kernel time).
  auto hold = [&](const std::string& key, std::size_t column, double scale) {
    if (!gpu || active_count[column] == 0) return;
    const std::optional<PhysicalRange> range = gpu_physical_range(key);
    if (!range) return;
    const bool time = scale == 0;
    const double wanted = time ? theta[column] * 1e6 : scale / theta[column];
    const double kept = std::clamp(wanted, range->lower, range->upper);
    if (kept == wanted) return;
    held.push_back({key, wanted, kept, column});
    theta[column] = time ? kept * 1e-6 : scale / kept;
  };
  for (std::size_t c = 0; c < kOpClassCount; ++c)
    hold(fmt::format("gpu.efficiency.{}", kOpClassNames[c]), c, 1.0);
  hold("gpu.memory_efficiency", kMemoryColumn, 1.0);
  const double memory =
      active_count[kMemoryColumn] > 0 ? 1.0 / theta[kMemoryColumn] : p.gpu.memory_or_default();
  for (OpClass kind : kBandwidthKinds) {
    hold(fmt::format("gpu.bandwidth_relative.{}", name_of(kind)),
         memory_column(static_cast<std::size_t>(kind)), 1.0 / memory);
  }
  if (!floors.empty()) hold("gpu.min_kernel_us", kMinKernelColumn, 0);
  for (const HeldFigure& h : held) {
    const PhysicalRange range = *gpu_physical_range(h.key);
    out.gaps.push_back(fmt::format(
        "{}: the per-layer times want {:.3g}, outside its physical range {:g}-{:g} ({}); kept "
        "at {:g}. The model lacks something for {}",
        h.key, h.wanted, range.lower, range.upper, range.why, h.kept,
        unexplained_layers(observations, wanted_theta, theta, h.column)));
  }
  report_layer_gaps(
      observations, theta,
      [&](const Observation& o) {
        return std::any_of(held.begin(), held.end(), [&](const HeldFigure& h) {
          return std::any_of(o.kernels.begin(), o.kernels.end(), [&](const UnitKernel& k) {
            return bound_by(k, wanted_theta, h.column);
          });
        });
      },
      out);

  auto add = [&](std::string key, double value, std::size_t column) {
    auto bounded = [&](const Observation& o) {
      return std::any_of(o.kernels.begin(), o.kernels.end(),
                         [&](const UnitKernel& k) { return bound_by(k, theta, column); });
    };
    const double rms = rms_relative(observations, theta, bounded);
    std::set<std::size_t> points;
    for (const Observation& o : observations) {
      if (bounded(o)) points.insert(o.point);
    }
    const double spread =
        column == kMinKernelColumn ? 0 : clustered_spread(observations, theta, column);
    const double independent = rms / std::sqrt(std::max(1.0, static_cast<double>(points.size())));
    if (spread > kPassMisfitSpread * std::max(kLeastMeasuredSpread, independent)) {
      if (auto note = pass_misfit_note(observations, theta, column, key, spread))
        out.notes.push_back(std::move(*note));
    }
    out.fitted.push_back({std::move(key), value, active_count[column], rms,
                          "per-layer forward/backward times (--profile-layers)",
                          static_cast<int>(points.size()), spread});
  };
  for (std::size_t c = 0; c < kOpClassCount; ++c) {
    if (active_count[c] == 0) {
      out.notes.push_back(
          fmt::format("gpu.efficiency.{}: kept at {:.3g}: no measured layer is "
                      "bound by {} compute",
                      kOpClassNames[c], p.gpu.compute[c], kOpClassNames[c]));
      continue;
    }
    p.gpu.compute[c] = 1.0 / theta[c];
    add(fmt::format("gpu.efficiency.{}", kOpClassNames[c]), p.gpu.compute[c], c);
  }
  if (active_count[kMemoryColumn] > 0) {
    p.gpu.memory = 1.0 / theta[kMemoryColumn];
    add("gpu.memory_efficiency", *p.gpu.memory, kMemoryColumn);
  } else {
    out.notes.push_back(
        "gpu.memory_efficiency: kept: no measured layer is bound by streaming memory traffic");
  }
  // A kind's own bandwidth, relative to the streaming one just fitted (or kept).
  for (OpClass kind : kBandwidthKinds) {
    const std::size_t c = static_cast<std::size_t>(kind), column = memory_column(c);
    const std::string key = fmt::format("gpu.bandwidth_relative.{}", name_of(kind));
    if (active_count[column] == 0) {
      out.notes.push_back(fmt::format("{}: kept at {:.3g}: no measured {} kernel is memory-bound",
                                      key, p.gpu.bandwidth_relative[c], name_of(kind)));
      continue;
    }
    p.gpu.bandwidth_relative[c] = std::clamp(1.0 / (theta[column] * p.gpu.memory_or_default()),
                                             kBandwidthRelativeLow, kBandwidthRelativeHigh);
    add(key, p.gpu.bandwidth_relative[c], column);
  }
  if (!floors.empty()) {
    p.gpu.min_kernel = Seconds(theta[kMinKernelColumn]);
    add("gpu.min_kernel_us", theta[kMinKernelColumn] * 1e6, kMinKernelColumn);
  } else {
    out.notes.push_back("gpu.min_kernel_us: kept: no measured layer is that short");
  }
  // Only a CPU draws a mask serially (a GPU's draws are in its kernels' FLOPs).
  if (active_count[kBernoulliColumn] > 0) {
    p.gpu.cpu_bernoulli_ns = theta[kBernoulliColumn];
    add("gpu.cpu_bernoulli_ns", theta[kBernoulliColumn], kBernoulliColumn);
  } else if (!gpu) {
    out.notes.push_back(fmt::format(
        "gpu.cpu_bernoulli_ns: kept at {:.3g}: no measured layer draws a random mask (dropout)",
        p.gpu.cpu_bernoulli_ns_or_default()));
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double rms(const std::vector<double>& values) {
  double sum = 0;
  for (double v : values)
    sum += v * v;
  return values.empty() ? 0 : std::sqrt(sum / static_cast<double>(values.size()));
}

// The kernel model's figures from kernel times (kernel_fit.h's stages, the fit that built the
// default profile), replacing what the per-layer fit gave for the same figures.
void fit_kernel_times(const std::vector<KernelMeasurement>& kernels, const GpuSpec& gpu,
                      Calibration& out) {
  std::vector<KernelMeasurement> rows;
  for (const KernelMeasurement& m : kernels) {
    if (m.gpu_id != gpu.id) {
      throw InputError(m.mark, "deviceProperties",
                       fmt::format("kernel times of '{}', but the measurements are of '{}': a "
                                   "profile describes one kind of device",
                                   m.gpu_id, gpu.id));
    }
    rows.push_back(m);
  }
  GpuCatalogue catalogue;
  catalogue.gpus.push_back(gpu);
  const MeasurementFloors floors = measurement_floors(rows);
  const KernelFit fit =
      fit_kernel_figures(rows, out.profile, catalogue, floors, kernel_fit_stages());
  const std::vector<KernelPrediction> predicted =
      predict_kernels(rows, fit.profile, catalogue, floors, fit.offsets);
  std::vector<double> relative;
  for (const KernelPrediction& p : predicted) {
    if (p.measured_s > 0) relative.push_back((p.predicted_s - p.measured_s) / p.measured_s);
  }
  const double spread = rms(relative);
  for (const auto& [key, value] : fit.figures) {
    set_profile_figure(out.profile, key, value);
    std::erase_if(out.fitted, [&](const FittedParameter& f) { return f.key == key; });
    out.fitted.push_back({key, value, static_cast<int>(rows.size()), spread,
                          "kernel times (profiler trace: each kernel's own GPU time)"});
  }
  for (const std::string& key : fit.unseen)
    out.notes.push_back(fmt::format("{}: no kernel time decides it: kept", key));
}

// Fit quality of a latency-bandwidth line: each measurement's relative error against it.
double latency_bandwidth_rms(const std::vector<double>& bytes, const std::vector<double>& seconds,
                             double alpha, double inverse_bandwidth) {
  std::vector<double> relative;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (seconds[i] > 0)
      relative.push_back((alpha + bytes[i] * inverse_bandwidth - seconds[i]) / seconds[i]);
  }
  return rms(relative);
}

// Fit quality of one value standing for several measurements (a median): their spread around it.
double spread_rms(const std::vector<double>& values, double value) {
  std::vector<double> relative;
  for (double v : values) {
    if (v > 0) relative.push_back((value - v) / v);
  }
  return rms(relative);
}

// Figures fitted above enter the end-to-end fit with those fits as their priors: the fit's own
// standard error as the spread (FittedParameter::spread, else its relative residual over the
// square root of its independent observations), at least kLeastMeasuredSpread, so that layer
// times and microbenchmarks keep their weight, and at most the spread of a figure no measurement
// fitted (default_log_sd): a figure the measurements barely touch keeps its default prior.
std::vector<FigurePrior> measured_priors(const Calibration& c) {
  std::vector<FigurePrior> priors;
  for (const FittedParameter& f : c.fitted) {
    const int independent = f.independent > 0 ? f.independent : f.observations;
    const double standard_error =
        f.spread > 0 ? f.spread
                     : f.rms_relative_residual / std::sqrt(std::max(1.0, double(independent)));
    std::vector<std::string> keys{f.key};
    if (f.key == kHostOpsKey) keys.assign(std::begin(kHostOpFigures), std::end(kHostOpFigures));
    for (const std::string& key : keys) {
      const double spread =
          std::min(default_log_sd(key), std::max(kLeastMeasuredSpread, standard_error));
      if (auto value = profile_figure_value(c.profile, key))
        priors.push_back({key, *value, spread, f.from});
    }
  }
  return priors;
}

// The end-to-end fit (end_to_end_fit.h) over every figure the measured epochs and iterations
// depend on; what it moves replaces or joins the fitted figures.
void fit_end_to_end_figures(const std::vector<MeasuredScenario>& inputs, const PointFilter& use,
                            Calibration& out, const FitProgress& progress) {
  EndToEndFit fit = fit_end_to_end(inputs, use, out.profile, measured_priors(out), progress);
  if (fit.points == 0) {
    out.notes.push_back("end-to-end: no measured epoch or iteration to fit");
    out.end_to_end = std::make_shared<EndToEndFit>(std::move(fit));
    return;
  }
  if (fit.kept_prior) {
    out.notes.push_back(fmt::format(
        "end-to-end: kept the prior: a fit to the other points predicts each point {:.1f}% off "
        "on average, the prior {:.1f}%",
        fit.leave_one_out_mape_pct, fit.prior_mape_pct));
  }
  for (const FigureEstimate& e : fit.figures) {
    if (fit.kept_prior || e.constraint == Constraint::unseen) continue;
    if (std::abs(e.value / e.prior - 1) < 1e-9) continue;
    FittedParameter f{
        e.key, e.value, fit.points, fit.fitted_mape_pct / 100,
        fmt::format("end-to-end fit of {} measured figures ({}; prior {:.4g} from "
                    "{})",
                    fit.points, constraint_name(e.constraint), e.prior, e.prior_from)};
    auto same = std::find_if(out.fitted.begin(), out.fitted.end(),
                             [&](const FittedParameter& g) { return g.key == e.key; });
    if (same != out.fitted.end()) {
      *same = f;
    } else {
      out.fitted.push_back(f);
    }
  }
  out.profile = fit.profile;
  out.profile.uncertainty = fit.uncertainty;
  out.end_to_end = std::make_shared<EndToEndFit>(std::move(fit));
}

void fit_links(const std::vector<MeasuredScenario>& inputs, Calibration& out) {
  std::vector<CollectiveMeasurement> collectives;
  std::vector<double> copy_bytes[2], copy_seconds[2];  // pinned, pageable host-to-device
  for (const MeasuredScenario& input : inputs) {
    const Benchmarks& b = input.measurements.benchmarks;
    collectives.insert(collectives.end(), b.collectives.begin(), b.collectives.end());
    for (const CopyMeasurement& c : b.copies) {
      if (c.kind != "host_to_device") continue;
      copy_bytes[c.pinned ? 0 : 1].push_back(static_cast<double>(c.bytes));
      copy_seconds[c.pinned ? 0 : 1].push_back(c.time_s);
    }
  }
  const MachineSpec& machine = inputs.front().scenario.machine;
  // Collectives: the simulator's own collective model fitted to them (link_fit.h).
  LinkFit links = fit_link_figures(collectives, machine, out.profile);
  out.profile = links.profile;
  for (const LinkFigureFit& f : links.fitted)
    out.fitted.push_back({f.key, f.value, f.observations, f.rms_relative_residual, f.from});
  out.notes.insert(out.notes.end(), links.notes.begin(), links.notes.end());
  out.gaps.insert(out.gaps.end(), links.gaps.begin(), links.gaps.end());
  const char* keys[2] = {"transfer.pcie_efficiency", "transfer.pageable_efficiency"};
  for (int pinned = 0; pinned < 2; ++pinned) {
    if (copy_bytes[pinned].size() < 2) continue;
    auto [alpha, inverse_bandwidth] =
        fit_latency_bandwidth(copy_bytes[pinned], copy_seconds[pinned]);
    if (inverse_bandwidth <= 0) continue;
    double efficiency =
        std::min(1.0, 1.0 / inverse_bandwidth / machine.gpu.pcie_bandwidth().value());
    (pinned == 0 ? out.profile.transfer.pcie_efficiency
                 : out.profile.transfer.pageable_efficiency) = efficiency;
    const double residual =
        latency_bandwidth_rms(copy_bytes[pinned], copy_seconds[pinned], alpha, inverse_bandwidth);
    out.fitted.push_back({keys[pinned], efficiency, static_cast<int>(copy_bytes[pinned].size()),
                          residual, "host-to-device copy microbenchmark"});
    if (pinned == 0) {
      out.profile.transfer.copy_latency = Seconds(alpha);
      out.fitted.push_back({"transfer.copy_latency_us", alpha * 1e6,
                            static_cast<int>(copy_bytes[0].size()), residual,
                            "host-to-device copy microbenchmark (pinned)"});
    }
  }
}

// The loaders' CPU clocks. One data set (one sample size): its median cost per sample. Files
// of several sizes (at least 2x apart): a cost per sample plus one per byte of the sample, so
// that one profile serves each of them and carries over to another data set; one median
// would charge a 784-float sample what a 12,000-float one costs.
void fit_sample_cost(const std::vector<double>& bytes, const std::vector<double>& seconds,
                     Calibration& out) {
  const auto [smallest, largest] = std::minmax_element(bytes.begin(), bytes.end());
  const int n = static_cast<int>(seconds.size());
  out.profile.batch_cpu.reset();  // the clocks hold all of it until fit_batch_cost splits it
  if (*largest >= 2 * *smallest) {
    auto [per_sample, per_byte] = fit_latency_bandwidth(bytes, seconds);
    if (per_byte > 0) {
      out.profile.sample_cpu = Seconds(per_sample);
      out.profile.sample_cpu_per_byte = per_byte;
      const double rms = latency_bandwidth_rms(bytes, seconds, per_sample, per_byte);
      out.fitted.push_back({"input.sample_cpu_us", per_sample * 1e6, n, rms,
                            "the loaders' CPU clocks, against their samples' bytes"});
      out.fitted.push_back({"input.sample_cpu_ns_per_byte", per_byte * 1e9, n, rms,
                            "the loaders' CPU clocks, against their samples' bytes"});
      return;
    }
  }
  const double per_sample = median(seconds);
  out.profile.sample_cpu = Seconds(per_sample);
  out.profile.sample_cpu_per_byte.reset();
  out.fitted.push_back({"input.sample_cpu_us", per_sample * 1e6, n, spread_rms(seconds, per_sample),
                        "the loaders' CPU clocks (median over points)"});
}

// A batch's clock at several batch sizes (at least 2x apart): its cost per sample falls as the
// batch grows where the loader pays something once a batch (collating the samples). Fitted as a
// cost a batch plus the costs above times its samples, relative residuals, and kept where it at
// least halves the residual of the costs per sample alone.
void fit_batch_cost(const std::vector<double>& bytes, const std::vector<double>& batches,
                    const std::vector<double>& seconds, Calibration& out) {
  const auto [fewest, most] = std::minmax_element(batches.begin(), batches.end());
  if (seconds.size() < 3 || *most < 2 * *fewest || !out.profile.sample_cpu) return;
  const double per_byte_before = out.profile.sample_cpu_per_byte.value_or(0);
  const bool by_bytes = out.profile.sample_cpu_per_byte.has_value();
  auto relative_rms = [&](double batch_cost, double per_sample, double per_byte) {
    std::vector<double> residuals;
    for (std::size_t i = 0; i < seconds.size(); ++i) {
      const double measured = seconds[i] * batches[i];
      const double modelled = batch_cost + batches[i] * (per_sample + per_byte * bytes[i]);
      residuals.push_back((modelled - measured) / measured);
    }
    return rms(residuals);
  };
  const double alone = relative_rms(0, out.profile.sample_cpu->value(), per_byte_before);
  std::vector<std::vector<double>> rows;
  std::vector<double> targets;
  for (std::size_t i = 0; i < seconds.size(); ++i) {
    const double measured = seconds[i] * batches[i];
    std::vector<double> row{1 / measured, batches[i] / measured};
    if (by_bytes) row.push_back(batches[i] * bytes[i] / measured);
    rows.push_back(std::move(row));
    targets.push_back(1);
  }
  const std::vector<double> x = non_negative_least_squares(rows, targets, by_bytes ? 3 : 2);
  const double per_byte = by_bytes ? x[2] : 0;
  if (x[0] <= 0 || x[1] <= 0 || (by_bytes && per_byte <= 0)) return;
  const double together = relative_rms(x[0], x[1], per_byte);
  // A second figure must earn its place: at least half the residual gone, else the clocks are
  // flat within their noise and the median a sample stands.
  constexpr double kResidualKept = 0.5;
  if (together > kResidualKept * alone) return;
  const int n = static_cast<int>(seconds.size());
  const char* from = "the loaders' CPU clocks, against their batch sizes";
  out.profile.batch_cpu = Seconds(x[0]);
  out.profile.sample_cpu = Seconds(x[1]);
  if (by_bytes) out.profile.sample_cpu_per_byte = per_byte;
  std::erase_if(out.fitted, [](const FittedParameter& f) {
    return f.key == "input.sample_cpu_us" || f.key == "input.sample_cpu_ns_per_byte";
  });
  out.fitted.push_back({"input.sample_cpu_us", x[1] * 1e6, n, together, from});
  if (by_bytes)
    out.fitted.push_back({"input.sample_cpu_ns_per_byte", per_byte * 1e9, n, together, from});
  out.fitted.push_back({"input.batch_cpu_us", x[0] * 1e6, n, together, from});
}

// The newest measurement's start, not the clock: the same files give the same profile.
std::string newest_measurement(const std::vector<MeasuredScenario>& inputs) {
  std::string newest;
  for (const MeasuredScenario& m : inputs)
    newest = std::max(newest, m.measurements.environment.started_at);
  return newest.empty() ? "unknown" : newest;
}

constexpr const char* kPythonExtraPrefix = "host.python_";
constexpr const char* kPythonExtraSource =
    "; plus what a Python loop adds, from the bench's Python loop";
// The host figures a Python loop's extra is added to.
constexpr const char* kPythonHostFigures[] = {"host.forward_op_us", "host.optimizer_op_us",
                                              "host.step_overhead_us"};
constexpr const char* kPythonLoopMethod =
    "forward ops: the same eager op's and an empty nn.Module call's extra time; optimizer ops: "
    "the op's; the step: torch.optim's foreach Adam step beyond its kernels' dispatch";

// epochcast-run is a C++ loop on LibTorch; users train from Python. Where the bench timed the
// same tiny work from both (an eager op, a module that does nothing, a foreach Adam step), the
// profile's host costs become a Python loop's: LibTorch's fitted costs plus what Python adds, and
// LibTorch's are kept for the runtime's own measurements (training.loop: libtorch). A module call
// is added to every forward op, as the profile's forward_op has always counted it. Returns
// whether it did; else a note says the costs are LibTorch's.
bool add_python_loop_costs(const std::vector<MeasuredScenario>& inputs, Calibration& out) {
  std::vector<double> per_op, per_module, per_step;
  for (const MeasuredScenario& input : inputs) {
    const std::optional<DispatchMeasurement>& d = input.measurements.benchmarks.dispatch;
    if (!d || !d->python_op_dispatch_s || !d->python_module_call_s || !d->python_optimizer_step_s ||
        d->optimizer_step_ops <= 0)
      continue;
    const double op = *d->python_op_dispatch_s - d->op_dispatch_s;
    per_op.push_back(op);
    per_module.push_back(*d->python_module_call_s - d->module_call_s);
    // The step's ops are costed as optimizer ops (each with Python's per-op extra): the rest of
    // the difference is torch.optim's own Python.
    per_step.push_back(*d->python_optimizer_step_s - d->optimizer_step_s -
                       d->optimizer_step_ops * op);
  }
  if (per_op.empty()) {
    out.notes.push_back(
        "host.*: a C++ LibTorch loop's (the measurements have no Python loop figures: python3 "
        "with torch was not found, or the bench predates them): a Python training loop pays "
        "more per op and per step than predicted");
    return false;
  }
  // Python never costs less than C++ for the same call; a negative difference is noise.
  const double op = std::max(0.0, median(per_op));
  const double module = std::max(0.0, median(per_module));
  const double step = std::max(0.0, median(per_step));
  HostCosts& host = out.profile.host;
  out.profile.host_libtorch = host;
  host.forward_op = Seconds(host.forward_op.value() + op + module);
  host.optimizer_op = Seconds(host.optimizer_op.value() + op);
  host.step_overhead = Seconds(host.step_overhead.value() + step);
  const int n = static_cast<int>(per_op.size());
  const std::string from = "the bench's Python loop against its C++ one";
  out.fitted.push_back({"host.python_op_extra_us", op * 1e6, n, 0, from});
  out.fitted.push_back({"host.python_module_call_extra_us", module * 1e6, n, 0, from});
  out.fitted.push_back({"host.python_step_extra_us", step * 1e6, n, 0, from});
  return true;
}

}  // namespace

Calibration calibrate(const std::vector<MeasuredScenario>& inputs, const PointFilter& use,
                      const std::vector<std::string>& file_names, const FitProgress& progress,
                      const std::vector<KernelMeasurement>& kernels) {
  if (inputs.empty()) throw std::invalid_argument("calibrate needs measurements");
  Calibration out;
  out.profile = inputs.front().scenario.profile;
  // epochcast-run's measurements are C++ loops on LibTorch: a profile calibrated before starts
  // from its LibTorch costs, and Python's extra is added again at the end. Results tables are
  // users' own (Python) loops: their host costs are fitted as they are.
  const bool libtorch_loops = std::all_of(
      inputs.begin(), inputs.end(),
      [](const MeasuredScenario& m) { return m.scenario.training.loop == TrainingLoop::libtorch; });
  if (libtorch_loops && out.profile.host_libtorch) {
    out.profile.host = *out.profile.host_libtorch;
    out.profile.host_libtorch.reset();
    for (const char* key : kPythonHostFigures) {
      std::string& source = out.profile.sources[key];
      source = source.substr(0, source.find(kPythonExtraSource));
    }
  }
  const MachineSpec& machine = inputs.front().scenario.machine;
  for (const MeasuredScenario& input : inputs) {
    if (input.scenario.machine.gpu.id != machine.gpu.id) {
      throw InputError(SourceMark{input.file, 0, 0}, "scenario",
                       fmt::format("measured with scenario hardware '{}' ({}), but the first file "
                                   "used '{}' ({}): a profile describes one kind of device",
                                   input.scenario.machine.name, input.scenario.machine.gpu.name,
                                   machine.name, machine.gpu.name));
    }
  }

  std::vector<double> dispatch;
  for (const MeasuredScenario& input : inputs) {
    if (input.measurements.benchmarks.dispatch)
      dispatch.push_back(input.measurements.benchmarks.dispatch->op_dispatch_s);
  }
  const std::optional<double> dispatch_s =
      dispatch.empty() ? std::nullopt : std::optional<double>(median(dispatch));
  std::vector<Observation> observations;
  std::size_t first_pass = 0;  // each file's layer passes numbered after the files before
  for (const MeasuredScenario& input : inputs) {
    std::vector<Observation> o = layer_observations(input, use, dispatch_s);
    const std::size_t first_point = observations.empty() ? 0 : observations.back().point + 1;
    std::size_t passes = 0;
    for (Observation& each : o) {
      each.point += first_point;
      passes = std::max(passes, each.pass + 1);
      each.pass += first_pass;
    }
    first_pass += passes;
    observations.insert(observations.end(), o.begin(), o.end());
  }
  if (observations.empty() && kernels.empty()) {
    out.notes.push_back("gpu.*: kept: no per-layer profile (run with --profile-layers)");
  } else if (!observations.empty()) {
    fit_efficiencies(observations, !is_cpu_architecture(machine.gpu.architecture), out);
  }
  if (!kernels.empty()) fit_kernel_times(kernels, machine.gpu, out);

  std::vector<double> sample_cpu, sample_bytes, sample_batches;
  for (const MeasuredScenario& input : inputs) {
    for (const MeasuredPoint& p : input.measurements.points) {
      if (p.status == PointStatus::ok && p.loader_sample_cpu_s > 0 && (!use || use(p))) {
        sample_cpu.push_back(p.loader_sample_cpu_s);
        // One rank's loader makes its per-GPU batch.
        sample_batches.push_back(static_cast<double>(std::max<std::int64_t>(1, p.per_gpu_batch)));
        sample_bytes.push_back(static_cast<double>(loader_sample_bytes(input.scenario)));
      }
    }
  }
  if (dispatch_s) {
    Seconds per_op(*dispatch_s);
    out.profile.host.forward_op = out.profile.host.backward_op = out.profile.host.optimizer_op =
        per_op;
    out.fitted.push_back({kHostOpsKey, per_op.value() * 1e6, static_cast<int>(dispatch.size()),
                          spread_rms(dispatch, per_op.value()),
                          "dispatch microbenchmark (tiny eager ops)"});
  } else {
    out.notes.push_back("host.*_op_us: kept: no dispatch microbenchmark (epochcast bench)");
  }
  if (!sample_cpu.empty()) {
    fit_sample_cost(sample_bytes, sample_cpu, out);
    fit_batch_cost(sample_bytes, sample_batches, sample_cpu, out);
  }
  fit_links(inputs, out);
  fit_end_to_end_figures(inputs, use, out, progress);

  const MeasuredEnvironment& env = inputs.front().measurements.environment;
  out.profile.name = "calibrated-" + machine.gpu.id;
  // The catalogue device the measurements stand for (a profile applied to another one is a
  // cross-device prediction); the device's own name goes into the sources.
  out.profile.calibration.device = machine.gpu.name;
  out.profile.calibration.date = newest_measurement(inputs);
  out.profile.calibration.measurements = file_names;
  // A results table records no device: its figures stand for the scenario's machine.
  std::string measured_on =
      env.device_name.empty()
          ? fmt::format("figures given for {}", machine.gpu.name)
          : fmt::format("{} ({}){}{}", env.device_name, env.host,
                        env.torch_version.empty() ? "" : ", LibTorch " + env.torch_version,
                        env.cuda_version.empty() ? "" : ", CUDA " + env.cuda_version);
  std::string provenance = fmt::format("epochcast calibrate on {}, from {}", measured_on,
                                       fmt::format("{}", fmt::join(file_names, ", ")));
  const bool python_loop = libtorch_loops && add_python_loop_costs(inputs, out);
  for (const FittedParameter& f : out.fitted) {
    if (f.key.rfind(kPythonExtraPrefix, 0) == 0) continue;  // sourced below
    // A source per group of figures: "links.efficiency" for links.efficiency.nvswitch.
    std::string group = f.key.substr(0, f.key.find('.', f.key.find('.') + 1));
    if (group.rfind("gpu.efficiency", 0) == 0) group = "gpu.efficiency";
    if (group == kHostOpsKey) {
      for (const char* k : kHostOpFigures)
        out.profile.sources[k] = provenance + ": " + f.from;
      continue;
    }
    out.profile.sources[group] = provenance + ": " + f.from;
  }
  if (python_loop) {
    out.profile.sources["host_libtorch"] =
        provenance + ": the host costs fitted to epochcast-run's C++ loop";
    for (const char* key : kPythonHostFigures) {
      std::string& source = out.profile.sources[key];
      if (source.empty()) source = provenance;
      source += std::string(kPythonExtraSource) + " (" + kPythonLoopMethod + ")";
    }
  }
  return out;
}

}  // namespace epochcast::validate

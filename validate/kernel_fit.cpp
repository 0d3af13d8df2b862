// Predicting measured operators with the device model, and fitting its figures to them.
#include "validate/kernel_fit.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/spec/profile_figures.h"
#include "sim/compute/device_model.h"
#include "validate/simplex_search.h"

namespace epochcast::validate {

namespace {

// A row's measuring floor: its (operator, GPU)'s, or none for a kernel's own time.
double floor_of(const KernelMeasurement& m, const MeasurementFloors& floors) {
  if (m.kernel_only) return 0.0;
  auto floor = floors.find({m.op, m.gpu_id});
  return floor == floors.end() ? 0.0 : floor->second;
}

// The rows with what does not change while figures move: their kernels, GPUs and floors.
struct Workload {
  const std::vector<KernelMeasurement>* rows = nullptr;
  std::vector<CostedOperator> costs;
  std::vector<const GpuSpec*> gpus;
  std::vector<double> floors;
  std::vector<std::string> ops;    // the distinct operators, sorted
  std::vector<std::size_t> op_of;  // each row's, as an index into ops
};

Workload make_workload(const std::vector<KernelMeasurement>& rows, const GpuCatalogue& catalogue,
                       const MeasurementFloors& floors) {
  Workload w;
  w.rows = &rows;
  for (const KernelMeasurement& m : rows) {
    w.costs.push_back(cost_operator(m));
    const GpuSpec* gpu = catalogue.find(m.gpu_id);
    if (gpu == nullptr) {
      throw InputError(m.mark, "Device", fmt::format("no catalogue entry '{}'", m.gpu_id));
    }
    w.gpus.push_back(gpu);
    w.floors.push_back(floor_of(m, floors));
    w.ops.push_back(m.op);
  }
  std::sort(w.ops.begin(), w.ops.end());
  w.ops.erase(std::unique(w.ops.begin(), w.ops.end()), w.ops.end());
  for (const KernelMeasurement& m : rows) {
    w.op_of.push_back(static_cast<std::size_t>(std::lower_bound(w.ops.begin(), w.ops.end(), m.op) -
                                               w.ops.begin()));
  }
  return w;
}

// The offsets of the workload's operators, in the order of Workload::ops.
std::vector<double> offsets_of(const Workload& w, const MeasuringOffsets& offsets) {
  std::vector<double> out;
  for (const std::string& op : w.ops)
    out.push_back(offset_for(offsets, op));
  return out;
}

// The device model of `gpu` as the kernel data measured it, made once per GPU.
const sim::DeviceModel& device_for(std::map<std::string, sim::DeviceModel>& models,
                                   const GpuSpec& gpu, const HardwareProfile& profile) {
  auto model = models.find(gpu.id);
  if (model == models.end()) {
    model = models
                .emplace(gpu.id, sim::DeviceModel(gpu, profile, kKernelMeasurementPrecision,
                                                  kKernelMeasurementConvolution))
                .first;
  }
  return model->second;
}

// The device model's time for each row's kernels under `profile`.
std::vector<double> kernel_times(const Workload& w, const HardwareProfile& profile) {
  std::map<std::string, sim::DeviceModel> models;
  std::vector<double> out;
  out.reserve(w.costs.size());
  for (std::size_t i = 0; i < w.costs.size(); ++i) {
    const sim::DeviceModel& model = device_for(models, *w.gpus[i], profile);
    double seconds = 0;
    for (const KernelWork& kernel : w.costs[i].kernels)
      seconds += model.explain(kernel, w.costs[i].batch).seconds;
    out.push_back(seconds);
  }
  return out;
}

// Each row as measured: its kernels' time after its operator's offset, at least its floor.
std::vector<KernelPrediction> predict(const Workload& w, const std::vector<double>& kernel_s,
                                      const std::vector<double>& offsets) {
  std::vector<KernelPrediction> out;
  out.reserve(kernel_s.size());
  for (std::size_t i = 0; i < kernel_s.size(); ++i) {
    KernelPrediction p;
    p.kernel_s = kernel_s[i];
    p.measured_s = (*w.rows)[i].seconds;
    const double modelled = offsets[w.op_of[i]] * w.floors[i] + p.kernel_s;
    p.predicted_s = std::max(w.floors[i], modelled);
    p.gpu_decided = p.measured_s >= kGpuDecidedFloors * w.floors[i];
    out.push_back(p);
  }
  return out;
}

// Mean over classes of the mean over that class's GPUs of the mean squared log ratio of its
// GPU-decided rows: each class and each GPU weighs the same, however many rows it has.
double log_cost(const std::vector<KernelMeasurement>& rows,
                const std::vector<KernelPrediction>& predictions) {
  std::map<std::pair<KernelClass, std::string>, std::pair<double, int>> groups;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const KernelPrediction& p = predictions[i];
    if (!p.gpu_decided) continue;
    const double r = std::log(p.predicted_s / p.measured_s);
    auto& [sum, n] = groups[{kernel_class(rows[i].op), rows[i].gpu_id}];
    sum += r * r;
    ++n;
  }
  std::map<KernelClass, std::pair<double, int>> classes;
  for (const auto& [key, group] : groups) {
    auto& [sum, n] = classes[key.first];
    sum += group.first / group.second;
    ++n;
  }
  double cost = 0;
  for (const auto& [cls, c] : classes)
    cost += c.first / c.second;
  return classes.empty() ? 0.0 : cost / static_cast<double>(classes.size());
}

// Whether some row is measured at kGpuDecidedFloors floors or more (the rows a fit can use).
bool any_gpu_decided(const std::vector<KernelMeasurement>& rows, const MeasurementFloors& floors) {
  return std::any_of(rows.begin(), rows.end(), [&](const KernelMeasurement& m) {
    return m.seconds >= kGpuDecidedFloors * floor_of(m, floors);
  });
}

// The rows of some classes.
std::vector<KernelMeasurement> rows_of(const std::vector<KernelMeasurement>& rows,
                                       const std::vector<KernelClass>& classes) {
  std::vector<KernelMeasurement> out;
  for (const KernelMeasurement& m : rows) {
    if (std::find(classes.begin(), classes.end(), kernel_class(m.op)) != classes.end())
      out.push_back(m);
  }
  return out;
}

// The search moves figures on a log scale (a relative step means the same anywhere in their
// range); a tile's costs, which may be 0, on log(value + 0.01): a hundredth of a cycle per
// element is far below any staging cost that matters.
constexpr double kTileCostShift = 0.01;
double to_search(const ProfileFigure& figure, double value) {
  return std::log(figure.kind == FigureKind::tile_cost ? value + kTileCostShift : value);
}
double from_search(const ProfileFigure& figure, double x) {
  return figure.kind == FigureKind::tile_cost ? std::exp(x) - kTileCostShift : std::exp(x);
}

// Whether the profile's per-architecture table gives `key` for `architecture` at the precision
// the kernel data were measured in.
bool architecture_gives(const HardwareProfile& profile, const std::string& architecture,
                        std::string_view key) {
  auto found = profile.gpu.by_architecture.find(architecture);
  if (found == profile.gpu.by_architecture.end()) return false;
  const ArchitectureEfficiency& e = found->second;
  if (key == "gpu.memory_efficiency") return e.memory.has_value();
  auto classes = e.compute.find(std::string(efficiency_precision(kKernelMeasurementPrecision)));
  for (std::size_t c = 0; c < kOpClassCount; ++c) {
    if (key == fmt::format("gpu.efficiency.{}", kOpClassNames[c]))
      return classes != e.compute.end() && classes->second.contains(c);
    if (key == fmt::format("gpu.bandwidth_relative.{}", kOpClassNames[c]))
      return e.bandwidth_relative.contains(c);
  }
  return false;
}

// Each operator's rows as a workload of its own, to fit its offset alone: an operator's offset
// moves only its rows. `index` maps its rows to the whole workload's.
struct OperatorRows {
  std::vector<KernelMeasurement> rows;
  Workload w;
  std::vector<std::size_t> index;
};
std::vector<OperatorRows> rows_by_operator(const Workload& w) {
  std::vector<OperatorRows> out(w.ops.size());
  for (std::size_t i = 0; i < w.op_of.size(); ++i) {
    OperatorRows& o = out[w.op_of[i]];
    o.rows.push_back((*w.rows)[i]);
    o.w.floors.push_back(w.floors[i]);
    o.w.op_of.push_back(0);
    o.index.push_back(i);
  }
  for (std::size_t k = 0; k < out.size(); ++k) {
    out[k].w.rows = &out[k].rows;  // no reallocation after this
    out[k].w.ops = {w.ops[k]};
  }
  return out;
}

// The offset of each operator (in the order of Workload::ops) that brings its own rows closest
// in log ratio, its kernels' times given (searched from `start`, each within 0 and 1).
std::vector<double> fitted_offsets(const std::vector<OperatorRows>& operators,
                                   const std::vector<double>& kernel_s,
                                   const std::vector<double>& start) {
  std::vector<double> out = start;
  for (std::size_t k = 0; k < operators.size(); ++k) {
    const OperatorRows& o = operators[k];
    std::vector<double> own_s;
    for (std::size_t i : o.index)
      own_s.push_back(kernel_s[i]);
    auto cost = [&](const std::vector<double>& x) {
      return log_cost(o.rows, predict(o.w, own_s, {std::clamp(x[0], 0.0, 1.0)}));
    };
    out[k] = std::clamp(simplex_search(cost, {start[k]}, 0.3, 1e-7, 400).x[0], 0.0, 1.0);
  }
  return out;
}

// One stage: its figures (searched as above, each trial clamped to the figure's bounds) and,
// when asked, the offset fraction of each of its operators (searched as they are: they may be
// 0), each the best for its rows at every trial of the figures.
void fit_stage(const Workload& w, const FitStage& stage, KernelFit& result) {
  std::vector<const ProfileFigure*> figures;
  std::vector<double> start;
  for (const std::string& key : stage.figures) {
    const ProfileFigure* figure = find_profile_figure(key);
    std::optional<double> value = profile_figure_value(result.profile, key);
    if (figure == nullptr || !value) {
      throw std::invalid_argument(fmt::format("no profile figure '{}' to fit", key));
    }
    figures.push_back(figure);
    start.push_back(to_search(*figure, std::clamp(*value, figure->lower, figure->upper)));
  }
  auto profile_at = [&](const std::vector<double>& x) {
    HardwareProfile p = result.profile;
    for (std::size_t i = 0; i < figures.size(); ++i) {
      set_profile_figure(
          p, figures[i]->key,
          std::clamp(from_search(*figures[i], x[i]), figures[i]->lower, figures[i]->upper));
    }
    return p;
  };
  const std::vector<double> prior_offsets = offsets_of(w, result.offsets);
  const std::vector<OperatorRows> operators =
      stage.offset ? rows_by_operator(w) : std::vector<OperatorRows>{};
  auto offsets_for = [&](const std::vector<double>& kernel_s) {
    return stage.offset ? fitted_offsets(operators, kernel_s, prior_offsets) : prior_offsets;
  };
  auto cost = [&](const std::vector<double>& x) {
    const std::vector<double> kernel_s = kernel_times(w, profile_at(x));
    return log_cost(*w.rows, predict(w, kernel_s, offsets_for(kernel_s)));
  };
  const std::vector<double> best_x =
      figures.empty() ? start : simplex_search(cost, start, 0.3, 1e-7, 400 * start.size()).x;
  result.profile = profile_at(best_x);
  const std::vector<double> kernel_s = kernel_times(w, result.profile);
  const std::vector<double> offsets = offsets_for(kernel_s);
  result.cost = log_cost(*w.rows, predict(w, kernel_s, offsets));
  for (std::size_t i = 0; i < w.ops.size() && stage.offset; ++i)
    result.offsets[w.ops[i]] = offsets[i];
  for (const ProfileFigure* figure : figures)
    result.figures[figure->key] = *profile_figure_value(result.profile, figure->key);
}

}  // namespace

MeasurementFloors measurement_floors(const std::vector<KernelMeasurement>& rows) {
  MeasurementFloors floors;
  for (const KernelMeasurement& m : rows) {
    if (m.kernel_only) continue;  // no measuring loop's floor in a kernel's own time
    auto [it, added] = floors.emplace(std::make_pair(m.op, m.gpu_id), m.seconds);
    if (!added) it->second = std::min(it->second, m.seconds);
  }
  return floors;
}

std::vector<KernelPrediction> predict_kernels(const std::vector<KernelMeasurement>& rows,
                                              const HardwareProfile& profile,
                                              const GpuCatalogue& catalogue,
                                              const MeasurementFloors& floors,
                                              const MeasuringOffsets& offsets) {
  const Workload w = make_workload(rows, catalogue, floors);
  return predict(w, kernel_times(w, profile), offsets_of(w, offsets));
}

std::vector<std::string> modelled_kernels(const std::vector<KernelMeasurement>& rows,
                                          const HardwareProfile& profile,
                                          const GpuCatalogue& catalogue) {
  const Workload w = make_workload(rows, catalogue, MeasurementFloors{});
  std::map<std::string, sim::DeviceModel> models;
  std::vector<std::string> out;
  out.reserve(rows.size());
  for (std::size_t i = 0; i < w.costs.size(); ++i) {
    const GpuSpec& gpu = *w.gpus[i];
    const sim::DeviceModel& model = device_for(models, gpu, profile);
    sim::KernelExplanation longest;
    for (const KernelWork& kernel : w.costs[i].kernels) {
      sim::KernelExplanation e = model.explain(kernel, w.costs[i].batch);
      if (e.seconds > longest.seconds) longest = std::move(e);
    }
    out.push_back(longest.algorithm);
  }
  return out;
}

std::vector<ClassAccuracy> class_accuracy(const std::vector<KernelMeasurement>& rows,
                                          const std::vector<KernelPrediction>& predictions) {
  struct Group {
    int rows = 0;
    std::vector<double> errors, ratios;
  };
  std::map<std::pair<KernelClass, std::string>, Group> groups;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    Group& g = groups[{kernel_class(rows[i].op), rows[i].gpu_id}];
    ++g.rows;
    const KernelPrediction& p = predictions[i];
    if (!p.gpu_decided) continue;
    g.errors.push_back(std::abs(p.predicted_s - p.measured_s) / p.measured_s);
    g.ratios.push_back(p.predicted_s / p.measured_s);
  }
  std::vector<ClassAccuracy> out;
  for (auto& [key, g] : groups) {
    ClassAccuracy a;
    a.kernel_class = key.first;
    a.gpu_id = key.second;
    a.rows = g.rows;
    a.gpu_decided = static_cast<int>(g.errors.size());
    if (!g.errors.empty()) {
      double sum = 0;
      for (double e : g.errors)
        sum += e;
      a.mape = sum / static_cast<double>(g.errors.size());
      std::nth_element(g.ratios.begin(), g.ratios.begin() + g.ratios.size() / 2, g.ratios.end());
      a.median_ratio = g.ratios[g.ratios.size() / 2];
    }
    out.push_back(a);
  }
  return out;
}

double offset_for(const MeasuringOffsets& offsets, const std::string& op) {
  auto found = offsets.find(op);
  return found == offsets.end() ? kDefaultOffsetFraction : found->second;
}

MeasuringOffsets fit_measuring_offsets(const std::vector<KernelMeasurement>& rows,
                                       const HardwareProfile& profile,
                                       const GpuCatalogue& catalogue,
                                       const MeasurementFloors& floors) {
  // The operators with a row the GPU decides: the others' offsets are not seen.
  std::set<std::string> decided;
  for (const KernelMeasurement& m : rows) {
    if (m.seconds >= kGpuDecidedFloors * floor_of(m, floors)) decided.insert(m.op);
  }
  std::vector<KernelMeasurement> seen;
  std::copy_if(rows.begin(), rows.end(), std::back_inserter(seen),
               [&](const KernelMeasurement& m) { return decided.contains(m.op); });
  KernelFit fit;
  fit.profile = profile;
  if (!seen.empty()) fit_stage(make_workload(seen, catalogue, floors), {{}, {}, true}, fit);
  return fit.offsets;
}

std::vector<FitStage> kernel_fit_stages() {
  return {
      {{KernelClass::elementwise}, {}, true},
      {{KernelClass::layernorm, KernelClass::softmax},
       {"gpu.bandwidth_relative.normalization"},
       true},
      {{KernelClass::gemm, KernelClass::batched_gemm},
       {"gpu.efficiency.gemm", "gpu.tile_staging_cycles"},
       true},
      {{KernelClass::conv}, {"gpu.efficiency.conv"}, true},
  };
}

std::vector<FitStage> joint_fit(const std::vector<std::string>& figures) {
  FitStage all{{}, figures, true};
  for (std::size_t i = 0; i < kKernelClassCount; ++i)
    all.classes.push_back(static_cast<KernelClass>(i));
  return {all};
}

KernelFit fit_kernel_figures(const std::vector<KernelMeasurement>& rows,
                             const HardwareProfile& prior, const GpuCatalogue& catalogue,
                             const MeasurementFloors& floors, const std::vector<FitStage>& stages) {
  KernelFit result;
  result.profile = prior;
  for (FitStage stage : stages) {
    const std::vector<KernelMeasurement> seen = rows_of(rows, stage.classes);
    if (seen.empty()) continue;  // none of its classes measured: nothing to say of its figures
    if (!any_gpu_decided(
            seen, floors)) {  // nothing of this stage the GPU decides: its figures keep the prior
      result.unseen.insert(result.unseen.end(), stage.figures.begin(), stage.figures.end());
      continue;
    }
    // A figure that every measured GPU's architecture gives is that architecture's, from its
    // own source: the rows could not move it.
    std::set<std::string> architectures;
    for (const KernelMeasurement& m : seen) {
      if (const GpuSpec* gpu = catalogue.find(m.gpu_id)) architectures.insert(gpu->architecture);
    }
    std::erase_if(stage.figures, [&](const std::string& key) {
      const bool held =
          std::all_of(architectures.begin(), architectures.end(),
                      [&](const std::string& a) { return architecture_gives(prior, a, key); });
      if (held && std::find(result.held.begin(), result.held.end(), key) == result.held.end())
        result.held.push_back(key);
      return held;
    });
    if (stage.figures.empty() && !stage.offset) continue;
    fit_stage(make_workload(seen, catalogue, floors), stage, result);
  }
  return result;
}

std::vector<LeaveOneOut> leave_one_gpu_out(const std::vector<KernelMeasurement>& rows,
                                           const HardwareProfile& prior,
                                           const GpuCatalogue& catalogue,
                                           const std::vector<FitStage>& stages) {
  const MeasurementFloors floors = measurement_floors(rows);
  // Chips (architecture, SMs) -> their boards' ids.
  std::map<std::pair<std::string, int>, std::set<std::string>> chips;
  for (const KernelMeasurement& m : rows) {
    const GpuSpec* gpu = catalogue.find(m.gpu_id);
    if (gpu == nullptr) throw std::invalid_argument("no catalogue entry " + m.gpu_id);
    chips[{gpu->architecture, gpu->sm_count}].insert(m.gpu_id);
  }
  if (chips.size() < 2) {
    throw std::invalid_argument("leaving one GPU out needs measurements of two GPUs or more");
  }
  std::vector<LeaveOneOut> out;
  for (const auto& [chip, boards] : chips) {
    std::vector<KernelMeasurement> others, own;
    for (const KernelMeasurement& m : rows)
      (boards.contains(m.gpu_id) ? own : others).push_back(m);
    LeaveOneOut l;
    l.gpu_id = fmt::format("{}", fmt::join(boards, "+"));
    l.fit = fit_kernel_figures(others, prior, catalogue, floors, stages);
    l.held_out =
        class_accuracy(own, predict_kernels(own, l.fit.profile, catalogue, floors, l.fit.offsets));
    out.push_back(std::move(l));
  }
  return out;
}

}  // namespace epochcast::validate

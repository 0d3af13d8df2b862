// Link figures from collective microbenchmarks, the simulator in the loop (link_fit.h).
#include "validate/link_fit.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <numeric>
#include <optional>
#include <tuple>

#include <fmt/format.h>

#include "core/spec/profile_figures.h"
#include "sim/collectives/collective_sweep.h"
#include "sim/collectives/protocols.h"

namespace epochcast::validate {

namespace {

constexpr std::string_view kCollectives[] = {"all_reduce", "all_gather", "reduce_scatter",
                                             "broadcast",  "reduce",     "alltoall"};

sim::Collective collective_of(const std::string& name) {
  if (name == "alltoall" || name == "all_to_all") return sim::Collective::all_to_all;
  for (std::size_t i = 0; i < std::size(sim::kCollectiveNames); ++i) {
    if (sim::kCollectiveNames[i] == name) return static_cast<sim::Collective>(i);
  }
  return sim::Collective::all_reduce;
}

std::string size_text(double bytes) {
  constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 4) {
    bytes /= 1024;
    ++unit;
  }
  return fmt::format("{:g} {}", bytes, kUnits[unit]);
}

// A step latency or launch cost above this is no link's (a millisecond per step).
constexpr double kLatencyBoundUs = 1000.0;
// What a host thread may take to launch one GPU's NCCL kernel: a CUDA launch alone takes 2-3 us
// on any host (../shared/REFERENCE.md section 2); 50 us is a host that does something else.
constexpr double kLaunchLowUs = 1.0, kLaunchHighUs = 50.0;

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

// The machine's collective at one size, as `collective` times it.
class Model {
 public:
  // `launches_per_iteration`: the benchmark's thread launches (nccl-tests' -g), whose floor the
  // measured times carry and the link figures must not absorb.
  Model(const MachineSpec& machine, sim::Collective collective, int per_node, int nodes,
        int launches_per_iteration)
      : machine_(machine) {
    sweep_.collective = collective;
    sweep_.gpus_per_node = per_node;
    sweep_.nodes = nodes;
    sweep_.launches_per_iteration = launches_per_iteration;
    sweep_.element_bytes = 1;  // measured sizes are whole already
    sweep_.factor = 1;
  }
  sim::CollectiveRow row(const HardwareProfile& profile, std::int64_t bytes) {
    sweep_.min_bytes = sweep_.max_bytes = bytes;
    return sim::run_collective_sweep(machine_, profile, sweep_).front();
  }
  double seconds(const HardwareProfile& profile, std::int64_t bytes) {
    return row(profile, bytes).seconds;
  }

 private:
  const MachineSpec& machine_;
  sim::CollectiveSweep sweep_;
};

// A figure of how the GPUs run LL or LL128, and the sizes it is matched on.
struct ProtocolFigureFit {
  std::string key;       // a links.ll* figure (profile_figures.h)
  std::string protocol;  // the protocol of the sizes it moves ("ll", "ll128")
  double lower = 0, upper = 0;
  bool time_rises = true;     // the time rises with it (a latency), else falls (a rate)
  std::vector<double> moved;  // each size's time, relative, with the figure a tenth slower
  std::vector<const CollectiveMeasurement*> rows;
  std::optional<double> value;
  std::optional<double> wanted;  // the bound it reached, where it keeps its prior
};

// The value in [lower, upper] where `error` (increasing in the value) crosses zero, by
// bisection (on a log scale when both bounds are positive); a bound when it does not cross.
double root(const std::function<double(double)>& error, double lower, double upper) {
  const bool log_scale = lower > 0;
  if (error(lower) >= 0) return lower;
  if (error(upper) <= 0) return upper;
  for (int i = 0; i < 60; ++i) {
    const double middle = log_scale ? std::sqrt(lower * upper) : (lower + upper) / 2;
    (error(middle) < 0 ? lower : upper) = middle;
    if (upper - lower <= 1e-9 * upper) break;
  }
  return log_scale ? std::sqrt(lower * upper) : (lower + upper) / 2;
}

}  // namespace

LinkFit fit_link_figures(const std::vector<CollectiveMeasurement>& measured,
                         const MachineSpec& machine, const HardwareProfile& prior) {
  LinkFit out;
  out.profile = prior;
  // The collective to fit: most ranks, all_reduce first; correct rows only; one group per way
  // the benchmark launched them (a -g 8 run's small sizes wait on its thread).
  std::map<std::tuple<int, int, int>, std::vector<const CollectiveMeasurement*>> groups;
  for (const CollectiveMeasurement& c : measured) {
    const auto known = std::find(std::begin(kCollectives), std::end(kCollectives), c.operation);
    if (!c.correct || c.ranks < 2 || c.time_s <= 0 || known == std::end(kCollectives)) continue;
    const int order = static_cast<int>(known - std::begin(kCollectives));
    groups[{-c.ranks, order, c.launches_per_iteration}].push_back(&c);
  }
  std::vector<const CollectiveMeasurement*> rows;
  for (auto& [key, group] : groups) {
    if (group.size() >= 2) {
      rows = group;
      break;
    }
  }
  if (rows.empty()) {
    out.notes.push_back(
        "links: kept: no collective measured at two sizes or more over 2 ranks "
        "or more");
    return out;
  }
  std::sort(rows.begin(), rows.end(),
            [](const auto* a, const auto* b) { return a->bytes < b->bytes; });
  const std::string& name = rows.front()->operation;
  const int ranks = rows.front()->ranks;
  const int per_node = std::min(ranks, machine.gpus_per_node);
  const int nodes = ranks / per_node;
  if (ranks % per_node != 0 || (nodes > 1 && !machine.topology.network)) {
    out.notes.push_back(fmt::format(
        "links: kept: {} over {} ranks does not fill whole nodes of '{}' ({} GPUs each{})", name,
        ranks, machine.name, machine.gpus_per_node,
        machine.topology.network ? "" : ", no network"));
    return out;
  }
  Model model(machine, collective_of(name), per_node, nodes, rows.front()->launches_per_iteration);
  // A figure as the machine runs it: LL's step of a kind the profile leaves to NCCL's hwLat is
  // that at the GPUs' clock (sim::machine_ll_step_latency), which a nudge must start from.
  const double clock_scale = sim::ll_clock_scale(machine.gpu);
  const auto machine_value = [&](const HardwareProfile& profile, const std::string& key) {
    for (std::size_t k = 0; k < kLinkKinds; ++k) {
      if (key == fmt::format("links.ll_step_latency_us.{}", kLinkKindKeys[k])) {
        return sim::machine_ll_step_latency(profile, static_cast<sim::LinkKind>(k), clock_scale)
                   .value() *
               1e6;
      }
    }
    return *profile_figure_value(profile, key);
  };
  if (const int launches = rows.front()->launches_per_iteration; launches > 1) {
    // One 8x A100 node measured both ways (tests/sim/data/nccl-tests/a100-80gb-node-*): under
    // -g 8, 7-39% slower from 1 MiB to 512 MiB than under mpirun, equal from 1 GiB; the model
    // times a thread's launches only, so figures fitted to such a run may be slow for training,
    // which runs a process per GPU.
    out.notes.push_back(fmt::format(
        "links: fitted to a run whose one thread drove {} GPUs (nccl-tests -g {}): one 8x A100 "
        "node ran 7-39% slower under -g 8 than with a process per GPU from 1 MiB to 512 MiB, "
        "which the model does not make; a run with a process per GPU (mpirun -np, -g 1) "
        "measures what training sees",
        launches, launches));
  }
  const std::string from = fmt::format(
      "{} over {} ranks ({} node{}), {} to {} ({} sizes), the "
      "simulator in the loop",
      name, ranks, nodes, nodes > 1 ? "s" : "", size_text(static_cast<double>(rows.front()->bytes)),
      size_text(static_cast<double>(rows.back()->bytes)), rows.size());

  // Which figures the model's times depend on, and where: each candidate nudged (an efficiency
  // down a tenth, a latency up 10 us) and every size re-timed.
  HardwareProfile& p = out.profile;
  std::vector<double> base;
  for (const CollectiveMeasurement* r : rows)
    base.push_back(model.seconds(p, r->bytes));
  const auto moved_by = [&](const HardwareProfile& trial) {
    std::vector<double> moved;
    for (std::size_t i = 0; i < rows.size(); ++i)
      moved.push_back(model.seconds(trial, rows[i]->bytes) / base[i] - 1);
    return moved;
  };
  // The median of log(predicted / measured) over `on`, timed with `profile`.
  const auto median_log_error = [&](const HardwareProfile& profile,
                                    const std::vector<const CollectiveMeasurement*>& on) {
    std::vector<double> errors;
    for (const CollectiveMeasurement* r : on)
      errors.push_back(std::log(model.seconds(profile, r->bytes) / r->time_s));
    return median(errors);
  };
  // How the GPUs run LL and LL128 (LinkCosts): each size NCCL runs under one of them is matched
  // by the figure of that protocol that moves it most, each made a tenth slower in turn: LL's step
  // latency on the kind of link that can explain its sizes (below) and its rate, LL128's rate.
  // (LL's thread pace is not one: where a thread stores one line a step, as up to 768 KiB on 8
  // ranks, it adds to each step as the latency does, and no size tells the two apart.) NCCL's
  // choice of protocol does not depend on them (its tuner's figures), so the sizes each protocol
  // runs stay its own while they move.
  std::vector<std::string> protocol_of;
  for (const CollectiveMeasurement* r : rows)
    protocol_of.push_back(model.row(p, r->bytes).protocol);
  std::vector<ProtocolFigureFit> protocol_figures;
  const auto protocol_candidate = [&](const std::string& key, const std::string& protocol,
                                      bool time_rises) {
    const ProfileFigure* figure = find_profile_figure(key);
    ProtocolFigureFit c;
    c.key = key;
    c.protocol = protocol;
    c.lower = figure->lower;
    c.upper = figure->upper;
    c.time_rises = time_rises;
    const double prior_value = machine_value(p, key);
    HardwareProfile trial = p;
    set_profile_figure(trial, key, time_rises ? prior_value * 1.1 : prior_value / 1.1);
    c.moved = moved_by(trial);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      if (protocol_of[i] != protocol) c.moved[i] = 0;
    }
    return c;
  };
  {
    // LL's step latency on the kind of link that can explain its sizes: of the kinds whose
    // latency moves them (by 1% or more), the one moving them most in all whose value matching
    // the sizes it moves (the median, as below; sizes the thread's launches bound left out)
    // stays inside its range, else the one moving them most. On two nodes over TCP a step across
    // the network takes tens of microseconds, where the many NVSwitch steps move the sizes more
    // but cannot reach such times.
    std::vector<ProtocolFigureFit> kinds;
    for (std::string_view kind : kLinkKindKeys) {
      ProtocolFigureFit c =
          protocol_candidate(fmt::format("links.ll_step_latency_us.{}", kind), "ll", true);
      if (*std::max_element(c.moved.begin(), c.moved.end()) >= 0.01) kinds.push_back(c);
    }
    const auto total = [](const ProtocolFigureFit& c) {
      return std::accumulate(c.moved.begin(), c.moved.end(), 0.0);
    };
    std::stable_sort(kinds.begin(), kinds.end(),
                     [&](const auto& a, const auto& b) { return total(a) > total(b); });
    const auto inside_range = [&](const ProtocolFigureFit& c) {
      std::vector<const CollectiveMeasurement*> on;
      for (std::size_t i = 0; i < rows.size(); ++i) {
        if (c.moved[i] >= 0.01 && !model.row(p, rows[i]->bytes).launch_bound) on.push_back(rows[i]);
      }
      if (on.empty()) return false;
      HardwareProfile trial = p;
      const double value = root(
          [&](double us) {
            set_profile_figure(trial, c.key, us);
            return median_log_error(trial, on);
          },
          c.lower, c.upper);
      return value > c.lower && value < c.upper;
    };
    const auto explaining = std::find_if(kinds.begin(), kinds.end(), inside_range);
    if (explaining != kinds.end()) {
      protocol_figures.push_back(*explaining);
    } else if (!kinds.empty()) {
      protocol_figures.push_back(kinds.front());
    }
    protocol_figures.push_back(protocol_candidate("links.ll_rate_relative", "ll", false));
    protocol_figures.push_back(protocol_candidate("links.ll128_rate_relative", "ll128", false));
  }
  std::vector<bool> under_protocol_figure(rows.size(), false);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    ProtocolFigureFit* most = nullptr;
    for (ProtocolFigureFit& c : protocol_figures) {
      if (c.moved[i] >= 0.01 && (most == nullptr || c.moved[i] > most->moved[i])) most = &c;
    }
    if (most == nullptr) continue;
    most->rows.push_back(rows[i]);
    under_protocol_figure[i] = true;
  }
  std::erase_if(protocol_figures, [](const ProtocolFigureFit& c) { return c.rows.empty(); });

  // The efficiency that moves the largest size most: the link kind that bounds it.
  std::size_t bandwidth_kind = kLinkKinds;
  std::vector<double> bandwidth_share;  // how much of each size's time that link's rate is
  for (std::size_t k = 0; k < kLinkKinds; ++k) {
    HardwareProfile trial = p;
    trial.links.efficiency[k] *= 0.9;
    std::vector<double> moved = moved_by(trial);
    if (moved.back() > 0.01 && (bandwidth_share.empty() || moved.back() > bandwidth_share.back())) {
      bandwidth_kind = k;
      bandwidth_share = std::move(moved);
    }
  }
  // The latency that moves the sizes most in all: a step's on each kind of link, or NCCL's
  // launch.
  std::string latency_key;
  Seconds* latency_slot = nullptr;
  std::vector<double> latency_share;
  double most_latency = 0;
  for (std::size_t k = 0; k <= kLinkKinds; ++k) {
    HardwareProfile trial = p;
    Seconds& slot = k < kLinkKinds ? trial.links.step_latency[k] : trial.links.collective_launch;
    slot += microseconds(10);
    std::vector<double> moved = moved_by(trial);
    const double total = std::accumulate(moved.begin(), moved.end(), 0.0);
    if (*std::max_element(moved.begin(), moved.end()) > 0.01 && total > most_latency) {
      most_latency = total;
      latency_key = k < kLinkKinds ? fmt::format("links.step_latency_us.{}", kLinkKindKeys[k])
                                   : "links.collective_launch_us";
      latency_slot = k < kLinkKinds ? &p.links.step_latency[k] : &p.links.collective_launch;
      latency_share = std::move(moved);
    }
  }
  const Seconds prior_latency = latency_slot != nullptr ? *latency_slot : Seconds(0);
  // Each figure is matched on the sizes it governs: an efficiency where its link's rate is
  // most of the time (a tenth off the rate moves the time by 8% or more) among the largest
  // sizes (within 8x of the largest), a latency where it moves the time by at least half as
  // much as it moves it anywhere.
  std::vector<const CollectiveMeasurement*> bandwidth_rows, latency_rows;
  const double latency_peak =
      latency_share.empty() ? 0 : *std::max_element(latency_share.begin(), latency_share.end());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (under_protocol_figure[i]) continue;
    // The rate shows best where the bytes dominate most: within 8x of the largest size.
    if (!bandwidth_share.empty() && bandwidth_share[i] >= 0.08 &&
        rows[i]->bytes * 8 >= rows.back()->bytes)
      bandwidth_rows.push_back(rows[i]);
    if (!latency_share.empty() && latency_share[i] >= latency_peak / 2)
      latency_rows.push_back(rows[i]);
  }
  const auto log_error = [&](const std::vector<const CollectiveMeasurement*>& on) {
    return median_log_error(p, on);
  };

  // A run whose thread launches several GPUs' kernels an iteration (-g) times its small sizes at
  // those launches: the sizes the launches bound (at the figures so far) fix the launch cost, and
  // the latency is matched on the others.
  const bool threaded = rows.front()->launches_per_iteration > 1;
  const Seconds prior_launch = p.links.nccl_launch_or_default();
  const auto launch_bound = [&] {
    std::vector<const CollectiveMeasurement*> bound;
    if (!threaded) return bound;
    for (const CollectiveMeasurement* r : rows) {
      if (model.row(p, r->bytes).launch_bound) bound.push_back(r);
    }
    return bound;
  };
  std::vector<const CollectiveMeasurement*> launch_rows;

  // Each figure solved in turn, the others held, until none moves (they share sizes where a
  // size pays both a latency and its bytes).
  std::optional<double> efficiency, latency_us, launch_us;
  const auto fit_efficiency = [&] {
    double& e = p.links.efficiency[bandwidth_kind];
    // A time falls as the efficiency rises: the error, negated, rises with it.
    e = root(
        [&](double value) {
          e = value;
          return -log_error(bandwidth_rows);
        },
        0.01, 1.0);
    efficiency = e;
  };
  // The latency, on the sizes it governs that the thread's launches do not bound.
  const auto fit_latency = [&] {
    launch_rows = launch_bound();
    std::vector<const CollectiveMeasurement*> paying_latency;
    for (const CollectiveMeasurement* r : latency_rows) {
      if (std::find(launch_rows.begin(), launch_rows.end(), r) == launch_rows.end())
        paying_latency.push_back(r);
    }
    if (paying_latency.empty()) return;
    Seconds& l = *latency_slot;
    latency_us = root(
        [&](double us) {
          l = microseconds(us);
          return log_error(paying_latency);
        },
        0.0, kLatencyBoundUs);
    l = microseconds(*latency_us);
  };
  // The protocols' figures, each on its sizes that the thread's launches do not bound.
  const auto fit_protocol_figures = [&] {
    for (ProtocolFigureFit& c : protocol_figures) {
      if (c.wanted) continue;
      std::vector<const CollectiveMeasurement*> on;
      for (const CollectiveMeasurement* r : c.rows) {
        if (std::find(launch_rows.begin(), launch_rows.end(), r) == launch_rows.end())
          on.push_back(r);
      }
      if (on.empty()) continue;
      c.value = root(
          [&](double value) {
            set_profile_figure(p, c.key, value);
            return c.time_rises ? log_error(on) : -log_error(on);
          },
          c.lower, c.upper);
      set_profile_figure(p, c.key, *c.value);
    }
  };
  const auto protocol_values = [&] {
    std::vector<double> values;
    for (const ProtocolFigureFit& c : protocol_figures)
      values.push_back(c.value.value_or(-1));
    return values;
  };
  for (int round = 0; round < 12; ++round) {
    const double efficiency_before = efficiency.value_or(-1);
    const double latency_before = latency_us.value_or(-1);
    const double launch_before = launch_us.value_or(-1);
    const std::vector<double> protocols_before = protocol_values();
    if (!bandwidth_rows.empty()) fit_efficiency();
    fit_latency();
    // The launch before the protocols' figures: a size its thread's launches bound is no LL
    // size's to match (an LL step pushed up to a launch-bound time would keep those sizes above
    // the launches, and so never launch-bound).
    launch_rows = launch_bound();
    if (launch_rows.size() >= 2) {
      launch_us = root(
          [&](double us) {
            p.links.nccl_launch = microseconds(us);
            return log_error(launch_rows);
          },
          kLaunchLowUs, kLaunchHighUs);
      p.links.nccl_launch = microseconds(*launch_us);
      launch_rows = launch_bound();
    }
    fit_protocol_figures();
    const std::vector<double> protocols_now = protocol_values();
    bool protocols_still = true;
    for (std::size_t i = 0; i < protocols_now.size(); ++i)
      protocols_still = protocols_still && std::abs(protocols_now[i] - protocols_before[i]) <=
                                               1e-6 * std::max(1.0, std::abs(protocols_now[i]));
    if (std::abs(efficiency.value_or(-1) - efficiency_before) < 1e-9 &&
        std::abs(latency_us.value_or(-1) - latency_before) < 1e-6 &&
        std::abs(launch_us.value_or(-1) - launch_before) < 1e-6 && protocols_still)
      break;
  }
  // A launch cost the launch-bound sizes would push past its range is no launch's: it keeps its
  // prior, the gap is named, and the other figures are refitted to the sizes they then govern.
  std::optional<double> launch_wanted;
  if (launch_us && (*launch_us >= kLaunchHighUs || *launch_us <= kLaunchLowUs)) {
    launch_wanted = launch_us;
    p.links.nccl_launch = prior_launch;
    launch_us.reset();
    fit_latency();
    if (!bandwidth_rows.empty()) fit_efficiency();
    launch_rows = launch_bound();
    fit_protocol_figures();
  }
  // A latency the sizes would push past its range stands for something the model lacks (a
  // transport's per-message cost, a proxy): it keeps its prior rather than bend the efficiency,
  // which is refitted alone, and the gap is named.
  std::optional<double> latency_wanted;
  if (latency_us && (*latency_us >= kLatencyBoundUs || *latency_us <= 0.0)) {
    latency_wanted = latency_us;
    *latency_slot = prior_latency;
    latency_us.reset();
    if (!bandwidth_rows.empty()) fit_efficiency();
  }
  // So does a protocol's figure at its bound: the others of the protocols are refitted without it.
  bool protocol_at_bound = false;
  for (ProtocolFigureFit& c : protocol_figures) {
    if (!c.value || (*c.value > c.lower && *c.value < c.upper)) continue;
    c.wanted = c.value;
    c.value.reset();
    copy_profile_figure(p, prior, c.key);
    protocol_at_bound = true;
  }
  for (int round = 0; protocol_at_bound && round < 12; ++round) {
    const std::vector<double> before = protocol_values();
    fit_protocol_figures();
    if (protocol_values() == before) break;
  }

  // Residuals over every size, and the sizes the fitted model still misses.
  std::vector<double> relative;
  for (const CollectiveMeasurement* r : rows)
    relative.push_back(model.seconds(p, r->bytes) / r->time_s - 1);
  const auto rms_over = [&](const std::vector<const CollectiveMeasurement*>& on) {
    double sum = 0;
    for (const CollectiveMeasurement* r : on) {
      const double e = model.seconds(p, r->bytes) / r->time_s - 1;
      sum += e * e;
    }
    return on.empty() ? 0.0 : std::sqrt(sum / static_cast<double>(on.size()));
  };
  if (efficiency) {
    const std::string key = fmt::format("links.efficiency.{}", kLinkKindKeys[bandwidth_kind]);
    out.fitted.push_back(
        {key, *efficiency, static_cast<int>(bandwidth_rows.size()), rms_over(bandwidth_rows),
         from + fmt::format("; the {} bandwidth-bound sizes", bandwidth_rows.size())});
    if (*efficiency >= 1.0 || *efficiency <= 0.01) {
      out.gaps.push_back(fmt::format(
          "{}: {} at its bound ({}): the measured bandwidth-bound sizes are {} than the model "
          "can make them with any efficiency of that link (an algorithm, a transport or a link "
          "the model does not have)",
          name, key, *efficiency, *efficiency >= 1.0 ? "faster" : "slower"));
    }
  } else {
    out.notes.push_back(fmt::format("links: no efficiency fitted: {}",
                                    "no link kind's efficiency moves the largest size by 1% "
                                    "or more"));
  }
  if (latency_us) {
    out.fitted.push_back({latency_key, *latency_us, static_cast<int>(latency_rows.size()),
                          rms_over(latency_rows),
                          from + fmt::format("; the {} latency-bound sizes", latency_rows.size())});
  } else if (latency_wanted) {
    out.gaps.push_back(fmt::format(
        "{}: {} kept at its prior ({:g} us): the sizes it moves most are {} than any latency from "
        "0 to {:g} us makes them in the model",
        name, latency_key, prior_latency.value() * 1e6,
        *latency_wanted <= 0.0 ? "faster" : "slower", kLatencyBoundUs));
  } else {
    out.notes.push_back(fmt::format("links: no step latency fitted: {}",
                                    "no Simple step latency or launch cost moves any size by 1% "
                                    "or more (the sizes NCCL runs under LL and LL128 are matched "
                                    "by those protocols' figures)"));
  }
  for (const ProtocolFigureFit& c : protocol_figures) {
    const std::string_view protocol = c.protocol == "ll" ? "LL" : "LL128";
    if (c.value) {
      out.fitted.push_back(
          {c.key, *c.value, static_cast<int>(c.rows.size()), rms_over(c.rows),
           from + fmt::format("; the {} sizes under {} it moves most", c.rows.size(), protocol)});
    } else if (c.wanted) {
      const bool slow_end = (*c.wanted >= c.upper) == c.time_rises;
      out.gaps.push_back(fmt::format(
          "{}: {} kept at its prior ({:g}): the sizes under {} it governs, {} to {}, are {} than "
          "any value from {:g} to {:g} makes them in the model",
          name, c.key, machine_value(p, c.key), protocol,
          size_text(static_cast<double>(c.rows.front()->bytes)),
          size_text(static_cast<double>(c.rows.back()->bytes)), slow_end ? "slower" : "faster",
          c.lower, c.upper));
    }
  }
  if (launch_us) {
    out.fitted.push_back(
        {"links.nccl_launch_us", *launch_us, static_cast<int>(launch_rows.size()),
         rms_over(launch_rows),
         from + fmt::format("; the {} sizes its thread's {} launches an iteration bound",
                            launch_rows.size(), rows.front()->launches_per_iteration)});
  } else if (launch_wanted) {
    out.gaps.push_back(fmt::format(
        "{}: links.nccl_launch_us kept at its prior ({:g} us): the sizes its thread's launches "
        "bound are {} than any launch from {:g} to {:g} us a GPU makes them",
        name, prior_launch.value() * 1e6, *launch_wanted <= kLaunchLowUs ? "faster" : "slower",
        kLaunchLowUs, kLaunchHighUs));
  }
  // Runs of sizes still more than 25% off.
  for (std::size_t i = 0; i < rows.size();) {
    if (std::abs(relative[i]) <= 0.25) {
      ++i;
      continue;
    }
    std::size_t j = i;
    double worst = 0;
    while (j < rows.size() && std::abs(relative[j]) > 0.25 &&
           (relative[j] > 0) == (relative[i] > 0)) {
      worst = std::abs(relative[j]) > std::abs(worst) ? relative[j] : worst;
      ++j;
    }
    const std::string first = size_text(static_cast<double>(rows[i]->bytes));
    const std::string sizes =
        j == i + 1 ? first : first + " to " + size_text(static_cast<double>(rows[j - 1]->bytes));
    out.gaps.push_back(fmt::format(
        "{} over {} ranks, {}: the fitted model is {} than measured by up to {:.0f}%: what {} "
        "pay{} is not in the model",
        name, ranks, sizes, worst > 0 ? "slower" : "faster", std::abs(worst) * 100,
        j == i + 1 ? "this size" : "these sizes", j == i + 1 ? "s" : ""));
    i = j;
  }
  return out;
}

}  // namespace epochcast::validate

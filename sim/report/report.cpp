// Table, CSV, JSON and Chrome-trace renderings of predictions.
#include "sim/report/report.h"

#include <algorithm>
#include <functional>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/format/text_table.h"
#include "core/spec/architecture_traits.h"
#include "sim/collectives/protocols.h"
#include "sim/compute/device_model.h"
#include "sim/network/topology.h"
#include "sim/predict/stragglers.h"
#include "sim/predict/time_to_target.h"
#include "sim/strategy/step_builder.h"
#include "sim/strategy/strategy.h"

namespace epochcast::sim {

namespace {

std::string fixed(double value, int decimals) {
  return fmt::format("{:.{}f}", value, decimals);
}

std::string precision_name(const ScenarioSpec& s) {
  return std::string(name_of(s.training.precision));
}

// The most GPUs of one node that a point of the sweep uses.
int most_gpus_in_node(const ScenarioSpec& s) {
  int most = 1;
  for (int gpus : s.sweep.gpus)
    most = std::max(most, std::min(gpus, s.machine.gpus_per_node));
  return most;
}

// The GPU pairs of one node, among those the sweep uses, that NCCL does not join by
// peer-to-peer ("0-2, 1-3, ..."); empty where every pair is peer-to-peer or no collective runs.
std::string staged_pairs(const ScenarioSpec& s) {
  if (s.training.strategy == Strategy::single) return "";
  const int used = most_gpus_in_node(s);
  if (used < 2) return "";
  const Topology topology = Topology::build(s.machine, 1);
  std::vector<std::string> pairs;
  for (int a = 0; a < used; ++a) {
    for (int b = a + 1; b < used; ++b) {
      if (!topology.nccl_peer_to_peer(a, b)) pairs.push_back(fmt::format("{}-{}", a, b));
    }
  }
  if (pairs.empty()) return "";
  constexpr std::size_t kListed = 4;
  std::string out;
  for (std::size_t i = 0; i < std::min(pairs.size(), kListed); ++i)
    out += (i ? ", " : "") + pairs[i];
  if (pairs.size() > kListed) out += fmt::format(" and {} more pairs", pairs.size() - kListed);
  return out;
}

// What the prediction takes for granted about the libraries where the scenario cannot say it,
// each with the setting that changes it.
std::vector<std::string> library_assumptions(const ScenarioSpec& s) {
  std::vector<std::string> out;
  const GpuSpec& gpu = s.machine.gpu;
  if (gpu.clocks && !is_cpu_architecture(gpu.architecture)) {
    if (gpu.clocks->sustained_from_power_rule) {
      out.push_back(fmt::format(
          "the {} holds {:.0f} MHz of its {:g} MHz boost clock when every SM is busy, as the "
          "catalogue's power rule gives for its board power (its clocks_mhz.sustained sets the "
          "clock it holds; calibrated efficiencies absorb another)",
          gpu.name, *gpu.clocks->sustained_mhz, gpu.clocks->boost_mhz));
    } else if (gpu.clocks->sustained_mhz) {
      out.push_back(
          fmt::format("the {} holds its sustained clock, {:g} MHz of its {:g} MHz "
                      "boost, when every SM is busy (catalogue clocks_mhz.sustained)",
                      gpu.name, *gpu.clocks->sustained_mhz, gpu.clocks->boost_mhz));
    } else {
      out.push_back(
          fmt::format("the {} runs at its {:g} MHz boost clock (no sustained clock in "
                      "the catalogue: clocks_mhz.sustained; calibrated efficiencies "
                      "absorb a lower one)",
                      gpu.name, gpu.clocks->boost_mhz));
    }
  }
  if (s.loader.prefetch_to_gpu && s.loader.normalize_on_gpu) {
    out.push_back(
        "the prefetcher's normalising kernels on its side stream overlap the step's kernels "
        "without slowing them (on the GPU they share its SMs)");
  }
  if (s.loader.gpu_decode.value() > 0) {
    out.push_back(fmt::format(
        "GPU decoding takes loader.gpu_decode_us ({:g} us) per sample of SM time in the compute "
        "stream's order, and the CPU keeps loader.sample_cpu_us per sample",
        s.loader.gpu_decode.value() * 1e6));
  }
  if (std::string staged = staged_pairs(s); !staged.empty()) {
    const PcieTopology& pcie = s.machine.topology.pcie;
    // How fast a host stages is its CPU's and memory's: public all_reduce_perf tables range
    // from 0.25 of the PCIe link (two GPUs on PCIe 3.0, NVIDIA/nccl issue 384) to 0.48 (eight
    // RTX 4090 on two EPYC 7542, tests/sim/data/nccl-tests).
    out.push_back(fmt::format(
        "NCCL stages collective traffic between GPUs {} through host memory (its shared-memory "
        "transport): {}; it moves at links.efficiency.shm {:g} of the narrowest PCIe link, a "
        "figure of the host (public all_reduce_perf tables: 0.25 to 0.48), which calibrate fits "
        "from an all_reduce_perf log",
        staged,
        pcie.peer_to_peer
            ? fmt::format("they are farther apart than its P2P level, {} (NCCL_P2P_LEVEL; set "
                          "topology.pcie.nccl_p2p_level where your jobs change it)",
                          name_of(pcie.nccl_p2p_level))
            : std::string("the machine allows no peer-to-peer (topology.pcie.peer_to_peer)"),
        s.profile.links.efficiency[static_cast<std::size_t>(LinkKind::shm)]));
  }
  const bool several =
      std::any_of(s.sweep.gpus.begin(), s.sweep.gpus.end(), [](int gpus) { return gpus > 1; });
  if (several && s.training.strategy != Strategy::single && s.training.wait_for_slowest_gpu) {
    const double spread = s.profile.gpu.speed_spread_or_default();
    const int most = *std::max_element(s.sweep.gpus.begin(), s.sweep.gpus.end());
    out.push_back(fmt::format(
        "GPUs of one model differ in speed by {:g}% (gpu.speed_spread, one standard deviation) "
        "and each step waits for the slowest: {:.1f}% slower at {} GPUs; "
        "training.wait_for_slowest_gpu: false leaves it out",
        100 * spread, 100 * (slowest_gpu_factor(most, spread) - 1), most));
  }
  // Threads that may want the node's cores at once: each process's training thread and its
  // loader workers (ddp: a process per GPU of the node).
  const StrategyModel& strategy = strategy_model(s.training.strategy);
  const int processes = strategy.process_per_gpu() ? most_gpus_in_node(s) : 1;
  const int threads = processes * (1 + s.loader.workers);
  if (s.training.share_cpu_cores && threads > s.machine.host.cores) {
    out.push_back(fmt::format(
        "up to {} training threads and loader workers share the node's {} cores (host.cores), "
        "each busy one at cores / busy of its speed when more are busy; "
        "training.share_cpu_cores: false gives each its own",
        threads, s.machine.host.cores));
  }
  if (several && s.training.strategy != Strategy::single &&
      !s.profile.links.own_protocol_figures()) {
    // LL's work a step is the SMs' (protocols.h, ll_clock_scale): over NVLink it takes as many
    // cycles as on an H100, at this GPU's clock.
    std::string clocked;
    const double scale = ll_clock_scale(s.machine.gpu);
    if (s.machine.topology.nvlink.shape != NvlinkShape::none && scale != 1.0) {
      const double nccl_step_us =
          LinkCosts::kNcclLlStepLatencyUs[static_cast<std::size_t>(LinkKind::nvlink)];
      clocked = fmt::format(
          " but for LL's step over NVLink and a thread's pace, taken at as many cycles as on an "
          "H100 ({:g} us a step at {:g} MHz; {:.2f} us at the {}'s {:g} MHz boost)",
          nccl_step_us, kLlReferenceClockMhz, nccl_step_us * scale, s.machine.gpu.name,
          s.machine.gpu.clocks->boost_mhz);
    }
    out.push_back(fmt::format(
        "NCCL's LL and LL128 protocols, which carry its collectives up to a few MiB, run as its "
        "tuner assumes (its hwLat, llMaxBw and LL128 rate){}; an older NCCL or another GPU "
        "generation may run them up to 2x slower (8x A100 under NCCL 2.8.4): calibrate on your "
        "all_reduce_perf log fits links.ll_step_latency_us, ll_rate_relative and "
        "ll128_rate_relative",
        clocked));
  }
  if (several) {
    for (std::string& assumption : strategy.assumptions(s))
      out.push_back(std::move(assumption));
  }
  if (std::any_of(s.analysis.layers.begin(), s.analysis.layers.end(),
                  [](const LayerCosts& l) { return l.layer.fused_attention(); })) {
    out.push_back(
        "attention: sdpa's fused kernel runs at the profile's GEMM efficiency (FlashAttention-2 "
        "reports 50-73% of peak forward, less backward); calibrating on measured runs corrects it");
  }
  bool convolutions = false;
  for (const LayerCosts& layer : s.analysis.layers) {
    for (const KernelWork& k : layer.forward)
      convolutions = convolutions || k.has_conv_geometry;
  }
  if (!convolutions) return out;
  if (is_cpu_architecture(s.machine.gpu.architecture)) {
    out.push_back(
        "convolutions run oneDNN's direct kernel where its conditions on the window's width hold, "
        "else im2col and a GEMM (oneDNN 2.x, PyTorch's CPU convolutions; other versions draw the "
        "line elsewhere)");
    return out;
  }
  if (!s.training.convolution.cudnn_benchmark) {
    out.push_back(
        "convolutions run cuDNN's implicit GEMM, taken as its heuristic's choice (not public); "
        "training.cudnn_benchmark: true takes the fastest algorithm instead");
  }
  DeviceModel device(s.machine.gpu, s.profile, s.training.precision);
  if (s.training.precision == TrainingPrecision::fp32 && device.conv_tensor_cores()) {
    out.push_back(
        "fp32: convolutions on TF32 tensor cores and GEMMs in full fp32, PyTorch's defaults "
        "(torch.backends.cudnn.allow_tf32 True, torch.backends.cuda.matmul.allow_tf32 False); "
        "training.precision: fp32_strict turns TF32 off everywhere, tf32 on everywhere");
  }
  if (device.conv_tensor_cores() && !s.training.convolution.channels_last) {
    out.push_back(
        "NCHW activations: each tensor-core convolution pass transposes its input and output to "
        "NHWC and back; training.memory_format: channels_last removes the transposes");
  }
  return out;
}

}  // namespace

std::string throughput_text(double samples_per_second) {
  if (samples_per_second > 0 && samples_per_second < 0.9995)
    return fmt::format("{:.3g}", samples_per_second);
  return fmt::format("{:.0f}", samples_per_second);
}

// Which multi-node points simulated every rank, and why, when some did (one line).
std::string every_rank_note(const ScenarioSpec& s, const std::vector<PointResult>& results) {
  // GPU counts by the reason they were simulated so, in the order they first appear.
  std::vector<std::pair<std::string, std::vector<int>>> groups;
  for (const PointResult& r : results) {
    if (r.ranks_simulated != "every rank") continue;
    std::string why = every_rank_reason(s, r.point.gpus);
    why = why.empty() ? "as asked: --every-rank or training.every_rank"
                      : why + ", so node 0 cannot stand for every node";
    auto group =
        std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == why; });
    if (group == groups.end()) group = groups.insert(groups.end(), {why, {}});
    if (std::find(group->second.begin(), group->second.end(), r.point.gpus) == group->second.end())
      group->second.push_back(r.point.gpus);
  }
  std::string out;
  for (const auto& [why, gpus] : groups)
    out += fmt::format("Simulated: every rank at {} GPUs ({}).\n", fmt::join(gpus, ", "), why);
  return out;
}

// The stragglers and faults that touched points, grouped by GPU count (one line per set).
std::string conditions_note(const std::vector<PointResult>& results) {
  std::vector<std::pair<std::vector<std::string>, std::vector<int>>> groups;
  for (const PointResult& r : results) {
    if (r.conditions.empty()) continue;
    auto group = std::find_if(groups.begin(), groups.end(),
                              [&](const auto& g) { return g.first == r.conditions; });
    if (group == groups.end()) group = groups.insert(groups.end(), {r.conditions, {}});
    if (std::find(group->second.begin(), group->second.end(), r.point.gpus) == group->second.end())
      group->second.push_back(r.point.gpus);
  }
  std::string out;
  for (const auto& [conditions, gpus] : groups) {
    out += fmt::format("Conditions at {} GPUs: {}.\n", fmt::join(gpus, ", "),
                       fmt::join(conditions, "; "));
  }
  return out;
}

const PointResult* fastest_point(const std::vector<PointResult>& results) {
  const PointResult* best = nullptr;
  for (const PointResult& r : results) {
    if (r.simulated && (!best || r.epoch_seconds < best->epoch_seconds)) best = &r;
  }
  return best;
}

std::string short_bottleneck(const PointResult& r, BatchMeaning batch_is) {
  if (!r.simulated) return r.bottleneck;
  const Breakdown& b = r.breakdown;
  const double epoch = r.epoch_seconds > 0 ? r.epoch_seconds : 1;
  double share = 0;
  if (r.bottleneck == "compute") share = b.forward + b.backward + b.optimizer;
  if (r.bottleneck == "host") share = b.host;
  if (r.bottleneck == "input") share = b.data;
  if (r.bottleneck == "copy") share = b.h2d;
  if (r.bottleneck == "communication") share = b.communication;
  // "comm": the table's note spells it out; the column stays narrow.
  const std::string word = r.bottleneck == "communication" ? "comm" : r.bottleneck;
  // One GPU at the same global batch; in a sweep of per-GPU batches the speedup beside it is
  // against one GPU at the same per-GPU batch, so the row says which.
  const char* faster = !r.one_gpu_faster                   ? ""
                       : batch_is == BatchMeaning::per_gpu ? ", 1 GPU faster at this global batch"
                                                           : ", 1 GPU faster";
  return fmt::format("{} {:.0f}%{}", word, 100 * share / epoch, faster);
}

namespace {

// Which columns a predict table has.
struct TableShape {
  bool multi = false;                            // several GPU counts: speedup and efficiency
  bool intervals = false;                        // a calibrated profile's 95% intervals
  bool wide = false;                             // --wide: every column
  const ScenarioSpec* target = nullptr;          // the scenario, when it has a target: time to it
  BatchMeaning batch_is = BatchMeaning::global;  // what the sweep's batches are
};

// The scenario's lines above the table (what it is, and what is assumed).
std::string scenario_lines(const ScenarioSpec& s) {
  std::string out =
      fmt::format("Scenario {}: {} on {} ({} x {} per node{}), {} {} {}, {} training samples{}\n",
                  s.name, s.model.name, s.machine.name, s.machine.gpus_per_node, s.machine.gpu.name,
                  s.machine.nodes > 1 ? fmt::format(", {} nodes", s.machine.nodes) : "",
                  name_of(s.training.strategy), name_of(s.training.optimizer), precision_name(s),
                  s.dataset.train_samples,
                  s.dataset.validation_samples > 0
                      ? fmt::format(" + {} validation", s.dataset.validation_samples)
                      : "");
  if (std::string note = cross_device_note(s); !note.empty()) out += fmt::format("{}.\n", note);
  if (std::string target = target_assumption(s); !target.empty()) {
    out += fmt::format("Assumed: {}.\n", target);
  }
  for (const std::string& assumption : library_assumptions(s))
    out += fmt::format("Assumed: {}.\n", assumption);
  if (s.contention.shared()) {
    out += fmt::format(
        "Shared system: this job gets {:.0f}% of each GPU's SMs and bandwidth and {:.0f}% of the "
        "host CPU.\n",
        100 * s.contention.gpu_share, 100 * s.contention.cpu_share);
  }
  return out;
}

// The columns that answer the question, and with --wide where GPU 0's epoch went. What a
// narrow terminal loses first: the per-GPU batch, the interval, the bottleneck's words
// (shortened), memory, efficiency, and last the bottleneck.
void add_columns(TextTable& table, const TableShape& shape) {
  using Align = TextTable::Align;
  const bool wide = shape.wide;
  table.add_column("gpus");
  table.add_column("batch");
  table.add_column("per-GPU", Align::right, {0, 6});
  if (wide) table.add_column("iters");
  table.add_column("epoch");
  if (shape.intervals) table.add_column("95% interval", Align::right, {0, 5});
  table.add_column("samples/s");
  if (shape.target) {
    table.add_column("to target");
    if (wide) {
      table.add_column("target steps");
      table.add_column("target epochs");
    }
  }
  if (wide) {
    for (const char* part : {"data (s)", "h2d (s)", "fwd (s)", "bwd (s)", "opt (s)", "comm (s)",
                             "host (s)", "GPU busy"}) {
      table.add_column(part);
    }
  }
  table.add_column("mem (GiB)", Align::right, {0, 3});
  table.add_column("fits", Align::left);
  if (wide) table.add_column("max batch");
  if (shape.multi) {
    if (wide) table.add_column("comm total (s)");
    table.add_column("speedup");
    table.add_column("efficiency", Align::right, {0, 2});
  }
  table.add_column("bottleneck", Align::left, TextTable::Fit{4, 1});
}

std::vector<std::string> row_cells(const PointResult& r, const TableShape& shape) {
  const bool wide = shape.wide;
  std::vector<std::string> row = {std::to_string(r.point.gpus),
                                  std::to_string(r.point.global_batch),
                                  std::to_string(r.point.per_gpu_batch)};
  if (wide) row.push_back(std::to_string(r.train_iterations));
  row.push_back(r.simulated ? readable_duration(r.epoch_seconds) : "-");
  if (shape.intervals) {
    row.push_back(r.simulated && r.epoch_interval
                      ? readable_duration_range(r.epoch_interval->first, r.epoch_interval->second)
                      : "-");
  }
  row.push_back(r.simulated ? throughput_text(r.samples_per_second) : "-");
  if (shape.target) {
    const std::optional<TargetPrediction> t = predict_to_target(*shape.target, r);
    row.push_back(t ? readable_duration(t->seconds) : "-");
    if (wide) {
      row.push_back(t ? fmt::format("{:.0f}", t->steps) : "-");
      row.push_back(t ? fmt::format("{:.2f}", t->epochs) : "-");
    }
  }
  if (wide) {
    const Breakdown& b = r.breakdown;
    for (double v :
         {b.data, b.h2d, b.forward, b.backward, b.optimizer, b.communication, b.host + b.other}) {
      row.push_back(r.simulated ? fixed(v, 4) : "-");
    }
    row.push_back(r.simulated ? fmt::format("{:.0f}%", 100 * r.gpu_busy_fraction) : "-");
  }
  row.push_back(fixed(to_gib(r.memory.peak), 2));
  row.push_back(r.memory.fits ? "yes" : "OOM");
  if (wide) row.push_back(std::to_string(r.memory.largest_batch));
  if (shape.multi) {
    if (wide) row.push_back(r.simulated ? fixed(r.communication_seconds, 4) : "-");
    row.push_back(r.speedup > 0 ? fmt::format("{:.2f}x", r.speedup) : "-");
    row.push_back(r.speedup > 0 ? fmt::format("{:.0f}%", 100 * r.scaling_efficiency) : "-");
  }
  row.push_back(wide            ? r.diagnosis
                : r.memory.fits ? short_bottleneck(r, shape.batch_is)
                                : fmt::format("memory: fits {} per GPU", r.memory.largest_batch));
  return row;
}

// Below the table: the fastest point and what the columns mean, at the terminal's width or at
// a readable 100 columns where there is no limit.
std::string closing_lines(const ScenarioSpec& s, const std::vector<PointResult>& results,
                          const TableShape& shape, std::size_t width) {
  std::string notes;
  if (const PointResult* best = fastest_point(results)) {
    notes += fmt::format(
        "\nFastest point that fits: {} GPU{}, global batch {}: {} per epoch, {} samples/s, "
        "{}-bound.\n",
        best->point.gpus, best->point.gpus == 1 ? "" : "s", best->point.global_batch,
        readable_duration(best->epoch_seconds), throughput_text(best->samples_per_second),
        best->bottleneck);
  }
  if (const PointResult* first = fastest_to_target(s, results)) {
    const TargetPrediction t = *predict_to_target(s, *first);
    notes += fmt::format(
        "Fastest to the target ({} {:g}): {} GPU{}, global batch {}: {} ({:.0f} steps, {:.2f} "
        "epochs){}.\n",
        name_of(s.target->metric), s.target->value, first->point.gpus,
        first->point.gpus == 1 ? "" : "s", first->point.global_batch, readable_duration(t.seconds),
        t.steps, t.epochs,
        t.seconds_interval
            ? fmt::format(", 95% interval {}", readable_duration_range(t.seconds_interval->first,
                                                                       t.seconds_interval->second))
            : "");
  }
  if (shape.wide) {
    notes += fmt::format(
        "\nTimes are per epoch, from GPU 0's point of view: data, h2d, fwd, bwd, opt and comm "
        "are what it ran or waited for; host is time it sat idle while the CPU dispatched work. "
        "They add up to the epoch. max batch is the largest per-GPU batch that fits in {:.1f} "
        "GiB.\n",
        to_gib(s.machine.gpu.memory));
  } else {
    notes += fmt::format(
        "\nbottleneck: what GPU 0's epoch went to most, and its share (compute, host, input, "
        "copy, comm: communication). --wide shows the whole breakdown, the largest batch that "
        "fits in {:.1f} GiB and the bottleneck in words.\n",
        to_gib(s.machine.gpu.memory));
  }
  if (shape.intervals) {
    notes += fmt::format(
        "The 95% interval comes from the uncertainty of the {} figures calibration fitted ({}); "
        "the figures it did not fit are taken as exact.\n",
        s.profile.uncertainty.figures.size(), s.profile.name);
  }
  if (shape.multi) {
    notes += fmt::format(
        "{}speedup is throughput against one GPU of the same machine at the same {} batch; "
        "efficiency is speedup / GPUs.\n",
        shape.wide ? "comm is communication GPU 0 waited for; comm total is all the time it had "
                     "a collective in flight, hidden behind compute or not. "
                   : "",
        s.sweep.batch_is == BatchMeaning::per_gpu ? "per-GPU" : "global");
    const bool flagged = std::any_of(results.begin(), results.end(),
                                     [](const PointResult& r) { return r.one_gpu_faster; });
    if (flagged) {
      notes +=
          "\"1 GPU faster\": one GPU trains the same global batch in less time than the row's "
          "GPUs do.\n";
    }
  }
  constexpr std::size_t kProse = 100;
  return wrap_lines(notes, width == 0 ? kProse : std::min(width, kProse), 0);
}

}  // namespace

std::string render_table(const ScenarioSpec& s, const std::vector<PointResult>& results,
                         const TableLayout& layout) {
  TableShape shape;
  shape.wide = layout.wide;
  shape.batch_is = s.sweep.batch_is;
  if (s.target) shape.target = &s;
  for (const PointResult& r : results) {
    shape.multi = shape.multi || r.point.gpus > 1;
    shape.intervals = shape.intervals || r.epoch_interval.has_value();
  }
  std::string out =
      wrap_lines(scenario_lines(s) + every_rank_note(s, results) + conditions_note(results),
                 layout.width) +
      "\n";
  TextTable table;
  add_columns(table, shape);
  for (const PointResult& r : results)
    table.add_row(row_cells(r, shape));
  out += table.render(layout.wide ? 0 : layout.width);
  return out + closing_lines(s, results, shape, layout.width);
}

std::string render_scaling_loss(const std::vector<PointResult>& results, std::size_t width) {
  TextTable table;
  table.add_column("gpus");
  table.add_column("per-GPU");
  table.add_column("epoch");
  table.add_column("ideal");
  table.add_column("loss");
  for (const char* part : {"strategy", "communication", "compute", "stragglers", "contention",
                           "input", "host", "other"})
    table.add_column(part);
  bool any = false;
  for (const PointResult& r : results) {
    if (!r.scaling_loss) continue;
    any = true;
    const ScalingLoss& l = *r.scaling_loss;
    auto part = [&](double seconds) {
      return fmt::format("{:.2f} s ({:.1f}%)", seconds, 100 * seconds / r.epoch_seconds);
    };
    table.add_row({std::to_string(r.point.gpus), std::to_string(r.point.per_gpu_batch),
                   fmt::format("{:.4g} s", r.epoch_seconds), fmt::format("{:.4g} s", l.ideal_epoch),
                   part(l.loss), part(l.strategy), part(l.communication), part(l.compute),
                   part(l.stragglers), part(l.contention), part(l.input), part(l.host),
                   part(l.other)});
  }
  if (!any) return "Scaling loss: no point on several GPUs with a process per GPU in this sweep.\n";
  return "\n" +
         wrap_lines(
             "Scaling loss of each point with a process per GPU (ddp, zero1, zero2, fsdp): its "
             "epoch against plain training's on one GPU at the same per-GPU batch over the GPU "
             "count (ideal), and where the rest goes (seconds per epoch and shares of it; "
             "strategy: what the strategy costs on one GPU, such as ddp's reducer, over the GPU "
             "count; communication: collectives exposed; compute: kernels the strategy "
             "adds or lengthens beyond one GPU's; stragglers: waiting for "
             "the slowest GPU; contention: NCCL's kernels taking SMs and memory bandwidth from "
             "the compute beside them; input: loading and copying batches; host: dispatch and "
             "the node's shared cores; the parts add up to the loss, each cause taken out in "
             "turn, stragglers first):\n",
             width) +
         table.render(width);
}

struct StreamedTable::Impl {
  ScenarioSpec scenario;
  TableLayout layout;
  TableShape shape;
  TextTable table;
  TextTable::Layout fitted;
};

StreamedTable::StreamedTable(const ScenarioSpec& scenario, const std::vector<SweepPoint>& points,
                             const TableLayout& layout)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.scenario = scenario;
  m.layout = layout;
  m.shape.wide = layout.wide;
  m.shape.batch_is = scenario.sweep.batch_is;
  m.shape.intervals = !scenario.profile.uncertainty.empty();
  if (m.scenario.target) m.shape.target = &m.scenario;
  // The widest cells the rows can be expected to have decide the columns' widths.
  PointResult widest;
  for (const SweepPoint& p : points) {
    m.shape.multi = m.shape.multi || p.gpus > 1;
    widest.point.gpus = std::max(widest.point.gpus, p.gpus);
    widest.point.global_batch = std::max(widest.point.global_batch, p.global_batch);
    widest.point.per_gpu_batch = std::max(widest.point.per_gpu_batch, p.per_gpu_batch);
  }
  // ... and as wide as a point's figures plausibly print: "99.98 min", a hundred million
  // samples a second, a terabyte, "1000.00x", the longest short bottleneck.
  widest.simulated = true;
  widest.epoch_seconds = 5999;
  widest.epoch_interval = std::make_pair(5999.0, 5999.0);
  widest.samples_per_second = 1e8;
  widest.memory.peak = Bytes(std::int64_t{1000} * kGiB);
  widest.memory.fits = true;
  widest.memory.largest_batch = std::max<std::int64_t>(99'999, widest.point.per_gpu_batch);
  widest.speedup = 1000;
  widest.scaling_efficiency = 1;
  widest.bottleneck = "communication";
  widest.breakdown.communication = widest.epoch_seconds;
  widest.one_gpu_faster = true;
  add_columns(m.table, m.shape);
  m.table.add_row(row_cells(widest, m.shape));
  m.fitted = m.table.layout(layout.wide ? 0 : layout.width);
}

StreamedTable::~StreamedTable() = default;

std::string StreamedTable::opening() const {
  return wrap_lines(scenario_lines(impl_->scenario), impl_->layout.width) + "\n" +
         impl_->table.render_header(impl_->fitted);
}

std::string StreamedTable::row(const PointResult& result) const {
  return impl_->table.render_row(row_cells(result, impl_->shape), impl_->fitted);
}

std::string StreamedTable::closing(const std::vector<PointResult>& results) const {
  std::string notes = every_rank_note(impl_->scenario, results) + conditions_note(results);
  return (notes.empty() ? "" : "\n" + wrap_lines(notes, impl_->layout.width)) +
         closing_lines(impl_->scenario, results, impl_->shape, impl_->layout.width);
}

std::string render_csv(const ScenarioSpec& scenario, const std::vector<PointResult>& results) {
  const bool target = scenario.target && scenario.statistical_efficiency;
  std::string out =
      "gpus,global_batch,per_gpu_batch,train_iterations,validation_iterations,epoch_s,"
      "iteration_s,samples_per_s,data_s,h2d_s,forward_s,backward_s,optimizer_s,"
      "communication_s,host_s,other_s,gpu_busy_fraction,communication_total_s,"
      "collective_bytes,speedup,scaling_efficiency,peak_memory_bytes,fits,"
      "largest_batch_per_gpu,bottleneck,diagnosis";
  if (target) {
    out +=
        ",steps_to_target,epochs_to_target,time_to_target_s,epochs_to_target_low,"
        "epochs_to_target_high,time_to_target_low_s,time_to_target_high_s";
  }
  out += "\n";
  for (const PointResult& r : results) {
    const Breakdown& b = r.breakdown;
    std::string diagnosis = r.diagnosis;
    std::string quoted;
    for (char c : diagnosis)
      quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
    out += fmt::format("{},{},{},{},{},", r.point.gpus, r.point.global_batch, r.point.per_gpu_batch,
                       r.train_iterations, r.validation_iterations);
    if (r.simulated) {
      out += fmt::format(
          "{:.9f},{:.9f},{:.3f},{:.9f},{:.9f},{:.9f},{:.9f},{:.9f},{:.9f},{:.9f},"
          "{:.9f},{:.6f},",
          r.epoch_seconds, r.iteration_seconds, r.samples_per_second, b.data, b.h2d, b.forward,
          b.backward, b.optimizer, b.communication, b.host, b.other, r.gpu_busy_fraction);
      out += fmt::format("{:.9f},{},", r.communication_seconds, r.stats.collective_bytes);
      out += r.speedup > 0 ? fmt::format("{:.6f},{:.6f},", r.speedup, r.scaling_efficiency) : ",,";
    } else {
      out += ",,,,,,,,,,,,,,,,";
    }
    out +=
        fmt::format("{},{},{},{},\"{}\"", r.memory.peak.value(), r.memory.fits ? "true" : "false",
                    r.memory.largest_batch, r.bottleneck, quoted);
    if (target) {
      const std::optional<TargetPrediction> t = predict_to_target(scenario, r);
      auto interval = [](const std::optional<std::pair<double, double>>& i, bool seconds) {
        if (!i) return std::string(",,");
        return seconds ? fmt::format(",{:.9f},{:.9f}", i->first, i->second)
                       : fmt::format(",{:.9g},{:.9g}", i->first, i->second);
      };
      out += t ? fmt::format(",{:.9g},{:.9g},{:.9f}", t->steps, t->epochs, t->seconds) +
                     interval(t->epochs_interval, false) + interval(t->seconds_interval, true)
               : std::string(",,,,,,,");
    }
    out += "\n";
  }
  return out;
}

namespace {

// The target and the figures that lead to it, each with its source (null without a target).
nlohmann::ordered_json target_json(const ScenarioSpec& s) {
  if (!s.target || !s.statistical_efficiency) return nullptr;
  const StatisticalEfficiencySpec& e = *s.statistical_efficiency;
  auto figure = [](const EfficiencyFigure& f) {
    return nlohmann::ordered_json{
        {"value", f.value}, {"relative_sd", f.relative_sd}, {"source", name_of(f.source)}};
  };
  const LearningRateSpec& rate = s.training.learning_rate;
  return {{"metric", name_of(s.target->metric)},
          {"value", s.target->value},
          {"noise_scale", figure(e.noise_scale)},
          {"min_steps", figure(e.min_steps)},
          {"min_steps_from", e.min_given_as_epochs ? "min_epochs" : "min_steps"},
          {"model",
           "steps_to_target = min_steps * (1 + noise_scale / (global_batch * "
           "gradient_accumulation)); epochs_to_target = steps * batch / train_samples; "
           "time_to_target_s = epochs_to_target * epoch_s (McCandlish et al. 2018)"},
          {"learning_rate",
           {{"base", rate.base},
            {"base_batch", rate.base_batch},
            {"scaling", name_of(rate.scaling)},
            {"warmup_steps", rate.warmup_steps}}},
          {"assumption", target_assumption(s)}};
}

}  // namespace

std::string render_json(const ScenarioSpec& s, const std::vector<PointResult>& results) {
  nlohmann::ordered_json points = nlohmann::ordered_json::array();
  for (const PointResult& r : results) {
    const Breakdown& b = r.breakdown;
    nlohmann::ordered_json point = {
        {"gpus", r.point.gpus},
        {"global_batch", r.point.global_batch},
        {"per_gpu_batch", r.point.per_gpu_batch},
        {"train_iterations", r.train_iterations},
        {"validation_iterations", r.validation_iterations},
        {"fits", r.memory.fits},
        {"memory",
         {{"peak_bytes", r.memory.peak.value()},
          {"capacity_bytes", r.memory.capacity.value()},
          {"context_bytes", r.memory.context.value()},
          {"weights_bytes", r.memory.weights.value()},
          {"gradients_bytes", r.memory.gradients.value()},
          {"optimizer_state_bytes", r.memory.optimizer_state.value()},
          {"weight_copies_bytes", r.memory.weight_copies.value()},
          {"workspace_bytes", r.memory.workspace.value()},
          {"activations_bytes", r.memory.activations.value()},
          {"transient_bytes", r.memory.transient.value()},
          {"largest_batch_per_gpu", r.memory.largest_batch}}},
        {"bottleneck", r.bottleneck},
        {"diagnosis", r.diagnosis},
    };
    if (r.simulated) {
      point["epoch_s"] = r.epoch_seconds;
      if (r.epoch_interval) {
        point["epoch_interval_s"] = {r.epoch_interval->first, r.epoch_interval->second};
        point["epoch_relative_sd"] = r.epoch_relative_sd;
      }
      point["training_s"] = r.epoch_seconds * s.training.epochs;
      point["iteration_s"] = r.iteration_seconds;
      point["samples_per_s"] = r.samples_per_second;
      point["gpu_busy_fraction"] = r.gpu_busy_fraction;
      point["breakdown_s"] = {{"data", b.data},           {"h2d", b.h2d},
                              {"forward", b.forward},     {"backward", b.backward},
                              {"optimizer", b.optimizer}, {"communication", b.communication},
                              {"host", b.host},           {"other", b.other}};
      point["communication"] = {{"total_s", r.communication_seconds},
                                {"exposed_s", b.communication},
                                {"collectives", r.stats.collectives},
                                {"bytes", r.stats.collective_bytes}};
      if (r.speedup > 0) {
        point["speedup"] = r.speedup;
        point["scaling_efficiency"] = r.scaling_efficiency;
      }
      if (r.scaling_loss) {
        const ScalingLoss& l = *r.scaling_loss;
        point["scaling_loss_s"] = {{"reference_batch", l.reference_batch},
                                   {"ideal_epoch", l.ideal_epoch},
                                   {"loss", l.loss},
                                   {"strategy", l.strategy},
                                   {"communication", l.communication},
                                   {"compute", l.compute},
                                   {"stragglers", l.stragglers},
                                   {"contention", l.contention},
                                   {"input", l.input},
                                   {"host", l.host},
                                   {"other", l.other}};
      }
      point["kernels_per_epoch"] = r.stats.kernels;
      point["simulated_iterations"] = r.stats.simulated_iterations;
      if (!r.ranks_simulated.empty()) point["ranks_simulated"] = r.ranks_simulated;
      if (!r.conditions.empty()) point["conditions"] = r.conditions;
      if (const std::optional<TargetPrediction> t = predict_to_target(s, r)) {
        point["steps_to_target"] = t->steps;
        point["epochs_to_target"] = t->epochs;
        point["time_to_target_s"] = t->seconds;
        if (t->epochs_interval) {
          point["epochs_to_target_interval"] = {t->epochs_interval->first,
                                                t->epochs_interval->second};
        }
        if (t->seconds_interval) {
          point["time_to_target_interval_s"] = {t->seconds_interval->first,
                                                t->seconds_interval->second};
        }
      }
    }
    points.push_back(std::move(point));
  }
  nlohmann::ordered_json out = {
      {"schema", "epochcast.prediction/1"},
      {"scenario", s.name},
      {"model", s.model.name},
      {"machine", s.machine.name},
      {"gpu", s.machine.gpu.id},
      {"strategy", name_of(s.training.strategy)},
      {"optimizer", name_of(s.training.optimizer)},
      {"precision", precision_name(s)},
      {"profile", s.profile.name},
      {"cross_device", cross_device_note(s)},
      {"settings",
       {{"cudnn_benchmark", s.training.convolution.cudnn_benchmark},
        {"memory_format", kMemoryFormatNames[s.training.convolution.channels_last ? 1 : 0]},
        {"optimizer_implementation", name_of(optimizer_implementation(s.training))},
        {"loader_source", name_of(s.loader.source)},
        {"normalize_on_gpu", s.loader.normalize_on_gpu},
        {"prefetch_to_gpu", s.loader.prefetch_to_gpu},
        {"gpu_decode_us", s.loader.gpu_decode.value() * 1e6},
        {"loop", name_of(s.training.loop)},
        {"broadcast_buffers", s.training.ddp.broadcast_buffers},
        {"gradient_dtype", name_of(s.training.gradient_dtype)},
        {"gradient_as_bucket_view", s.training.ddp.gradient_as_bucket_view},
        {"find_unused_parameters", s.training.ddp.find_unused_parameters},
        {"static_graph", s.training.ddp.static_graph},
        {"activation_checkpointing", name_of(s.training.activation_checkpointing)},
        {"fsdp",
         {{"wrap", name_of(s.training.fsdp.wrap)},
          {"backward_prefetch", name_of(s.training.fsdp.backward_prefetch)},
          {"forward_prefetch", s.training.fsdp.forward_prefetch},
          {"limit_all_gathers", s.training.fsdp.limit_all_gathers},
          {"reshard_after_forward", s.training.fsdp.reshard_after_forward},
          {"reduce_dtype", s.training.fsdp.reduce_in_fp32 ? "fp32" : "param"},
          {"cpu_offload", s.training.fsdp.cpu_offload}}},
        {"every_rank", s.training.every_rank}}},
      {"assumptions", library_assumptions(s)},
      {"uncertainty",
       s.profile.uncertainty.empty()
           ? std::string("none: the profile's figures are taken as exact")
           : fmt::format("epoch_interval_s is a 95% interval from the covariance of the {} figures "
                         "calibration fitted; the others are taken as exact",
                         s.profile.uncertainty.figures.size())},
      {"epochs", s.training.epochs},
      {"target", target_json(s)},
      {"gpu_share", s.contention.gpu_share},
      {"cpu_share", s.contention.cpu_share},
      {"points", points},
  };
  return out.dump(2) + "\n";
}

void write_chrome_trace(const ScenarioSpec& s, const PointResult& r,
                        const std::function<void(std::string_view)>& write) {
  const Trace& trace = r.trace;
  // Pieces of about a megabyte: the trace is written as it is rendered, never held whole.
  std::string buffer;
  auto flush = [&] {
    write(buffer);
    buffer.clear();
  };
  bool first = true;  // of the events array: the others follow a comma
  auto emit = [&](const std::string& piece) {
    if (!first) buffer += ',';
    first = false;
    buffer += piece;
    if (buffer.size() > (std::size_t{1} << 20)) flush();
  };
  // One process per machine part, one thread (track) per resource, named by metadata events;
  // every name JSON-escaped once.
  auto quoted = [](const std::string& text) {
    return nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  };
  const std::string scenario_name = quoted(s.name);
  std::vector<std::string> names;
  names.reserve(trace.names.size());
  for (const std::string& name : trace.names)
    names.push_back(quoted(name));
  std::vector<int> pid(trace.tracks.size(), 0);
  for (std::size_t t = 0; t < trace.tracks.size(); ++t) {
    const std::string& track = trace.tracks[t];
    if (track.rfind("GPU ", 0) == 0) pid[t] = 1 + std::stoi(track.substr(4));
  }
  buffer = "{\"traceEvents\":[";
  // Metadata for the tracks the events use (link tracks are named by their counters).
  std::vector<bool> used(trace.tracks.size(), false);
  for (const Trace::Event& e : trace.events)
    used[e.track] = true;
  std::map<int, bool> named;
  for (std::size_t t = 0; t < trace.tracks.size(); ++t) {
    if (!used[t]) continue;
    if (!named[pid[t]]) {
      named[pid[t]] = true;
      emit(fmt::format(
          "{{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":{},\"args\":{{\"name\":{}}}}}", pid[t],
          quoted(pid[t] == 0 ? std::string("host") : fmt::format("GPU {}", pid[t] - 1))));
    }
    emit(fmt::format(
        "{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":{},\"tid\":{},\"args\":{{\"name\":{}}}}}",
        pid[t], t, quoted(trace.tracks[t])));
  }
  for (const Trace::Event& e : trace.events) {
    emit(
        fmt::format("{{\"name\":{},\"cat\":\"{}\",\"ph\":\"X\",\"ts\":{},\"dur\":{},\"pid\":{},"
                    "\"tid\":{}}}",
                    names[e.name], name_of(e.category), static_cast<double>(e.start.ns()) / 1e3,
                    static_cast<double>((e.end - e.start).ns()) / 1e3, pid[e.track], e.track));
  }
  // Link utilisation as counter tracks, in a process of their own after the GPUs'. Rates change
  // at every flow event: a link keeps its last value at each instant, and only values that
  // differ from the one before it are written.
  if (!trace.counters.empty()) {
    const int links_pid = r.point.gpus + 1;
    emit(fmt::format(
        "{{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":{},\"args\":{{\"name\":\"links "
        "(utilisation %)\"}}}}",
        links_pid));
    struct Pending {
      bool waiting = false;  // a value at `ts` not written yet
      double ts = 0, percent = 0;
      bool written = false;
      double last_written = 0;
    };
    std::vector<Pending> links(trace.tracks.size());
    auto settle = [&](std::uint32_t link) {
      Pending& p = links[link];
      if (!p.waiting) return;
      p.waiting = false;
      if (p.written && p.last_written == p.percent) return;
      p.written = true;
      p.last_written = p.percent;
      emit(fmt::format(
          "{{\"name\":{},\"ph\":\"C\",\"ts\":{},\"pid\":{},\"args\":{{\"utilisation\":{}}}}}",
          quoted(trace.tracks[link]), p.ts, links_pid, p.percent));
    };
    for (const Trace::Counter& c : trace.counters) {
      Pending& p = links[c.link];
      const double ts = static_cast<double>(c.time.ns()) / 1e3;
      if (p.waiting && p.ts == ts) {
        p.percent = 100 * c.utilisation;
        continue;
      }
      settle(c.link);
      p.waiting = true;
      p.ts = ts;
      p.percent = 100 * c.utilisation;
    }
    for (std::uint32_t link = 0; link < links.size(); ++link)
      settle(link);
  }
  buffer += fmt::format(
      "],\"displayTimeUnit\":\"ms\",\"otherData\":{{\"scenario\":{},\"gpus\":{},"
      "\"global_batch\":{},\"note\":\"simulated by epochcast; times in microseconds from the "
      "start of the epoch\"}}}}\n",
      scenario_name, r.point.gpus, r.point.global_batch);
  flush();
}

std::string render_chrome_trace(const ScenarioSpec& s, const PointResult& r) {
  std::string out;
  write_chrome_trace(s, r, [&out](std::string_view piece) { out += piece; });
  return out;
}

}  // namespace epochcast::sim

#include "cli/prediction_plots.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "cli/gnuplot_figure.h"
#include "core/format/gnuplot_text.h"
#include "core/input_error.h"
#include "sim/predict/time_to_target.h"

namespace epochcast::cli {

namespace {

using Points = std::vector<const sim::PointResult*>;

std::string gpus_label(int gpus) {
  return fmt::format("{} GPU{}", gpus, gpus == 1 ? "" : "s");
}

// The points per GPU count, in the sweep's order within each.
std::map<int, Points> by_gpu_count(const Points& points) {
  std::map<int, Points> groups;
  for (const sim::PointResult* r : points)
    groups[r->point.gpus].push_back(r);
  return groups;
}

// Like the seeds' figures: one line per GPU count (each its own colour, marker and dash), log
// axes zoomed to the points. A point that does not fit in memory is a cross in its GPU count's
// colour in a row above the lines, at its batch; the word OOM under the first cross of each
// GPU count (a label under every cross runs into its neighbours).
void plot_epoch_time(const ScenarioSpec& s, const Points& fitting, const Points& out_of_memory,
                     const std::string& image) {
  // Every GPU count plotted, lines or crosses, keeps one style.
  std::map<int, int> style;
  for (const Points* points : {&fitting, &out_of_memory}) {
    for (const sim::PointResult* r : *points)
      style.emplace(r->point.gpus, 0);
  }
  int next = 0;
  for (auto& [gpus, index] : style)
    index = next++;
  const std::map<int, Points> lines = by_gpu_count(fitting);
  std::string data = "# gpus global_batch per_gpu_batch epoch_s samples_per_s\n";
  std::string plots;
  std::vector<double> batches, seconds;
  int block = 0;
  auto separate = [&] { return block ? ", \\\n     " : ""; };
  for (const auto& [gpus, points] : lines) {
    if (block > 0) data += "\n\n";
    for (const sim::PointResult* r : points) {
      data += fmt::format("{} {} {} {:.9g} {:.6g}\n", gpus, r->point.global_batch,
                          r->point.per_gpu_batch, r->epoch_seconds, r->samples_per_second);
      batches.push_back(static_cast<double>(r->point.global_batch));
      seconds.push_back(r->epoch_seconds);
    }
    plots += fmt::format("{}data index {} using 2:4 with linespoints lw 2 {} title '{}'",
                         separate(), block, line_style(style[gpus]), gpus_label(gpus));
    ++block;
  }
  if (!out_of_memory.empty()) {
    // A row above the slowest point (at 1 s when nothing fits), a step up per GPU count so
    // that crosses at one batch stay apart.
    const double row =
        seconds.empty() ? 1.0 : 1.3 * *std::max_element(seconds.begin(), seconds.end());
    constexpr double kStep = 1.08;
    bool keyed = false;
    std::map<std::int64_t, double> lowest;  // per labelled batch, where its OOM label goes
    for (const auto& [gpus, points] : by_gpu_count(out_of_memory)) {
      const double y = row * std::pow(kStep, style[gpus]);
      data += fmt::format("\n\n# {}: out of memory (global_batch, y)\n", gpus_label(gpus));
      for (const sim::PointResult* r : points) {
        data += fmt::format("{} {:.9g}\n", r->point.global_batch, y);
        batches.push_back(static_cast<double>(r->point.global_batch));
        seconds.push_back(y);
      }
      std::int64_t first = points.front()->point.global_batch;  // the smallest
      for (const sim::PointResult* r : points)
        first = std::min(first, r->point.global_batch);
      auto [at, added] = lowest.emplace(first, y);
      if (!added) at->second = std::min(at->second, y);
      // The key names the crosses once, and a GPU count that has no line at all.
      std::string title = "notitle";
      if (!lines.contains(gpus)) {
        title = fmt::format("title '{}: out of memory'", gpus_label(gpus));
      } else if (!keyed) {
        title = "title 'x: out of memory'";
        keyed = true;
      }
      plots += fmt::format("{}data index {} using 1:2 with points pt 2 ps 1.8 lw 2 lc {} {}",
                           separate(), block, style[gpus] % 8 + 1, title);
      ++block;
    }
    data += "\n\n# OOM labels (global_batch, y)\n";
    for (const auto& [batch, y] : lowest)
      data += fmt::format("{} {:.9g}\n", batch, y);
    plots += fmt::format(
        "{}data index {} using 1:2:(\"OOM\") with labels offset 0,-1.1 tc rgb 'red' notitle",
        separate(), block);
  }
  draw_with_gnuplot(image, "--plot", data,
                    epoch_against_batch_commands(fmt::format("{}: predicted epoch time ({} on {})",
                                                             s.name, s.model.name, s.machine.name),
                                                 plots, batches, seconds));
}

// Where each epoch goes, as stacked bars: the breakdown columns of the table, a group of bars
// (labelled by batch) per GPU count.
void plot_breakdown(const ScenarioSpec& s, const Points& fitting, const std::string& image) {
  static constexpr const char* kParts[] = {"data",      "h2d",           "forward", "backward",
                                           "optimizer", "communication", "host"};
  std::string data = "# global_batch data h2d forward backward optimizer communication host\n";
  std::string plots;
  int block = 0;
  for (const auto& [gpus, points] : by_gpu_count(fitting)) {
    if (block > 0) data += "\n\n";
    for (const sim::PointResult* r : points) {
      const sim::Breakdown& b = r->breakdown;
      data += fmt::format("{} {:.9g} {:.9g} {:.9g} {:.9g} {:.9g} {:.9g} {:.9g}\n",
                          r->point.global_batch, b.data, b.h2d, b.forward, b.backward, b.optimizer,
                          b.communication, b.host + b.other);
    }
    plots += fmt::format("{}newhistogram '{}' lt 1", block ? ", \\\n     " : "", gpus_label(gpus));
    for (std::size_t part = 0; part < std::size(kParts); ++part) {
      plots +=
          fmt::format(", data index {} using {}{} {}", block, part + 2, part == 0 ? ":xtic(1)" : "",
                      block == 0 ? fmt::format("title '{}'", kParts[part]) : "notitle");
    }
    ++block;
  }
  draw_with_gnuplot(
      image, "--plot", data,
      fmt::format("set title {}\n"
                  "set ylabel 'seconds per epoch'\n"
                  "set style data histograms\nset style histogram rowstacked title offset 0,-1\n"
                  "set style fill solid 0.85 border -1\nset boxwidth 0.8\n"
                  "set xtics rotate by -90 font ',8'\nset grid ytics\nset key outside right\n"
                  "set yrange [0:*]\nset bmargin 5\n"
                  "plot {}\n",
                  gnuplot_quoted(fmt::format(
                      "{}: where the epoch goes (GPU 0), by global batch and GPU count", s.name)),
                  plots));
}

// Speedup / GPUs against GPU count, one line per batch (global or per-GPU, as the sweep means
// it), with the ideal at 100%.
void plot_scaling(const ScenarioSpec& s, const Points& fitting, const std::string& image) {
  const bool per_gpu = s.sweep.batch_is == BatchMeaning::per_gpu;
  std::map<std::int64_t, Points> by_batch;
  for (const sim::PointResult* r : fitting) {
    if (r->point.gpus == 1 || r->speedup > 0)
      by_batch[per_gpu ? r->point.per_gpu_batch : r->point.global_batch].push_back(r);
  }
  std::string data = "# batch gpus scaling_efficiency_pct speedup\n";
  std::string plots;
  int block = 0;
  for (const auto& [batch, points] : by_batch) {
    if (block > 0) data += "\n\n";
    for (const sim::PointResult* r : points) {
      double efficiency = r->point.gpus == 1 ? 1.0 : r->scaling_efficiency;
      double speedup = r->point.gpus == 1 ? 1.0 : r->speedup;
      data += fmt::format("{} {} {:.6g} {:.6g}\n", batch, r->point.gpus, 100 * efficiency, speedup);
    }
    plots += fmt::format("{}data index {} using 2:3 with linespoints lw 2 {} title 'batch {}{}'",
                         block ? ", \\\n     " : "", block, line_style(block), batch,
                         per_gpu ? " per GPU" : "");
    ++block;
  }
  plots += ", \\\n     100 with lines lw 2 lc rgb 'gray40' title 'ideal'";
  std::string tics;
  for (const auto& [gpus, points] : by_gpu_count(fitting))
    tics += fmt::format("{}{}", tics.empty() ? "" : ", ", gpus);
  // Zoomed to the efficiencies (down to the lowest, in steps of ten, the ideal kept in view),
  // the GPU counts with room either side.
  double lowest = 100, highest = 100;
  for (const sim::PointResult* r : fitting) {
    if (r->point.gpus > 1 && r->speedup > 0 && std::isfinite(r->scaling_efficiency)) {
      lowest = std::min(lowest, 100 * r->scaling_efficiency);
      highest = std::max(highest, 100 * r->scaling_efficiency);
    }
  }
  const double bottom = std::max(0.0, std::floor((lowest - 5) / 10) * 10);
  const double top = std::ceil((highest + 5) / 5) * 5;  // superlinear points stay in view
  const auto [fewest, most] = std::minmax_element(
      fitting.begin(), fitting.end(), [](const sim::PointResult* a, const sim::PointResult* b) {
        return a->point.gpus < b->point.gpus;
      });
  draw_with_gnuplot(
      image, "--plot", data,
      fmt::format("set title {}\n"
                  "set xlabel 'GPUs'\nset ylabel 'scaling efficiency (%)'\n"
                  "set logscale x 2\nset xtics ({})\nset grid\nset key outside right\n"
                  "set xrange [{:.6g}:{:.6g}]\nset yrange [{:.6g}:{:.6g}]\n"
                  "plot {}\n",
                  gnuplot_quoted(fmt::format("{}: scaling efficiency against one GPU ({} batch)",
                                             s.name, per_gpu ? "per-GPU" : "global")),
                  tics, (*fewest)->point.gpus / 1.2, (*most)->point.gpus * 1.2, bottom, top,
                  plots));
}

// Time to the scenario's target against batch, a line per GPU count (as the epoch plot, same
// styles), the fastest point ringed: where the epoch plot favours the largest batch, this one
// shows where the extra steps of a batch beyond the noise scale take the gain back.
void plot_time_to_target(const ScenarioSpec& s, const Points& fitting, const std::string& image) {
  std::string data = "# gpus global_batch time_to_target_s epochs_to_target steps_to_target\n";
  std::string plots;
  std::vector<double> batches, seconds;
  const sim::PointResult* fastest = nullptr;
  double fastest_seconds = 0;
  int block = 0;
  for (const auto& [gpus, points] : by_gpu_count(fitting)) {
    if (block > 0) data += "\n\n";
    for (const sim::PointResult* r : points) {
      const std::optional<sim::TargetPrediction> t = sim::predict_to_target(s, *r);
      if (!t) continue;
      data += fmt::format("{} {} {:.9g} {:.6g} {:.6g}\n", gpus, r->point.global_batch, t->seconds,
                          t->epochs, t->steps);
      batches.push_back(static_cast<double>(r->point.global_batch));
      seconds.push_back(t->seconds);
      if (!fastest || t->seconds < fastest_seconds) {
        fastest = r;
        fastest_seconds = t->seconds;
      }
    }
    plots += fmt::format("{}data index {} using 2:3 with linespoints lw 2 {} title '{}'",
                         block ? ", \\\n     " : "", block, line_style(block), gpus_label(gpus));
    ++block;
  }
  data += fmt::format("\n\n# fastest to the target (global_batch, s)\n{} {:.9g}\n",
                      fastest->point.global_batch, fastest_seconds);
  plots += fmt::format(
      ", \\\n     data index {} using 1:2 with points pt 6 ps 3.5 lw 2 lc rgb 'black' "
      "title 'fastest to target'",
      block);
  const std::string metric(name_of(s.target->metric));
  std::string commands = epoch_against_batch_commands(
      fmt::format("{}: predicted time to {} {:g}", s.name, metric, s.target->value), plots, batches,
      seconds);
  // The same axes as the epoch plot, labelled for this figure.
  const std::string epoch_label = "set ylabel 'epoch time (s)'";
  commands.replace(commands.find(epoch_label), epoch_label.size(),
                   "set ylabel 'time to target (s)'");
  draw_with_gnuplot(image, "--plot", data, commands);
}

}  // namespace

std::vector<std::string> prediction_plot_files(const std::string& image) {
  std::vector<std::string> files;
  for (const char* suffix : {"", "-breakdown", "-scaling", "-target"}) {
    for (std::string& file : figure_files(sibling_image(image, suffix)))
      files.push_back(std::move(file));
  }
  return files;
}

std::vector<std::string> plot_predictions(const ScenarioSpec& scenario,
                                          const std::vector<sim::PointResult>& results,
                                          const std::string& image) {
  checked_image_name(image, "--plot");
  Points fitting, out_of_memory;
  for (const sim::PointResult& r : results) {
    if (r.simulated) fitting.push_back(&r);
    if (!r.memory.fits) out_of_memory.push_back(&r);
  }
  if (fitting.empty()) {
    throw InputError(SourceMark{"<command line>", 0, 0}, "--plot",
                     "no point of the sweep fits in memory, so there is nothing to plot");
  }
  std::vector<std::string> images = {image, sibling_image(image, "-breakdown")};
  plot_epoch_time(scenario, fitting, out_of_memory, images[0]);
  plot_breakdown(scenario, fitting, images[1]);
  if (by_gpu_count(fitting).size() > 1) {
    images.push_back(sibling_image(image, "-scaling"));
    plot_scaling(scenario, fitting, images.back());
  }
  if (scenario.target) {
    images.push_back(sibling_image(image, "-target"));
    plot_time_to_target(scenario, fitting, images.back());
  }
  return images;
}

}  // namespace epochcast::cli

#include "cli/prediction_plots.h"

#include <algorithm>
#include <iterator>
#include <map>

#include <fmt/format.h>

#include "cli/gnuplot_figure.h"
#include "core/input_error.h"

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

// Like the seeds' figures: one line per GPU count, log axes (batches span decades).
void plot_epoch_time(const ScenarioSpec& s, const Points& fitting, const std::string& image) {
  std::string data = "# gpus global_batch per_gpu_batch epoch_s samples_per_s\n";
  std::string plots;
  int block = 0;
  for (const auto& [gpus, points] : by_gpu_count(fitting)) {
    if (block > 0) data += "\n\n";
    for (const sim::PointResult* r : points) {
      data += fmt::format("{} {} {} {:.9g} {:.6g}\n", gpus, r->point.global_batch,
                          r->point.per_gpu_batch, r->epoch_seconds, r->samples_per_second);
    }
    plots += fmt::format("{}data index {} using 2:4 with linespoints lw 2 pt 7 title '{}'",
                         block ? ", \\\n     " : "", block, gpus_label(gpus));
    ++block;
  }
  draw_with_gnuplot(image, "--plot", data,
                    epoch_against_batch_commands(fmt::format("{}: predicted epoch time ({} on {})",
                                                             s.name, s.model.name, s.machine.name),
                                                 plots));
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
                  gnuplot_string(fmt::format(
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
    // Eight colours, then the same colours dashed.
    plots += fmt::format(
        "{}data index {} using 2:3 with linespoints lw 2 pt 7 lc {} dt {} title 'batch {}{}'",
        block ? ", \\\n     " : "", block, block % 8 + 1, block / 8 + 1, batch,
        per_gpu ? " per GPU" : "");
    ++block;
  }
  plots += ", \\\n     100 with lines lw 2 lc rgb 'gray40' title 'ideal'";
  std::string tics;
  for (const auto& [gpus, points] : by_gpu_count(fitting))
    tics += fmt::format("{}{}", tics.empty() ? "" : ", ", gpus);
  draw_with_gnuplot(
      image, "--plot", data,
      fmt::format("set title {}\n"
                  "set xlabel 'GPUs'\nset ylabel 'scaling efficiency (%)'\n"
                  "set logscale x 2\nset xtics ({})\nset grid\nset key outside right\n"
                  "set yrange [0:110]\n"
                  "plot {}\n",
                  gnuplot_string(fmt::format("{}: scaling efficiency against one GPU ({} batch)",
                                             s.name, per_gpu ? "per-GPU" : "global")),
                  tics, plots));
}

}  // namespace

std::vector<std::string> prediction_plot_files(const std::string& image) {
  std::vector<std::string> files;
  for (const char* suffix : {"", "-breakdown", "-scaling"}) {
    for (std::string& file : figure_files(sibling_image(image, suffix)))
      files.push_back(std::move(file));
  }
  return files;
}

std::vector<std::string> plot_predictions(const ScenarioSpec& scenario,
                                          const std::vector<sim::PointResult>& results,
                                          const std::string& image) {
  checked_image_name(image, "--plot");
  Points fitting;
  for (const sim::PointResult& r : results) {
    if (r.simulated) fitting.push_back(&r);
  }
  if (fitting.empty()) {
    throw InputError(SourceMark{"<command line>", 0, 0}, "--plot",
                     "no point of the sweep fits in memory, so there is nothing to plot");
  }
  std::vector<std::string> images = {image, sibling_image(image, "-breakdown")};
  plot_epoch_time(scenario, fitting, images[0]);
  plot_breakdown(scenario, fitting, images[1]);
  if (by_gpu_count(fitting).size() > 1) {
    images.push_back(sibling_image(image, "-scaling"));
    plot_scaling(scenario, fitting, images.back());
  }
  return images;
}

}  // namespace epochcast::cli

#include "cli/gnuplot_figure.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "core/format/gnuplot_text.h"
#include "core/input_error.h"
#include "core/io/child_process.h"
#include "core/io/output_file.h"
#include "core/system_failure.h"

namespace epochcast::cli {

std::string checked_image_name(const std::string& image, const std::string& option) {
  std::string extension = std::filesystem::path(image).extension().string();
  if (extension != ".png" && extension != ".svg") {
    throw InputError(SourceMark{"<command line>", 0, 0}, option,
                     "expected a file name ending in .png or .svg, got '" + image + "'");
  }
  // The names go into the script as quoted strings (gnuplot_quoted); a line break would still
  // end a command there.
  if (image.find_first_of("\n\r") != std::string::npos) {
    throw InputError(SourceMark{"<command line>", 0, 0}, option,
                     "expected a file name without line breaks");
  }
  return extension;
}

std::string sibling_image(const std::string& image, const std::string& suffix) {
  std::filesystem::path path(image);
  return ((path.parent_path() / path.stem()).string() + suffix) + path.extension().string();
}

std::vector<std::string> figure_files(const std::string& image) {
  std::filesystem::path path(image);
  std::filesystem::path stem = path.parent_path() / path.stem();
  return {image, stem.string() + ".dat", stem.string() + ".gp"};
}

std::vector<double> readable_ticks(double low, double high) {
  if (!(low >= std::numeric_limits<double>::min()) || !(high >= low) || !std::isfinite(high))
    return {};
  // A range too narrow to hold distinct plain steps: its one value.
  if (high <= low * (1 + 1e-9)) return {low};
  auto within = [&](const std::vector<double>& mantissas) {
    std::vector<double> ticks;
    for (double decade = std::pow(10.0, std::floor(std::log10(low))); decade <= high;
         decade *= 10) {
      for (double m : mantissas) {
        const double v = m * decade;
        if (v >= low * (1 - 1e-9) && v <= high * (1 + 1e-9)) ticks.push_back(v);
      }
    }
    return ticks;
  };
  static const std::vector<std::vector<double>> kSteps = {
      {1}, {1, 2, 5}, {1, 1.5, 2, 3, 5, 7}, {1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 7, 8, 9}};
  for (const std::vector<double>& mantissas : kSteps) {
    std::vector<double> ticks = within(mantissas);
    if (ticks.size() >= 4) return ticks;
  }
  // Less than a stretch of the finest steps: plain steps of 1, 2 or 5 times a power of ten,
  // five or so across the range (2200, 2300, ... 2600).
  const double raw = (high - low) / 5;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  const double step = raw / power < 2 ? power : raw / power < 5 ? 2 * power : 5 * power;
  std::vector<double> ticks;
  for (double v = std::ceil(low / step) * step; v <= high * (1 + 1e-9) && v + step > v; v += step)
    ticks.push_back(v);
  return ticks;
}

std::string zoomed_log_axis(char axis, double low, double high, std::vector<double> ticks) {
  // A margin of a sixteenth of the span on a log scale each way, at least 8% of the value, so
  // the extreme points are not drawn on the frame.
  const double span = high > low ? std::log10(high / low) : 0;
  const double margin = std::pow(10.0, std::max(span / 16, std::log10(1.08)));
  const double from = low / margin, to = high * margin;
  if (ticks.empty()) ticks = readable_ticks(from, to);
  std::string labels;
  for (double t : ticks)
    labels += fmt::format("{}\"{:.10g}\" {:.10g}", labels.empty() ? "" : ", ", t, t);
  return fmt::format("set {0}range [{1:.10g}:{2:.10g}]\nset {0}tics ({3})\nset m{0}tics 1\n", axis,
                     from, to, labels);
}

std::string line_style(int index) {
  // gnuplot's default colours (lc 1-8); filled and open circles, squares, triangles and
  // diamonds; solid, dashed, dotted and dash-dotted lines.
  static constexpr int kPoints[] = {7, 5, 9, 13, 6, 4, 8, 12};
  const int dash = index % 4 + 1;
  return fmt::format("lc {} pt {} dt {}", index % 8 + 1, kPoints[index % 8], dash);
}

std::string epoch_against_batch_commands(const std::string& title, const std::string& plots,
                                         const std::vector<double>& batches,
                                         const std::vector<double>& seconds) {
  std::vector<double> distinct = batches;
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  const auto [fastest, slowest] = std::minmax_element(seconds.begin(), seconds.end());
  std::string axes;
  if (!distinct.empty()) {
    // The sweep's own batches as labels, those too close to the one before left out (labels
    // about a fourteenth of the axis apart at least: three-digit labels touch at a twentieth),
    // unless too few would remain.
    const double spacing = std::max(1.2, std::pow(distinct.back() / distinct.front(), 1.0 / 14));
    std::vector<double> labelled;
    for (double b : distinct) {
      if (labelled.empty() || b / labelled.back() >= spacing) labelled.push_back(b);
    }
    axes += zoomed_log_axis('x', distinct.front(), distinct.back(),
                            labelled.size() >= 3 ? labelled : std::vector<double>{});
  }
  if (fastest != seconds.end()) axes += zoomed_log_axis('y', *fastest, *slowest);
  return fmt::format(
      "set title {}\n"
      "set xlabel 'global batch (samples)'\nset ylabel 'epoch time (s)'\n"
      "set logscale xy\nset grid\nset key outside right\n"
      "{}"
      "plot {}\n",
      gnuplot_quoted(title), axes, plots);
}

std::string plotted_message(const std::string& image) {
  const std::vector<std::string> files = figure_files(image);
  return fmt::format("Plotted {} (gnuplot data and script: {}, {})", image, files[1], files[2]);
}

void draw_with_gnuplot(const std::string& image, const std::string& option, const std::string& data,
                       const std::string& commands) {
  std::string extension = checked_image_name(image, option);
  std::filesystem::path path(image);
  std::filesystem::path directory = path.parent_path().empty() ? "." : path.parent_path();
  std::string stem = path.stem().string();
  std::string name = path.filename().string();
  // The script names its files relative to its own directory, so that it can be moved or rerun
  // there as it is; `output` can be overridden (gnuplot -e "output='x.svg'" ...).
  std::string script = fmt::format(
      "# Written by epochcast; edit and run `gnuplot {0}.gp` in this directory to restyle.\n"
      "set terminal {1} size 960,600{2}\n"
      "if (!exists(\"output\")) {{ output = {3} }}\n"
      "set output output\n"
      "data = {4}\n"
      "{5}",
      stem, extension == ".png" ? "pngcairo noenhanced" : "svg noenhanced",
      extension == ".png" ? "" : " dynamic", gnuplot_quoted(name), gnuplot_quoted(stem + ".dat"),
      commands);
  write_output((directory / (stem + ".dat")).string(), data, option);
  write_output((directory / (stem + ".gp")).string(), script, option);
  // gnuplot draws to its standard output, which becomes the image only once it has finished,
  // so a failed run leaves no half-drawn image behind. Its messages go to our standard error.
  // It runs without a shell, in the script's directory.
  ChildOptions in_directory;
  in_directory.directory = directory.string();
  const ChildResult gnuplot =
      run_program({"gnuplot", "-e", "output='/dev/stdout'", stem + ".gp"}, in_directory);
  if (!gnuplot.started) throw SystemFailure("cannot run gnuplot (is it installed?)");
  if (!gnuplot.succeeded() || gnuplot.output.empty()) {
    throw SystemFailure("gnuplot failed on " + stem + ".gp");
  }
  write_output(image, gnuplot.output, option);
}

}  // namespace epochcast::cli

// Figures drawn by gnuplot. Each image gets its data (<stem>.dat) and script (<stem>.gp) written
// beside it, so a user can restyle it by editing the script and running `gnuplot <stem>.gp`.
#pragma once

#include <string>
#include <vector>

namespace epochcast::cli {

// The image's extension, ".png" or ".svg"; any other name (or one with a line break) is an
// InputError naming `option`.
std::string checked_image_name(const std::string& image, const std::string& option);

// `image` with `suffix` inserted before its extension: ("a/epoch.png", "-scaling") ->
// "a/epoch-scaling.png".
std::string sibling_image(const std::string& image, const std::string& suffix);

// The files a figure writes: the image, <stem>.dat and <stem>.gp beside it (for registering
// outputs before any work).
std::vector<std::string> figure_files(const std::string& image);

// Values a person reads off an axis from `low` to `high` (both > 0): 1-2-5 steps per decade
// over wide ranges, finer ones (and plain steps) where the data span less than a decade, so that
// there are at least four where the range allows (one where low == high).
std::vector<double> readable_ticks(double low, double high);

// gnuplot commands that zoom log axis `axis` ('x' or 'y') to the data in [low, high], with a
// margin, labelled at `ticks` (empty: readable_ticks of the range).
std::string zoomed_log_axis(char axis, double low, double high, std::vector<double> ticks = {});

// The style of a figure's n-th line: its colour, point type and dash pattern all its own, so
// that lines can be told apart where they overlap or in black and white.
std::string line_style(int index);

// The commands of an epoch-time-against-global-batch figure, like the seeds' (log axes, the key
// outside on the right), drawing `plots` (gnuplot plot clauses), zoomed to the batches and
// seconds plotted (the batches labelled where there are few).
std::string epoch_against_batch_commands(const std::string& title, const std::string& plots,
                                         const std::vector<double>& batches,
                                         const std::vector<double>& seconds);

// What a figure wrote, for the command to print: "Plotted a.png (gnuplot data and script:
// a.dat, a.gp)".
std::string plotted_message(const std::string& image);

// Writes the data and a script (a terminal and output for the image's type, `data = '<stem>.dat'`
// and then `commands`), runs gnuplot on it and writes the image it draws, each file as
// core/io's OutputFile writes (whole, through symlinks, streamed to FIFOs). Throws if gnuplot is
// missing or fails.
void draw_with_gnuplot(const std::string& image, const std::string& option, const std::string& data,
                       const std::string& commands);

}  // namespace epochcast::cli

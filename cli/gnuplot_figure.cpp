#include "cli/gnuplot_figure.h"

#include <cstdio>
#include <filesystem>
#include <stdexcept>

#include <fmt/format.h>

#include "core/input_error.h"
#include "core/io/output_file.h"

namespace epochcast::cli {

std::string checked_image_name(const std::string& image, const std::string& option) {
  std::string extension = std::filesystem::path(image).extension().string();
  if (extension != ".png" && extension != ".svg") {
    throw InputError(SourceMark{"<command line>", 0, 0}, option,
                     "expected a file name ending in .png or .svg, got '" + image + "'");
  }
  // The names go into gnuplot's single-quoted strings and a shell command line.
  if (image.find_first_of("'\"\\$`\n") != std::string::npos) {
    throw InputError(
        SourceMark{"<command line>", 0, 0}, option,
        "expected a file name without quotes, backslashes, '$' or '`', got '" + image + "'");
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

std::string gnuplot_string(const std::string& text) {
  std::string quoted = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') quoted += '\\';
    quoted += c == '\n' ? ' ' : c;
  }
  return quoted + "\"";
}

std::string epoch_against_batch_commands(const std::string& title, const std::string& plots) {
  return fmt::format(
      "set title {}\n"
      "set xlabel 'global batch (samples)'\nset ylabel 'epoch time (s)'\n"
      "set logscale xy\nset grid\nset key outside right\n"
      "plot {}\n",
      gnuplot_string(title), plots);
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
      "if (!exists(\"output\")) {{ output = '{3}' }}\n"
      "set output output\n"
      "data = '{0}.dat'\n"
      "{4}",
      stem, extension == ".png" ? "pngcairo noenhanced" : "svg noenhanced",
      extension == ".png" ? "" : " dynamic", name, commands);
  write_output((directory / (stem + ".dat")).string(), data, option);
  write_output((directory / (stem + ".gp")).string(), script, option);
  // gnuplot draws to its standard output, which becomes the image only once it has finished,
  // so a failed run leaves no half-drawn image behind. Its messages go to our standard error.
  std::string command = fmt::format("cd '{}' && gnuplot -e \"output='/dev/stdout'\" '{}.gp'",
                                    directory.string(), stem);
  std::FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error("cannot run gnuplot (is it installed?)");
  std::string drawn;
  char buffer[65536];
  while (std::size_t n = std::fread(buffer, 1, sizeof buffer, pipe))
    drawn.append(buffer, n);
  if (::pclose(pipe) != 0 || drawn.empty()) {
    throw std::runtime_error("gnuplot failed on " + stem + ".gp (is gnuplot installed?)");
  }
  write_output(image, drawn, option);
}

}  // namespace epochcast::cli

#include "cli/gnuplot_figure.h"

#include <cstdlib>
#include <filesystem>
#include <stdexcept>

#include <fmt/format.h>

#include "core/input_error.h"
#include "core/io/atomic_file.h"

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
  write_file_atomically((directory / (stem + ".dat")).string(), data, option);
  write_file_atomically((directory / (stem + ".gp")).string(), script, option);
  // gnuplot draws into a temporary name, renamed once it has finished, so that a failed run
  // leaves no half-drawn image behind.
  std::string partial = image + ".partial";
  std::string command = fmt::format("cd '{}' && gnuplot -e \"output='{}.partial'\" '{}.gp' 2>&1",
                                    directory.string(), name, stem);
  if (std::system(command.c_str()) != 0) {
    std::error_code ignored;
    std::filesystem::remove(partial, ignored);
    throw std::runtime_error("gnuplot failed on " + stem + ".gp (is gnuplot installed?)");
  }
  std::filesystem::rename(partial, image);
}

}  // namespace epochcast::cli

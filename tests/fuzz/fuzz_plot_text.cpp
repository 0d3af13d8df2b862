// libFuzzer target for text from input files on its way into gnuplot scripts (scenario, model
// and profile names become plot titles). Each input is a name: gnuplot_quoted must give one
// string that reads back as the name (control characters as spaces), and, where gnuplot is
// installed, gnuplot itself must print exactly that from a script `print <quoted>`, run in an
// empty folder that it must leave empty: no backquoted command, macro or escape of the name may
// run or change it. EPOCHCAST_FUZZ_VERBOSE=1 prints each name and what gnuplot printed.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>
#include <unistd.h>

#include "core/format/gnuplot_text.h"
#include "core/io/child_process.h"
#include "tests/fuzz/fuzz_common.h"

namespace {

using epochcast::fuzz::finding;
using epochcast::fuzz::shell_quoted;

// What a title of `text` should read as: control characters turn into spaces.
std::string visible(std::string_view text) {
  std::string out;
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    out += byte < 0x20 || byte == 0x7f ? ' ' : c;
  }
  return out;
}

bool gnuplot_installed() {
  static const bool installed = [] {
    epochcast::ChildOptions quiet;
    quiet.discard_errors = true;
    return epochcast::run_program({"gnuplot", "--version"}, quiet).succeeded();
  }();
  return installed;
}

// A folder of this process's own, emptied before each run.
const std::filesystem::path& scratch() {
  static const std::filesystem::path folder = [] {
    std::filesystem::path p =
        std::filesystem::temp_directory_path() / fmt::format("epochcast-fuzz-plot-{}", ::getpid());
    std::filesystem::remove_all(p);
    std::filesystem::create_directories(p);
    return p;
  }();
  return folder;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string name(reinterpret_cast<const char*>(data), size);
  const std::string quoted = epochcast::gnuplot_quoted(name);
  const std::string expected = visible(name);
  std::string read_back;
  if (!epochcast::gnuplot_unquoted(quoted, read_back) || read_back != expected) {
    finding(fmt::format("gnuplot_quoted({}) = {} does not read back as the name",
                        shell_quoted(name), shell_quoted(quoted)));
  }
  if (!gnuplot_installed()) return 0;

  const std::filesystem::path& folder = scratch();
  for (const auto& entry : std::filesystem::directory_iterator(folder))
    std::filesystem::remove_all(entry.path());
  {
    std::ofstream script(folder / "t.gp", std::ios::binary);
    script << "set print '-'\nprint " << quoted << "\n";
  }
  epochcast::ChildOptions in_folder;
  in_folder.directory = folder.string();
  const epochcast::ChildResult gnuplot = epochcast::run_program({"gnuplot", "t.gp"}, in_folder);
  if (epochcast::fuzz::verbose_requested()) {
    std::fprintf(stderr, "name %s: gnuplot printed %s\n", shell_quoted(name).c_str(),
                 shell_quoted(gnuplot.output).c_str());
  }
  if (!gnuplot.succeeded() || gnuplot.output != expected + "\n") {
    finding(fmt::format("gnuplot read the title {} as {} (exit {})", shell_quoted(quoted),
                        shell_quoted(gnuplot.output), gnuplot.exit_code.value_or(-1)));
  }
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    if (entry.path().filename() != "t.gp") {
      finding(fmt::format("gnuplot left {} behind for the title {}", entry.path().string(),
                          shell_quoted(quoted)));
    }
  }
  return 0;
}

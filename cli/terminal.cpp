// Terminal width and detection.
#include "cli/terminal.h"

#include <cstdlib>
#include <string>

#include <sys/ioctl.h>
#include <unistd.h>

namespace epochcast::cli {

bool is_terminal(std::FILE* out) {
  return ::isatty(::fileno(out)) != 0;
}

std::size_t output_width(std::FILE* out) {
  if (is_terminal(out)) {
    winsize size{};
    if (::ioctl(::fileno(out), TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
  }
  if (const char* columns = std::getenv("COLUMNS")) {
    // A value that is not a positive number is ignored, as shells and other tools do.
    char* end = nullptr;
    const long value = std::strtol(columns, &end, 10);
    if (end != columns && *end == '\0' && value > 0 && value < 100'000)
      return static_cast<std::size_t>(value);
  }
  return 0;
}

}  // namespace epochcast::cli

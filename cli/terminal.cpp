// Terminal width and detection.
#include "cli/terminal.h"

#include <cstdlib>
#include <string>

#include <fmt/format.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "core/format/text_table.h"

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

void print_prose(std::FILE* out, const std::string& text, std::size_t indent) {
  const std::size_t width = output_width(out);
  std::string laid_out;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size() - 1;
    const std::string line = text.substr(start, end + 1 - start);
    if (line.rfind("# ", 0) == 0 && width > 2) {
      // A comment's pieces each start with "# " (scripts skip comment lines).
      std::string wrapped = wrap_lines(line.substr(2), width - 2, 0);
      std::size_t at = 0;
      while (at < wrapped.size()) {
        const std::size_t next = wrapped.find('\n', at);
        const std::size_t stop = next == std::string::npos ? wrapped.size() : next + 1;
        laid_out += "# " + wrapped.substr(at, stop - at);
        at = stop;
      }
    } else {
      laid_out += wrap_lines(line, width, indent);
    }
    start = end + 1;
  }
  fmt::print(out, "{}", laid_out);
}

}  // namespace epochcast::cli

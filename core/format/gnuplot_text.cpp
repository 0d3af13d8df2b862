#include "core/format/gnuplot_text.h"

namespace epochcast {

std::string gnuplot_quoted(std::string_view text) {
  std::string quoted = "'";
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '\'') {
      quoted += "''";
    } else if (byte < 0x20 || byte == 0x7f) {
      quoted += ' ';
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

bool gnuplot_unquoted(std::string_view quoted, std::string& text) {
  text.clear();
  if (quoted.size() < 2 || quoted.front() != '\'' || quoted.back() != '\'') return false;
  const std::string_view inside = quoted.substr(1, quoted.size() - 2);
  for (std::size_t i = 0; i < inside.size(); ++i) {
    const auto byte = static_cast<unsigned char>(inside[i]);
    if (byte < 0x20 || byte == 0x7f) return false;  // would end or break the command
    if (inside[i] == '\'') {
      // Inside, a quote is only ever half of a doubled one; a lone one would end the string.
      if (i + 1 >= inside.size() || inside[i + 1] != '\'') return false;
      ++i;
    }
    text += inside[i];
  }
  return true;
}

}  // namespace epochcast

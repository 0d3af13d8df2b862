#include "core/format/gnuplot_text.h"

#include "core/format/utf8.h"

namespace epochcast {

std::string gnuplot_visible(std::string_view text) {
  std::string out;
  while (!text.empty()) {
    const std::size_t length = utf8_length(text);
    if (length == 0) {
      out += '?';
      text.remove_prefix(1);
      continue;
    }
    const auto first = static_cast<unsigned char>(text.front());
    if (length == 1 && (first < 0x20 || first == 0x7f)) {
      out += ' ';
    } else {
      out.append(text.substr(0, length));
    }
    text.remove_prefix(length);
  }
  return out;
}

std::string gnuplot_quoted(std::string_view text) {
  std::string quoted = "\"";
  for (char c : gnuplot_visible(text)) {
    if (c == '"' || c == '\\') {
      quoted += '\\';
      quoted += c;
    } else if (c == '`') {
      quoted += "\\140";
    } else {
      quoted += c;
    }
  }
  return quoted + "\"";
}

bool gnuplot_unquoted(std::string_view quoted, std::string& text) {
  text.clear();
  if (quoted.size() < 2 || quoted.front() != '"' || quoted.back() != '"') return false;
  const std::string_view inside = quoted.substr(1, quoted.size() - 2);
  for (std::size_t i = 0; i < inside.size();) {
    const char c = inside[i];
    if (c == '"' || c == '`') return false;  // would end the string, or be substituted
    if (c == '\\') {
      const std::string_view escape = inside.substr(i, 4);
      if (escape.substr(0, 2) == "\\\"" || escape.substr(0, 2) == "\\\\") {
        text += inside[i + 1];
        i += 2;
      } else if (escape == "\\140") {
        text += '`';
        i += 4;
      } else {
        return false;
      }
      continue;
    }
    const std::size_t length = utf8_length(inside.substr(i));
    if (length == 0) return false;  // gnuplot would read past it
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) return false;  // would end or break the command
    text.append(inside.substr(i, length));
    i += length;
  }
  return true;
}

}  // namespace epochcast

// Text from input files (scenario, model and profile names) as gnuplot reads it back literally.
#pragma once

#include <string>
#include <string_view>

namespace epochcast {

// `text` as a gnuplot single-quoted string. gnuplot substitutes `command` (a shell command's
// output) and @macros in the rest of a script line, and reads escapes in double-quoted strings,
// but takes a single-quoted string as it is, a doubled quote standing for one (gnuplot 5 manual,
// "Quote marks", "Substitution"). So a name like "x `touch pwned` y" is drawn as written and
// never run, also when the user reruns the script. Control characters (line breaks among them,
// which would end the command) become spaces.
std::string gnuplot_quoted(std::string_view text);

// What gnuplot reads from `quoted` as one single-quoted string, into `text` (the inverse of
// gnuplot_quoted, for checks). False when `quoted` is not exactly one such string on one line.
bool gnuplot_unquoted(std::string_view quoted, std::string& text);

}  // namespace epochcast

// Text from input files (scenario, model and profile names) as gnuplot reads it back literally.
#pragma once

#include <string>
#include <string_view>

namespace epochcast {

// `text` as a gnuplot double-quoted string, `"` and `\` escaped as \" and \\, and the backquote
// as the octal escape \140: gnuplot replaces backquoted text with a shell command's output
// anywhere on a line before it parses the line (gnuplot 5 manual, "Substitution"), so a name
// like "x `touch pwned` y" is drawn as written and never run, also when the user reruns the
// script. (Single quotes would need no escapes, but gnuplot 5.4 misreads a doubled quote beside
// another, as in 'a''''b'; and it reads an octal escape that starts with 0 to four digits.)
// Control characters (line breaks among them, which would end the command) become spaces, and
// bytes that are not UTF-8 become '?': gnuplot reads a UTF-8 lead byte with the bytes after it
// as one character, so a stray lead byte before an escape or the closing quote would swallow it.
std::string gnuplot_quoted(std::string_view text);

// What gnuplot_quoted writes for `text`, unquoted: the text a plot shows.
std::string gnuplot_visible(std::string_view text);

// What gnuplot reads from `quoted` as one string written as gnuplot_quoted writes them, into
// `text` (the inverse of gnuplot_quoted, for checks). False when `quoted` is not exactly one
// such string on one line: a bare `"` or backquote inside, an escape other than \", \\ and
// \140, a control character, or a byte that is not UTF-8.
bool gnuplot_unquoted(std::string_view quoted, std::string& text);

}  // namespace epochcast

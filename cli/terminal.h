// What the output is written to: a terminal (and how wide it is) or a pipe or file.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>

namespace epochcast::cli {

// The width tables and prose are laid out to: the terminal's, where `out` is one; else the
// COLUMNS environment variable, where it is set to a positive number; else 0 (no limit).
std::size_t output_width(std::FILE* out);

// Prints `text` (sentences, lists) to `out`, each line broken at its spaces to fit
// output_width(out), continuations indented by `indent`; each broken line of a comment ("# ...")
// goes on as a comment.
void print_prose(std::FILE* out, const std::string& text, std::size_t indent = 2);

// Whether `out` is a terminal (progress lines are for people watching, not for logs).
bool is_terminal(std::FILE* out);

}  // namespace epochcast::cli

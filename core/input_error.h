// Bad input: an error that names the file, line and column, the key, and what was expected.
#pragma once

#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

namespace epochcast {

// A position in an input file. Line and column are 1-based; 0 means "not known" (e.g. a value
// given on the command line).
struct SourceMark {
  std::string file;
  int line = 0;
  int column = 0;

  // "file:line:col", or just "file" when the position is unknown.
  std::string str() const;
};

// Raised while loading input, before any work starts. what() is the full one-line message:
//   scenarios/x.yaml:12:5: error: training.precision: expected one of fp32, ...; got 'fp33'
//   (did you mean 'fp32'?)
class InputError : public std::runtime_error {
 public:
  InputError(SourceMark mark, std::string key, std::string problem);

  const SourceMark& mark() const { return mark_; }
  // Dotted path of the offending key ("training.precision", "layers[3].kernel"); may be empty.
  const std::string& key() const { return key_; }
  const std::string& problem() const { return problem_; }

 private:
  SourceMark mark_;
  std::string key_;
  std::string problem_;
};

// The candidate closest to `word` by edit distance, if it is close enough to be a plausible
// misspelling (at most a third of the word's length, and at least 1, edits away). Empty otherwise.
std::string closest_match(std::string_view word, std::span<const std::string_view> candidates);

// " (did you mean 'x'?)" when closest_match finds one, else "".
std::string did_you_mean(std::string_view word, std::span<const std::string_view> candidates);

// "a, b or c" — for "expected one of ..." messages.
std::string join_alternatives(std::span<const std::string_view> names);

}  // namespace epochcast

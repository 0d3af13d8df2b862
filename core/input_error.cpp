// Formatting of input errors and the misspelling suggestions that go with them.
#include "core/input_error.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

namespace epochcast {

std::string SourceMark::str() const {
  if (line <= 0) return file;
  return fmt::format("{}:{}:{}", file, line, column);
}

namespace {

std::string format_message(const SourceMark& mark, const std::string& key,
                           const std::string& problem) {
  std::string where = mark.str();
  std::string prefix = where.empty() ? "error: " : where + ": error: ";
  return key.empty() ? prefix + problem : prefix + key + ": " + problem;
}

// Levenshtein distance; inputs are short key names, so the quadratic table is fine.
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> previous(b.size() + 1);
  std::vector<std::size_t> current(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j)
    previous[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    current[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t substitution = previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1, substitution});
    }
    std::swap(previous, current);
  }
  return previous[b.size()];
}

}  // namespace

InputError::InputError(SourceMark mark, std::string key, std::string problem)
    : std::runtime_error(format_message(mark, key, problem)),
      mark_(std::move(mark)),
      key_(std::move(key)),
      problem_(std::move(problem)) {}

std::string closest_match(std::string_view word, std::span<const std::string_view> candidates) {
  std::size_t limit = std::max<std::size_t>(1, word.size() / 3);
  std::string best;
  std::size_t best_distance = limit + 1;
  for (std::string_view candidate : candidates) {
    std::size_t distance = edit_distance(word, candidate);
    if (distance < best_distance) {
      best_distance = distance;
      best = candidate;
    }
  }
  return best;
}

std::string did_you_mean(std::string_view word, std::span<const std::string_view> candidates) {
  std::string match = closest_match(word, candidates);
  return match.empty() ? "" : fmt::format(" (did you mean '{}'?)", match);
}

std::string join_alternatives(std::span<const std::string_view> names) {
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += (i + 1 == names.size()) ? " or " : ", ";
    out += names[i];
  }
  return out;
}

}  // namespace epochcast

// What every fuzz target shares: the contract (InputError is the one way to refuse input; any
// other exception is a finding, reported with its type and message before aborting, so that
// libFuzzer saves the reproducer) and small helpers for decoding and printing inputs.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <typeinfo>
#include <vector>

#include <cxxabi.h>
#include <fuzzer/FuzzedDataProvider.h>

#include "core/input_error.h"

namespace epochcast::fuzz {

// Findings reported but not fixed yet (tests/fuzz/findings/), by a phrase of their message.
// With EPOCHCAST_FUZZ_SKIP_KNOWN=1 they count as refused input, so that a long campaign can look
// past them; without it (tools/fuzz.sh, ctest) they are findings like any other.
inline constexpr std::string_view kKnownFindings[] = {
    // none open (a phrase of the finding's message, and where its reproducer is)
    "",
};

inline bool skipping_known(const std::string& what) {
  static const bool skip = [] {
    const char* v = std::getenv("EPOCHCAST_FUZZ_SKIP_KNOWN");
    return v != nullptr && std::string_view(v) == "1";
  }();
  if (!skip) return false;
  for (std::string_view phrase : kKnownFindings)
    if (!phrase.empty() && what.find(phrase) != std::string::npos) return true;
  return false;
}

// Reports a broken promise and aborts (libFuzzer saves the input as crash-<sha1>), unless it is
// a known finding being skipped: then it returns.
inline void finding(const std::string& what) {
  if (skipping_known(what)) return;
  std::fprintf(stderr, "\n==FUZZ FINDING== %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

// EPOCHCAST_FUZZ_VERBOSE=1 (not empty, not 0): a target says what became of each input, for
// replaying a reproducer.
inline bool verbose_requested() {
  const char* v = std::getenv("EPOCHCAST_FUZZ_VERBOSE");
  return v != nullptr && *v != '\0' && std::string_view(v) != "0";
}

inline std::string type_name(const std::type_info& type) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> name(
      abi::__cxa_demangle(type.name(), nullptr, nullptr, &status), std::free);
  return status == 0 && name ? name.get() : type.name();
}

// Runs `work`; returns true when it finished, false when it raised InputError (or a skipped
// known finding). Any other exception is a finding.
template <typename Work>
bool expect_input_error_at_most(Work work) {
  try {
    work();
    return true;
  } catch (const InputError&) {
    return false;  // the one way to refuse input
  } catch (const std::exception& error) {
    finding("uncaught " + type_name(typeid(error)) + ": " + error.what());
  } catch (...) {
    finding("uncaught exception of a type not derived from std::exception");
  }
  return false;
}

// FuzzedDataProvider::PickValueInArray for a vector.
template <typename T>
const T& pick(FuzzedDataProvider& in, const std::vector<T>& items) {
  return items[in.ConsumeIntegralInRange<std::size_t>(0, items.size() - 1)];
}

// `text` as one bash word: '...' when printable, else $'...' with \xNN escapes.
inline std::string shell_quoted(std::string_view text) {
  bool printable = true;
  auto is_printable = [](unsigned char ch) { return ch >= 0x20 && ch < 0x7f; };
  for (char c : text)
    printable = printable && is_printable(static_cast<unsigned char>(c));
  std::string quoted = printable ? "'" : "$'";
  for (char c : text) {
    const auto ch = static_cast<unsigned char>(c);
    if (printable) {
      quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    } else if (c == '\'' || c == '\\') {
      quoted += '\\';
      quoted += c;
    } else if (is_printable(ch)) {
      quoted += c;
    } else {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", ch);
      quoted += escaped;
    }
  }
  return quoted + "'";
}

}  // namespace epochcast::fuzz

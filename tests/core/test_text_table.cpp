// Text layout: durations a person reads, prose wrapped to a width, tables fitted to it.
#include <catch2/catch.hpp>

#include "core/format/text_table.h"
#include "support/text.h"

using namespace epochcast;
using epochcast::test::widest_line;

TEST_CASE("durations read in the unit a person reads, with four significant digits") {
  CHECK(readable_duration(0) == "0 s");
  CHECK(readable_duration(0.0000123) == "12.30 us");
  CHECK(readable_duration(0.01234) == "12.34 ms");
  CHECK(readable_duration(0.4941) == "494.1 ms");
  CHECK(readable_duration(1.80627) == "1.806 s");
  CHECK(readable_duration(119.9) == "119.9 s");
  CHECK(readable_duration(2200) == "36.67 min");
  CHECK(readable_duration(5051) == "84.18 min");
  CHECK(readable_duration(3 * 3600.0) == "3.000 h");
  CHECK(readable_duration(3 * 86400.0) == "3.000 days");
  // The example: 156,826,336 s is 1,815 days, not a nine-digit count of seconds.
  CHECK(readable_duration(156826336.0227) == "1815 days");
  CHECK(readable_duration(1e12) == "11,574,074 days");
  // Rounding that reaches the next unit reads in it; beyond a trillion days, words.
  CHECK(readable_duration(0.99996) == "1.000 s");
  CHECK(readable_duration(9.99996) == "10.00 s");
  CHECK(readable_duration(119.9996) == "2.000 min");
  CHECK(readable_duration(1e300) == "over 10^12 days");
  CHECK(readable_duration_range(0, 0) == "0 s-0 s");
  CHECK(readable_duration_range(0.784, 0.8476) == "784.0-847.6 ms");
  CHECK(readable_duration_range(0.9816, 1.055) == "0.982-1.055 s");
}

TEST_CASE("prose is wrapped at spaces to the width, continuations indented") {
  const std::string text =
      "Assumed: GPUs of one model differ in speed by 1% and each step waits for the slowest.\n"
      "short line\n";
  CHECK(wrap_lines(text, 0) == text);
  const std::string wrapped = wrap_lines(text, 30);
  CHECK(widest_line(wrapped) <= 30);
  CHECK(wrapped.rfind("Assumed: GPUs of one model\n  differ", 0) == 0);
  CHECK(wrapped.find("\nshort line\n") != std::string::npos);
  // A word longer than the width stays whole on its own line.
  CHECK(wrap_lines("a averyveryverylongword b", 8, 0) == "a\naveryveryverylongword\nb");
  // A line's own indentation is kept, never broken at; trailing and doubled spaces vanish.
  CHECK(wrap_lines("  averyveryverylongword b", 8, 2) == "  averyveryverylongword\n  b");
  CHECK(wrap_lines("one two three \n", 9, 0) == "one two\nthree\n");
  CHECK(wrap_lines("", 10) == "");
  CHECK(wrap_lines("\n\n", 10) == "\n\n");
}

TEST_CASE("a table too wide for its width shortens, then leaves out, what may go") {
  TextTable table;
  table.add_column("gpus");
  table.add_column("epoch");
  table.add_column("per-GPU", TextTable::Align::right, {0, 2});
  table.add_column("bottleneck", TextTable::Align::left, {3, 1});
  table.add_row({"1", "1.806 s", "64", "compute-bound: the GPU is busy 96% of the epoch"});
  table.add_row({"1024", "494.1 ms", "64", "communication-bound"});
  const std::string full = table.render();
  CHECK(widest_line(full) > 60);
  CHECK(full.find("busy 96% of the epoch") != std::string::npos);
  // Shortened first: the sentence is cut with "...", every column stays.
  const std::string shortened = table.render(40);
  CHECK(widest_line(shortened) <= 40);
  CHECK(shortened.find("per-GPU") != std::string::npos);
  CHECK(shortened.find("...") != std::string::npos);
  // Narrower still: per-GPU (the most expendable) goes, then the bottleneck.
  const std::string narrow = table.render(30);
  CHECK(widest_line(narrow) <= 30);
  CHECK(narrow.find("per-GPU") == std::string::npos);
  CHECK(narrow.find("bottleneck") != std::string::npos);
  const std::string narrowest = table.render(16);
  CHECK(narrowest.find("bottleneck") == std::string::npos);
  CHECK(narrowest.find("494.1 ms") != std::string::npos);  // what cannot go stays
}

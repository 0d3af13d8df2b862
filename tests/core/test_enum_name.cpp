// name_of: each enum's value by the names table kept beside it, and a value past the table a
// broken invariant.
#include <stdexcept>
#include <string_view>

#include <catch2/catch.hpp>

#include "core/enum_name.h"
#include "core/spec/scenario_spec.h"

using namespace epochcast;

namespace {
enum class Colour { red, green, blue };
constexpr std::string_view kColourNames[] = {"red", "green"};  // blue's entry lost
}  // namespace

TEST_CASE("name_of gives the table's entry for every value of an enum") {
  for (std::size_t i = 0; i < std::size(kStrategyNames); ++i) {
    CHECK(name_of(static_cast<Strategy>(i)) == kStrategyNames[i]);
  }
  CHECK(name_of(TrainingPrecision::amp_bf16) == "amp_bf16");
  CHECK(name_of(FsdpBackwardPrefetch::none) == "none");
  CHECK(name_of(OptimizerImplementation::automatic) == "auto");
}

TEST_CASE("a value past its names table is a broken invariant not a name") {
  CHECK(enum_name(kColourNames, Colour::green) == "green");
  CHECK_THROWS_AS(enum_name(kColourNames, Colour::blue), std::logic_error);
}

// The command line: misspelt commands and options get the closest known one, ranges read as
// numbers, and every option's help shows its default.
#include <catch2/catch.hpp>

#include "support/paths.h"
#include "support/run_command.h"

using namespace epochcast::test;

namespace {

std::string linear() {
  return (source_dir() / "scenarios/seed-001/linear.yaml").string();
}

}  // namespace

TEST_CASE("a misspelt command exits 2 naming the closest command") {
  CommandResult r = run_command(epochcast_binary() + " predcit " + linear());
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::StartsWith("epochcast: 'predcit' is not a command (did you mean "
                                         "'predict'?); the commands are inspect, predict,"));
}

TEST_CASE("a misspelt option exits 2 naming the closest option of that command") {
  CommandResult r = run_command(epochcast_binary() + " predict " + linear() + " --jsno out.json");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::StartsWith("epochcast predict: unknown option '--jsno' (did you "
                                         "mean '--json'?)"));
  CommandResult equals = run_command(epochcast_binary() + " validate --holdot=x a b");
  CHECK(equals.exit_code == 2);
  CHECK_THAT(equals.output, Catch::Contains("unknown option '--holdot' (did you mean "
                                            "'--holdout'?)"));
}

TEST_CASE("an option out of its range names the range as numbers") {
  CommandResult r =
      run_command(epochcast_binary() + " predict " + linear() + " --trace t.json --trace-point 0");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains(
                           "--trace-point: expected an integer from 1 to 1,000,000,000, got '0'"));
}

TEST_CASE("the help of every option shows its default") {
  CommandResult r = run_command(epochcast_binary() + " predict --help");
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("How many training iterations to trace (default: 3)"));
  CommandResult topo = run_command(epochcast_binary() + " topo --help");
  CHECK_THAT(topo.output, Catch::Contains("(default: the machine's)"));
}

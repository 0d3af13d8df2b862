// Shards of a sweep: each point in exactly one shard, as MPI processes share them; the shard
// file reads back exactly what was written (results bit for bit, errors as raised); a damaged,
// edited or foreign file is refused with its name, the key and what to do.
#include <set>
#include <string>

#include <catch2/catch.hpp>

#include "core/input_error.h"
#include "core/spec/scenario_spec.h"
#include "sim/predict/sweep_shard.h"
#include "sim/report/report.h"
#include "support/paths.h"

using namespace epochcast;
using namespace epochcast::sim;

namespace {

SweepIdentity identity(std::size_t points) {
  SweepIdentity s;
  s.epochcast = "epochcast 0.1.0 (git 0123abc)";
  s.command = "predict";
  s.arguments = {"scenarios/seed-001/linear.yaml", "--set", "training.epochs=2"};
  s.inputs = "00112233aabbccdd";
  s.points = points;
  return s;
}

// Shard 1 of 2 of a three-point sweep: a result, an input error and another error.
ShardFile sample_shard(const ScenarioSpec& scenario) {
  ShardFile file;
  file.sweep = identity(5);
  file.shard = 1;
  file.shards = 2;
  PointOutcome simulated;
  simulated.result = predict_point(scenario, expand_sweep(scenario).front());
  PointOutcome refused;
  refused.input_error = InputError(SourceMark{"x.yaml", 3, 7}, "sweep.batch", "too large");
  PointOutcome broken;
  broken.internal_error = "an invariant broke";
  file.outcomes = {{0, simulated}, {2, refused}, {4, broken}};
  return file;
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const std::size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

}  // namespace

TEST_CASE("every point of a sweep is in exactly one shard taken every N-th as MPI processes do") {
  for (const std::size_t points : {0, 1, 7, 30}) {
    for (const int shards : {1, 2, 5, 40}) {
      std::set<std::size_t> seen;
      for (int k = 1; k <= shards; ++k) {
        for (const std::size_t i : shard_points(points, k, shards)) {
          CHECK(i % static_cast<std::size_t>(shards) == static_cast<std::size_t>(k - 1));
          CHECK(seen.insert(i).second);
        }
      }
      CHECK(seen.size() == points);
    }
  }
  CHECK(shard_points(12, 2, 5) == std::vector<std::size_t>{1, 6, 11});
}

TEST_CASE("a shard file reads back its identity and outcomes exactly") {
  const ScenarioSpec s = load_scenario(test::source_dir() / "scenarios/seed-001/linear.yaml");
  const ShardFile written = sample_shard(s);
  const ShardFile read = read_shard_file(shard_file_text(written), "shard-1.json");
  CHECK(read.sweep.id() == written.sweep.id());
  CHECK(read.sweep.arguments == written.sweep.arguments);
  CHECK(read.shard == 1);
  CHECK(read.shards == 2);
  REQUIRE(read.outcomes.size() == 3);
  CHECK(read.outcomes[1].first == 2);
  // The result bit for bit: its table, CSV and JSON are the original's.
  REQUIRE(read.outcomes[0].second.result.has_value());
  const std::vector<PointResult> before = {*written.outcomes[0].second.result};
  const std::vector<PointResult> after = {*read.outcomes[0].second.result};
  CHECK(render_table(s, after) == render_table(s, before));
  CHECK(render_csv(s, after) == render_csv(s, before));
  CHECK(render_json(s, after) == render_json(s, before));
  // The errors as they were raised.
  REQUIRE(read.outcomes[1].second.input_error.has_value());
  CHECK(std::string(read.outcomes[1].second.input_error->what()) ==
        written.outcomes[1].second.input_error->what());
  CHECK_THROWS_AS(PointOutcome(read.outcomes[1].second).take(), InputError);
  CHECK_THROWS_WITH(PointOutcome(read.outcomes[2].second).take(), "an invariant broke");
  // Written again, the same text.
  CHECK(shard_file_text(read) == shard_file_text(written));
}

TEST_CASE("a sweep's identity changes with each of its fields") {
  const SweepIdentity base = identity(30);
  std::set<std::string> ids = {base.id()};
  SweepIdentity other = base;
  other.epochcast = "epochcast 0.1.1 (git 0123abc)";
  ids.insert(other.id());
  other = base;
  other.command = "compare";
  ids.insert(other.id());
  other = base;
  other.arguments.back() = "training.epochs=3";
  ids.insert(other.id());
  other = base;
  other.inputs = "00112233aabbccde";
  ids.insert(other.id());
  other = base;
  other.points = 31;
  ids.insert(other.id());
  CHECK(ids.size() == 6);
}

TEST_CASE("a sweep's command line quotes the words a shell would split") {
  SweepIdentity s = identity(1);
  s.arguments = {"my scenario.yaml", "--set", "name=it's"};
  CHECK(s.command_line() == "epochcast predict 'my scenario.yaml' --set 'name=it'\\''s'");
}

TEST_CASE("a truncated shard file is refused at the line and column where it breaks") {
  const ScenarioSpec s = load_scenario(test::source_dir() / "scenarios/seed-001/linear.yaml");
  const std::string text = shard_file_text(sample_shard(s));
  CHECK_THROWS_WITH(read_shard_file(text.substr(0, text.size() / 2), "shard-1.json"),
                    Catch::StartsWith("shard-1.json:") && Catch::Contains("JSON is broken") &&
                        Catch::Contains("compute that shard again"));
}

TEST_CASE("a file of another kind or version is refused saying what merge takes") {
  CHECK_THROWS_WITH(read_shard_file("{\"schema\": \"epochcast.prediction/1\"}", "p.json"),
                    Catch::Contains("not a shard file") && Catch::Contains("--shard-output"));
  CHECK_THROWS_WITH(read_shard_file("{\"format\": \"epochcast.shard/9\"}", "s.json"),
                    Catch::Contains("another version"));
}

TEST_CASE("an edited or damaged shard file is refused naming the key and how to compute it again") {
  const ScenarioSpec s = load_scenario(test::source_dir() / "scenarios/seed-001/linear.yaml");
  const ShardFile shard = sample_shard(s);
  const std::string text = shard_file_text(shard);
  const std::string again = "--shard 1/2 --shard-output shard-1.json";
  // Another sweep's arguments under this sweep's id.
  CHECK_THROWS_WITH(
      read_shard_file(replaced(text, "training.epochs=2", "training.epochs=3"), "shard-1.json"),
      Catch::Contains("sweep.id") && Catch::Contains(again));
  // A point that is not the shard's.
  CHECK_THROWS_WITH(
      read_shard_file(replaced(text, "\"point\": 3,", "\"point\": 2,"), "shard-1.json"),
      Catch::Contains("outcomes[1].point") && Catch::Contains(again));
  // One character of an outcome changed: its bytes no longer match the file's digest.
  const std::size_t at = text.find("\"outcome\": \"") + 40;
  std::string flipped = text;
  flipped[at] = flipped[at] == 'A' ? 'B' : 'A';
  CHECK_THROWS_AS(read_shard_file(flipped, "shard-1.json"), InputError);
  // A shard number past the count.
  CHECK_THROWS_WITH(
      read_shard_file(replaced(text, "\"shard\": 1,", "\"shard\": 3,"), "shard-1.json"),
      Catch::Contains("shard") && Catch::Contains("1 to 2"));
}

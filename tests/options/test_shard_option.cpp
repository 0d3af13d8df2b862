// --shard's value: K/N numbered from 1, and auto / auto/N from a Slurm array task or a
// Kubernetes indexed Job; anything else refused saying what to give.
#include <map>
#include <string>
#include <tuple>

#include <catch2/catch.hpp>

#include "core/input_error.h"
#include "options/shard_option.h"

using namespace epochcast;
using namespace epochcast::options;

namespace {

Shard parse(const std::string& text, const std::map<std::string, std::string>& variables = {}) {
  return parse_shard(text, [&variables](const char* name) -> const char* {
    const auto it = variables.find(name);
    return it == variables.end() ? nullptr : it->second.c_str();
  });
}

const std::map<std::string, std::string> kSlurmTask = {{"SLURM_ARRAY_TASK_ID", "4"},
                                                       {"SLURM_ARRAY_TASK_MIN", "1"},
                                                       {"SLURM_ARRAY_TASK_MAX", "5"},
                                                       {"SLURM_ARRAY_TASK_COUNT", "5"}};

}  // namespace

TEST_CASE("K/N names shard K of N counted from 1") {
  for (const auto& [text, number, count] :
       {std::tuple{"1/1", 1, 1}, std::tuple{"2/5", 2, 5}, std::tuple{"5/5", 5, 5}}) {
    const Shard s = parse(text);
    CHECK(s.number == number);
    CHECK(s.count == count);
  }
}

TEST_CASE("a shard outside 1 to N or a malformed value is refused naming --shard") {
  CHECK_THROWS_WITH(parse("0/4"), Catch::Contains("--shard") &&
                                      Catch::Contains("numbered from 1 to 4") &&
                                      Catch::Contains("--shard auto"));
  CHECK_THROWS_WITH(parse("5/4"), Catch::Contains("shard 5 of 4 does not exist"));
  for (const char* text : {"3", "3/", "/4", "a/b", "2/0", "-1/4", "2/4/6", "1.5/4", " 1/4"}) {
    INFO(text);
    CHECK_THROWS_AS(parse(text), InputError);
  }
}

TEST_CASE("auto reads a Slurm array task as shard index minus the first plus 1 of the count") {
  const Shard s = parse("auto", kSlurmTask);
  CHECK(s.number == 4 - 1 + 1);
  CHECK(s.count == 5);
  // auto/N agrees with the array's count.
  CHECK(parse("auto/5", kSlurmTask).number == 4);
  CHECK_THROWS_WITH(parse("auto/4", kSlurmTask), Catch::Contains("--shard says 4 shards"));
}

TEST_CASE("auto/N reads a Kubernetes indexed Job's index from 0 as shard index plus 1") {
  const Shard s = parse("auto/8", {{"JOB_COMPLETION_INDEX", "0"}});
  CHECK(s.number == 1);
  CHECK(s.count == 8);
  CHECK(parse("auto/8", {{"JOB_COMPLETION_INDEX", "7"}}).number == 8);
  CHECK_THROWS_WITH(parse("auto/8", {{"JOB_COMPLETION_INDEX", "8"}}),
                    Catch::Contains("JOB_COMPLETION_INDEX=8") && Catch::Contains("past"));
  // Kubernetes does not tell the Job's completions.
  CHECK_THROWS_WITH(parse("auto", {{"JOB_COMPLETION_INDEX", "3"}}),
                    Catch::Contains("--shard auto/N"));
}

TEST_CASE("auto without an array task's variables is refused saying which it reads") {
  CHECK_THROWS_WITH(parse("auto"), Catch::Contains("SLURM_ARRAY_TASK_ID") &&
                                       Catch::Contains("JOB_COMPLETION_INDEX") &&
                                       Catch::Contains("neither is set") && Catch::Contains("K/N"));
  CHECK_THROWS_WITH(parse("auto/3"), Catch::Contains("1/3 to 3/3"));
}

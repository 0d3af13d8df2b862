// Scenario files loaded with overrides, and one point picked out of a sweep's results.
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "core/spec/scenario_spec.h"
#include "core/yaml/override.h"
#include "sim/predict/predict.h"
#include "support/paths.h"

namespace epochcast::test {

// A scenario of the source tree (`relative` to it) with `sets` ("key=value") applied.
inline ScenarioSpec load_with(const std::filesystem::path& relative,
                              const std::vector<std::string>& sets = {}) {
  std::vector<yaml::Override> overrides;
  for (const std::string& text : sets)
    overrides.push_back(yaml::parse_override(text));
  return load_scenario(source_dir() / relative, overrides);
}

// The result at `gpus` GPUs and global batch `batch`; the test fails if the sweep has none.
inline const sim::PointResult& point_at(const std::vector<sim::PointResult>& results, int gpus,
                                        std::int64_t batch) {
  auto found = std::find_if(results.begin(), results.end(), [&](const sim::PointResult& r) {
    return r.point.gpus == gpus && r.point.global_batch == batch;
  });
  REQUIRE(found != results.end());
  return *found;
}

}  // namespace epochcast::test

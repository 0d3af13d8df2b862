// Results that cross processes (MPI sweeps) come back exactly: the table, CSV, JSON and trace
// of decoded results equal the originals'.
#include <catch2/catch.hpp>

#include "core/spec/scenario_spec.h"
#include "sim/predict/point_codec.h"
#include "sim/predict/predict.h"
#include "sim/report/report.h"
#include "support/paths.h"

using namespace epochcast;
using namespace epochcast::sim;

TEST_CASE("a point's result survives encoding: table, CSV, JSON and trace are the originals'") {
  for (const char* file :
       {"scenarios/seed-001/linear.yaml", "scenarios/what-if/stragglers-and-faults-h100.yaml",
        "scenarios/seed-004/cats-dogs-memory.yaml"}) {
    INFO(file);
    const ScenarioSpec s = load_scenario(test::source_dir() / file);
    std::vector<PointResult> results;
    const std::vector<SweepPoint> points = expand_sweep(s);
    for (std::size_t i = 0; i < points.size(); ++i) {
      PredictOptions options;
      options.trace_iterations = i == 0 ? 1 : 0;  // the first point carries a trace
      results.push_back(predict_point(s, points[i], options));
    }
    compare_with_one_gpu(s, results);
    std::vector<PointResult> decoded;
    for (const PointResult& r : results)
      decoded.push_back(decode_point(encode_point(r)));
    CHECK(render_table(s, decoded) == render_table(s, results));
    CHECK(render_csv(s, decoded) == render_csv(s, results));
    CHECK(render_json(s, decoded) == render_json(s, results));
    if (results.front().simulated) {
      CHECK(render_chrome_trace(s, decoded.front()) == render_chrome_trace(s, results.front()));
    }
    CHECK(decoded.back().conditions == results.back().conditions);
    CHECK(decoded.back().stats.simulated_tasks == results.back().stats.simulated_tasks);
  }
}

TEST_CASE("damaged result bytes are refused, not misread") {
  const ScenarioSpec s = load_scenario(test::source_dir() / "scenarios/seed-001/linear.yaml");
  const std::string bytes = encode_point(predict_point(s, expand_sweep(s).front()));
  CHECK_THROWS_WITH(decode_point(bytes.substr(0, bytes.size() / 2)), Catch::Contains("damaged"));
  CHECK_THROWS_WITH(decode_point(bytes + "x"), Catch::Contains("left over"));
  std::string other = bytes;
  other[0] = 9;  // another layout's version
  CHECK_THROWS_WITH(decode_point(other), Catch::Contains("another layout"));
}

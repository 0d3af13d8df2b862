// Time to a target: the noise-scale model's steps, epochs and time per point, the scenario keys
// that state it (each figure with its source), the outputs that report it, and the fit and
// validation of its figures from time-to-target runs (synthetic truths recovered exactly).
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <variant>

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/measure/target_runs.h"
#include "sim/predict/time_to_target.h"
#include "sim/report/report.h"
#include "support/paths.h"
#include "support/sweep_points.h"
#include "validate/time_to_target.h"

using namespace epochcast;

namespace {

ScenarioSpec fashion(const std::vector<std::string>& sets = {}) {
  return test::load_with("scenarios/seed-003/fashion-mnist-cpu.yaml", sets);
}

// Runs whose median steps follow S_min (1 + B_noise / B) exactly, seeds spread around it.
TargetRunsFile synthetic_runs(double min_steps, double noise_scale,
                              const std::vector<std::int64_t>& batches) {
  TargetRunsFile f;
  f.scenario_name = "synthetic";
  f.model = "mnist-cnn";
  f.device_name = "cpu";
  f.torch_version = "1.13.0";
  f.metric = "validation_accuracy";
  f.value = 0.85;
  f.evaluate_every_samples = 1;
  f.max_epochs = 100;
  f.train_samples = 60000;
  for (std::int64_t b : batches) {
    TargetPoint p;
    p.global_batch = b;
    p.learning_rate = 1e-3;
    const double steps = min_steps * (1 + noise_scale / static_cast<double>(b));
    for (double spread : {0.9, 1.0, 1.1}) {
      TargetRun r;
      r.seed = p.runs.size() + 1;
      r.reached = true;
      r.steps = std::llround(steps * spread);
      r.epochs = static_cast<double>(r.steps) * static_cast<double>(b) / 60000.0;
      r.seconds = r.epochs * 20;
      p.runs.push_back(r);
    }
    f.points.push_back(p);
  }
  return f;
}

}  // namespace

TEST_CASE("steps to target follow S_min (1 + B_noise / B), epochs and time follow from them") {
  ScenarioSpec s = fashion();
  REQUIRE(s.target);
  REQUIRE(s.statistical_efficiency);
  const double min_steps = s.statistical_efficiency->min_steps.value;
  const double noise = s.statistical_efficiency->noise_scale.value;
  std::vector<sim::PointResult> results = sim::predict(s);
  for (const sim::PointResult& r : results) {
    INFO("batch " << r.point.global_batch);
    const auto t = sim::predict_to_target(s, r);
    REQUIRE(t);
    const auto batch = static_cast<double>(r.point.global_batch);
    CHECK(t->steps == Approx(min_steps * (1 + noise / batch)));
    CHECK(t->epochs == Approx(t->steps * batch / 60000.0));
    CHECK(t->seconds == Approx(t->epochs * r.epoch_seconds));
    // The figures carry a spread: the interval holds the value.
    REQUIRE(t->seconds_interval);
    CHECK(t->seconds_interval->first < t->seconds);
    CHECK(t->seconds_interval->second > t->seconds);
  }
  // Far below the noise scale a batch needs proportionally more steps; far above, hardly fewer:
  // the fastest to the target is not the fastest per epoch.
  const sim::PointResult* first = sim::fastest_to_target(s, results);
  REQUIRE(first);
  CHECK(first->point.global_batch != sim::fastest_point(results)->point.global_batch);
}

// The Fashion-MNIST scenario with its statistical_efficiency block replaced.
ScenarioSpec fashion_with(const std::string& block) {
  const std::filesystem::path file =
      epochcast::test::source_dir() / "scenarios/seed-003/fashion-mnist-cpu.yaml";
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  std::string yaml = text.str();
  const std::size_t from = yaml.find("statistical_efficiency:");
  const std::size_t to = yaml.find("sweep:", from);
  yaml.replace(from, to - from, block);
  return load_scenario_from_string(yaml, "fashion.yaml", file.parent_path());
}

TEST_CASE("min_epochs is E_min: S_min = min_epochs x samples / B_noise") {
  ScenarioSpec s = fashion_with(
      "statistical_efficiency:\n  noise_scale: {value: 400, source: measured}\n"
      "  min_epochs: {value: 2, source: assumed}\n");
  CHECK(s.statistical_efficiency->min_steps.value == Approx(2 * 60000 / 400.0));
  CHECK(s.statistical_efficiency->min_given_as_epochs);
  CHECK(s.statistical_efficiency->noise_scale.source == FigureSource::measured);
}

TEST_CASE("bad input: a target's figures, each with its source, one minimum, a validation set") {
  auto error_of = [](const std::string& block) -> std::string {
    try {
      fashion_with(block);
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  };
  CHECK_THAT(error_of("statistical_efficiency:\n  noise_scale: {value: 400}\n"
                      "  min_steps: {value: 20, source: assumed}\n"),
             Catch::Contains("statistical_efficiency.noise_scale.source: missing required key"));
  CHECK_THAT(error_of("statistical_efficiency:\n  noise_scale: {value: 400, source: measured}\n"
                      "  min_steps: {value: 20, source: assumed}\n"
                      "  min_epochs: {value: 2, source: assumed}\n"),
             Catch::Contains("one of them"));
  CHECK_THAT(error_of("statistical_efficiency:\n  noise_scale: {value: 400, source: mesured}\n"
                      "  min_steps: {value: 20, source: assumed}\n"),
             Catch::Contains("did you mean 'measured'?"));
  CHECK_THAT(error_of(""), Catch::Contains("statistical_efficiency: missing required key"));
}

TEST_CASE("a target's prediction is in the JSON with its figures' sources, the CSV and the table") {
  ScenarioSpec s = fashion();
  std::vector<sim::PointResult> results = sim::predict(s);
  nlohmann::json j = nlohmann::json::parse(sim::render_json(s, results));
  CHECK(j["target"]["metric"] == "validation_accuracy");
  CHECK(j["target"]["noise_scale"]["source"] == "measured");
  CHECK(j["target"]["min_steps"]["source"] == "calibrated");
  CHECK(j["target"]["learning_rate"]["scaling"] == "sqrt");
  for (const auto& p : j["points"]) {
    CHECK(p.contains("steps_to_target"));
    CHECK(p.contains("epochs_to_target"));
    CHECK(p.contains("time_to_target_s"));
    CHECK(p["time_to_target_interval_s"].size() == 2);
  }
  // The CSV's last columns carry the same figures, row by row.
  const std::string csv = sim::render_csv(s, results);
  const std::string header = csv.substr(0, csv.find('\n'));
  CHECK_THAT(header, Catch::EndsWith(",steps_to_target,epochs_to_target,time_to_target_s,"
                                     "epochs_to_target_low,epochs_to_target_high,"
                                     "time_to_target_low_s,time_to_target_high_s"));
  std::size_t line_start = csv.find('\n') + 1;
  for (const auto& p : j["points"]) {
    const std::size_t line_end = csv.find('\n', line_start);
    std::vector<std::string> cells;
    std::string cell;
    for (char c : csv.substr(line_start, line_end - line_start)) {
      if (c == ',') {
        cells.push_back(cell);
        cell.clear();
      } else {
        cell += c;
      }
    }
    cells.push_back(cell);
    REQUIRE(cells.size() >= 7);
    const std::size_t at = cells.size() - 7;
    CHECK(std::stod(cells[at]) == Approx(p["steps_to_target"].get<double>()).epsilon(1e-8));
    CHECK(std::stod(cells[at + 1]) == Approx(p["epochs_to_target"].get<double>()).epsilon(1e-8));
    CHECK(std::stod(cells[at + 2]) == Approx(p["time_to_target_s"].get<double>()).epsilon(1e-8));
    CHECK(std::stod(cells[at + 3]) ==
          Approx(p["epochs_to_target_interval"][0].get<double>()).epsilon(1e-8));
    CHECK(std::stod(cells[at + 4]) ==
          Approx(p["epochs_to_target_interval"][1].get<double>()).epsilon(1e-8));
    CHECK(std::stod(cells[at + 5]) ==
          Approx(p["time_to_target_interval_s"][0].get<double>()).epsilon(1e-8));
    CHECK(std::stod(cells[at + 6]) ==
          Approx(p["time_to_target_interval_s"][1].get<double>()).epsilon(1e-8));
    line_start = line_end + 1;
  }
  const std::string table = sim::render_table(s, results);
  CHECK_THAT(table, Catch::Contains("to target"));
  CHECK_THAT(table, Catch::Contains("Fastest to the target (validation_accuracy 0.85)"));
  CHECK_THAT(table, Catch::Contains("B_noise 521 samples (measured)"));
  // Without a target nothing of it appears.
  ScenarioSpec plain = test::load_with("scenarios/seed-001/conv1d.yaml");
  std::vector<sim::PointResult> plain_results = sim::predict(plain);
  CHECK(nlohmann::json::parse(sim::render_json(plain, plain_results))["target"].is_null());
  CHECK_THAT(sim::render_csv(plain, plain_results), !Catch::Contains("to_target"));
  CHECK_THAT(sim::render_table(plain, plain_results), !Catch::Contains("to target"));
}

TEST_CASE("the statistical figures are recovered from time-to-target runs") {
  const TargetRunsFile runs = synthetic_runs(80, 500, {16, 64, 256, 1024});
  SECTION("from the steps at several batches") {
    const auto fit = validate::fit_from_steps(runs, {16, 64, 256, 1024});
    REQUIRE(fit);
    CHECK(fit->min_steps == Approx(80).epsilon(0.01));
    CHECK(fit->noise_scale == Approx(500).epsilon(0.01));
  }
  SECTION("from a measured noise scale and one batch") {
    TargetRunsFile measured = runs;
    measured.noise_scale = NoiseScaleMeasurement{256, 4, 500, 400, 600, 10};
    const auto fit = validate::fit_from_noise_scale(measured, 64);
    REQUIRE(fit);
    CHECK(fit->noise_source == FigureSource::measured);
    CHECK(fit->min_steps == Approx(80).epsilon(0.01));
    ScenarioSpec s = fashion();
    const validate::TargetValidation v = validate::validate_to_target(s, measured, *fit);
    CHECK(v.epochs_mape_pct < 1.0);
    REQUIRE(v.rows.size() == 4);
    CHECK(v.rows[1].calibration);
    CHECK_FALSE(v.rows[0].calibration);
  }
  SECTION("too little to fit") {
    CHECK_FALSE(validate::fit_from_steps(runs, {64}));
    CHECK_FALSE(validate::fit_from_noise_scale(runs, 64));  // no noise scale measured
  }
}

namespace {

// A record of whole windows, each of its kWindow steps adding (trace, gradient_squared) / kWindow.
NoiseScaleRecord record_of(const std::vector<std::pair<double, double>>& windows) {
  NoiseScaleRecord record;
  for (const auto& [trace, gradient] : windows) {
    for (int step = 0; step < NoiseScaleRecord::kWindow; ++step)
      record.add(trace / NoiseScaleRecord::kWindow, gradient / NoiseScaleRecord::kWindow);
  }
  return record;
}

std::string reason_of(const NoiseScaleRecord& record) {
  auto measured = record.measurement(64, 4);
  const std::string* reason = std::get_if<std::string>(&measured);
  return reason != nullptr ? *reason : "measured";
}

}  // namespace

TEST_CASE("a noise scale's quartiles rank windows that resolved no gradient above every other") {
  // Each window's two estimates are unbiased, so either may come out at or below zero.
  CHECK(window_b_simple(600, 2) == 300);
  CHECK(std::isinf(window_b_simple(600, 0)));
  CHECK(std::isinf(window_b_simple(600, -1)));  // the noise hides the gradient: no bound
  CHECK(std::isinf(window_b_simple(-5, -1)));
  CHECK(window_b_simple(-5, 2) == 0);  // no noise resolved
  CHECK(std::isnan(window_b_simple(std::nan(""), 2)));
  // Windows of B_simple 300, unbounded, 100, 200, unbounded and 0 (a negative trace); dropping
  // the two unbounded ones would have made the quartiles 100 and 300.
  const NoiseScaleRecord record =
      record_of({{600, 2}, {600, -1}, {100, 1}, {400, 2}, {50, 0}, {-30, 3}});
  auto measured = record.measurement(64, 4);
  REQUIRE(std::holds_alternative<NoiseScaleMeasurement>(measured));
  const NoiseScaleMeasurement m = std::get<NoiseScaleMeasurement>(measured);
  CHECK(m.batch == 64);
  CHECK(m.micro_batches == 4);
  CHECK(m.b_simple == Approx((600 + 600 + 100 + 400 + 50 - 30) / (2.0 - 1 + 1 + 2 + 0 + 3)));
  CHECK(m.windows == 6);
  CHECK(m.low == Approx(100));
  CHECK(std::isinf(m.high));
  CHECK(quartile_text(m.high) == "unbounded");
  CHECK(quartile_text(m.low) == "100");
  // Three quarters unbounded: both quartiles are.
  auto mostly = record_of({{1, 0}, {1, 0}, {1, 0}, {400, 2}}).measurement(64, 4);
  REQUIRE(std::holds_alternative<NoiseScaleMeasurement>(mostly));
  CHECK(std::isinf(std::get<NoiseScaleMeasurement>(mostly).low));
  // No measurement, and why: a step short of a window, whole-run estimates at or below zero,
  // or not finite.
  NoiseScaleRecord short_of_a_window;
  for (int step = 0; step + 1 < NoiseScaleRecord::kWindow; ++step)
    short_of_a_window.add(10, 1);
  CHECK(reason_of(short_of_a_window) == "too few steps: 9, a window is 10");
  CHECK_THAT(reason_of(record_of({{600, 2}, {600, -3}})),
             Catch::Contains("|G|^2 estimate is -1: the noise hides the gradient"));
  CHECK_THAT(reason_of(record_of({{600, 2}, {-700, 2}})),
             Catch::Contains("tr(Sigma) estimate is -100: no gradient noise resolved"));
  CHECK_THAT(reason_of(record_of({{std::nan(""), 2}})), Catch::Contains("did training diverge"));
  CHECK_THAT(reason_of(record_of({{1e308, 2}, {1e308, 2}})),
             Catch::Contains("did training diverge"));
  CHECK_THAT(reason_of(record_of({{1e300, 1e-300}})), Catch::Contains("is not finite"));

  // An unbounded quartile is written as such and read back.
  TargetRunsFile runs = synthetic_runs(80, 500, {16, 64});
  runs.noise_scale = m;
  const std::string text = to_json(runs);
  CHECK_THAT(text, Catch::Contains("\"high\": \"unbounded\""));
  const TargetRunsFile back = load_target_runs_from_string(text, "runs.json");
  REQUIRE(back.noise_scale);
  CHECK(back.noise_scale->low == Approx(100));
  CHECK(std::isinf(back.noise_scale->high));
  CHECK(to_json(back) == text);
  // A quartile below zero, misspelt, or an upper one below the lower, is refused by name.
  auto problem_of = [&](const std::string& from, const std::string& to) {
    std::string broken = text;
    broken.replace(broken.find(from), from.size(), to);
    try {
      load_target_runs_from_string(broken, "runs.json");
    } catch (const InputError& e) {
      CHECK(e.mark().line > 0);
      return e.key() + ": " + e.problem();
    }
    return std::string("accepted");
  };
  const std::string low = fmt::format("\"low\": {}", nlohmann::json(m.low).dump());
  const std::string expected = "expected a number of samples, at least 0, or \"unbounded\", got ";
  CHECK_THAT(problem_of(low, "\"low\": -1"), Catch::Contains("noise_scale.low: " + expected));
  CHECK_THAT(problem_of(low, "\"low\": \"unbound\""),
             Catch::Contains("noise_scale.low: " + expected));
  CHECK_THAT(problem_of(low, "\"low\": [1]"), Catch::Contains("noise_scale.low: " + expected));
  CHECK_THAT(problem_of("\"high\": \"unbounded\"", "\"high\": 99.5"),
             Catch::Contains("noise_scale.high: expected the upper quartile, at least the lower "
                             "one (100), got 99.5"));
  CHECK(problem_of(low, "\"low\": \"unbounded\"") == "accepted");
}

TEST_CASE("time-to-target files round-trip, and bad ones name the key") {
  TargetRunsFile runs = synthetic_runs(80, 500, {16, 64});
  runs.noise_scale = NoiseScaleMeasurement{64, 4, 512.5, 400, 700, 12};
  const TargetRunsFile back = load_target_runs_from_string(to_json(runs), "runs.json");
  CHECK(to_json(back) == to_json(runs));
  const auto m = medians(back.points[0]);
  REQUIRE(m);
  CHECK(m->reached == 3);
  CHECK(m->epochs_low < m->epochs);
  std::string broken = to_json(runs);
  broken.replace(broken.find("\"reached\": true"), 15, "\"reached\": \"yes\"");
  try {
    load_target_runs_from_string(broken, "runs.json");
    FAIL("a string where a boolean belongs was accepted");
  } catch (const InputError& e) {
    CHECK_THAT(e.key(), Catch::Contains("reached"));
    CHECK(e.mark().line > 0);
  }
  // Another kind of file, or a version this epochcast does not read, is refused by name.
  auto problem_of = [](std::string text, const std::string& from, const std::string& to) {
    text.replace(text.find(from), from.size(), to);
    try {
      load_target_runs_from_string(text, "runs.json");
    } catch (const InputError& e) {
      return e.key() + ": " + e.problem();
    }
    return std::string("accepted");
  };
  const std::string good = to_json(runs);
  CHECK_THAT(problem_of(good, "\"epochcast-target-runs\"", "\"epochcast-measurements\""),
             Catch::Contains("this is not an epochcast time-to-target file"));
  CHECK_THAT(problem_of(good, "\"version\": 1", "\"version\": 2"),
             Catch::Contains("version: this epochcast reads time-to-target files of version 1, "
                             "not 2"));
}

TEST_CASE("with min_epochs the interval follows E_min's sensitivity, not S_min's") {
  // S = E_min / B_noise + E_min / B: far below the noise scale the noise scale hardly matters.
  ScenarioSpec s = fashion_with(
      "statistical_efficiency:\n  noise_scale: {value: 100000, source: assumed, relative_sd: 1}\n"
      "  min_epochs: {value: 2, source: assumed}\n");
  std::vector<sim::PointResult> results = sim::predict(s);
  const auto t = sim::predict_to_target(s, test::point_at(results, 1, 16));
  REQUIRE(t);
  REQUIRE(t->epochs_interval);
  CHECK(t->epochs_interval->second / t->epochs < 1.01);
}

TEST_CASE("a batch most of whose seeds missed the target has no median, one seed short does") {
  TargetPoint point;
  point.global_batch = 64;
  for (bool reached : {true, false, true}) {
    TargetRun r;
    r.seed = point.runs.size() + 1;
    r.reached = reached;
    r.steps = reached ? 100 * static_cast<std::int64_t>(r.seed) : 500;
    r.epochs = 0.1 * static_cast<double>(r.seed);
    r.seconds = 1;
    point.runs.push_back(r);
  }
  const auto m = medians(point);
  REQUIRE(m);
  CHECK(m->steps == 300);  // of 100, 300 and the unreached seed counted beyond both
  CHECK(m->reached == 2);
  point.runs[0].reached = false;
  CHECK_FALSE(medians(point));
}

TEST_CASE("validation refuses runs of another model, target or data set") {
  TargetRunsFile runs = synthetic_runs(80, 500, {16, 64});
  ScenarioSpec s = fashion();
  CHECK_NOTHROW(validate::check_runs_match(s, runs, "runs.json"));
  runs.value = 0.9;
  CHECK_THROWS_WITH(validate::check_runs_match(s, runs, "runs.json"),
                    Catch::Contains("the runs aimed at validation_accuracy 0.9"));
  runs.value = 0.85;
  runs.train_samples = 1000;
  CHECK_THROWS_WITH(validate::check_runs_match(s, runs, "runs.json"),
                    Catch::Contains("trained on 1000 samples"));
}

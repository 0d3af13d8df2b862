// Command-line overrides (`--set PATH=VALUE`): values replaced or created before the strict
// loaders read the document, and errors about them located at the override.
#include <functional>

#include <catch2/catch.hpp>

#include "core/yaml/strict_yaml.h"

using namespace epochcast;

namespace {

yaml::Document load(const std::string& text, const std::vector<std::string>& sets) {
  yaml::Document document = yaml::Document::load_string(text, "t.yaml");
  std::vector<yaml::Override> overrides;
  for (const std::string& set : sets)
    overrides.push_back(yaml::parse_override(set));
  document.apply_overrides(overrides);
  return document;
}

// Raises an InputError that reads "WHERE: error: KEY: ..." with `phrase` in its problem.
void expect_error(const std::function<void()>& action, const std::string& where,
                  const std::string& key, const std::string& phrase) {
  try {
    action();
  } catch (const InputError& error) {
    INFO(error.what());
    CHECK(error.mark().str() == where);
    CHECK(error.key() == key);
    CHECK_THAT(error.problem(), Catch::Contains(phrase));
    CHECK_THAT(std::string(error.what()),
               Catch::StartsWith(where + ": error: " + (key.empty() ? "" : key + ": ")));
    return;
  }
  FAIL("no InputError was raised");
}

const char* kTraining = "training:\n  precision: fp32\n  epochs: 3\n";

}  // namespace

TEST_CASE("an override replaces a scalar and is located at the override") {
  yaml::Document document = load(kTraining, {"training.precision=amp_bf16"});
  yaml::MapReader top(document.root(), {"training"});
  yaml::MapReader training(top.required("training"), {"precision", "epochs"});
  yaml::Node precision = training.required("precision");
  CHECK(precision.as_string() == "amp_bf16");
  CHECK(precision.path() == "training.precision");
  CHECK(precision.mark().str() == "--set training.precision=amp_bf16");
  // Values not overridden keep their file positions.
  CHECK(training.required("epochs").mark().str() == "t.yaml:3:11");
  CHECK(top.required("training").mark().str() == "t.yaml:2:3");
}

TEST_CASE("an override creates missing nested keys") {
  yaml::Document document = load(kTraining, {"loader.options.workers=4"});
  yaml::MapReader top(document.root(), {"training", "loader"});
  yaml::Node loader = top.required("loader");
  CHECK(loader.mark().str() == "--set loader.options.workers=4");
  yaml::MapReader options(yaml::MapReader(loader, {"options"}).required("options"), {"workers"});
  yaml::Node workers = options.required("workers");
  CHECK(workers.as_int() == 4);
  CHECK(workers.path() == "loader.options.workers");
  CHECK(workers.mark().str() == "--set loader.options.workers=4");
  CHECK(top.keys() == std::vector<std::string>{"training", "loader"});
}

TEST_CASE("an override's value is YAML: lists, maps, booleans, quoted strings") {
  yaml::Document document =
      load(kTraining, {"sweep.batch=[32,64]", "loader={workers: 4, pin: true}",
                       "training.name=\"7\"", "training.epochs=5", "training.epochs=6"});
  yaml::MapReader top(document.root(), {"training", "sweep", "loader"});
  yaml::MapReader sweep(top.required("sweep"), {"batch"});
  CHECK(sweep.required("batch").as_int_list(1) == std::vector<std::int64_t>{32, 64});
  std::vector<yaml::Node> items = sweep.required("batch").items();
  CHECK(items[1].path() == "sweep.batch[1]");
  CHECK(items[1].mark().str() == "--set sweep.batch=[32,64]");

  yaml::MapReader loader(top.required("loader"), {"workers", "pin"});
  CHECK(loader.required("workers").as_int() == 4);
  CHECK(loader.required("pin").as_bool());
  CHECK(loader.required("pin").mark().str() == "--set loader={workers: 4, pin: true}");

  yaml::MapReader training(top.required("training"), {"precision", "epochs", "name"});
  CHECK(training.required("name").as_string() == "7");
  expect_error([&] { training.required("name").as_int(); }, "--set training.name=\"7\"",
               "training.name", "remove the quotes");
  // The last override of a path wins, and is the one named.
  CHECK(training.required("epochs").as_int() == 6);
  CHECK(training.required("epochs").mark().str() == "--set training.epochs=6");
}

TEST_CASE("an override sets one list element") {
  yaml::Document document = load("sweep:\n  batch: [8, 16, 32]\n", {"sweep.batch[1]=64"});
  yaml::MapReader sweep(yaml::MapReader(document.root(), {"sweep"}).required("sweep"), {"batch"});
  CHECK(sweep.required("batch").as_int_list(1) == std::vector<std::int64_t>{8, 64, 32});
  std::vector<yaml::Node> items = sweep.required("batch").items();
  CHECK(items[0].mark().str() == "t.yaml:2:11");
  CHECK(items[1].mark().str() == "--set sweep.batch[1]=64");
  CHECK(items[2].mark().str() == "t.yaml:2:18");

  yaml::Document nested = load("grid: [[1, 2], [3, 4]]\n", {"grid[1][0]=9"});
  yaml::Node grid = yaml::MapReader(nested.root(), {"grid"}).required("grid");
  CHECK(grid.items()[1].as_int_list(0) == std::vector<std::int64_t>{9, 4});
  CHECK(grid.items()[1].items()[0].mark().str() == "--set grid[1][0]=9");
}

TEST_CASE("a value of the wrong type is reported at the override") {
  yaml::Document document = load("a:\n  n: 3\n", {"a.n=ten"});
  yaml::MapReader a(yaml::MapReader(document.root(), {"a"}).required("a"), {"n"});
  expect_error([&] { a.required("n").as_int(); }, "--set a.n=ten", "a.n",
               "expected an integer, got 'ten'");
  try {
    a.required("n").as_int();
  } catch (const InputError& error) {
    CHECK(std::string(error.what()) == "--set a.n=ten: error: a.n: expected an integer, got 'ten'");
  }
}

TEST_CASE("an empty override value is reported as a key with no value, at the override") {
  yaml::Document document = load("a:\n  n: 3\n", {"a.n="});
  yaml::MapReader a(yaml::MapReader(document.root(), {"a"}).required("a"), {"n"});
  expect_error([&] { a.required("n"); }, "--set a.n=", "a.n", "has no value");
}

TEST_CASE("an unknown key created by an override is reported at the override") {
  yaml::Document document = load(kTraining, {"training.precison=amp_bf16"});
  yaml::MapReader top(document.root(), {"training"});
  try {
    yaml::MapReader training(top.required("training"), {"precision", "epochs"});
    FAIL("accepted an unknown key");
  } catch (const InputError& error) {
    CHECK(error.mark().str() == "--set training.precison=amp_bf16");
    CHECK(error.key() == "training.precison");
    CHECK_THAT(std::string(error.what()),
               Catch::StartsWith("--set training.precison=amp_bf16: error: training.precison: "
                                 "unknown key (did you mean 'precision'?); "));
  }

  // A misspelt top-level key: the map the override created is named, at the override.
  yaml::Document created = load(kTraining, {"trainig.precision=fp32"});
  expect_error(
      [&] {
        yaml::MapReader(created.root(), {"training", "sweep"});
      },
      "--set trainig.precision=fp32", "trainig", "did you mean 'training'?");
}

TEST_CASE("malformed overrides are rejected, naming the override") {
  expect_error([] { yaml::parse_override("training.precision"); }, "--set training.precision", "",
               "no '='");
  expect_error([] { yaml::parse_override("=fp32"); }, "--set =fp32", "", "empty path");
  expect_error([] { yaml::parse_override("a..b=1"); }, "--set a..b=1", "", "empty segment");
  expect_error([] { yaml::parse_override("a.=1"); }, "--set a.=1", "", "empty segment");
  expect_error([] { yaml::parse_override("a.[0]=1"); }, "--set a.[0]=1", "", "malformed");
  expect_error([] { yaml::parse_override("a[x]=1"); }, "--set a[x]=1", "", "malformed list index");
  expect_error([] { yaml::parse_override("a[1=1"); }, "--set a[1=1", "", "malformed list index");
  expect_error([] { yaml::parse_override("a[-1]=1"); }, "--set a[-1]=1", "",
               "malformed list index");
  // The value may hold '=': only the first one splits.
  CHECK(yaml::parse_override("a.b=x=y").value == "x=y");
}

TEST_CASE("overrides that cannot be applied are rejected, naming the override") {
  const char* text = "a:\n  n: 3\n  list: [1, 2, 3]\n";
  expect_error([&] { load(text, {"a.list[3]=1"}); }, "--set a.list[3]=1", "",
               "index 3 is out of range (a.list has 3 items)");
  expect_error([&] { load(text, {"a.n.x=1"}); }, "--set a.n.x=1", "",
               "cannot set a.n.x: a.n is not a mapping");
  expect_error([&] { load(text, {"a.n[0]=1"}); }, "--set a.n[0]=1", "",
               "cannot set a.n[0]: a.n is not a list");
  expect_error([&] { load(text, {"a.missing[0]=1"}); }, "--set a.missing[0]=1", "",
               "a.missing is not a list");
  expect_error([&] { load(text, {"a.list.x=1"}); }, "--set a.list.x=1", "",
               "a.list is not a mapping");
  expect_error([&] { load(text, {"a.n=[1, 2"}); }, "--set a.n=[1, 2", "a.n", "not valid YAML");
  expect_error([&] { load(text, {"a.n=&x [*x]"}); }, "--set a.n=&x [*x]", "", "nested too deeply");
}

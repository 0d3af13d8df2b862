// YAML as JSON (support/yaml_json.h): scalars typed as the strict reader types them.
#include <catch2/catch.hpp>

#include "support/yaml_json.h"

using epochcast::test::yaml_to_json;
using nlohmann::json;

TEST_CASE("plain scalars become integers or numbers or booleans or null as the loaders read them") {
  const json j = yaml_to_json(YAML::Load(
      "count: 10\nnegative: -3\nfraction: 0.25\nexponent: 1.0e-5\nflag: true\noff: false\n"
      "nothing: ~\nempty:\nword: pascal\nhuge: 99999999999999999999\n"));
  CHECK(j["count"] == json(10));
  CHECK(j["count"].is_number_integer());
  CHECK(j["negative"] == json(-3));
  CHECK(j["fraction"] == json(0.25));
  CHECK(j["exponent"].get<double>() == Approx(1e-5));
  CHECK(j["flag"] == json(true));
  CHECK(j["off"] == json(false));
  CHECK(j["nothing"].is_null());
  CHECK(j["empty"].is_null());
  CHECK(j["word"] == json("pascal"));
  CHECK(j["huge"].is_number_float());  // beyond 64 bits: a number, as the loader's as_number
}

TEST_CASE("quoted scalars and words the loaders do not take as booleans stay strings") {
  const json j = yaml_to_json(YAML::Load(
      "quoted: \"10\"\nsingle: 'true'\nyes_word: yes\ncapital: True\nplus: +5\ninf: .inf\n"
      "date: 2026-11-22T09:00:00Z\n"));
  CHECK(j["quoted"] == json("10"));
  CHECK(j["single"] == json("true"));
  CHECK(j["yes_word"] == json("yes"));
  CHECK(j["capital"] == json("True"));
  CHECK(j["plus"] == json("+5"));
  CHECK(j["inf"] == json(".inf"));
  CHECK(j["date"] == json("2026-11-22T09:00:00Z"));
}

TEST_CASE("mappings and lists keep their structure and order of items") {
  const json j =
      yaml_to_json(YAML::Load("layers:\n  - relu\n  - {type: linear, out_features: 4}\n"
                              "shape: [1, 28, 28]\n"));
  CHECK(j["layers"][0] == json("relu"));
  CHECK(j["layers"][1]["out_features"] == json(4));
  CHECK(j["shape"] == json::array({1, 28, 28}));
}

// The strict reader: typed scalars, exact key sets and misspelling suggestions.
#include <catch2/catch.hpp>

#include "core/yaml/strict_yaml.h"

using namespace epochcast;

namespace {

yaml::Node parse(const std::string& text) {
  static std::vector<yaml::Document> keep;  // nodes share their document's lifetime
  keep.push_back(yaml::Document::load_string(text, "t.yaml"));
  return keep.back().root();
}

}  // namespace

TEST_CASE("integers are read exactly and rejected when they are not integers") {
  CHECK(parse("12000").as_int() == 12000);
  CHECK(parse("-4").as_int() == -4);
  CHECK_THROWS_AS(parse("1.5").as_int(), InputError);
  CHECK_THROWS_AS(parse("1e3").as_int(), InputError);
  CHECK_THROWS_AS(parse("\"7\"").as_int(), InputError);
  CHECK_THROWS_AS(parse("[1]").as_int(), InputError);
}

TEST_CASE("numbers must be finite") {
  CHECK(parse("2.5e-3").as_number() == 2.5e-3);
  CHECK_THROWS_AS(parse(".inf").as_number(), InputError);
  CHECK_THROWS_AS(parse(".nan").as_number(), InputError);
  CHECK_THROWS_AS(parse("0").as_positive_number(), InputError);
}

TEST_CASE("booleans are exactly true or false") {
  CHECK(parse("true").as_bool());
  CHECK_FALSE(parse("false").as_bool());
  CHECK_THROWS_AS(parse("yes").as_bool(), InputError);
  CHECK_THROWS_AS(parse("True").as_bool(), InputError);
}

TEST_CASE("a map reader lists the allowed keys and suggests the closest") {
  try {
    yaml::MapReader map(parse("epocs: 3"), {"epochs", "optimizer"});
    FAIL("accepted an unknown key");
  } catch (const InputError& error) {
    CHECK(error.key() == "epocs");
    CHECK(error.problem() ==
          "unknown key (did you mean 'epochs'?); expected one of epochs or "
          "optimizer");
    CHECK(error.mark().str() == "t.yaml:1:1");
  }
}

TEST_CASE("choices suggest the closest spelling only when it is plausibly a typo") {
  std::vector<std::string_view> names = {"sgd", "momentum", "adam", "adamw"};
  CHECK(closest_match("adamm", names) == "adam");
  CHECK(closest_match("momentun", names) == "momentum");
  CHECK(closest_match("lbfgs", names).empty());
}

TEST_CASE("keys nest into dotted paths and list items into indices") {
  yaml::Node root = parse("a:\n  b: [1, 2, x]\n");
  yaml::MapReader top(root, {"a"});
  yaml::MapReader inner(top.required("a"), {"b"});
  std::vector<yaml::Node> items = inner.required("b").items();
  CHECK(items[2].path() == "a.b[2]");
  CHECK(items[2].mark().str() == "t.yaml:2:13");
}

TEST_CASE("documents over the size limit are refused before parsing") {
  std::string huge(yaml::kMaxDocumentBytes + 1, '#');
  CHECK_THROWS_AS(yaml::Document::load_string(huge, "big.yaml"), InputError);
}

TEST_CASE("assigning a node rebinds it and leaves the document as it was") {
  yaml::Node root = parse("{base: dgx-h100-cluster, nodes: 4}");
  yaml::Node held = root;
  held = yaml::MapReader(root, {"base", "nodes"}).required("base");  // yaml-cpp would write through
  CHECK(held.as_string() == "dgx-h100-cluster");
  CHECK(root.is_map());
  CHECK(yaml::MapReader(root, {"base", "nodes"}).required("nodes").as_int() == 4);
}

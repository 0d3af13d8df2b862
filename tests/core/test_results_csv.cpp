// Results tables: the CSV route for end-to-end figures a user timed or copied from a paper.
#include <catch2/catch.hpp>

#include "core/measure/results_csv.h"

using namespace epochcast;

namespace {

// The message of the InputError `text` raises, or "" when it reads.
std::string error_of(const std::string& text) {
  try {
    parse_results_csv(text, "results.csv");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("a results table reads figures, overrides and unknown cells as written") {
  ResultsTable t = parse_results_csv(
      "# Table 3 of the study\n"
      "scenario, gpus, global_batch, epoch_s, samples_per_s, set, note\n"
      "\n"
      "linear.yaml,1,64,812.5,,,\"measured, twice\"\r\n"
      "linear.yaml,4,256,,1024,\"training.precision=amp_fp16;loader.workers=8\",\n",
      "results.csv");
  REQUIRE(t.rows.size() == 2);
  CHECK(t.has_scenario_column);
  const ResultRow& a = t.rows[0];
  CHECK(a.mark.line == 4);
  CHECK(a.gpus == 1);
  CHECK(a.global_batch == 64);
  CHECK_FALSE(a.per_gpu_batch);
  CHECK(a.epoch_s == 812.5);
  CHECK_FALSE(a.samples_per_s);  // empty: unknown, not zero
  CHECK_FALSE(a.set);
  REQUIRE(a.scenario);
  CHECK(a.scenario->text == "linear.yaml");
  const ResultRow& b = t.rows[1];
  CHECK_FALSE(b.epoch_s);
  CHECK(b.samples_per_s == 1024);
  REQUIRE(b.set);
  CHECK(b.set->text == "training.precision=amp_fp16;loader.workers=8");
  CHECK(b.set->mark.line == 5);
  CHECK(b.set->mark.column == 25);
}

TEST_CASE("a results table without the columns it needs is refused at its header") {
  CHECK(error_of("gpus,batch,epoch_s\n1,2,3\n") ==
        "results.csv:1:6: error: batch: unknown column 'batch'; the columns are scenario, gpus, "
        "global_batch, per_gpu_batch, epoch_s, iteration_s, samples_per_s, precision, strategy, "
        "set or note");
  CHECK_THAT(error_of("gpus,global_batch,epoch_sec\n1,2,3\n"),
             Catch::Contains("unknown column 'epoch_sec' (did you mean 'epoch_s'?)"));
  CHECK_THAT(error_of("global_batch,epoch_s\n2,3\n"),
             Catch::Contains("results.csv:1:1: error: gpus: the header has no column 'gpus'"));
  CHECK_THAT(error_of("gpus,epoch_s\n1,3\n"), Catch::Contains("'global_batch' or 'per_gpu_batch'"));
  CHECK_THAT(error_of("gpus,global_batch\n1,2\n"), Catch::Contains("needs a measured figure"));
  CHECK_THAT(error_of("gpus,gpus,global_batch,epoch_s\n"), Catch::Contains("named twice"));
  CHECK_THAT(error_of("# nothing\n"), Catch::Contains("no header line and no rows"));
  CHECK_THAT(error_of("gpus,global_batch,epoch_s\n"), Catch::Contains("a header but no rows"));
}

TEST_CASE("a results table saved by a spreadsheet reads or says why not") {
  // A UTF-8 byte-order mark before the header.
  ResultsTable t = parse_results_csv("\xEF\xBB\xBFgpus,global_batch,epoch_s\n1,2,3\n", "x.csv");
  CHECK(t.rows.size() == 1);
  CHECK_THAT(error_of("gpus;global_batch;epoch_s\n1;2;3\n"),
             Catch::Contains("(cells are separated by commas)"));
}

TEST_CASE("a bad cell is refused with its row, column and range") {
  const std::string header = "gpus,global_batch,per_gpu_batch,epoch_s,iteration_s\n";
  CHECK(error_of(header + "0,2,,3,\n") ==
        "results.csv:2:1: error: gpus: expected an integer from 1 to 1,000,000, got 0");
  CHECK(error_of(header + "1,x,,3,\n") ==
        "results.csv:2:3: error: global_batch: expected an integer from 1 to "
        "1,000,000,000,000, got 'x'");
  CHECK_THAT(error_of(header + "1,99999999999999999999,,3,\n"),
             Catch::Contains("got 99999999999999999999"));
  CHECK(error_of(header + "1,2,,0,\n") ==
        "results.csv:2:6: error: epoch_s: expected an epoch time in seconds above 0 and at most "
        "1e+09, got '0'");
  CHECK_THAT(error_of(header + "1,2,,1e308,\n"), Catch::Contains("got '1e308'"));
  CHECK_THAT(error_of(header + "1,2,,nan,\n"), Catch::Contains("got 'nan'"));
  CHECK_THAT(error_of(header + "1,2,,,-1\n"), Catch::Contains("iteration_s: expected"));
  CHECK_THAT(error_of(header + "2,8,3,1,\n"),
             Catch::Contains("results.csv:2:1: error: per_gpu_batch: global_batch 8 is not "
                             "per_gpu_batch 3 x gpus 2"));
  CHECK_THAT(error_of(header + "1,2,,,\n"), Catch::Contains("gives no measured figure"));
  CHECK_THAT(error_of(header + "1,,,3,\n"), Catch::Contains("gives no batch size"));
  CHECK_THAT(error_of(header + ",2,,3,\n"), Catch::Contains("gives no GPU count"));
  CHECK(error_of(header + "1,2,3\n") ==
        "results.csv:2:1: error: expected 5 cells as in the header (line 1), got 3");
  CHECK_THAT(error_of("gpus,global_batch,epoch_s,note\n1,2,3,\"open\n"),
             Catch::Contains("results.csv:2:7: error: a quoted field does not end on its line"));
  CHECK_THAT(error_of("gpus,global_batch,epoch_s,note\n1,2,3,\"a\"b\n"),
             Catch::Contains("results.csv:2:10: error: expected ',' after a quoted field"));
}

TEST_CASE("results tables are told from measurement files by their extension") {
  CHECK(is_results_table("paper/table3.csv"));
  CHECK(is_results_table("RESULTS.CSV"));
  CHECK_FALSE(is_results_table("measured.json"));
  CHECK_FALSE(is_results_table("csv"));
}

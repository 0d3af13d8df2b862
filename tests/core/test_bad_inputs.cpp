// Bad input is rejected while loading with file:line:col, the key, and what was expected —
// never a crash, never a silently wrong spec. One test per distinct mistake.
#include <filesystem>
#include <fstream>
#include <functional>

#include <catch2/catch.hpp>

#include "core/model/analysis.h"
#include "core/spec/hardware_spec.h"
#include "core/spec/scenario_spec.h"
#include "core/yaml/strict_yaml.h"
#include "support/paths.h"

using namespace epochcast;

namespace {

struct Expected {
  std::string where;   // "bad.yaml:3:5"
  std::string key;     // "layers[0].kernel"
  std::string phrase;  // part of the problem text
};

void expect_error(const std::function<void()>& load, const Expected& expected) {
  try {
    load();
  } catch (const InputError& error) {
    INFO(error.what());
    CHECK(error.mark().str() == expected.where);
    CHECK(error.key() == expected.key);
    CHECK_THAT(error.problem(), Catch::Contains(expected.phrase));
    CHECK_THAT(std::string(error.what()),
               Catch::StartsWith(expected.where +
                                 ": error: " + (expected.key.empty() ? "" : expected.key + ": ")));
    return;
  }
  FAIL("no InputError was raised");
}

void model_error(const std::string& text, const Expected& expected) {
  expect_error([&] { analyze_model(load_model_from_string(text, "bad.yaml")); }, expected);
}

const char* kModelHead = "kind: model\nname: m\ninput: {shape: [1, 100]}\nlayers:\n";

using Catch::Contains;

const char* kCatalogue = R"(kind: gpu-catalogue
gpus:
  test-gpu:
    name: Test GPU
    architecture: ampere
    sm_count: 10
    memory_gib: 8
    memory_bandwidth_gb_per_s: 500
    peak_tflops: {fp32: 10}
    pcie: {generation: 4, lanes: 16}
    sources: {sm_count: a, memory_gib: b, memory_bandwidth_gb_per_s: c, peak_tflops: d, pcie: e}
  nvlink-gpu:
    name: NVLink GPU
    architecture: ampere
    sm_count: 10
    memory_gib: 8
    memory_bandwidth_gb_per_s: 500
    peak_tflops: {fp32: 10}
    pcie: {generation: 4, lanes: 16}
    nvlink: {generation: 3, links: 12, per_link_gb_per_s_per_direction: 25}
    sources: {sm_count: a, memory_gib: b, memory_bandwidth_gb_per_s: c, peak_tflops: d, pcie: e,
              nvlink: f}
)";

// A valid scenario; each scenario test breaks one line of it.
std::string scenario(const std::string& replace_from = "", const std::string& replace_to = "") {
  std::string text = R"(kind: scenario
name: s
model: spoken-digits-linear
hardware: seed001-box
dataset: {name: fsdd, train_samples: 2000, classes: 10}
training: {strategy: dp, optimizer: adam, precision: fp32, epochs: 20}
sweep:
  gpus: [1, 2, 4]
  batch: [10, 600]
  batch_is: global
)";
  if (!replace_from.empty()) {
    std::size_t at = text.find(replace_from);
    REQUIRE(at != std::string::npos);
    text.replace(at, replace_from.size(), replace_to);
  }
  return text;
}

void scenario_error(const std::string& text, const Expected& expected) {
  expect_error([&] { load_scenario_from_string(text, "bad.yaml", test::source_dir()); }, expected);
}

}  // namespace

TEST_CASE("the valid scenario used by these tests loads") {
  ScenarioSpec s = load_scenario_from_string(scenario(), "good.yaml", test::source_dir());
  CHECK(expand_sweep(s).size() == 6);
}

TEST_CASE("bad input: an unknown key gets a did-you-mean suggestion") {
  model_error("kind: model\nname: m\ninput: {shape: [4]}\nlayer:\n  - relu\n",
              {"bad.yaml:4:1", "layer", "did you mean 'layers'?"});
}

TEST_CASE("bad input: a duplicate key names the first occurrence") {
  model_error("kind: model\nname: m\nname: n\ninput: {shape: [4]}\nlayers: [relu]\n",
              {"bad.yaml:3:1", "name", "duplicate key (first given on line 2)"});
}

TEST_CASE("bad input: a missing required key points at its mapping") {
  model_error("kind: model\nname: m\ninput: {shape: [4]}\n",
              {"bad.yaml:1:1", "layers", "missing required key"});
}

TEST_CASE("bad input: a word where an integer is expected") {
  model_error(std::string(kModelHead) + "  - {type: linear, out_features: ten}\n",
              {"bad.yaml:5:34", "layers[0].out_features", "expected an integer, got 'ten'"});
}

TEST_CASE("bad input: a quoted number is a string, and the message says so") {
  model_error(std::string(kModelHead) + "  - {type: linear, out_features: \"10\"}\n",
              {"bad.yaml:5:34", "layers[0].out_features", "(remove the quotes)"});
}

TEST_CASE("bad input: a negative size") {
  model_error(std::string(kModelHead) + "  - {type: linear, out_features: -3}\n",
              {"bad.yaml:5:34", "layers[0].out_features", "expected a positive integer, got -3"});
}

TEST_CASE("bad input: a zero kernel") {
  model_error(std::string(kModelHead) + "  - {type: conv1d, out_channels: 4, kernel: 0}\n",
              {"bad.yaml:5:45", "layers[0].kernel", "expected a positive integer, got 0"});
}

TEST_CASE("bad input: a kernel larger than its padded input names the layer") {
  model_error(
      std::string(kModelHead) + "  - {type: conv1d, out_channels: 4, kernel: 200, padding: 20}\n",
      {"bad.yaml:5:5", "layer 1 '0' (conv1d)",
       "the kernel (200) is larger than its padded input (100 + 2x20 = 140)"});
}

TEST_CASE("bad input: a misspelt layer type gets a suggestion") {
  model_error(std::string(kModelHead) + "  - {type: lienar, out_features: 4}\n",
              {"bad.yaml:5:12", "layers[0].type", "did you mean 'linear'?"});
}

TEST_CASE("bad input: a bare type name for a layer that needs parameters") {
  model_error(std::string(kModelHead) + "  - linear\n",
              {"bad.yaml:5:5", "layers[0].out_features", "missing required key"});
}

TEST_CASE("bad input: a misspelt layer key lists that layer's keys") {
  model_error(std::string(kModelHead) + "  - {type: conv1d, out_channels: 4, kernal: 3}\n",
              {"bad.yaml:5:37", "layers[0].kernal", "did you mean 'kernel'?"});
}

TEST_CASE("bad input: channels that do not divide into groups") {
  model_error(
      "kind: model\nname: m\ninput: {shape: [6, 10]}\nlayers:\n"
      "  - {type: conv1d, out_channels: 8, kernel: 3, groups: 4}\n",
      {"bad.yaml:5:5", "layer 1 '0' (conv1d)",
       "input channels (6) are not divisible by groups (4)"});
}

TEST_CASE("bad input: residual branches that disagree") {
  model_error(
      "kind: model\nname: m\ninput: {shape: [16]}\nlayers:\n"
      "  - type: residual\n    body: [{type: linear, out_features: 8}]\n",
      {"bad.yaml:5:5", "layer 2 '0.add' (add)",
       "the body gives [-1, 8] but the shortcut gives [-1, 16]"});
}

TEST_CASE("bad input: a dropout probability of 1 or more") {
  model_error(std::string(kModelHead) + "  - {type: dropout, p: 1.5}\n",
              {"bad.yaml:5:24", "layers[0].p", "expected a fraction between 0 and 1, got 1.5"});
}

TEST_CASE("bad input: an unknown input dtype") {
  model_error("kind: model\nname: m\ninput: {shape: [4], dtype: float33}\nlayers: [relu]\n",
              {"bad.yaml:3:28", "input.dtype", "did you mean 'float32'?"});
}

TEST_CASE("bad input: float data fed to an embedding") {
  model_error(
      "kind: model\nname: m\ninput: {shape: [8]}\nlayers:\n"
      "  - {type: embedding, num_embeddings: 10, embedding_dim: 4}\n",
      {"bad.yaml:5:5", "layer 1 '0' (embedding)", "expects integer token ids"});
}

TEST_CASE("bad input: a convolution on a tensor of the wrong rank") {
  model_error(
      "kind: model\nname: m\ninput: {shape: [12000]}\nlayers:\n"
      "  - {type: conv1d, out_channels: 4, kernel: 3}\n",
      {"bad.yaml:5:5", "layer 1 '0' (conv1d)",
       "expects [channels, length] per sample, got [-1, 12000]"});
}

TEST_CASE("bad input: a weight tied to a layer that does not exist") {
  model_error(std::string(kModelHead) + "  - {type: linear, out_features: 4, tied_to: wte}\n",
              {"bad.yaml:5:5", "layer 1 '0' (linear)", "tied_to 'wte' names no earlier layer"});
}

TEST_CASE("bad input: a reshape that does not fit the elements") {
  model_error(std::string(kModelHead) + "  - {type: reshape, shape: [3, -1]}\n",
              {"bad.yaml:5:5", "layer 1 '0' (reshape)", "cannot reshape [-1, 1, 100]"});
}

TEST_CASE("bad input: repeat zero times") {
  model_error(std::string(kModelHead) + "  - {type: relu, repeat: 0}\n",
              {"bad.yaml:5:26", "layers[0].repeat", "expected a positive integer, got 0"});
}

TEST_CASE("bad input: a YAML syntax error reports where the parser stopped") {
  model_error("kind: model\nname: m\ninput: {shape: [4]\nlayers: [relu]\n",
              {"bad.yaml:4:1", "", "not valid YAML: end of map flow not found"});
}

TEST_CASE("bad input: an empty file") {
  model_error("# nothing but a comment\n", {"bad.yaml", "", "holds no YAML content"});
}

TEST_CASE("bad input: several YAML documents in one file") {
  model_error("kind: model\n---\nkind: model\n", {"bad.yaml", "", "more than one YAML document"});
}

TEST_CASE("bad input: a stray top-level line that yaml-cpp reads as endless documents") {
  // Found by the fuzzer: YAML::LoadAll never returns on this input.
  model_error(",02 01#0-sample\n", {"bad.yaml", "", "more than one YAML document"});
}

TEST_CASE("bad input: a list where a spec file's mapping belongs") {
  model_error("- relu\n- tanh\n", {"bad.yaml:1:1", "", "expected a model file"});
}

TEST_CASE("bad input: a model file passed where a scenario is expected") {
  expect_error([] { load_scenario(test::zoo_model("resnet-50")); },
               {test::zoo_model("resnet-50").string() + ":3:7", "kind",
                "this is a model file, but a scenario file is expected here"});
}

TEST_CASE("bad input: a file without its kind") {
  model_error("name: m\nlayers: [relu]\n",
              {"bad.yaml:1:1", "kind", "a model file starts with 'kind: model'"});
}

TEST_CASE("bad input: a key given without a value") {
  model_error("kind: model\nname:\ninput: {shape: [4]}\nlayers: [relu]\n",
              {"bad.yaml:2:1", "name", "has no value"});
}

TEST_CASE("bad input: an integer too large to represent") {
  model_error(std::string(kModelHead) + "  - {type: linear, out_features: 99999999999999999999}\n",
              {"bad.yaml:5:34", "layers[0].out_features", "is out of range"});
}

TEST_CASE("bad input: a GPU that is not in the catalogue") {
  GpuCatalogue catalogue = load_gpu_catalogue_from_string(kCatalogue, "gpus.yaml");
  expect_error(
      [&] {
        load_machine_from_string(
            "kind: machine\nname: x\ngpu: test-gpo\ngpus_per_node: 2\nhost: {cpu: c, cores: 4}\n",
            "bad.yaml", catalogue);
      },
      {"bad.yaml:3:6", "gpu",
       "'test-gpo' is not in the GPU catalogue (gpus.yaml) (did you "
       "mean 'test-gpu'?)"});
}

TEST_CASE("bad input: an architecture the models do not know is refused, never defaulted") {
  // A new generation would otherwise get some other generation's tiles and protocols silently.
  std::string text = kCatalogue;
  text.replace(text.find("architecture: ampere"), 20, "architecture: rubin");
  expect_error([&] { load_gpu_catalogue_from_string(text, "gpus.yaml"); },
               {"gpus.yaml:5:19", "gpus.test-gpu.architecture",
                "expected one of maxwell, pascal, volta, turing, ampere, ada, hopper, blackwell, "
                "x86-64 or aarch64, got 'rubin'"});
  text = kCatalogue;
  text.replace(text.find("architecture: ampere"), 20, "architecture: hoper");
  expect_error([&] { load_gpu_catalogue_from_string(text, "gpus.yaml"); },
               {"gpus.yaml:5:19", "gpus.test-gpu.architecture", "(did you mean 'hopper'?)"});
}

TEST_CASE("bad input: a power reference is a board of the catalogue with the rule's figures") {
  // Both boards with clocks and board power: test-gpu 100 W and nvlink-gpu 40 W for 10 TFLOP/s.
  auto with = [](const std::string& references) {
    std::string text = kCatalogue;
    const std::string peak = "    peak_tflops: {fp32: 10}\n";
    std::size_t at = 0;
    for (const char* watts : {"100", "40"}) {  // test-gpu's entry, then nvlink-gpu's
      at = text.find(peak, at);
      const std::string figures =
          std::string("    clocks_mhz: {boost: 1500}\n    board_power_w: ") + watts + "\n";
      text.insert(at, figures);
      at += figures.size() + peak.size();
    }
    for (std::size_t source = text.find("pcie: e"); source != std::string::npos;
         source = text.find("pcie: e", source + 1)) {
      text.replace(source, 7, "pcie: e, clocks_mhz: g, board_power_w: h");
    }
    return text + "power_references:\n" + references;
  };
  const GpuCatalogue good = load_gpu_catalogue_from_string(
      with("  ampere: {board: test-gpu, source: holds boost}\n"), "gpus.yaml");
  // 4 W per TFLOP/s against the reference's 10: 0.4 of 1500 MHz; the reference keeps boost.
  const GpuSpec& held = *good.find("nvlink-gpu");
  REQUIRE(held.clocks->sustained_mhz.has_value());
  CHECK(*held.clocks->sustained_mhz == Approx(600));
  CHECK(held.clocks->sustained_from_power_rule);
  CHECK_FALSE(good.find("test-gpu")->clocks->sustained_mhz.has_value());

  auto error_of = [&](const std::string& references) {
    try {
      load_gpu_catalogue_from_string(with(references), "gpus.yaml");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(error_of("  ampere: {board: no-such-gpu, source: s}\n"),
             Contains("power_references.ampere.board") &&
                 Contains("no GPU 'no-such-gpu' in this catalogue"));
  CHECK_THAT(error_of("  ampre: {board: test-gpu, source: s}\n"),
             Contains("power_references") && Contains("did you mean 'ampere'?"));
  CHECK_THAT(error_of("  ampere: {board: test-gpu, source: \"\"}\n"),
             Contains("power_references.ampere.source") && Contains("non-empty"));
  CHECK_THAT(error_of("  ampere: {board: test-gpu}\n"),
             Contains("power_references.ampere") && Contains("source"));
  // The rule takes the reference at its boost clock: one with a sustained clock is refused.
  std::string held_reference = with("  ampere: {board: test-gpu, source: s}\n");
  held_reference.replace(held_reference.find("{boost: 1500}"), 13, "{boost: 1500, sustained: 900}");
  CHECK_THROWS_WITH(load_gpu_catalogue_from_string(held_reference, "gpus.yaml"),
                    Contains("gives a sustained clock below boost"));
  // A reference without board power cannot set the rule.
  std::string no_power = kCatalogue;
  no_power += "power_references:\n  ampere: {board: test-gpu, source: s}\n";
  CHECK_THROWS_WITH(load_gpu_catalogue_from_string(no_power, "gpus.yaml"),
                    Contains("needs board_power_w, clocks_mhz and peak_tflops.fp32"));
}

TEST_CASE("bad input: clocks, memory type and L2 of a catalogue entry are checked and sourced") {
  auto with = [](const std::string& keys, const std::string& sources) {
    std::string text = kCatalogue;
    text.replace(text.find("    peak_tflops: {fp32: 10}\n"), 0, keys);
    text.replace(text.find("pcie: e}"), 8, "pcie: e" + sources + "}");
    return text;
  };
  const std::string sources = ", memory_type: f, l2_mib: g, clocks_mhz: h";
  GpuCatalogue good = load_gpu_catalogue_from_string(
      with("    memory_type: hbm2e\n    l2_mib: 40\n    clocks_mhz: {base: 765, boost: 1410, "
           "sustained: 1200}\n",
           sources),
      "gpus.yaml");
  const GpuSpec& g = good.gpus.front();
  CHECK(g.memory_type == "hbm2e");
  CHECK(g.l2_cache == Bytes(40 * kMiB));
  CHECK(g.sustained_clock_fraction() == Approx(1200.0 / 1410));
  expect_error(
      [&] {
        load_gpu_catalogue_from_string(
            with("    memory_type: hbm2e\n    l2_mib: 40\n    clocks_mhz: {boost: 1410, "
                 "sustained: 1500}\n",
                 sources),
            "gpus.yaml");
      },
      {"gpus.yaml:11:42", "gpus.test-gpu.clocks_mhz.sustained", "from 1 to 1410, got 1500"});
  expect_error(
      [&] {
        load_gpu_catalogue_from_string(
            with("    memory_type: hbm9\n    l2_mib: 40\n    clocks_mhz: {boost: 1410}\n", sources),
            "gpus.yaml");
      },
      {"gpus.yaml:9:18", "gpus.test-gpu.memory_type", "did you mean 'hbm2'?"});
  expect_error(
      [&] {
        load_gpu_catalogue_from_string(
            with("    memory_type: hbm2e\n    l2_mib: 40\n    clocks_mhz: {boost: 1410}\n",
                 ", memory_type: f, l2_mib: g"),
            "gpus.yaml");
      },
      {"gpus.yaml:14:14", "gpus.test-gpu.sources.clocks_mhz", "has no source"});
}

TEST_CASE("bad input: a board's streaming figure is sourced and at most its datasheet rate") {
  auto with = [](const std::string& streaming, const std::string& source) {
    std::string text = kCatalogue;
    text.replace(text.find("    peak_tflops: {fp32: 10}\n"), 0,
                 "    streaming_gb_per_s: " + streaming + "\n");
    text.replace(text.find("pcie: e}"), 8, "pcie: e" + source + "}");
    return text;
  };
  GpuCatalogue good =
      load_gpu_catalogue_from_string(with("440", ", streaming_gb_per_s: f"), "gpus.yaml");
  CHECK(good.gpus.front().streaming_fraction() == Approx(440.0 / 500));
  CHECK_FALSE(load_gpu_catalogue_from_string(kCatalogue, "gpus.yaml")
                  .gpus.front()
                  .streaming_fraction()
                  .has_value());
  // No kernel streams faster than the memory's datasheet rate (500 GB/s here).
  expect_error(
      [&] { load_gpu_catalogue_from_string(with("520", ", streaming_gb_per_s: f"), "gpus.yaml"); },
      {"gpus.yaml:9:25", "gpus.test-gpu.streaming_gb_per_s", "got 520"});
  expect_error([&] { load_gpu_catalogue_from_string(with("440", ""), "gpus.yaml"); },
               {"gpus.yaml:12:14", "gpus.test-gpu.sources.streaming_gb_per_s", "has no source"});
}

TEST_CASE("bad input: a sweep of more points than are simulated is refused before any") {
  // 1,001 GPU counts x 1,000 batches: 1,001,000 points.
  std::string gpus, batches;
  for (int g = 1; g <= 1001; ++g)
    gpus += (g > 1 ? ", " : "") + std::to_string(g);
  for (int b = 1; b <= 1000; ++b)
    batches += (b > 1 ? ", " : "") + std::to_string(b);
  scenario_error(scenario("gpus: [1, 2, 4]\n  batch: [10, 600]",
                          "gpus: [" + gpus + "]\n  batch: [" + batches + "]"),
                 {"bad.yaml:8:3", "sweep",
                  "the sweep has 1,001,000 points (1,001 GPU counts x 1,000 batches), more than "
                  "1,000,000"});
}

TEST_CASE("bad input: a name that is not UTF-8 is refused where it is written") {
  // It would reach JSON outputs, tables and plots, which all need text.
  scenario_error(scenario("name: s",
                          "name: ab\xff\xfe"
                          "cd"),
                 {"bad.yaml:2:7", "name", "expected UTF-8 text, got the byte 0xff at character 3"});
}

TEST_CASE("bad input: a catalogue figure without its source") {
  std::string text = kCatalogue;
  text.replace(text.find(" pcie: e"), 8, "");
  text.replace(text.find("d,"), 2, "d");
  expect_error([&] { load_gpu_catalogue_from_string(text, "gpus.yaml"); },
               {"gpus.yaml:11:14", "gpus.test-gpu.sources.pcie", "has no source"});
}

TEST_CASE("bad input: a batch larger than the data set") {
  scenario_error(scenario("batch: [10, 600]", "batch: [10, 2400]"),
                 {"bad.yaml:9:15", "sweep.batch[1]",
                  "a global batch of 2400 (1 GPU) is larger than the data set (2000 training "
                  "samples)"});
}

TEST_CASE("bad input: a per-GPU batch that multiplies past the data set") {
  scenario_error(scenario("batch_is: global", "batch_is: per_gpu"),
                 {"bad.yaml:9:15", "sweep.batch[1]", "a global batch of 2400 (4 GPUs)"});
}

TEST_CASE("bad input: more GPUs than the machine has") {
  scenario_error(
      scenario("gpus: [1, 2, 4]", "gpus: [1, 2, 8]"),
      {"bad.yaml:8:16", "sweep.gpus[2]", "8 GPUs asked for, but the machine 'seed001-box' has 4"});
}

TEST_CASE("bad input: a sweep that does not say whether the batch is global or per GPU") {
  scenario_error(scenario("  batch_is: global\n", ""),
                 {"bad.yaml:8:3", "sweep.batch_is", "missing required key"});
}

TEST_CASE("bad input: classes that do not match the model's output") {
  scenario_error(scenario("classes: 10", "classes: 12"),
                 {"bad.yaml:5:10", "dataset",
                  "the data set has 12 classes but the model 'spoken-digits-linear' gives 10"});
}

TEST_CASE("bad input: a misspelt precision") {
  scenario_error(scenario("precision: fp32", "precision: fp33"),
                 {"bad.yaml:6:54", "training.precision", "did you mean 'fp32'?"});
}

TEST_CASE("bad input: a model name that is not in the zoo") {
  scenario_error(scenario("model: spoken-digits-linear", "model: resnet50"),
                 {"bad.yaml:3:8", "model", "did you mean 'resnet-50'?"});
}

TEST_CASE("bad input: a fractional number of epochs") {
  scenario_error(
      scenario("epochs: 20", "epochs: 1.5"),
      {"bad.yaml:6:68", "training.epochs", "expected an integer from 1 to 100,000, got '1.5'"});
}

TEST_CASE("bad input: yes is not a boolean here") {
  scenario_error(scenario("epochs: 20", "epochs: 20, drop_last: yes"),
                 {"bad.yaml:6:83", "training.drop_last", "expected true or false, got 'yes'"});
}

TEST_CASE("bad input: samples of a different shape than the model takes") {
  scenario_error(scenario("classes: 10}", "classes: 10, sample_shape: [12000]}"),
                 {"bad.yaml:5:71", "dataset.sample_shape",
                  "the samples are [-1, 12000] but the model 'spoken-digits-linear' takes "
                  "[-1, 1, 12000]"});
}

TEST_CASE("bad input: a file that does not exist") {
  expect_error([] { load_model("/nonexistent/model.yaml"); },
               {"/nonexistent/model.yaml", "", "no such file"});
}

TEST_CASE("bad input: a directory where a file belongs") {
  expect_error([] { load_model(test::source_dir() / "scenarios"); },
               {(test::source_dir() / "scenarios").string(), "", "is a directory"});
}

namespace {

void machine_error(const std::string& topology, const Expected& expected,
                   const std::string& host = "{cpu: c, cores: 4}",
                   const std::string& gpu = "test-gpu") {
  GpuCatalogue catalogue = load_gpu_catalogue_from_string(kCatalogue, "gpus.yaml");
  std::string text =
      "kind: machine\nname: x\ngpu: " + gpu + "\ngpus_per_node: 4\nhost: " + host + "\n" + topology;
  expect_error([&] { load_machine_from_string(text, "bad.yaml", catalogue); }, expected);
}

}  // namespace

TEST_CASE("bad input: several nodes of a machine without a network") {
  scenario_error(scenario("hardware: seed001-box", "hardware: {base: seed001-box, nodes: 2}"),
                 {"bad.yaml:4:38", "hardware.nodes",
                  "the machine 'seed001-box' has no network section to join several nodes"});
}

TEST_CASE("bad input: a misspelt key of the hardware map") {
  scenario_error(scenario("hardware: seed001-box", "hardware: {base: seed001-box, node: 2}"),
                 {"bad.yaml:4:31", "hardware.node", "did you mean 'nodes'?"});
}

TEST_CASE("bad input: gradient accumulation under DataParallel") {
  scenario_error(scenario("epochs: 20}", "epochs: 20, gradient_accumulation: 4}"),
                 {"bad.yaml:6:95", "training.gradient_accumulation",
                  "gradient accumulation is modelled for a process per GPU"});
}

TEST_CASE("bad input: a misspelt collective fidelity or algorithm") {
  scenario_error(scenario("epochs: 20}", "epochs: 20, collectives: flow}"),
                 {"bad.yaml:6:85", "training.collectives", "(did you mean 'flows'?)"});
  scenario_error(scenario("epochs: 20}", "epochs: 20, collective_algorithm: rings}"),
                 {"bad.yaml:6:94", "training.collective_algorithm", "(did you mean 'ring'?)"});
}

TEST_CASE("bad input: a misspelt memory format or a non-boolean cudnn_benchmark") {
  scenario_error(scenario("epochs: 20}", "epochs: 20, memory_format: channel_last}"),
                 {"bad.yaml:6:87", "training.memory_format", "(did you mean 'channels_last'?)"});
  scenario_error(scenario("epochs: 20}", "epochs: 20, cudnn_benchmark: on}"),
                 {"bad.yaml:6:89", "training.cudnn_benchmark", "expected true or false"});
}

TEST_CASE("bad input: a misspelt optimizer implementation") {
  scenario_error(scenario("epochs: 20}", "epochs: 20, optimizer_implementation: fussed}"),
                 {"bad.yaml:6:98", "training.optimizer_implementation", "(did you mean 'fused'?)"});
}

TEST_CASE("bad input: normalize_on_gpu for a model that takes token ids") {
  std::string text =
      "kind: scenario\nname: s\nmodel: gpt2-small\nhardware: dgx-a100\n"
      "dataset: {name: d, train_samples: 1000, classes: 50257}\n"
      "loader: {normalize_on_gpu: true}\n"
      "training: {strategy: single, optimizer: adam}\n"
      "sweep: {gpus: [1], batch: [8], batch_is: global}\n";
  expect_error([&] { load_scenario_from_string(text, "bad.yaml", test::source_dir()); },
               {"bad.yaml:6:28", "loader.normalize_on_gpu", "takes integer int64 inputs"});
}

TEST_CASE("bad input: a compressed all-reduce outside ddp, an unknown gradient dtype") {
  auto with = [](const std::string& strategy, const std::string& dtype) {
    return scenario("training: {strategy: dp,",
                    "training: {strategy: " + strategy + ", gradient_dtype: " + dtype + ",");
  };
  scenario_error(with("single", "bf16"),
                 {"bad.yaml:6:46", "training.gradient_dtype", "modelled for the ddp strategy"});
  scenario_error(with("ddp", "fp8"),
                 {"bad.yaml:6:43", "training.gradient_dtype", "fp32, fp16 or bf16"});
}

TEST_CASE("bad input: ddp's settings outside their block, or not of their type") {
  // Moved to training.ddp: refused where they stood, with where they go.
  for (const std::string key : {"bucket_cap_mib: 1", "first_bucket_mib: 1",
                                "gradient_as_bucket_view: true", "broadcast_buffers: false"}) {
    const std::string name = key.substr(0, key.find(':'));
    INFO(key);
    scenario_error(scenario("training: {strategy: dp,", "training: {strategy: ddp, " + key + ","),
                   {"bad.yaml:6:27", "training." + name, "write it as training.ddp." + name});
  }
  auto with = [](const std::string& block) {
    return scenario("training: {strategy: dp,", "training: {strategy: ddp, ddp: " + block + ",");
  };
  scenario_error(with("{gradient_as_bucket_view: maybe}"),
                 {"bad.yaml:6:58", "training.ddp.gradient_as_bucket_view", "true or false"});
  scenario_error(with("{find_unused_parameters: 1}"),
                 {"bad.yaml:6:57", "training.ddp.find_unused_parameters", "true or false"});
  scenario_error(with("{static_graph: 2}"),
                 {"bad.yaml:6:47", "training.ddp.static_graph", "true or false"});
  scenario_error(with("{bucket_cap_mib: 0}"),
                 {"bad.yaml:6:49", "training.ddp.bucket_cap_mib", "expected a number from"});
  scenario_error(with("{bucket_cap: 25}"),
                 {"bad.yaml:6:33", "training.ddp.bucket_cap", "expected one of bucket_cap_mib"});
}

TEST_CASE("bad input: FSDP's settings misspelt, an unknown strategy") {
  auto with = [](const std::string& training) {
    return scenario("training: {strategy: dp,", "training: {" + training + ",");
  };
  scenario_error(with("strategy: fsdp, fsdp: {wrap: blocks}"),
                 {"bad.yaml:6:41", "training.fsdp.wrap", "(did you mean 'block'?)"});
  scenario_error(with("strategy: fsdp, fsdp: {backward_prefetch: early}"),
                 {"bad.yaml:6:54", "training.fsdp.backward_prefetch", "pre, post or none"});
  scenario_error(with("strategy: fsdp, fsdp: {prefetch: pre}"),
                 {"bad.yaml:6:35", "training.fsdp.prefetch", "unknown key"});
  scenario_error(with("strategy: zero3"),
                 {"bad.yaml:6:22", "training.strategy", "zero1, zero2 or fsdp"});
}

TEST_CASE("bad input: a host loader's settings with source synthetic_gpu, an unknown source") {
  auto with_loader = [](const std::string& loader) {
    return scenario("training: {", "loader: " + loader + "\ntraining: {");
  };
  scenario_error(with_loader("{source: synthetic_gpu, workers: 4}"),
                 {"bad.yaml:6:42", "loader.workers", "means nothing with source synthetic_gpu"});
  scenario_error(with_loader("{source: synthetic_gpu, pin_memory: true}"),
                 {"bad.yaml:6:45", "loader.pin_memory", "use source: host"});
  scenario_error(with_loader("{source: synthetic_cpu}"),
                 {"bad.yaml:6:18", "loader.source", "(did you mean 'synthetic_gpu'?)"});
}

TEST_CASE("bad input: GPU decoding without its encoded size, beside normalize_on_gpu, for tokens") {
  auto with_loader = [](const std::string& loader) {
    return scenario("training: {", "loader: " + loader + "\ntraining: {");
  };
  scenario_error(with_loader("{gpu_decode_us: 40}"),
                 {"bad.yaml:6:25", "loader.gpu_decode_us", "give loader.encoded_sample_bytes"});
  scenario_error(with_loader("{encoded_sample_bytes: 110000}"),
                 {"bad.yaml:6:32", "loader.encoded_sample_bytes", "set loader.gpu_decode_us"});
  scenario_error(with_loader("{gpu_decode_us: 40, encoded_sample_bytes: 0}"),
                 {"bad.yaml:6:51", "loader.encoded_sample_bytes", "an integer from 1 to"});
  scenario_error(with_loader("{gpu_decode_us: -1, encoded_sample_bytes: 9}"),
                 {"bad.yaml:6:25", "loader.gpu_decode_us", "a number from 0 to"});
  scenario_error(
      with_loader("{gpu_decode_us: 40, encoded_sample_bytes: 9, normalize_on_gpu: true}"),
      {"bad.yaml:6:72", "loader.normalize_on_gpu", "crop_mirror_normalize"});
  std::string text =
      "kind: scenario\nname: s\nmodel: gpt2-small\nhardware: dgx-a100\n"
      "dataset: {name: d, train_samples: 1000, classes: 50257}\n"
      "loader: {gpu_decode_us: 5, encoded_sample_bytes: 100}\n"
      "training: {strategy: single, optimizer: adam}\n"
      "sweep: {gpus: [1], batch: [8], batch_is: global}\n";
  expect_error([&] { load_scenario_from_string(text, "bad.yaml", test::source_dir()); },
               {"bad.yaml:6:25", "loader.gpu_decode_us", "GPU decoding is for images"});
}

TEST_CASE("bad input: DataParallel across nodes") {
  std::string text =
      scenario("hardware: seed001-box", "hardware: {base: dgx-h100-cluster, nodes: 2}");
  text.replace(text.find("gpus: [1, 2, 4]"), 15, "gpus: [1, 16]");
  scenario_error(text, {"bad.yaml:8:13", "sweep.gpus[1]",
                        "dp (nn.DataParallel) runs in one process on one node"});
}

TEST_CASE("bad input: DDP across nodes on part of a node") {
  std::string text =
      scenario("hardware: seed001-box", "hardware: {base: dgx-h100-cluster, nodes: 2}");
  text.replace(text.find("gpus: [1, 2, 4]"), 15, "gpus: [1, 12]");
  text.replace(text.find("strategy: dp"), 12, "strategy: ddp");
  scenario_error(text, {"bad.yaml:8:13", "sweep.gpus[1]",
                        "across nodes ddp uses whole nodes: a multiple of 8 GPUs"});
}

TEST_CASE("bad input: NVLink on a GPU that has none") {
  machine_error("topology:\n  nvlink: {shape: nvswitch}\n  sources: {nvlink: x}\n",
                {"bad.yaml:7:19", "topology.nvlink.shape", "the Test GPU has no NVLink"});
}

TEST_CASE("bad input: two sockets without the link between them") {
  machine_error("topology:\n  pcie: {switches_per_socket: 1}\n  sources: {pcie: x}\n",
                {"bad.yaml:7:3", "topology.sockets", "needs its inter-socket link"},
                "{cpu: c, cores: 4, sockets: 2}");
}

TEST_CASE("bad input: a topology section without its source") {
  machine_error("topology:\n  pcie: {switches_per_socket: 1}\n  sources: {}\n",
                {"bad.yaml:8:12", "topology.sources.pcie", "the section has no source"});
}

TEST_CASE("bad input: NICs that the GPUs do not share evenly") {
  machine_error(
      "topology:\n  network: {nics_per_node: 3, nic_gbit_per_s: 100, latency_us: 1}\n"
      "  sources: {network: x}\n",
      {"bad.yaml:7:28", "topology.network.nics_per_node", "4 GPUs do not share 3 NICs evenly"});
}

TEST_CASE("bad input: a network oversubscribed below 1") {
  machine_error(
      "topology:\n  network: {nics_per_node: 4, nic_gbit_per_s: 100, latency_us: 1, "
      "oversubscription: 0.5}\n  sources: {network: x}\n",
      {"bad.yaml:7:85", "topology.network.oversubscription",
       "expected a number from 1 to 1000, got 0.5"});
}

TEST_CASE("bad input: an NVLink pair listed twice") {
  machine_error(
      "topology:\n  nvlink: {shape: explicit, links: [[0, 1, 2], [2, 3, 2], [1, 0, 1]]}\n"
      "  sources: {nvlink: x}\n",
      {"bad.yaml:7:59", "topology.nvlink.links[2]",
       "GPUs 1 and 0 are already joined by an earlier entry"},
      "{cpu: c, cores: 4}", "nvlink-gpu");
}

TEST_CASE("bad input: more PCIe switches than GPUs") {
  machine_error("topology:\n  pcie: {switches_per_socket: 9}\n  sources: {pcie: x}\n",
                {"bad.yaml:7:31", "topology.pcie.switches_per_socket",
                 "9 PCIe switches per socket on 1 socket is more switches than the node's 4 GPUs"});
}

TEST_CASE("bad input: an NCCL P2P level that is not one of NCCL_P2P_LEVEL's words") {
  machine_error("topology:\n  pcie: {nccl_p2p_level: phbb}\n  sources: {pcie: x}\n",
                {"bad.yaml:7:26", "topology.pcie.nccl_p2p_level", "did you mean 'phb'"});
}

// Integers are checked in 64 bits before they are narrowed: 2^31 and 2^32 + 1 once wrapped to
// a negative epoch count and to one loader worker.
TEST_CASE("bad input: counts beyond their range are refused and never wrapped") {
  struct Case {
    std::string from, to, where, key, phrase;
  };
  const std::vector<Case> cases = {
      {"epochs: 20}", "epochs: 2147483648}", "bad.yaml:6:68", "training.epochs",
       "expected an integer from 1 to 100,000, got 2,147,483,648"},
      {"epochs: 20}", "epochs: 20, gradient_accumulation: 9007199254740992}", "bad.yaml:6:95",
       "training.gradient_accumulation",
       "expected an integer from 1 to 1,024, got 9,007,199,254,740,992"},
      {"train_samples: 2000", "train_samples: 9007199254740992", "bad.yaml:5:38",
       "dataset.train_samples", "expected an integer from 1 to 1,000,000,000,000"},
      {"batch: [10, 600]", "batch: [10, 99999999999999999999]", "bad.yaml:9:15", "sweep.batch[1]",
       "expected an integer from 1 to 1,000,000,000,000, got 99999999999999999999"},
      {"gpus: [1, 2, 4]", "gpus: [1, 2, 4294967297]", "bad.yaml:8:16", "sweep.gpus[2]",
       "expected an integer from 1 to 1,000,000, got 4,294,967,297"},
  };
  for (const Case& c : cases) {
    INFO(c.to);
    scenario_error(scenario(c.from, c.to), {c.where, c.key, c.phrase});
  }
}

TEST_CASE("bad input: loader figures beyond their range") {
  const std::string head = "dataset: {name: fsdd, train_samples: 2000, classes: 10}\n";
  scenario_error(scenario(head, head + "loader: {workers: 4294967296}\n"),
                 {"bad.yaml:6:19", "loader.workers",
                  "expected an integer from 0 to 1,024, got 4,294,967,296"});
  scenario_error(scenario(head, head + "loader: {workers: 2, prefetch_factor: 2147483648}\n"),
                 {"bad.yaml:6:39", "loader.prefetch_factor",
                  "expected an integer from 1 to 1,024, got 2,147,483,648"});
  scenario_error(scenario(head, head + "loader: {workers: 1024, prefetch_factor: 1024}\n"),
                 {"bad.yaml:6:42", "loader.prefetch_factor",
                  "keep 1,048,576 batches in flight; epochcast models at most 512"});
}

TEST_CASE("bad input: a share of a GPU too small to model") {
  const std::string head = "dataset: {name: fsdd, train_samples: 2000, classes: 10}\n";
  scenario_error(
      scenario(head, head + "contention: {gpu_share: 1e-9}\n"),
      {"bad.yaml:6:25", "contention.gpu_share", "expected a number from 0.001 to 1, got 1e-9"});
}

TEST_CASE("an error about a long command-line value leaves out its middle") {
  std::string batches;
  for (int b = 1; b <= 3000; ++b)
    batches += (b > 1 ? "," : "") + std::to_string(b);
  yaml::Override batch{"sweep.batch", "[" + batches + "]", "--batch " + batches};
  std::string where = batch.where();
  CHECK(where.size() < 90);
  CHECK(where.rfind("--batch 1,2,3,", 0) == 0);
  CHECK_THAT(where, Catch::EndsWith(",2999,3000"));
  // Never inside a UTF-8 character: 'é' is two bytes, and 40 of them straddle every cut.
  std::string accents;
  for (int i = 0; i < 40; ++i)
    accents += "\xc3\xa9";
  std::string cut = yaml::Override{"dataset.name", accents, ""}.where();
  CHECK_THAT(cut, Catch::StartsWith("--set dataset.name="));
  CHECK_THAT(cut, Catch::Contains(" ... "));
  for (std::size_t i = 0; i + 1 < cut.size(); ++i) {
    if (cut[i] == ' ') {
      CHECK((static_cast<unsigned char>(cut[i + 1]) & 0xC0) != 0x80);
      CHECK((static_cast<unsigned char>(cut[i - 1]) & 0xE0) != 0xC0);
    }
  }
  CHECK(yaml::Override{"training.epochs", "3", ""}.where() == "--set training.epochs=3");
}

TEST_CASE("bad input: an input that names no earlier layer gets a suggestion") {
  model_error(
      "kind: model\nname: m\ninput: {shape: [4, 8, 8]}\nlayers:\n"
      "  - {type: conv2d, name: encoder, out_channels: 4, kernel: 1}\n"
      "  - {type: concat, inputs: [encodr, input]}\n",
      {"bad.yaml:6:29", "layers[1].inputs[0]", "did you mean 'encoder'?"});
  // A later layer is not an input either.
  model_error(
      "kind: model\nname: m\ninput: {shape: [4, 8, 8]}\nlayers:\n"
      "  - {type: relu, name: a, input: b}\n"
      "  - {type: relu, name: b}\n",
      {"bad.yaml:5:34", "layers[0].input", "'b' names no earlier layer"});
}

TEST_CASE("bad input: an output nothing reads, and 'input' as a layer name") {
  model_error(
      "kind: model\nname: m\ninput: {shape: [4, 8, 8]}\nlayers:\n"
      "  - {type: conv2d, name: lost, out_channels: 4, kernel: 1}\n"
      "  - {type: relu, input: input}\n",
      {"bad.yaml:5:5", "layers", "the output of 'lost' is never read"});
  model_error("kind: model\nname: m\ninput: {shape: [4]}\nlayers:\n  - {type: relu, name: input}\n",
              {"bad.yaml:5:5", "layers[0]", "'input' is the model's input"});
}

TEST_CASE("bad input: a concat of shapes that do not line up names both") {
  model_error(
      "kind: model\nname: m\ninput: {shape: [4, 8, 8]}\nlayers:\n"
      "  - {type: maxpool2d, name: half, kernel: 2}\n"
      "  - {type: concat, name: join, inputs: [input, half]}\n",
      {"bad.yaml:6:5", "layer 2 'join' (concat)", "cannot join [-1, 4, 8, 8] and [-1, 4, 4, 4]"});
  model_error(std::string(kModelHead) + "  - {type: concat, input: input}\n",
              {"bad.yaml:5:27", "layers[0].input", "list them under 'inputs'"});
  model_error(std::string(kModelHead) + "  - {type: concat, inputs: [input]}\n",
              {"bad.yaml:5:28", "layers[0].inputs", "at least 2 items"});
}

TEST_CASE("bad input: permute, transpose, upsample and conv_transpose2d hyper-parameters") {
  model_error(std::string(kModelHead) + "  - {type: permute, dims: [0, 0]}\n",
              {"bad.yaml:5:27", "layers[0].dims", "a permutation"});
  model_error(std::string(kModelHead) + "  - {type: permute, dims: [1, 0, 2]}\n",
              {"bad.yaml:5:5", "layer 1 '0' (permute)", "permutes 3 dimensions"});
  model_error(std::string(kModelHead) + "  - {type: transpose, dims: [0, 2]}\n",
              {"bad.yaml:5:5", "layer 1 '0' (transpose)", "dimension 2 is outside"});
  model_error(std::string(kModelHead) + "  - {type: upsample, scale_factor: 2, size: 8}\n",
              {"bad.yaml:5:5", "layers[0]", "either scale_factor or size"});
  model_error(std::string(kModelHead) + "  - {type: upsample, size: 8, align_corners: true}\n",
              {"bad.yaml:5:46", "layers[0].align_corners", "mode: bilinear only"});
  model_error(std::string(kModelHead) +
                  "  - {type: conv_transpose2d, out_channels: 2, kernel: 2, stride: 2, "
                  "output_padding: 2}\n",
              {"bad.yaml:5:85", "layers[0].output_padding", "smaller than the stride (2)"});
  model_error(std::string(kModelHead) + "  - {type: upsample, scale_factor: 2}\n",
              {"bad.yaml:5:5", "layer 1 '0' (upsample)", "[channels, height, width]"});
}

TEST_CASE("bad input: a residual whose branches both read named outputs leaves its input unread") {
  model_error(
      "kind: model\nname: m\ninput: {shape: [8]}\nlayers:\n"
      "  - {type: linear, name: a, out_features: 8}\n"
      "  - {type: linear, name: b, out_features: 8}\n"
      "  - type: residual\n    name: r\n"
      "    body: [{type: linear, name: x, input: a, out_features: 8}]\n"
      "    shortcut: [{type: linear, name: y, input: a, out_features: 8}]\n",
      {"bad.yaml:6:5", "layers", "the output of 'b' is never read"});
}

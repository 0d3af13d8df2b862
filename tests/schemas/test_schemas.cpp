// The JSON Schemas of schemas/ against the files they describe: every bundled input and
// committed measurement validates against its kind's schema, every JSON golden and committed
// report against its output's, and the schemas agree with the loaders — the same vocabularies,
// and, changed one key or value at a time, the same documents refused (the schema may be more
// lenient where a check spans files or keys; it is never stricter).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <span>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "core/input_error.h"
#include "core/io/launcher_environment.h"
#include "core/measure/measurements.h"
#include "core/measure/target_runs.h"
#include "core/model/model_spec.h"
#include "core/model/tensor_shape.h"
#include "core/spec/data_paths.h"
#include "core/spec/file_kind.h"
#include "core/spec/hardware_spec.h"
#include "core/spec/profile_figures.h"
#include "core/spec/profile_spec.h"
#include "core/spec/scenario_spec.h"
#include "sim/collectives/collective.h"
#include "sim/predict/sweep_shard.h"
#include "support/json_schema.h"
#include "support/paths.h"
#include "support/run_command.h"
#include "support/text.h"
#include "support/yaml_json.h"
#include "validate/kernel_measurements.h"

using namespace epochcast;
using epochcast::test::JsonSchema;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

const JsonSchema& schema(const std::string& file) {
  static std::map<std::string, JsonSchema> loaded;
  auto found = loaded.find(file);
  if (found == loaded.end())
    found = loaded.emplace(file, JsonSchema::load(test::source_dir() / "schemas" / file)).first;
  return found->second;
}

// The schema file that describes `document`: <kind>.schema.json for an input file,
// <format>-<version>.schema.json for a measurement or time-to-target file, and the output's
// tag (`schema`, or a shard file's `format`) with '/' as '-' (epochcast.prediction/1:
// epochcast.prediction-1.schema.json).
std::optional<std::string> schema_file_of(const json& document) {
  if (!document.is_object()) return std::nullopt;
  if (auto kind = document.find("kind"); kind != document.end() && kind->is_string())
    return kind->get<std::string>() + ".schema.json";
  if (auto tag = document.find("schema"); tag != document.end() && tag->is_string()) {
    std::string name = tag->get<std::string>();
    std::replace(name.begin(), name.end(), '/', '-');
    return name + ".schema.json";
  }
  auto format = document.find("format");
  if (format == document.end() || !format->is_string()) return std::nullopt;
  std::string name = format->get<std::string>();
  if (name.find('/') != std::string::npos) {  // a tag, as a shard file's epochcast.shard/1
    std::replace(name.begin(), name.end(), '/', '-');
    return name + ".schema.json";
  }
  auto version = document.find("version");
  if (version != document.end()) return name + "-" + version->dump() + ".schema.json";
  return std::nullopt;
}

json read_document(const fs::path& file) {
  if (file.extension() == ".json") {
    std::ifstream in(file);
    return json::parse(in);
  }
  return test::load_yaml_as_json(file);
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& line : lines)
    out += line + "\n";
  return out;
}

// `document[key]` when it is a string, else "".
std::string text_of(const json& document, const std::string& key) {
  auto found = document.find(key);
  return found != document.end() && found->is_string() ? found->get<std::string>() : "";
}

// The document given to the loader its kind names, as JSON text (which is YAML), as if it were
// `origin` (other files are found relative to it). Empty when the loader takes it; else the
// InputError, whose key() and problem() the checks below read.
std::optional<InputError> loader_error(const json& document, const fs::path& origin) {
  const std::string text = document.dump();
  const std::string name = origin.string();
  try {
    const std::string kind = text_of(document, "kind");
    const std::string format = text_of(document, "format");
    if (kind == "model") {
      load_model_from_string(text, name);
    } else if (kind == "gpu-catalogue") {
      load_gpu_catalogue_from_string(text, name);
    } else if (kind == "machine") {
      load_machine_from_string(text, name, bundled_gpu_catalogue());
    } else if (kind == "profile") {
      load_profile_from_string(text, name);
    } else if (kind == "scenario") {
      load_scenario_from_string(text, name, origin.parent_path());
    } else if (format == kTargetRunsFormat) {
      load_target_runs_from_string(text, name);
    } else if (format.starts_with("epochcast.shard/")) {
      sim::read_shard_file(text, name);
    } else if (document.contains("format")) {
      load_measurements_from_string(text, name);
    } else {
      // No kind, or one that is no file's: the loaders' own kind check refuses it.
      load_model_from_string(text, name);
    }
  } catch (const InputError& error) {
    return error;
  }
  return std::nullopt;
}

std::vector<fs::path> files_under(const std::string& folder, const std::string& extension) {
  std::vector<fs::path> out;
  for (const auto& entry : fs::recursive_directory_iterator(test::source_dir() / folder)) {
    if (entry.is_regular_file() && entry.path().extension() == extension)
      out.push_back(entry.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Every input file the project ships or tests with that is meant to load.
std::vector<fs::path> bundled_inputs() {
  std::vector<fs::path> files;
  for (const char* folder :
       {"scenarios", "topologies", "tests/runtime/scenarios", "tests/validate/scenarios",
        "tests/sim/data", "tests/schemas", "validate/data"}) {
    for (const fs::path& file : files_under(folder, ".yaml"))
      files.push_back(file);
  }
  // Measurement and time-to-target files (the reports beside them are outputs, below; the
  // *.pytorch.json files are tools/pytorch_reference.py's, which epochcast never reads).
  for (const fs::path& file : files_under("validate/data", ".json")) {
    if (file.string().ends_with(".pytorch.json")) continue;
    if (read_document(file).contains("format")) files.push_back(file);
  }
  // The fuzz seeds that are whole valid files (the others are broken on purpose).
  const fs::path seeds = test::source_dir() / "tests/fuzz/seeds/fuzz_measurements_profiles";
  for (const char* seed :
       {"every-section.json", "profile-with-uncertainty.yaml",
        "default-profile-by-architecture.yaml", "fixed-profile-name-with-newline.yaml",
        "fixed-profile-source-indented-first-line.yaml",
        "fixed-profile-source-trailing-newline.yaml"})
    files.push_back(seeds / seed);
  return files;
}

// Every output the project keeps: the JSON goldens and the reports committed beside the
// measurements.
std::vector<fs::path> committed_outputs() {
  std::vector<fs::path> files = files_under("tests/golden", ".json");
  for (const fs::path& file : files_under("validate/data", ".json")) {
    if (file.string().ends_with(".pytorch.json")) continue;
    if (read_document(file).contains("schema")) files.push_back(file);
  }
  return files;
}

std::vector<std::string> names(std::span<const std::string_view> values) {
  return {values.begin(), values.end()};
}

std::vector<std::string> keys_of(const json& object) {
  std::vector<std::string> out;
  for (const auto& [key, value] : object.items())
    out.push_back(key);
  return out;
}

std::vector<std::string> sorted(std::vector<std::string> values) {
  std::sort(values.begin(), values.end());
  return values;
}

const json& at(const std::string& file, const std::string& pointer) {
  return schema(file).root().at(json::json_pointer(pointer));
}

}  // namespace

TEST_CASE("every schema is a draft 2020-12 schema within the subset the tests check") {
  std::set<std::string> found;
  for (const auto& entry : fs::directory_iterator(test::source_dir() / "schemas")) {
    const std::string name = entry.path().filename().string();
    INFO(name);
    REQUIRE(name.ends_with(".schema.json"));
    found.insert(name);
    const json& root = schema(name).root();  // refused here if outside the subset
    CHECK(root.value("$schema", "") == "https://json-schema.org/draft/2020-12/schema");
    CHECK_FALSE(root.value("title", "").empty());
    CHECK_FALSE(root.value("description", "").empty());
  }
  // One per input kind, per JSON file the runtime writes and per JSON output of the CLI.
  std::set<std::string> expected;
  for (std::string_view kind : kFileKindNames)
    expected.insert(std::string(kind) + ".schema.json");
  for (const char* name :
       {"epochcast-measurements-1", "epochcast-target-runs-1", "epochcast.prediction-1",
        "epochcast.comparison-1", "epochcast.collective-1", "epochcast.kernels-2",
        "epochcast.validation-1", "epochcast.target-validation-1", "epochcast.model-analysis-1",
        "epochcast.step-kernels-1", "epochcast.shard-1"})
    expected.insert(std::string(name) + ".schema.json");
  CHECK(found == expected);
}

TEST_CASE("the schemas are found beside the binary with the rest of the bundled data") {
  // The build tree's share/epochcast, as an installed prefix's (cmake --install copies schemas/
  // with topologies/ and scenarios/; tests/cli/check_install.sh looks for it there).
  const std::vector<fs::path> folders = data_directories();
  CHECK(std::any_of(folders.begin(), folders.end(), [](const fs::path& folder) {
    return fs::is_regular_file(folder / "schemas" / "scenario.schema.json");
  }));
}

TEST_CASE("each schema names its required keys and refuses keys it does not know") {
  for (const auto& entry : fs::directory_iterator(test::source_dir() / "schemas")) {
    const std::string name = entry.path().filename().string();
    const json& root = schema(name).root();
    INFO(name);
    CHECK(root.at("type") == "object");
    CHECK(root.at("required").size() >= 2);
    CHECK(root.at("additionalProperties") == false);
    // Everywhere: an object whose keys are listed refuses others (the loaders refuse unknown
    // keys in every mapping; the outputs' keys are all listed, so a new one needs the schema),
    // and lists every key it requires. (Conditions, `if`/`then` parts, are no objects of their
    // own: they say what an object holds.)
    int objects = 0;
    std::function<void(const json&, const std::string&)> walk = [&](const json& node,
                                                                    const std::string& where) {
      if (node.is_object()) {
        if (node.value("type", json()) == "object" && node.contains("properties")) {
          ++objects;
          INFO(where);
          CHECK(node.value("additionalProperties", json(true)) == false);
          for (const json& key : node.value("required", json::array()))
            CHECK(node.at("properties").contains(key.get<std::string>()));
        }
        for (const auto& [key, value] : node.items())
          walk(value, where + "/" + key);
      } else if (node.is_array()) {
        for (std::size_t i = 0; i < node.size(); ++i)
          walk(node[i], where + "/" + std::to_string(i));
      }
    };
    walk(root, "");
    CHECK(objects >= 2);
  }
}

TEST_CASE("every bundled input loads and validates against the schema of its kind") {
  std::map<std::string, int> per_schema;
  for (const fs::path& file : bundled_inputs()) {
    const std::string relative = fs::relative(file, test::source_dir()).string();
    INFO(relative);
    const json document = read_document(file);
    const std::optional<std::string> name = schema_file_of(document);
    REQUIRE(name.has_value());
    ++per_schema[*name];
    // Loaded from the file itself: the JSON round trip of the mutation tests is not in the way.
    std::optional<std::string> refused;
    try {
      if (document.value("kind", "") == "scenario") {
        load_scenario(file);
      } else if (document.value("kind", "") == "machine") {
        load_machine(file, bundled_gpu_catalogue());
      } else if (document.value("kind", "") == "model") {
        load_model(file);
      } else if (document.value("kind", "") == "profile") {
        load_profile(file);
      } else if (document.value("kind", "") == "gpu-catalogue") {
        load_gpu_catalogue(file);
      } else if (document.value("format", "") == kTargetRunsFormat) {
        load_target_runs(file);
      } else {
        load_measurements(file);
      }
    } catch (const InputError& error) {
      refused = error.what();
    }
    INFO("the loader: " << refused.value_or("accepts it"));
    CHECK_FALSE(refused.has_value());
    const std::vector<std::string> errors = schema(*name).errors(document);
    INFO(*name << ":\n" << joined(errors));
    CHECK(errors.empty());
  }
  CHECK(per_schema["scenario.schema.json"] >= 25);
  CHECK(per_schema["model.schema.json"] >= 10);
  CHECK(per_schema["machine.schema.json"] >= 15);
  CHECK(per_schema["gpu-catalogue.schema.json"] == 1);
  CHECK(per_schema["profile.schema.json"] >= 5);
  CHECK(per_schema["epochcast-measurements-1.schema.json"] >= 20);
  CHECK(per_schema["epochcast-target-runs-1.schema.json"] >= 1);
}

TEST_CASE("every JSON golden and committed report validates against its output's schema") {
  std::set<std::string> covered;
  for (const fs::path& file : committed_outputs()) {
    INFO(fs::relative(file, test::source_dir()).string());
    const json document = read_document(file);
    const std::optional<std::string> name = schema_file_of(document);
    REQUIRE(name.has_value());
    covered.insert(*name);
    const std::vector<std::string> errors = schema(*name).errors(document);
    INFO(*name << ":\n" << joined(errors));
    CHECK(errors.empty());
  }
  // The goldens (tests/golden/cases.txt) cover every output a committed input can make.
  for (const char* name :
       {"epochcast.prediction-1", "epochcast.comparison-1", "epochcast.collective-1",
        "epochcast.kernels-2", "epochcast.validation-1", "epochcast.target-validation-1",
        "epochcast.model-analysis-1", "epochcast.step-kernels-1"}) {
    INFO(name);
    CHECK(covered.count(std::string(name) + ".schema.json") == 1);
  }
}

namespace {

// A shard file of a small sweep, as `predict --shard 2/3 --shard-output` writes it (a shard file
// names the build that wrote it, so it cannot be a golden).
json written_shard(const std::string& command, const std::string& name) {
  const std::string out = test::output_file(name);
  fs::remove(out);
  const test::CommandResult r =
      test::run_command("cd " + test::source_dir().string() + " && " + test::epochcast_binary() +
                        " " + command + " --shard 2/3 --shard-output " + out);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  return json::parse(test::read_file(out));
}

}  // namespace

TEST_CASE("the files the commands write and no golden holds validate against their schemas") {
  // Shard files, of predict and of compare.
  for (const char* command :
       {"predict scenarios/seed-001/linear.yaml --gpus 1,2 --batch 10,20,30",
        "compare scenarios/seed-001/linear.yaml --hardware seed001-box host-cpu --gpus 1 "
        "--batch 10,20,30"}) {
    INFO(command);
    const json shard = written_shard(command, "schema-shard.json");
    const std::vector<std::string> errors = schema("epochcast.shard-1.schema.json").errors(shard);
    INFO(joined(errors));
    CHECK(errors.empty());
  }
  // Machine files written from `nvidia-smi topo -m` (tests/cli/nvidia_smi), each loaded too.
  const std::pair<const char*, const char*> matrices[] = {
      {"dgx1-v100-msccl-tools.txt", "v100-sxm2-32gb"},
      {"a100-nvswitch-8gpu-xuesongtap.txt", "a100-sxm4-40gb"},
      {"l40s-pcie-4gpu-miss-alignment-106.txt", "l40s"},
      {"rtx4090-8gpu-go-gpuallocator-17.txt", "rtx-4090"},
      {"t4-pcie-4gpu-nccl-428.txt", "t4"}};
  for (const auto& [matrix, gpu] : matrices) {
    INFO(matrix);
    const std::string out = test::output_file("schema-from-smi.yaml");
    fs::remove(out);
    const test::CommandResult r =
        test::run_command(test::epochcast_binary() + " topo --from-nvidia-smi " +
                          test::source_file(std::string("tests/cli/nvidia_smi/") + matrix) +
                          " --gpu " + gpu + " -o " + out);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    CHECK_NOTHROW(load_machine(out, bundled_gpu_catalogue()));
    const std::vector<std::string> errors =
        schema("machine.schema.json").errors(test::load_yaml_as_json(out));
    INFO(joined(errors));
    CHECK(errors.empty());
  }
  // A profile `kernels --fit --write-profile` writes (calibrate's are committed, validate/data).
  const std::string profile = test::output_file("schema-kernel-fit.yaml");
  fs::remove(profile);
  const test::CommandResult r = test::run_command(
      test::epochcast_binary() + " kernels " + test::source_file("tests/validate/kernels/add.csv") +
      " " + test::source_file("tests/validate/kernels/linear.csv") + " --fit --write-profile " +
      profile);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_NOTHROW(load_profile(profile));
  const std::vector<std::string> errors =
      schema("profile.schema.json").errors(test::load_yaml_as_json(profile));
  INFO(joined(errors));
  CHECK(errors.empty());
}

TEST_CASE("every whole-file YAML example in the docs validates against its kind's schema") {
  int examples = 0;
  for (const char* doc : {"docs/formats.md", "docs/guide.md"}) {
    std::ifstream in(test::source_dir() / doc);
    REQUIRE(in.good());
    std::string line, text;
    int number = 0, opened = 0;
    bool open = false;
    while (std::getline(in, line)) {
      ++number;
      if (!open && line == "```yaml") {
        open = true;
        opened = number;
        text.clear();
      } else if (open && line == "```") {
        open = false;
        const json document = test::yaml_to_json(YAML::Load(text));
        if (!document.is_object() || !document.contains("kind")) continue;  // a fragment
        ++examples;
        INFO(doc << ":" << opened << "\n" << text);
        const std::vector<std::string> errors = schema(*schema_file_of(document)).errors(document);
        INFO(joined(errors));
        CHECK(errors.empty());
      } else if (open) {
        text += line + "\n";
      }
    }
  }
  CHECK(examples >= 9);
}

TEST_CASE("the schemas' vocabularies are the loaders' and the writers'") {
  const std::string s = "scenario.schema.json";
  const std::string training = "/properties/training/properties/";
  const std::pair<std::string, std::span<const std::string_view>> scenario_enums[] = {
      {training + "strategy/enum", kStrategyNames},
      {training + "optimizer/enum", kOptimizerNames},
      {training + "optimizer_implementation/enum", kOptimizerImplementationNames},
      {training + "precision/enum", kTrainingPrecisionNames},
      {training + "framework/enum", kFrameworkNames},
      {training + "gradient_dtype/enum", kGradientDtypeNames},
      {training + "collectives/enum", kCollectiveFidelityNames},
      {training + "collective_algorithm/enum", kCollectiveAlgorithmNames},
      {training + "memory_format/enum", kMemoryFormatNames},
      {training + "activation_checkpointing/enum", kActivationCheckpointingNames},
      {training + "loop/enum", kTrainingLoopNames},
      {training + "fsdp/properties/wrap/enum", kFsdpWrapNames},
      {training + "fsdp/properties/backward_prefetch/enum", kFsdpBackwardPrefetchNames},
      {training + "learning_rate/properties/scaling/enum", kLearningRateScalingNames},
      {"/properties/loader/properties/source/enum", kLoaderSourceNames},
      {"/properties/sweep/properties/batch_is/enum", kBatchMeaningNames},
      {"/properties/target/properties/metric/enum", kTargetMetricNames},
      {"/properties/statistical_efficiency/properties/noise_scale/properties/source/enum",
       kFigureSourceNames},
  };
  for (const auto& [pointer, expected] : scenario_enums) {
    INFO(s << pointer);
    CHECK(at(s, pointer).get<std::vector<std::string>>() == names(expected));
  }
  const std::string p = "epochcast.prediction-1.schema.json";
  CHECK(at(p, "/properties/strategy/enum").get<std::vector<std::string>>() ==
        names(kStrategyNames));
  CHECK(at(p, "/properties/optimizer/enum").get<std::vector<std::string>>() ==
        names(kOptimizerNames));
  CHECK(at(p, "/properties/precision/enum").get<std::vector<std::string>>() ==
        names(kTrainingPrecisionNames));
  CHECK(at(p, "/properties/target/oneOf/1/properties/metric/enum") ==
        at(s, "/properties/target/properties/metric/enum"));

  const std::string g = "gpu-catalogue.schema.json";
  CHECK(at(g, "/$defs/gpu/properties/architecture/enum").get<std::vector<std::string>>() ==
        names(kArchitectureNames));
  CHECK(at(g, "/$defs/gpu/properties/memory_type/enum").get<std::vector<std::string>>() ==
        names(kMemoryTypeNames));
  CHECK(keys_of(at(g, "/$defs/gpu/properties/peak_tflops/properties")) ==
        sorted(names(kPrecisionNames)));
  CHECK(keys_of(at(g, "/properties/power_references/properties")) ==
        sorted(names(kArchitectureNames)));
  const std::string m = "machine.schema.json";
  CHECK(at(m, "/properties/topology/properties/pcie/properties/nccl_p2p_level/enum")
            .get<std::vector<std::string>>() == names(kP2pLevelNames));
  CHECK(at(m, "/properties/topology/properties/nvlink/properties/shape/enum")
            .get<std::vector<std::string>>() == names(kNvlinkShapeNames));

  const std::string f = "profile.schema.json";
  CHECK(keys_of(at(f, "/properties/gpu/properties/efficiency/properties")) ==
        sorted(names(kOpClassNames)));
  std::vector<std::string> kinds;
  for (OpClass kind : kBandwidthKinds)
    kinds.emplace_back(name_of(kind));
  CHECK(keys_of(at(f, "/$defs/bandwidth_relative/properties")) == sorted(kinds));
  CHECK(keys_of(at(f, "/properties/links/properties/efficiency/properties")) ==
        sorted(names(kLinkKindKeys)));
  CHECK(keys_of(at(f, "/properties/links/properties/step_latency_us/properties")) ==
        sorted(names(kLinkKindKeys)));
  CHECK(keys_of(at(f, "/properties/links/properties/ll_step_latency_us/properties")) ==
        sorted(names(kLinkKindKeys)));
  for (std::size_t i = 0; i < kLinkKinds; ++i) {
    const std::string kind = "/properties/links/properties/ll_step_latency_us/properties/" +
                             std::string(kLinkKindKeys[i]);
    CHECK(at(f, kind + "/minimum").get<double>() == Approx(LinkCosts::ll_step_latency_low_us(i)));
    CHECK(at(f, kind + "/maximum").get<double>() == Approx(LinkCosts::ll_step_latency_high_us(i)));
  }
  CHECK(keys_of(at(f, "/properties/gpu/properties/efficiency_by_architecture/properties")) ==
        sorted(names(kArchitectureNames)));
  std::vector<std::string> per_architecture = names(kEfficiencyPrecisions);
  per_architecture.insert(per_architecture.end(), {"memory", "bandwidth_relative"});
  CHECK(keys_of(at(f, "/$defs/architecture/properties")) == sorted(per_architecture));
  std::vector<std::string> figures;
  for (const ProfileFigure& figure : profile_figures())
    figures.push_back(figure.key);
  CHECK(at(f, "/properties/uncertainty/properties/figures/items/enum")
            .get<std::vector<std::string>>() == figures);

  CHECK(at("model.schema.json", "/properties/input/properties/dtype/enum")
            .get<std::vector<std::string>>() == names(kDTypeNames));
  CHECK(at("epochcast.model-analysis-1.schema.json", "/properties/input_dtype/enum")
            .get<std::vector<std::string>>() == names(kDTypeNames));
  CHECK(
      at("epochcast-measurements-1.schema.json", "/properties/points/items/properties/status/enum")
          .get<std::vector<std::string>>() == names(kPointStatusNames));
  std::vector<std::string> launchers;
  for (Launcher launcher : {Launcher::none, Launcher::mpi, Launcher::torchrun, Launcher::slurm})
    launchers.emplace_back(name_of(launcher));
  CHECK(
      at("epochcast-measurements-1.schema.json", "/properties/environment/properties/launcher/enum")
          .get<std::vector<std::string>>() == launchers);
  CHECK(at("epochcast-target-runs-1.schema.json", "/properties/target/properties/metric/enum")
            .get<std::vector<std::string>>() == names(kTargetMetricNames));
  CHECK(at("epochcast.kernels-2.schema.json", "/properties/accuracy/items/properties/class/enum")
            .get<std::vector<std::string>>() == names(validate::kKernelClassNames));
  CHECK(at("epochcast.kernels-2.schema.json", "/properties/offset_fractions/propertyNames/enum")
            .get<std::vector<std::string>>() == names(validate::kKernelOperators));
  CHECK(at("epochcast.collective-1.schema.json", "/properties/rows/items/properties/algorithm/enum")
            .get<std::vector<std::string>>() == names(sim::kAlgorithmNames));
  CHECK(at("epochcast.collective-1.schema.json", "/properties/rows/items/properties/protocol/enum")
            .get<std::vector<std::string>>() == names(sim::kProtocolNames));
  CHECK(at("epochcast.step-kernels-1.schema.json",
           "/properties/kernels/items/properties/op_class/enum")
            .get<std::vector<std::string>>() == names(kOpClassNames));
}

TEST_CASE("the model schema knows every layer type the loader knows") {
  // LayerType's primitives (scale is the last), as inspect --json names them.
  std::vector<std::string> primitives;
  for (int i = 0; i <= static_cast<int>(LayerType::scale); ++i)
    primitives.emplace_back(name_of(static_cast<LayerType>(i)));
  CHECK(sorted(at("epochcast.model-analysis-1.schema.json",
                  "/properties/layers/items/properties/type/enum")
                   .get<std::vector<std::string>>()) == sorted(primitives));
  // A layer entry is a mapping of one of those or of a block, or a bare type name.
  std::vector<std::string> written = primitives;
  written.insert(written.end(), {"residual", "bottleneck", "basic_block", "inverted_residual",
                                 "transformer_encoder", "gated_mlp", "decoder_layer"});
  std::vector<std::string> in_schema;
  const json& variants = at("model.schema.json", "/$defs/layer/oneOf");
  for (const json& variant : variants) {
    if (variant.contains("properties"))
      in_schema.push_back(variant.at("properties").at("type").at("const").get<std::string>());
  }
  CHECK(sorted(in_schema) == sorted(written));
  // Each bare name is one the loader reads alone (a primitive whose every key has a default).
  for (const json& bare : variants.at(0).at("enum")) {
    INFO(bare);
    const std::string text = "kind: model\nname: m\ninput: {shape: [4, 8, 8]}\nlayers:\n  - " +
                             bare.get<std::string>() + "\n";
    CHECK_NOTHROW(load_model_from_string(text, "bare.yaml"));
  }
}

TEST_CASE("the machine schema describes its own GPU as the catalogue describes an entry") {
  json own = at("machine.schema.json", "/$defs/gpu");
  json entry = at("gpu-catalogue.schema.json", "/$defs/gpu");
  REQUIRE(own.at("properties").contains("id"));
  own.at("properties").erase("id");
  own.erase("description");
  entry.erase("description");
  CHECK(own == entry);
}

namespace {

// The documents the agreement tests change one thing at a time: tests/schemas/every-key-*.yaml
// (every key of the scenario, machine and model formats, every layer type) and one of each
// other input kind and section (a shard file written for the test), made small where the file is
// large (a few GPUs of the catalogue, a few points of a measurement file) since every change is
// loaded anew.
std::vector<std::pair<fs::path, json>> documents_to_change() {
  const fs::path root = test::source_dir();
  std::vector<std::pair<fs::path, json>> out;
  for (const char* file :
       {"tests/schemas/every-key-scenario.yaml", "tests/schemas/every-key-machine.yaml",
        "tests/schemas/every-key-model.yaml", "scenarios/seed-003/fashion-mnist-cpu.yaml",
        "topologies/dgx1-v100.yaml", "topologies/pcie-2socket-8gpu.yaml",
        "topologies/profiles/default.yaml", "validate/data/h200-sxm-1gpu/profile.yaml",
        "scenarios/models/opt-6.7b.yaml"})
    out.emplace_back(root / file, test::load_yaml_as_json(root / file));

  json catalogue = test::load_yaml_as_json(root / "topologies/gpus.yaml");
  json few = json::object();
  for (const char* id : {"v100-pcie-32gb", "t4", "h100-sxm"})
    few[id] = catalogue.at("gpus").at(id);
  catalogue["gpus"] = few;
  catalogue["power_references"] = {{"turing", catalogue["power_references"]["turing"]}};
  out.emplace_back(root / "topologies/gpus.yaml", catalogue);

  // An own GPU in a machine, the catalogue's H100 with an id.
  json machine = test::load_yaml_as_json(root / "topologies/h100-sxm-1gpu.yaml");
  machine["gpu"] = few.at("h100-sxm");
  machine["gpu"]["id"] = "my-h100";
  out.emplace_back(root / "topologies/h100-sxm-1gpu.yaml", machine);

  // Each list of a measurement or time-to-target file cut to its first two items (a list of
  // numbers, the timed iterations, to its first).
  std::function<void(json&)> trim = [&](json& node) {
    if (node.is_array()) {
      const std::size_t keep = !node.empty() && node[0].is_number() ? 1 : 2;
      if (node.size() > keep)
        node.erase(node.begin() + static_cast<std::ptrdiff_t>(keep), node.end());
    }
    for (json& item : node) {
      if (item.is_structured()) trim(item);
    }
  };
  out.emplace_back(test::output_file("schema-shard-to-change.json"),
                   written_shard("predict scenarios/seed-001/linear.yaml --gpus 1 --batch 10,20,30",
                                 "schema-shard-to-change.json"));
  for (const char* file : {"validate/data/h100-sxm-1gpu/gpu-mnist-cnn.json",
                           "validate/data/fashion-mnist-cpu/runs.json",
                           "tests/fuzz/seeds/fuzz_measurements_profiles/every-section.json"}) {
    std::ifstream in(root / file);
    json document = json::parse(in);
    trim(document);
    out.emplace_back(root / file, document);
  }
  return out;
}

// A JSON pointer as the loaders name the key: "/sweep/gpus/0" is "sweep.gpus[0]".
std::string dotted(const json::json_pointer& pointer, const json& document) {
  std::vector<std::string> tokens;
  for (json::json_pointer rest = pointer; !rest.empty(); rest.pop_back())
    tokens.insert(tokens.begin(), rest.back());
  std::string out;
  const json* node = &document;
  for (const std::string& token : tokens) {
    if (node->is_array()) {
      out += "[" + token + "]";
      node = &(*node)[std::stoul(token)];
    } else {
      out += (out.empty() ? "" : ".") + token;
      node = &node->at(token);
    }
  }
  return out;
}

// Every place in `document`: each value's pointer (the root's is empty).
void places(const json& node, const json::json_pointer& here,
            std::vector<json::json_pointer>& out) {
  out.push_back(here);
  if (node.is_object()) {
    for (const auto& [key, value] : node.items())
      places(value, here / key, out);
  } else if (node.is_array()) {
    for (std::size_t i = 0; i < node.size(); ++i)
      places(node[i], here / i, out);
  }
}

struct Change {
  std::string what;
  json document;
  json::json_pointer place;  // the value changed, or the key removed
};

std::vector<Change> one_change_each(const json& document) {
  std::vector<Change> changes;
  std::vector<json::json_pointer> all;
  places(document, json::json_pointer(), all);
  for (const json::json_pointer& place : all) {
    const json& value = document.at(place);
    auto changed = [&](const std::string& what, const json& replacement) {
      json copy = document;
      copy.at(place) = replacement;
      changes.push_back({what + " at " + place.to_string(), std::move(copy), place});
    };
    if (value.is_object()) {
      json copy = document;
      copy.at(place)["unknown_key_zz"] = 1;
      changes.push_back({"an unknown key in " + place.to_string(), std::move(copy), place});
    }
    if (!place.empty()) {
      json copy = document;
      const json::json_pointer parent = place.parent_pointer();
      if (copy.at(parent).is_object()) {
        copy.at(parent).erase(place.back());
        changes.push_back({"no " + place.to_string(), std::move(copy), place});
      }
    }
    if (value.is_array() && !value.empty()) changed("an empty list", json::array());
    // A value of another kind: a mapping for a string, a word for anything else.
    if (value.is_string()) changed("a mapping", json::object());
    if (value.is_primitive() && !value.is_string()) changed("a word", "zz");
    if (value.is_number_integer()) {
      for (std::int64_t n : {std::int64_t{0}, std::int64_t{-1}, std::int64_t{1} << 40})
        changed("the integer " + std::to_string(n), n);
      changed("a fraction", 0.5);
    } else if (value.is_number_float()) {
      for (double x : {0.0, -1.0, 1e-30, 1e30})
        changed("the number " + json(x).dump(), x);
    }
  }
  return changes;
}

// Whether the loader's refusal is about the value at `place` being missing, or outside the
// range or the kind of value it accepts there: a refusal the schema must make too. Not the
// ranges that follow other figures, which only the loader knows: the machine's (a straggler's
// rank, a failed link's node, NIC or leaf), the GPU's own (base and sustained clocks at most
// boost, streaming bandwidth at most the datasheet's) or a place in a matrix (a covariance's
// diagonal is at least 0).
bool about_the_value(const InputError& error, const std::string& place) {
  if (error.key() != place) return false;
  static const std::regex loader_only(
      "^(stragglers\\.(gpus|nodes)\\[[0-9]+\\]\\.(gpu|node)|faults\\.links\\[[0-9]+\\]\\.(node|nic|"
      "leaf)|"
      "uncertainty\\.log_covariance\\[[0-9]+\\]\\[[0-9]+\\]|"
      "(.*\\.)?(clocks_mhz\\.(base|sustained)|streaming_gb_per_s))$");
  if (std::regex_match(place, loader_only)) return false;
  static const std::regex kinds(
      "^(missing required key|expected an integer from|expected a number from|expected a "
      "positive|expected a non-negative|expected a fraction|expected an integer of at least|"
      "expected a finite number|expected an integer|expected true or false|expected a string|"
      "expected a non-empty string|expected a list|expected a mapping|expected a non-empty "
      "list|expected one of|expected a number >= 0|expected an epoch time)");
  return std::regex_search(error.problem(), kinds);
}

// The range a loader's refusal names ("expected an integer from 1 to 64, got 0", "expected a
// number from 0.001 to 1e+06, got -1"): its ends, and whether it is of integers.
struct NamedRange {
  double low = 0, high = 0;
  bool integers = false;
};
std::optional<NamedRange> named_range(const std::string& problem) {
  static const std::regex range(
      "^expected an? (integer|number) from (-?[0-9.,e+-]+) to (-?[0-9.,e+-]+),");
  std::smatch found;
  if (!std::regex_search(problem, found, range)) return std::nullopt;
  auto number = [](std::string text) {
    text.erase(std::remove(text.begin(), text.end(), ','), text.end());
    return std::stod(text);
  };
  return NamedRange{number(found[2]), number(found[3]), found[1] == "integer"};
}

// Values just inside and just outside `range` (the loader prints a number's ends to 6 digits).
std::vector<std::pair<json, bool>> around(const NamedRange& range) {
  if (range.integers) {
    const auto low = static_cast<std::int64_t>(range.low);
    const auto high = static_cast<std::int64_t>(range.high);
    return {{low, true}, {high, true}, {low - 1, false}, {high + 1, false}};
  }
  auto nudge = [](double x, double by) { return x + std::max(std::abs(x), 1e-6) * by; };
  return {{range.low == 0 ? 0.0 : nudge(range.low, 1e-4), true},
          {nudge(range.high, -1e-4), true},
          {nudge(range.low, -1e-3), false},
          {nudge(range.high, 1e-3), false}};
}

}  // namespace

TEST_CASE("changed one key or value at a time the schemas refuse what the loaders refuse") {
  int changes = 0, refused_by_both = 0, ranges = 0;
  for (const auto& [origin, document] : documents_to_change()) {
    const std::string file = fs::relative(origin, test::source_dir()).string();
    INFO(file);
    const JsonSchema& checker = schema(*schema_file_of(document));
    REQUIRE(checker.errors(document).empty());
    REQUIRE_FALSE(loader_error(document, origin).has_value());
    std::set<std::string> ranged;  // the places whose range was checked
    // The schema's answer against the loader's for `changed`: never stricter (what the schema
    // refuses the loader refuses), and refusing what the loader refuses at `place` for a reason
    // of the value's own (`must_refuse`, or a missing key, a wrong kind, a range).
    auto compare = [&](const json& changed, const json::json_pointer& place,
                       const std::string& what, bool must_refuse) {
      const std::vector<std::string> errors = checker.errors(changed);
      const std::optional<InputError> refused = loader_error(changed, origin);
      INFO(what << "\nschema: " << joined(errors)
                << "\nloader: " << (refused ? refused->what() : "accepts it"));
      if (!errors.empty()) CHECK(refused.has_value());
      if (must_refuse || (refused && about_the_value(*refused, dotted(place, document))))
        CHECK_FALSE(errors.empty());
      if (!errors.empty() && refused) ++refused_by_both;
      return refused;
    };
    for (const Change& change : one_change_each(document)) {
      ++changes;
      const std::optional<InputError> refused = compare(change.document, change.place, change.what,
                                                        change.what.starts_with("an unknown key"));
      // A range the loader names: its ends are the schema's (inside accepted, outside refused).
      const std::optional<NamedRange> range =
          refused && refused->key() == dotted(change.place, document)
              ? named_range(refused->problem())
              : std::nullopt;
      if (!range || !about_the_value(*refused, dotted(change.place, document)) ||
          !ranged.insert(change.place.to_string()).second)
        continue;
      ++ranges;
      for (const auto& [value, inside] : around(*range)) {
        json changed = document;
        changed.at(change.place) = value;
        compare(changed, change.place,
                "the " + std::string(inside ? "inside" : "outside") + " value " + value.dump() +
                    " of " + refused->problem() + " at " + change.place.to_string(),
                !inside);
      }
    }
  }
  // The changes refused are most of them: the schemas are no formality.
  CHECK(changes > 2000);
  CHECK(refused_by_both > changes / 2);
  CHECK(ranges > 100);
}

namespace {

json golden(const std::string& name) {
  std::ifstream in(test::source_dir() / "tests/golden" / name);
  return json::parse(in);
}

// The schema's errors for `document` after `edit`.
std::vector<std::string> errors_after(const json& document,
                                      const std::function<void(json&)>& edit) {
  json copy = document;
  edit(copy);
  return schema(*schema_file_of(copy)).errors(copy);
}

}  // namespace

TEST_CASE("deliberately bad inputs are refused by the schemas and the loaders alike") {
  const fs::path root = test::source_dir();
  struct Bad {
    const char* file;
    std::function<void(json&)> edit;
    const char* error;  // a line of the schema's errors
  };
  const Bad bad[] = {
      {"scenarios/seed-001/linear.yaml", [](json& j) { j["training"]["strategy"] = "ddpp"; },
       "/training/strategy: the string \"ddpp\" is not one of"},
      {"scenarios/seed-001/linear.yaml", [](json& j) { j["sweep"].erase("batch_is"); },
       "/sweep: missing the required key 'batch_is'"},
      {"scenarios/seed-001/linear.yaml", [](json& j) { j["training"]["epochs"] = 0; },
       "/training/epochs: 0 is below the minimum 1"},
      {"scenarios/seed-001/linear.yaml", [](json& j) { j["sweep"]["gpus"] = json::array({"4"}); },
       "/sweep/gpus/0: expected integer, got the string \"4\""},
      {"scenarios/seed-001/linear.yaml", [](json& j) { j["training"]["bucket_cap_mib"] = 25; },
       "/training/bucket_cap_mib: unknown key"},
      {"scenarios/seed-003/fashion-mnist-cpu.yaml",
       [](json& j) { j.erase("statistical_efficiency"); },
       "(root): missing the required key 'statistical_efficiency'"},
      {"topologies/seed001-box.yaml", [](json& j) { j["gpus_per_node"] = 65; },
       "/gpus_per_node: 65 is above the maximum 64"},
      {"topologies/seed001-box.yaml", [](json& j) { j["host"].erase("cores"); },
       "/host: missing the required key 'cores'"},
      {"topologies/dgx1-v100.yaml", [](json& j) { j["topology"]["nvlink"]["shape"] = "mesh"; },
       "/topology/nvlink/shape: the string \"mesh\" is not one of"},
      {"topologies/gpus.yaml", [](json& j) { j["gpus"]["t4"]["architecture"] = "amprere"; },
       "/gpus/t4/architecture: the string \"amprere\" is not one of"},
      {"topologies/gpus.yaml", [](json& j) { j["gpus"]["t4"]["sources"].erase("l2_mib"); },
       "/gpus/t4/sources: missing the required key 'l2_mib'"},
      {"topologies/profiles/default.yaml", [](json& j) { j["gpu"]["efficiency"]["gemm"] = 1.5; },
       "/gpu/efficiency/gemm: 1.5 is above the maximum 1"},
      {"topologies/profiles/default.yaml", [](json& j) { j["sources"].erase("host.sync_us"); },
       "/sources: missing the required key 'host.sync_us'"},
      {"scenarios/models/mnist-cnn.yaml", [](json& j) { j["layers"][0]["type"] = "conv3d"; },
       "/layers/0: matches none of the"},
      {"scenarios/models/mnist-cnn.yaml", [](json& j) { j["layers"][0]["kernel"] = 0; },
       "/layers/0: matches none of the"},
      {"validate/data/host-cpu/cpu-mnist-cnn.json",
       [](json& j) { j["points"][0]["status"] = "good"; },
       "/points/0/status: the string \"good\" is not one of"},
      {"validate/data/host-cpu/cpu-mnist-cnn.json",
       [](json& j) { j["points"][0].erase("epoch_s_estimated"); },
       "/points/0: missing the required key 'epoch_s_estimated'"},
      {"validate/data/host-cpu/cpu-mnist-cnn.json", [](json& j) { j["settings"]["seed"] = -1; },
       "/settings/seed: -1 is below the minimum 0"},
      {"validate/data/fashion-mnist-cpu/runs.json",
       [](json& j) { j["noise_scale"]["low"] = "lots"; },
       "/noise_scale/low: matches none of the 2 alternatives (anyOf)"},
  };
  for (const Bad& b : bad) {
    const json document = read_document(root / b.file);
    json copy = document;
    b.edit(copy);
    const std::vector<std::string> errors = schema(*schema_file_of(copy)).errors(copy);
    INFO(b.file << "\n" << copy.dump().substr(0, 200) << "\nschema: " << joined(errors));
    CHECK(std::any_of(errors.begin(), errors.end(),
                      [&](const std::string& line) { return line.starts_with(b.error); }));
    CHECK(loader_error(copy, root / b.file).has_value());
  }
}

TEST_CASE("deliberately bad outputs are refused by the schemas") {
  const json prediction = golden("predict-seed-004-cats-dogs-memory.json");
  CHECK(errors_after(prediction, [](json& j) { j["points"][0]["bottleneck"] = "gpu"; }).size() ==
        1);
  // A point that was simulated has every figure of one.
  CHECK_FALSE(errors_after(prediction, [](json& j) {
                for (json& point : j["points"]) {
                  if (point.contains("epoch_s")) {
                    point.erase("breakdown_s");
                    break;
                  }
                }
              }).empty());
  // One that does not fit has none.
  CHECK_FALSE(errors_after(prediction, [](json& j) {
                for (json& point : j["points"]) {
                  if (!point["fits"].get<bool>()) point["epoch_s"] = 1.0;
                }
              }).empty());
  CHECK_FALSE(
      errors_after(prediction, [](json& j) { j["target"]["min_steps_from"] = "guess"; }).empty());
  CHECK_FALSE(errors_after(prediction, [](json& j) { j.erase("settings"); }).empty());

  const json comparison = golden("compare-resnet50-three-machines.json");
  CHECK_FALSE(errors_after(comparison, [](json& j) {
                j["machines"][0]["fastest"]["epoch_s"] = "fast";
              }).empty());
  CHECK_FALSE(
      errors_after(comparison, [](json& j) { j["machines"][0]["not_run"] = "why"; }).empty());
  const json collective = golden("collective-dgx-h100.json");
  CHECK_FALSE(errors_after(collective, [](json& j) { j["rows"][0]["protocol"] = "LL"; }).empty());
  const json analysis = golden("inspect-mnist-cnn.json");
  CHECK_FALSE(errors_after(analysis, [](json& j) { j["layers"][0]["flops"] = 1; }).empty());
  const json validation = golden("validate-cpu-mnist-cnn.json");
  CHECK_FALSE(errors_after(validation, [](json& j) { j["all"]["spearman"] = 2; }).empty());
  const json kernels = golden("kernels-add-linear-fit.json");
  CHECK_FALSE(errors_after(kernels, [](json& j) { j.erase("not_fitted"); }).empty());
}

// `epochcast import`: a model YAML from what users have. A Hugging Face config.json is read here
// (core/model/huggingface_config.h); a PyTorch module is traced by importers/torch_import.py,
// run without a shell with the interpreter the user chose. Either result is checked (loaded and
// analysed) before it is written.
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/io/child_process.h"
#include "core/io/output_file.h"
#include "core/model/analysis.h"
#include "core/model/huggingface_config.h"
#include "core/spec/data_paths.h"
#include "options/command_line.h"

namespace epochcast::cli {

namespace {

struct ImportArgs {
  std::string config;  // a Hugging Face config.json
  std::string torch;   // package.module.function or file.py:function
  std::string input_shape;
  std::string input_dtype = "float32";
  std::string kwargs = "{}";
  std::string name;
  std::string python;
  std::int64_t tokens = 0;
  std::int64_t labels = 0;
  std::string attention;
  std::string output = "-";
};

const SourceMark kCommandLine{"<command line>", 0, 0};

std::filesystem::path importer_script() {
  for (const std::filesystem::path& dir : data_directories()) {
    std::filesystem::path script = dir / "importers" / "torch_import.py";
    if (std::filesystem::is_regular_file(script)) return script;
  }
  throw InputError(kCommandLine, "--torch",
                   fmt::format("importers/torch_import.py is in none of the data folders\n{}",
                               describe_data_directories()));
}

std::string torch_yaml(const ImportArgs& a) {
  if (a.input_shape.empty()) {
    throw InputError(kCommandLine, "--input-shape",
                     "--torch needs one sample's shape, such as --input-shape 3,224,224");
  }
  std::string python = a.python;
  if (python.empty()) {
    const char* chosen = std::getenv("EPOCHCAST_PYTHON");
    python = chosen != nullptr && *chosen != '\0' ? chosen : "python3";
  }
  std::vector<std::string> argv = {python,          importer_script().string(),
                                   "--model",       a.torch,
                                   "--input-shape", a.input_shape,
                                   "--input-dtype", a.input_dtype,
                                   "--kwargs",      a.kwargs};
  if (!a.name.empty()) {
    argv.push_back("--name");
    argv.push_back(a.name);
  }
  const ChildResult result = run_program(argv);
  if (!result.started) {
    throw InputError(kCommandLine, "--python",
                     fmt::format("cannot start '{}'; name a Python with PyTorch (--python or "
                                 "EPOCHCAST_PYTHON)",
                                 python));
  }
  if (!result.succeeded()) {
    throw InputError(
        kCommandLine, "--torch",
        fmt::format("the import of {} failed (the importer's messages are above)", a.torch));
  }
  return result.output;
}

// The importer's last line: every layer's output per sample as PyTorch computed it. Each must
// be what the analysis infers, or the YAML does not describe the module.
constexpr std::string_view kShapesLine = "# pytorch-shapes: ";

void check_against_pytorch(std::string& yaml, const ModelAnalysis& analysis,
                           const std::string& model) {
  const std::size_t at = yaml.rfind(kShapesLine);
  if (at == std::string::npos) {
    throw InputError(kCommandLine, "--torch", "the importer gave no shapes to check against");
  }
  const nlohmann::json shapes = nlohmann::json::parse(yaml.substr(at + kShapesLine.size()));
  yaml.erase(at);
  for (const LayerCosts& layer : analysis.layers) {
    const auto found = shapes.find(layer.layer.name);
    if (found == shapes.end()) continue;  // a join the analysis adds (a residual's)
    const std::vector<std::int64_t> expected = found->get<std::vector<std::int64_t>>();
    if (expected != layer.output_shape.dims) {
      throw InputError(
          kCommandLine, "--torch",
          fmt::format("{}: layer '{}' gives [{}] per sample, PyTorch [{}]; the "
                      "import does not describe the module (please report it)",
                      model, layer.layer.name, fmt::join(layer.output_shape.dims, ", "),
                      fmt::join(expected, ", ")));
    }
  }
}

int run_import(const ImportArgs& a) {
  if (a.config.empty() == a.torch.empty()) {
    throw InputError(kCommandLine, "config",
                     "give a Hugging Face config.json or --torch MODEL (one of them)");
  }
  OutputFiles outputs;
  const OutputFile output = outputs.add(a.output, "--output");
  std::string yaml;
  std::string source;
  if (!a.config.empty()) {
    HuggingFaceOptions options;
    options.tokens = a.tokens;
    options.labels = a.labels;
    if (a.attention == "eager") options.attention = AttentionKernels::eager;
    if (a.attention == "sdpa") options.attention = AttentionKernels::sdpa;
    yaml = huggingface_model_yaml(a.config, options);
    source = a.config;
  } else {
    yaml = torch_yaml(a);
    source = a.torch;
  }
  // Checked as any model file is: a YAML that does not load or analyse is a bug of the import;
  // a traced module's shapes must be PyTorch's, layer by layer.
  const ModelAnalysis analysis =
      analyze_model(load_model_from_string(yaml, source + " (imported)"));
  if (!a.torch.empty()) check_against_pytorch(yaml, analysis, a.torch);
  output.write(yaml);
  std::ostream& note = output.kind() == OutputFile::Kind::standard_output ? std::cerr : std::cout;
  note << fmt::format("{}: {} layers, {} parameters, a sample [{}]{}\n", source,
                      analysis.layers.size(), analysis.params,
                      fmt::join(analysis.input_shape.dims, ", "),
                      output.kind() == OutputFile::Kind::standard_output
                          ? ""
                          : fmt::format(", written to {}", output.given()));
  return 0;
}

}  // namespace

Command add_import_command(CLI::App& app) {
  auto args = std::make_shared<ImportArgs>();
  CLI::App* cmd = app.add_subcommand(
      "import",
      "Write a model YAML from a Hugging Face config.json (BERT, RoBERTa, GPT-2, Llama, Mistral, "
      "Qwen2, ViT; no Python needed) or from a PyTorch module (--torch, traced with torch.fx)");
  cmd->add_option("config", args->config, "A Hugging Face config.json");
  cmd->add_option("--torch", args->torch,
                  "A PyTorch model to trace: package.module.function (torchvision.models.resnet50) "
                  "or file.py:function, called with --kwargs; the file is run as Python");
  cmd->add_option("--input-shape", args->input_shape,
                  "With --torch: one sample's shape, comma-separated (3,224,224)");
  cmd->add_option("--input-dtype", args->input_dtype, "With --torch: the input's type")
      ->check(CLI::IsMember({"float32", "int64"}));
  cmd->add_option("--kwargs", args->kwargs, "With --torch: the constructor's arguments as JSON");
  cmd->add_option("--name", args->name, "With --torch: the model's name");
  cmd->add_option("--python", args->python,
                  "With --torch: the Python with PyTorch (default: $EPOCHCAST_PYTHON, else "
                  "python3)");
  cmd->add_option("--tokens", args->tokens,
                  fmt::format("With a config: tokens a sample (default: the config's context, "
                              "at most {} for decoders, 512 for encoders)",
                              kDefaultHuggingFaceTokens))
      ->check(options::integer_within(1, 1 << 20));
  cmd->add_option("--labels", args->labels,
                  "With a ViT config: the classifier's classes (default: as transformers counts "
                  "them)")
      ->check(options::integer_within(1, 1 << 24));
  cmd->add_option("--attention", args->attention,
                  "With a config: transformers' attn_implementation (default sdpa)")
      ->check(CLI::IsMember({"eager", "sdpa"}));
  cmd->add_option("--output,-o", args->output, "Where to write the YAML (- for standard output)");
  return [args] { return run_import(*args); };
}

}  // namespace epochcast::cli

// `epochcast inspect MODEL`: a torchsummary-like per-layer table, totals, FLOPs and kernels.
#include <filesystem>
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/format/text_table.h"
#include "core/model/analysis.h"
#include "core/spec/data_paths.h"

namespace epochcast::cli {

namespace {

struct InspectOptions {
  std::string model;
  bool json = false;
};

std::string row_label(const LayerCosts& layer) {
  return layer.display_name.empty() ? std::string(to_string(layer.layer.type)) : layer.display_name;
}

void print_table(const ModelAnalysis& a) {
  fmt::print("Model {}: input {} {}\n\n", a.model_name, a.input_shape.str(),
             to_string(a.input_dtype));
  TextTable table;
  table.add_column("Layer (type)", TextTable::Align::left);
  table.add_column("Name", TextTable::Align::left);
  table.add_column("Output Shape", TextTable::Align::left);
  table.add_column("Param #");
  table.add_column("Fwd FLOPs");
  table.add_column("Bwd dX FLOPs");
  table.add_column("Bwd dW FLOPs");
  table.add_column("Saved KiB");
  table.add_column("Kernels f/b");
  for (const LayerCosts& layer : a.layers) {
    table.add_row(
        {row_label(layer), layer.layer.name, layer.output_shape.str(), with_thousands(layer.params),
         si_count(static_cast<double>(layer.forward_flops().per_sample.value())),
         si_count(static_cast<double>(layer.backward_input_flops().per_sample.value())),
         si_count(static_cast<double>(layer.backward_weight_flops().per_sample.value())),
         fmt::format("{:.1f}", static_cast<double>(layer.saved.per_sample.value()) / 1024.0),
         fmt::format("{}/{}", layer.forward_kernels(), layer.backward_kernels())});
  }
  fmt::print("{}", table.render());
  double total_mb =
      a.torchsummary_input_mb + a.torchsummary_forward_backward_mb + a.torchsummary_params_mb;
  fmt::print("Total params: {}\n", with_thousands(a.params));
  fmt::print("Trainable params: {}\n", with_thousands(a.params));
  fmt::print("Non-trainable params: 0\n");
  fmt::print("Input size (MB): {:.2f}\n", a.torchsummary_input_mb);
  fmt::print("Forward/backward pass size (MB): {:.2f}\n", a.torchsummary_forward_backward_mb);
  fmt::print("Params size (MB): {:.2f}\n", a.torchsummary_params_mb);
  fmt::print("Estimated Total Size (MB): {:.2f}\n\n", total_mb);

  auto flops = [](PerBatch<Flops> f) {
    return si_count(static_cast<double>(f.per_sample.value()));
  };
  fmt::print(
      "Per sample (fp32): {} multiply-adds; FLOPs forward {}, backward {} "
      "(input gradients {}, weight gradients {})\n",
      si_count(static_cast<double>(a.macs_per_sample)), flops(a.forward_flops),
      si_count(static_cast<double>(a.backward_input_flops.per_sample.value() +
                                   a.backward_weight_flops.per_sample.value())),
      flops(a.backward_input_flops), flops(a.backward_weight_flops));
  fmt::print("Activations held for backward: {:.2f} MiB per sample + {:.2f} MiB per step\n",
             to_mib(a.saved_activations.per_sample), to_mib(a.saved_activations.fixed));
  fmt::print("Buffers (running statistics): {}\n", with_thousands(a.buffers));
  fmt::print(
      "Kernels per training step: {} forward + {} backward = {} (before the loss and the "
      "optimizer)\n",
      a.forward_kernels, a.backward_kernels, a.forward_kernels + a.backward_kernels);
}

nlohmann::ordered_json per_batch(PerBatch<Flops> f) {
  return {{"per_sample", f.per_sample.value()}, {"per_step", f.fixed.value()}};
}
nlohmann::ordered_json per_batch(PerBatch<Bytes> b) {
  return {{"per_sample", b.per_sample.value()}, {"per_step", b.fixed.value()}};
}

void print_json(const ModelAnalysis& a) {
  nlohmann::ordered_json layers = nlohmann::ordered_json::array();
  for (const LayerCosts& layer : a.layers) {
    layers.push_back({
        {"name", layer.layer.name},
        {"type", to_string(layer.layer.type)},
        {"summary_name", layer.display_name},
        {"output_shape", layer.output_shape.dims},
        {"params", layer.params},
        {"macs_per_sample", layer.macs_per_sample},
        {"forward_flops", per_batch(layer.forward_flops())},
        {"backward_input_flops", per_batch(layer.backward_input_flops())},
        {"backward_weight_flops", per_batch(layer.backward_weight_flops())},
        {"forward_bytes", per_batch(layer.forward_bytes())},
        {"backward_bytes", per_batch(layer.backward_bytes())},
        {"saved_bytes", per_batch(layer.saved)},
        {"forward_kernels", layer.forward_kernels()},
        {"backward_kernels", layer.backward_kernels()},
        {"needs_input_grad", layer.needs_input_grad},
    });
  }
  nlohmann::ordered_json out = {
      {"model", a.model_name},
      {"input_shape", a.input_shape.dims},
      {"input_dtype", to_string(a.input_dtype)},
      {"output_shape", a.output_shape.dims},
      {"params", a.params},
      {"buffers", a.buffers},
      {"macs_per_sample", a.macs_per_sample},
      {"forward_flops", per_batch(a.forward_flops)},
      {"backward_input_flops", per_batch(a.backward_input_flops)},
      {"backward_weight_flops", per_batch(a.backward_weight_flops)},
      {"saved_activation_bytes", per_batch(a.saved_activations)},
      {"forward_kernels", a.forward_kernels},
      {"backward_kernels", a.backward_kernels},
      {"torchsummary",
       {{"input_size_mb", a.torchsummary_input_mb},
        {"forward_backward_pass_size_mb", a.torchsummary_forward_backward_mb},
        {"params_size_mb", a.torchsummary_params_mb}}},
      {"layers", layers},
  };
  std::cout << out.dump(2) << "\n";
}

}  // namespace

Command add_inspect_command(CLI::App& app) {
  auto options = std::make_shared<InspectOptions>();
  CLI::App* command = app.add_subcommand(
      "inspect",
      "Per-layer summary of a model: output shapes, parameters, FLOPs, memory held "
      "for backward and kernels launched, with torchsummary's totals");
  command->add_option("model", options->model, "A zoo model name (e.g. resnet-50) or a path")
      ->required();
  command->add_flag("--json", options->json, "Print the analysis as JSON");
  return [options] {
    std::filesystem::path file =
        resolve_data_file(options->model, std::filesystem::current_path(), "scenarios/models",
                          SourceMark{"<command line>", 0, 0}, "model");
    ModelAnalysis analysis = analyze_model(load_model(file));
    if (options->json) {
      print_json(analysis);
    } else {
      print_table(analysis);
    }
    return 0;
  };
}

}  // namespace epochcast::cli

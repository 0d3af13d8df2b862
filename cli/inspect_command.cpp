// `epochcast inspect MODEL`: a torchsummary-like per-layer table, totals, FLOPs and kernels.
#include <algorithm>
#include <array>
#include <filesystem>
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/terminal.h"
#include "core/format/text_table.h"
#include "core/model/analysis.h"
#include "core/spec/data_paths.h"
#include "core/spec/hardware_spec.h"
#include "core/spec/profile_spec.h"
#include "core/spec/scenario_spec.h"
#include "options/command_line.h"
#include "options/scenario_options.h"
#include "sim/compute/device_model.h"

namespace epochcast::cli {

namespace {

struct InspectOptions {
  std::string model;
  bool json = false;
  std::string hardware;  // with it: the kernels of a training step on that machine's GPU
  std::int64_t batch = 32;
  std::string precision = "fp32";
  std::string profile;
  bool cudnn_benchmark = false;
  bool channels_last = false;
  std::vector<std::string> catalogues;
};

// One kernel of a training step, as the device model costs it.
struct ExplainedKernel {
  std::string layer;
  std::string pass;  // forward, backward (input), backward (weight)
  const KernelWork* kernel = nullptr;
  sim::KernelExplanation why;
};

std::string efficiency_used(const sim::KernelExplanation& e, OpClass op_class,
                            const GpuEfficiency& profile) {
  switch (e.bound) {
    case sim::KernelBound::compute:
      return fmt::format(
          "{} {:.3g} of {:.4g} TFLOPS{}", name_of(op_class), e.efficiency, e.peak.value() / 1e12,
          e.clock_fraction < 1
              ? fmt::format(" at {:.0f}% of boost (power limit)", e.clock_fraction * 100)
              : "");
    case sim::KernelBound::memory:
      if (op_class == OpClass::optimizer) {
        return fmt::format("optimizer memory {:.3g}: {:.4g} GB/s",
                           profile.optimizer_memory_or_default(), e.bandwidth.value() / 1e9);
      }
      if (has_own_bandwidth(op_class)) {
        return fmt::format("memory {:.3g} x {} {:.3g}: {:.4g} GB/s", profile.memory_or_default(),
                           name_of(op_class),
                           profile.bandwidth_relative[static_cast<std::size_t>(op_class)],
                           e.bandwidth.value() / 1e9);
      }
      return fmt::format("memory {:.3g}: {:.4g} GB/s", profile.memory_or_default(),
                         e.bandwidth.value() / 1e9);
    case sim::KernelBound::floor:
      return "min_kernel_us";
    case sim::KernelBound::serial:
      return fmt::format("cpu_bernoulli_ns {:.3g}", profile.cpu_bernoulli_ns_or_default());
  }
  return "";
}

// The clock the peaks are taken at: "; 1590 MHz boost clock, no sustained clock known" or
// "; 773 MHz sustained (power rule) of 1590 MHz boost"; empty for a GPU without clocks.
std::string clock_words(const GpuSpec& gpu) {
  if (!gpu.clocks) return "";
  if (gpu.clocks->sustained_mhz) {
    return fmt::format("; {:.0f} MHz sustained{} of {:g} MHz boost", *gpu.clocks->sustained_mhz,
                       gpu.clocks->sustained_from_power_rule ? " (power rule)" : "",
                       gpu.clocks->boost_mhz);
  }
  return fmt::format("; {:g} MHz boost clock, no sustained clock known", gpu.clocks->boost_mhz);
}

nlohmann::json clocks_json(const GpuSpec& gpu) {
  if (!gpu.clocks) return nullptr;
  return {{"boost_mhz", gpu.clocks->boost_mhz},
          {"sustained_mhz", gpu.clocks->sustained_mhz ? nlohmann::json(*gpu.clocks->sustained_mhz)
                                                      : nlohmann::json()},
          {"sustained_from_power_rule", gpu.clocks->sustained_from_power_rule},
          {"peak_fraction", gpu.sustained_clock_fraction()}};
}

// The kernels of one training step's layers (forward and backward) on `hardware`'s GPU: the
// time of each, what bounds it, the algorithm assumed and the efficiency used, with sources.
int print_kernels(const ModelSpec& model, const InspectOptions& o) {
  const SourceMark cli{"<command line>", 0, 0};
  options::extend_catalogue(o.catalogues);
  MachineSpec machine = load_machine(resolve_data_file(o.hardware, std::filesystem::current_path(),
                                                       "topologies", cli, "--hardware"),
                                     bundled_gpu_catalogue());
  const auto precision =
      static_cast<TrainingPrecision>(std::find(std::begin(kTrainingPrecisionNames),
                                               std::end(kTrainingPrecisionNames), o.precision) -
                                     std::begin(kTrainingPrecisionNames));
  HardwareProfile profile =
      o.profile.empty() ? load_profile(machine.profile_file)
                        : load_profile(resolve_data_file(o.profile, std::filesystem::current_path(),
                                                         "topologies/profiles", cli, "--profile"));
  resolve_for_device(profile, machine.gpu, efficiency_precision(precision));
  ConvolutionSettings convolution;
  convolution.cudnn_benchmark = o.cudnn_benchmark;
  convolution.channels_last = o.channels_last;
  sim::DeviceModel device(machine.gpu, profile, precision, convolution);
  ModelAnalysis analysis = analyze_model(model, sim::cost_options(precision));

  std::vector<ExplainedKernel> kernels;
  for (const LayerCosts& layer : analysis.layers) {
    const std::string name = layer.display_name.empty() ? layer.layer.name : layer.display_name;
    auto add = [&](const std::vector<KernelWork>& list, const char* pass) {
      for (const KernelWork& k : list)
        kernels.push_back({name, pass, &k, device.explain(k, o.batch)});
    };
    add(layer.forward, "forward");
    add(layer.backward_input, "backward dX");
    add(layer.backward_weight, "backward dW");
  }
  if (o.json) {
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    for (const ExplainedKernel& k : kernels) {
      rows.push_back({{"layer", k.layer},
                      {"pass", k.pass},
                      {"kernel", k.kernel->name},
                      {"op_class", name_of(k.kernel->op_class)},
                      {"algorithm", k.why.algorithm},
                      {"kernels_launched", k.why.parts},
                      {"flops", k.why.flops},
                      {"bytes", k.why.bytes},
                      {"time_s", k.why.seconds},
                      {"bound", sim::bound_name(k.why.bound)},
                      {"compute_utilisation", k.why.compute_utilisation},
                      {"memory_utilisation", k.why.memory_utilisation},
                      {"efficiency", k.why.efficiency},
                      {"clock_fraction", k.why.clock_fraction},
                      {"peak_flops", k.why.peak.value()},
                      {"effective_bandwidth", k.why.bandwidth.value()}});
    }
    nlohmann::ordered_json out = {
        {"schema", "epochcast.step-kernels/1"},
        {"model", analysis.model_name},
        {"machine", machine.name},
        {"gpu", machine.gpu.id},
        {"architecture", machine.gpu.architecture},
        {"precision", o.precision},
        {"batch", o.batch},
        {"profile", profile.name},
        {"clocks", clocks_json(machine.gpu)},
        {"cudnn_benchmark", o.cudnn_benchmark},
        {"memory_format", kMemoryFormatNames[o.channels_last ? 1 : 0]},
        {"sources",
         {{"gpu.efficiency", profile.sources["gpu.efficiency"]},
          {"gpu.memory_efficiency", profile.sources["gpu.memory_efficiency"]},
          {"gpu.bandwidth_relative", profile.sources["gpu.bandwidth_relative"]},
          {"gpu.min_kernel_us", profile.sources["gpu.min_kernel_us"]}}},
        {"kernels", rows},
    };
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  const std::size_t width = output_width(stdout);
  fmt::print("{}\n",
             wrap_lines(fmt::format("Kernels of one training step of {} at batch {} on {} ({}, "
                                    "{}{}), profile {}, cudnn.benchmark {}, {}\n",
                                    analysis.model_name, o.batch, machine.gpu.name,
                                    machine.gpu.architecture, o.precision, clock_words(machine.gpu),
                                    profile.name, o.cudnn_benchmark ? "on" : "off",
                                    kMemoryFormatNames[o.channels_last ? 1 : 0]),
                        width));
  // On a narrow terminal: the efficiency's words and the algorithm are shortened, then the
  // figures a kernel's time follows from (class, MB, GFLOP, util) go before its time and bound.
  using Align = TextTable::Align;
  TextTable table;
  table.add_column("layer", Align::left, {6, 0});
  table.add_column("pass", Align::left);
  table.add_column("kernel", Align::left, {5, 0});
  table.add_column("class", Align::left, {0, 4});
  table.add_column("algorithm", Align::left, {7, 0});
  table.add_column("GFLOP", Align::right, {0, 2});
  table.add_column("MB", Align::right, {0, 3});
  table.add_column("time (us)");
  table.add_column("bound", Align::left);
  table.add_column("util", Align::right, {0, 2});
  table.add_column("efficiency used", Align::left, {9, 1});
  double total = 0;
  std::array<double, 4> by_bound{};  // KernelBound's order
  std::array<int, 4> count_by_bound{};
  for (const ExplainedKernel& k : kernels) {
    const double util = k.why.bound == sim::KernelBound::memory ? k.why.memory_utilisation
                                                                : k.why.compute_utilisation;
    table.add_row(
        {k.layer, k.pass, std::string(k.kernel->name), std::string(name_of(k.kernel->op_class)),
         k.why.algorithm, fmt::format("{:.3f}", k.why.flops / 1e9),
         fmt::format("{:.2f}", k.why.bytes / 1e6), fmt::format("{:.1f}", k.why.seconds * 1e6),
         sim::bound_name(k.why.bound), fmt::format("{:.0f}%", util * 100),
         efficiency_used(k.why, k.kernel->op_class, profile.gpu)});
    total += k.why.seconds;
    by_bound[static_cast<std::size_t>(k.why.bound)] += k.why.seconds;
    ++count_by_bound[static_cast<std::size_t>(k.why.bound)];
  }
  fmt::print("{}", table.render(width));
  fmt::print(
      "{}",
      wrap_lines(
          fmt::format(
              "\n{} kernels, {:.3f} ms on the GPU: compute-bound {} ({:.3f} ms), memory-bound {} "
              "({:.3f} ms), at the launch floor {} ({:.3f} ms){}. The loss, the optimizer and "
              "zero_grad add their own kernels (predict's opt column); host dispatch is not "
              "included.\n",
              kernels.size(), total * 1e3, count_by_bound[0], by_bound[0] * 1e3, count_by_bound[1],
              by_bound[1] * 1e3, count_by_bound[2], by_bound[2] * 1e3,
              count_by_bound[3] > 0 ? fmt::format(", drawing a mask serially {} ({:.3f} ms)",
                                                  count_by_bound[3], by_bound[3] * 1e3)
                                    : ""),
          width, 0));
  std::string sources;
  sources += fmt::format(
      "\nutil: the share of the GPU the kernel keeps busy (its tiles' waves, or blocks per "
      "SM).\nWhere the efficiencies come from (profile {}):\n",
      profile.name);
  // The per-architecture note is appended to both efficiency keys; print it once.
  std::string memory_source = profile.sources["gpu.memory_efficiency"];
  const std::string& efficiency_source = profile.sources["gpu.efficiency"];
  if (const std::size_t at = efficiency_source.find("; for "); at != std::string::npos) {
    const std::string note = efficiency_source.substr(at);
    if (memory_source.size() >= note.size() &&
        memory_source.compare(memory_source.size() - note.size(), note.size(), note) == 0) {
      memory_source.resize(memory_source.size() - note.size());
      memory_source += "; per architecture: as for gpu.efficiency above";
    }
  }
  sources += fmt::format("  gpu.efficiency: {}\n", efficiency_source);
  sources += fmt::format("  gpu.memory_efficiency: {}\n", memory_source);
  if (const auto relative = profile.sources.find("gpu.bandwidth_relative");
      relative != profile.sources.end()) {
    sources += fmt::format("  gpu.bandwidth_relative: {}\n", relative->second);
  }
  sources += fmt::format("  gpu.min_kernel_us: {}\n", profile.sources["gpu.min_kernel_us"]);
  fmt::print("{}", wrap_lines(sources, width, 4));
  return 0;
}

std::string row_label(const LayerCosts& layer) {
  return layer.display_name.empty() ? std::string(name_of(layer.layer.type)) : layer.display_name;
}

void print_table(const ModelAnalysis& a) {
  fmt::print("Model {}: input {} {}\n\n", a.model_name, a.input_shape.str(),
             name_of(a.input_dtype));
  // torchsummary's columns first; on a narrow terminal the layer names are shortened, then
  // kernels, saved activations and the backward's FLOPs go.
  using Align = TextTable::Align;
  TextTable table;
  table.add_column("Layer (type)", Align::left);
  table.add_column("Name", Align::left, {6, 0});
  table.add_column("Output Shape", Align::left);
  table.add_column("Param #");
  table.add_column("Fwd FLOPs");
  table.add_column("Bwd dX FLOPs", Align::right, {0, 3});
  table.add_column("Bwd dW FLOPs", Align::right, {0, 2});
  table.add_column("Saved KiB", Align::right, {0, 4});
  table.add_column("Kernels f/b", Align::right, {0, 5});
  for (const LayerCosts& layer : a.layers) {
    table.add_row(
        {row_label(layer), layer.layer.name, layer.output_shape.str(), with_thousands(layer.params),
         si_count(static_cast<double>(layer.forward_flops().per_sample.value())),
         si_count(static_cast<double>(layer.backward_input_flops().per_sample.value())),
         si_count(static_cast<double>(layer.backward_weight_flops().per_sample.value())),
         fmt::format("{:.1f}", static_cast<double>(layer.saved.per_sample.value()) / 1024.0),
         fmt::format("{}/{}", layer.forward_kernels(), layer.backward_kernels())});
  }
  const std::size_t width = output_width(stdout);
  fmt::print("{}", table.render(width));
  std::string notes;
  double total_mb =
      a.torchsummary_input_mb + a.torchsummary_forward_backward_mb + a.torchsummary_params_mb;
  notes += fmt::format("Total params: {}\n", with_thousands(a.params));
  notes += fmt::format("Trainable params: {}\n", with_thousands(a.params));
  notes += fmt::format("Non-trainable params: 0\n");
  notes += fmt::format("Input size (MB): {:.2f}\n", a.torchsummary_input_mb);
  notes +=
      fmt::format("Forward/backward pass size (MB): {:.2f}\n", a.torchsummary_forward_backward_mb);
  notes += fmt::format("Params size (MB): {:.2f}\n", a.torchsummary_params_mb);
  notes += fmt::format("Estimated Total Size (MB): {:.2f}\n\n", total_mb);

  auto flops = [](PerBatch<Flops> f) {
    return si_count(static_cast<double>(f.per_sample.value()));
  };
  notes += fmt::format(
      "Per sample (fp32): {} multiply-adds; FLOPs forward {}, backward {} "
      "(input gradients {}, weight gradients {})\n",
      si_count(static_cast<double>(a.macs_per_sample)), flops(a.forward_flops),
      si_count(static_cast<double>(a.backward_input_flops.per_sample.value() +
                                   a.backward_weight_flops.per_sample.value())),
      flops(a.backward_input_flops), flops(a.backward_weight_flops));
  notes +=
      fmt::format("Activations held for backward: {:.2f} MiB per sample + {:.2f} MiB per step\n",
                  to_mib(a.saved_activations.per_sample), to_mib(a.saved_activations.fixed));
  notes += fmt::format("Buffers (running statistics): {}\n", with_thousands(a.buffers));
  notes += fmt::format(
      "Kernels per training step: {} forward + {} backward = {} (before the loss and the "
      "optimizer)\n",
      a.forward_kernels, a.backward_kernels, a.forward_kernels + a.backward_kernels);
  fmt::print("{}", wrap_lines(notes, width));
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
        {"type", name_of(layer.layer.type)},
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
      {"schema", "epochcast.model-analysis/1"},
      {"model", a.model_name},
      {"input_shape", a.input_shape.dims},
      {"input_dtype", name_of(a.input_dtype)},
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
  command->add_option("--hardware", options->hardware,
                      "A machine (bundled name or path): list each kernel of a training step "
                      "on its GPU with its time, bound, algorithm and the efficiency used");
  options::add_catalogue_option(*command, options->catalogues);
  command->add_option("--batch", options->batch, "Per-GPU batch for --hardware (default 32)")
      ->check(options::integer_within(1, 1'000'000'000));
  command
      ->add_option("--precision", options->precision,
                   "Training precision for --hardware: fp32, tf32, amp_fp16 or amp_bf16")
      ->check(CLI::IsMember(std::vector<std::string>(std::begin(kTrainingPrecisionNames),
                                                     std::end(kTrainingPrecisionNames))));
  command->add_option("--profile", options->profile,
                      "A profile instead of the machine's own, for --hardware");
  command->add_flag("--cudnn-benchmark", options->cudnn_benchmark,
                    "For --hardware: convolutions take cuDNN's fastest algorithm "
                    "(torch.backends.cudnn.benchmark = True)");
  command->add_flag("--channels-last", options->channels_last,
                    "For --hardware: activations in NHWC order (memory_format=channels_last)");
  return [options] {
    std::filesystem::path file =
        resolve_data_file(options->model, std::filesystem::current_path(), "scenarios/models",
                          SourceMark{"<command line>", 0, 0}, "model");
    if (!options->hardware.empty()) return print_kernels(load_model(file), *options);
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

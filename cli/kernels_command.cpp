// `epochcast kernels DATA...`: the kernel model against kernel-level measurements, per operator
// class and GPU; with --fit the profile figures that fit them; with --leave-one-gpu-out, figures
// fitted on all GPUs but one and checked on that one.
#include <filesystem>
#include <iostream>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/terminal.h"
#include "core/format/text_table.h"
#include "core/io/output_file.h"
#include "core/spec/data_paths.h"
#include "core/spec/hardware_spec.h"
#include "core/spec/profile_figures.h"
#include "core/spec/profile_spec.h"
#include "options/command_line.h"
#include "validate/kernel_fit.h"
#include "validate/kernel_trace.h"

namespace epochcast::cli {

namespace {

// "add 0.56, ln 0.98, ...": the measuring loop's offset of each operator.
std::string offsets_text(const validate::MeasuringOffsets& offsets) {
  std::vector<std::string> parts;
  for (const auto& [op, fraction] : offsets)
    parts.push_back(fmt::format("{} {:.2f}", op, fraction));
  return parts.empty() ? "none fitted" : fmt::format("{}", fmt::join(parts, ", "));
}

struct KernelsArgs {
  std::vector<std::string> data;
  std::string profile = "default";
  std::vector<std::string> catalogues;
  std::vector<std::string> figures;
  bool fit = false;
  bool leave_one_out = false;
  std::string write_profile;
  std::string json;
  std::string residuals;
  std::string gpu;  // of the traces, when their device name is not enough
};

std::string percent(double fraction) {
  return fmt::format("{:.1f}%", 100 * fraction);
}

void add_accuracy_rows(TextTable& table, const std::vector<validate::ClassAccuracy>& accuracy) {
  for (const validate::ClassAccuracy& a : accuracy) {
    table.add_row({std::string(name_of(a.kernel_class)), a.gpu_id, std::to_string(a.rows),
                   std::to_string(a.gpu_decided), a.gpu_decided > 0 ? percent(a.mape) : "-",
                   a.gpu_decided > 0 ? fmt::format("{:.3f}", a.median_ratio) : "-"});
  }
}

TextTable accuracy_table() {
  TextTable table;
  table.add_column("class", TextTable::Align::left);
  table.add_column("GPU", TextTable::Align::left);
  table.add_column("rows");
  table.add_column("GPU-decided");
  table.add_column("MAPE");
  table.add_column("median pred/meas");
  return table;
}

nlohmann::json accuracy_json(const std::vector<validate::ClassAccuracy>& accuracy) {
  nlohmann::json out = nlohmann::json::array();
  for (const validate::ClassAccuracy& a : accuracy) {
    out.push_back(
        {{"class", name_of(a.kernel_class)},
         {"gpu", a.gpu_id},
         {"rows", a.rows},
         {"gpu_decided_rows", a.gpu_decided},
         // No GPU-decided row: no figure (the text prints '-').
         {"mape", a.gpu_decided > 0 ? nlohmann::json(a.mape) : nlohmann::json()},
         {"median_ratio", a.gpu_decided > 0 ? nlohmann::json(a.median_ratio) : nlohmann::json()}});
  }
  return out;
}

// --figures: keys of the kernel model, the ones kernel times can move (a host cost could only
// drift in a fit of kernel times).
void check_kernel_figure(const std::string& key) {
  std::vector<std::string> allowed;
  for (const ProfileFigure& figure : profile_figures()) {
    if (figure.key.starts_with("gpu.efficiency.") || figure.key.starts_with("gpu.bandwidth_") ||
        figure.key == "gpu.memory_efficiency" || figure.key == "gpu.min_kernel_us" ||
        figure.key.starts_with("gpu.tile_")) {
      allowed.push_back(figure.key);
    }
  }
  if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) return;
  std::vector<std::string_view> names(allowed.begin(), allowed.end());
  throw InputError(SourceMark{"<command line>", 0, 0}, "--figures",
                   fmt::format("'{}' is no figure kernel times can fit; expected one of {}{}", key,
                               join_alternatives(names), did_you_mean(key, names)));
}

std::string residual_csv(const std::vector<validate::KernelMeasurement>& rows,
                         const std::vector<validate::KernelPrediction>& predictions,
                         const std::vector<std::string>& modelled) {
  std::string out =
      "op,gpu,shape,measured_us,kernel_us,predicted_us,gpu_decided,library_kernel,model_kernel\n";
  auto quoted = [](std::string text) {
    for (char& c : text)
      if (c == '"') c = '\'';
    return "\"" + text + "\"";
  };
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const validate::KernelMeasurement& m = rows[i];
    const validate::KernelPrediction& p = predictions[i];
    out += fmt::format("{},{},{},{:.3f},{:.3f},{:.3f},{},{},{}\n", m.op, m.gpu_id,
                       fmt::join(m.shape, "x"), p.measured_s * 1e6, p.kernel_s * 1e6,
                       p.predicted_s * 1e6, p.gpu_decided ? 1 : 0, quoted(m.library_kernel),
                       quoted(modelled[i]));
  }
  return out;
}

int run_kernels(const KernelsArgs& a) {
  const SourceMark cli{"<command line>", 0, 0};
  OutputFiles outputs;
  std::optional<OutputFile> json_out, profile_out, residual_out;
  if (!a.json.empty()) json_out = outputs.add(a.json, "--json");
  if (!a.write_profile.empty()) profile_out = outputs.add(a.write_profile, "--write-profile");
  if (!a.residuals.empty()) residual_out = outputs.add(a.residuals, "--residuals");
  if (profile_out && !a.fit) {
    throw InputError(cli, "--write-profile", "writes the fitted profile: add --fit");
  }
  for (const std::string& file : a.catalogues)
    extend_gpu_catalogue(file);
  const GpuCatalogue& catalogue = bundled_gpu_catalogue();
  const HardwareProfile prior = load_profile(resolve_data_file(
      a.profile, std::filesystem::current_path(), "topologies/profiles", cli, "--profile"));
  for (const std::string& key : a.figures)
    check_kernel_figure(key);
  const std::vector<validate::FitStage> stages =
      a.figures.empty() ? validate::kernel_fit_stages() : validate::joint_fit(a.figures);

  if (!a.gpu.empty() && catalogue.find(a.gpu) == nullptr) {
    throw InputError(cli, "--gpu", fmt::format("no catalogue entry '{}'", a.gpu));
  }
  const bool quiet_early = a.json == "-" || a.residuals == "-";
  std::ostream& note = quiet_early ? std::cerr : std::cout;
  std::vector<validate::KernelMeasurement> rows;
  for (const std::string& path : a.data) {
    std::vector<validate::KernelMeasurement> more;
    if (std::filesystem::is_directory(path)) {
      more = validate::read_kernel_directory(path, catalogue);
    } else if (validate::is_kernel_trace(path)) {
      validate::KernelTrace trace = validate::read_kernel_trace(path, catalogue, a.gpu);
      note << fmt::format("{}: {} kernels of {}, {} attributed to {} operator shapes\n", path,
                          trace.kernels, trace.device, trace.attributed, trace.rows.size());
      for (const auto& [why, count] : trace.skipped)
        note << fmt::format("  left out: {} ({})\n", why, count);
      more = std::move(trace.rows);
    } else {
      more = validate::read_kernel_measurements(path, catalogue);
    }
    rows.insert(rows.end(), more.begin(), more.end());
  }
  if (rows.empty()) {
    throw InputError(cli, "data",
                     "no kernel measurement in the files given (a trace's operators must be "
                     "float32 linear, bmm, conv2d, layer_norm, softmax or element-wise ones, "
                     "recorded with their shapes)");
  }
  const validate::MeasurementFloors floors = validate::measurement_floors(rows);
  std::set<std::string> gpus;
  for (const auto& m : rows)
    gpus.insert(m.gpu_id);
  const bool quiet = outputs.to_standard_output();
  std::ostream& say = quiet ? std::cerr : std::cout;
  const std::size_t width = output_width(quiet ? stderr : stdout);

  nlohmann::json json = {{"schema", "epochcast.kernels/2"}};
  HardwareProfile profile = prior;
  say << fmt::format("{} kernel measurements of {} GPU(s), profile {}\n\n", rows.size(),
                     gpus.size(), prior.name);
  if (a.leave_one_out) {
    // Checked before any fit: a fit of one GPU held out has nothing to fit on.
    std::set<std::pair<std::string, int>> chips;
    for (const std::string& id : gpus) {
      const GpuSpec* gpu = catalogue.find(id);
      chips.insert({gpu->architecture, gpu->sm_count});
    }
    if (chips.size() < 2) {
      throw InputError(cli, "--leave-one-gpu-out",
                       "the measurements are of one GPU: leaving it out leaves nothing to fit "
                       "on; give measurements of two GPUs or more");
    }
  }
  // The measuring loop's offsets are the host's, not profile figures: each operator's read from
  // its rows under the profile evaluated.
  validate::MeasuringOffsets offsets =
      validate::fit_measuring_offsets(rows, prior, catalogue, floors);
  if (a.fit) {
    validate::KernelFit fit = validate::fit_kernel_figures(rows, prior, catalogue, floors, stages);
    profile = fit.profile;
    offsets = fit.offsets;
    say << "Fitted on every GPU:\n";
    nlohmann::json fitted = nlohmann::json::object();
    for (const auto& [key, value] : fit.figures) {
      say << fmt::format("  {} = {:.4g}\n", key, value);
      fitted[key] = value;
    }
    say << "  the measuring loop's offsets, of each operator's floor: " << offsets_text(offsets)
        << "\n";
    for (const std::string& key : fit.unseen) {
      say << fmt::format(
          "  {}: not fitted (no row of its classes is decided by the GPU), kept at "
          "the prior\n",
          key);
    }
    for (const std::string& key : fit.held) {
      say << fmt::format(
          "  {}: not fitted, each measured GPU's architecture gives its own "
          "(efficiency_by_architecture)\n",
          key);
    }
    say << "\n";
    json["fitted"] = fitted;
    json["not_fitted"] = fit.unseen;
    json["held_by_architecture"] = fit.held;
    if (profile_out) {
      if (fit.figures.empty()) {
        throw InputError(cli, "--write-profile",
                         "no figure was fitted (no row is decided by the GPU: each is within 1.5 "
                         "times its operator's shortest time); nothing to write");
      }
      profile.name = prior.name + "-kernel-fit";
      for (const auto& [key, value] : fit.figures) {
        profile.sources[key] =
            fmt::format("fitted to {} kernel measurements of {} by epochcast kernels --fit",
                        rows.size(), fmt::join(gpus, ", "));
      }
      profile_out->write(profile_yaml(profile, "Kernel figures fitted to kernel measurements."));
    }
  }
  const std::vector<validate::KernelPrediction> predictions =
      validate::predict_kernels(rows, profile, catalogue, floors, offsets);
  const std::vector<validate::ClassAccuracy> accuracy = validate::class_accuracy(rows, predictions);
  TextTable table = accuracy_table();
  add_accuracy_rows(table, accuracy);
  say << (a.fit ? "Accuracy with the fitted figures" : "Accuracy of the profile's figures")
      << (a.fit ? ":\n"
                : " (the measuring loop's offsets, of each operator's floor: " +
                      offsets_text(offsets) + "):\n")
      << table.render(width) << "\n";
  json["offset_fractions"] = offsets;
  json["accuracy"] = accuracy_json(accuracy);
  if (residual_out) {
    residual_out->write(
        residual_csv(rows, predictions, validate::modelled_kernels(rows, profile, catalogue)));
  }

  if (a.leave_one_out) {
    const std::vector<validate::LeaveOneOut> runs =
        validate::leave_one_gpu_out(rows, prior, catalogue, stages);
    TextTable held = accuracy_table();
    nlohmann::json loo = nlohmann::json::array();
    for (const validate::LeaveOneOut& run : runs) {
      add_accuracy_rows(held, run.held_out);
      loo.push_back({{"held_out", run.gpu_id},
                     {"fitted", run.fit.figures},
                     {"offset_fractions", run.fit.offsets},
                     {"accuracy", accuracy_json(run.held_out)}});
    }
    say << "Leave one GPU out (each GPU predicted from figures fitted on the others):\n"
        << held.render(width) << "\n";
    json["leave_one_gpu_out"] = loo;
  }
  if (json_out) json_out->write(json.dump(2) + "\n");
  return 0;
}

}  // namespace

Command add_kernels_command(CLI::App& app) {
  auto args = std::make_shared<KernelsArgs>();
  CLI::App* cmd = app.add_subcommand(
      "kernels",
      "Check the kernel model against kernel-level measurements (operator, shape, GPU, time), per "
      "operator class and GPU; fit its figures to them (--fit) or check that figures fitted on "
      "some GPUs predict another (--leave-one-gpu-out)");
  cmd->add_option("data", args->data,
                  "Kernel measurement files or directories of them (CSV, plain or .csv.gz, in the "
                  "columns of shared/data/kernels; docs/formats.md), or profiler traces "
                  "(epochcast run --kernel-trace, torch.profiler's Chrome trace)")
      ->required();
  cmd->add_option("--gpu", args->gpu,
                  "The catalogue GPU the profiler traces ran on, where the trace's device name "
                  "is not one entry's (\"NVIDIA H200\": h200-sxm or h200-nvl)");
  cmd->add_option("--profile", args->profile,
                  "The hardware profile whose figures predict (bundled name or path)");
  cmd->add_option("--catalogue", args->catalogues,
                  "A GPU catalogue file with the measured GPUs, beside the bundled one "
                  "(repeatable)");
  cmd->add_option("--figures", args->figures,
                  "Profile figures to fit together to every class (keys as in calibrate's report); "
                  "default: in steps, each with its operators' measuring offsets: element-wise "
                  "kernels (which stream at each board's catalogue figure), then "
                  "gpu.bandwidth_relative.normalization from LayerNorm and softmax, "
                  "gpu.efficiency.gemm and gpu.tile_staging_cycles from GEMMs, "
                  "gpu.efficiency.conv from convolutions")
      ->delimiter(',');
  cmd->add_flag("--fit", args->fit, "Fit the figures to every measurement and report with them");
  cmd->add_flag("--leave-one-gpu-out", args->leave_one_out,
                "For each GPU, fit on the others and report its accuracy");
  cmd->add_option("--write-profile", args->write_profile,
                  "With --fit: write the profile with the fitted figures");
  cmd->add_option("--json", args->json, "Write the report as JSON (- for standard output)");
  cmd->add_option("--residuals", args->residuals,
                  "Write every row's measured, modelled and predicted time as CSV, with the "
                  "library's kernel and the model's");
  return [args] { return run_kernels(*args); };
}

}  // namespace epochcast::cli

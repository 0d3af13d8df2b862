// The kernel model against kernel-level measurements: files read as written (plain or gzip) or
// refused with their position, operators costed by core/model, figures recovered from a
// synthetic truth, and the leave-one-GPU-out accuracy on the committed sample of the public data
// held to its committed figures.
#include <cmath>
#include <fstream>
#include <map>

#include <catch2/catch.hpp>
#include <zlib.h>

#include "core/format/csv_line.h"
#include "core/input_error.h"
#include "core/spec/profile_figures.h"
#include "core/spec/profile_spec.h"
#include "sim/compute/device_model.h"
#include "support/paths.h"
#include "validate/kernel_fit.h"
#include "validate/kernel_measurements.h"
#include "validate/simplex_search.h"

using namespace epochcast;
using namespace epochcast::validate;
using Catch::Contains;

namespace {

const std::string kHeader = "OPName,Latency,Device,B,H\n";

std::string write_text(const std::string& name, const std::string& text) {
  const std::string path = test::output_file(name);
  std::ofstream(path) << text;
  return path;
}

std::string error_of(const std::string& text) {
  try {
    read_kernel_measurements(write_text("kernels-bad.csv", text), bundled_gpu_catalogue());
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

HardwareProfile default_profile() {
  return load_profile(test::source_dir() / "topologies" / "profiles" / "default.yaml");
}

std::vector<KernelMeasurement> sample() {
  return read_kernel_directory(test::source_dir() / "tests" / "validate" / "kernels",
                               bundled_gpu_catalogue());
}

}  // namespace

TEST_CASE("kernel measurements: plain and gzip files read alike, devices named by the catalogue",
          "[kernels]") {
  // A byte-order mark before the header and catalogue ids as devices are fine.
  CHECK(read_kernel_measurements(
            write_text("kernels-bom.csv", "\xEF\xBB\xBF" + kHeader + "add,0.05,t4,4,4\n"),
            bundled_gpu_catalogue())
            .front()
            .gpu_id == "t4");
  const std::string text = "# a comment before the header\n" + kHeader +
                           "add,0.0312,Tesla T4,64,1024\n"
                           "ln,0.05,NVIDIA A100-PCIE-40GB,8,768\n";
  const std::string plain = write_text("kernels-plain.csv", text);
  const std::string zipped = test::output_file("kernels-zipped.csv.gz");
  gzFile out = gzopen(zipped.c_str(), "wb");
  REQUIRE(out != nullptr);
  gzwrite(out, text.data(), static_cast<unsigned>(text.size()));
  gzclose(out);
  for (const std::string& file : {plain, zipped}) {
    std::vector<KernelMeasurement> rows = read_kernel_measurements(file, bundled_gpu_catalogue());
    REQUIRE(rows.size() == 2);
    CHECK(rows[0].op == "add");
    CHECK(rows[0].gpu_id == "t4");
    CHECK(rows[0].seconds == Approx(31.2e-6));
    CHECK(rows[0].shape == std::vector<std::int64_t>{64, 1024});
    CHECK(rows[0].mark.line == 3);
    CHECK(rows[1].gpu_id == "a100-pcie-40gb");
    CHECK(kernel_class(rows[1].op) == KernelClass::layernorm);
  }
}

TEST_CASE("kernel measurements: bad files are refused at the cell, with what was expected",
          "[kernels]") {
  CHECK_THAT(error_of(kHeader + "add,0.03,Tesla X9,1,2\n"),
             Contains("kernels-bad.csv:2:") && Contains("Device") &&
                 Contains("no GPU of the catalogue is 'Tesla X9'") && Contains("t4"));
  CHECK_THAT(error_of(kHeader + "add,-1,Tesla T4,1,2\n"),
             Contains(":2:5:") && Contains("Latency") && Contains("above 0"));
  CHECK_THAT(error_of(kHeader + "addd,0.03,Tesla T4,1,2\n"),
             Contains("OPName") && Contains("did you mean 'add'"));
  CHECK_THAT(error_of(kHeader + "add,0.03,Tesla T4,0,2\n"),
             Contains("B") && Contains("from 1 to 2,147,483,647"));
  CHECK_THAT(error_of(kHeader + "add,0.03,Tesla T4,1\n"),
             Contains("4 cells where the header names 5"));
  CHECK_THAT(error_of("OPName,Latency,Device,B\nadd,0.03,Tesla T4,1\n"),
             Contains("H") && Contains("lacks this column"));
  CHECK_THAT(error_of("# only a comment\n"), Contains("no header"));
  CHECK_THAT(error_of(kHeader), Contains("a header and no measurement under it"));
  CHECK_THAT(error_of(kHeader + "add,0.03,Tesla T4,1,2" + std::string(1, '\0') + "\n"),
             Contains(":2:1:") && Contains("a NUL byte"));
  CHECK_THAT(error_of(kHeader + std::string(std::size_t{1} << 21, 'x')),
             Contains(":2:1:") && Contains("longer than 1 MiB"));
  // Sizes whose products leave 64 bits are refused at the row, never wrapped.
  CHECK_THAT(error_of("OPName,Latency,Device,B,M,N,K\nbmm,0.05,t4,2147483647,2147483647,"
                      "2147483647,2147483647\n"),
             Contains(":2:") && Contains("more than 2^60"));
  // Sizes the model refuses (a count beyond 2^44) are refused at the row too.
  const std::vector<KernelMeasurement> huge = read_kernel_measurements(
      write_text("kernels-huge.csv",
                 "OPName,Latency,Device,B,M,N,K\nlinear,0.05,t4,1,2147483,2147483,2147\n"),
      bundled_gpu_catalogue());
  try {
    cost_operator(huge.front());
    FAIL("a linear layer beyond the model's sizes was costed");
  } catch (const InputError& e) {
    CHECK_THAT(e.what(), Contains("kernels-huge.csv:2:1: error: shape"));
  }
  // A CPU entry of the catalogue is no GPU a kernel was measured on.
  CHECK_THAT(error_of(kHeader + "add,0.03,host-cpu-1core,1,2\n"),
             Contains("no GPU of the catalogue is 'host-cpu-1core'"));
  CHECK_THAT(error_of("OPName,Latency,Device,B,Input_Channel,Output_Channel,Kernel_Szie,"
                      "Input_Size,Stride,Padding\nconv,1,Tesla T4,1,3,8,7,3,1,1\n"),
             Contains("Kernel_Szie") && Contains("larger than the padded"));
}

TEST_CASE("kernel measurements: each operator is costed as the simulator costs its layer",
          "[kernels]") {
  KernelMeasurement linear{"linear", "Tesla T4", "t4", 1e-3, {4, 128, 768, 512}, "", {}};
  CostedOperator c = cost_operator(linear);
  REQUIRE(c.kernels.size() == 1);
  CHECK(c.batch == 4);
  CHECK(c.kernels[0].has_gemm_shape);
  // NeuSight's collect.py: nn.Linear(N, K) on [B, M, N]: N features in, K out.
  CHECK(scaled(c.kernels[0].gemm.m, c.batch) == 4 * 128);
  CHECK(scaled(c.kernels[0].gemm.n, c.batch) == 512);
  CHECK(scaled(c.kernels[0].gemm.k, c.batch) == 768);
  CHECK(scaled(c.kernels[0].bytes, c.batch) >= 4.0 * (4 * 128 * (768 + 512) + 768 * 512));

  // torch.bmm of [B, M, N] by [B, N, K]: N is the reduction.
  KernelMeasurement bmm{"bmm", "Tesla T4", "t4", 1e-3, {12, 64, 32, 16}, "", {}};
  c = cost_operator(bmm);
  CHECK(scaled(c.kernels[0].gemm.batches, c.batch) == 12);
  CHECK(scaled(c.kernels[0].gemm.m, c.batch) == 64);
  CHECK(scaled(c.kernels[0].gemm.n, c.batch) == 16);
  CHECK(scaled(c.kernels[0].gemm.k, c.batch) == 32);
  CHECK(scaled(c.kernels[0].bytes, c.batch) == 4.0 * 12 * (64 * 32 + 32 * 16 + 64 * 16));
  CHECK(scaled(c.kernels[0].flops, c.batch) == 2.0 * 12 * 64 * 32 * 16);

  KernelMeasurement conv{"conv", "Tesla T4", "t4", 1e-3, {8, 64, 128, 3, 56, 1, 1}, "", {}};
  c = cost_operator(conv);
  REQUIRE(c.kernels.size() == 1);  // no bias: the data's kernels are cuDNN's alone
  CHECK(c.kernels[0].has_conv_geometry);
  CHECK(c.kernels[0].conv.out_size[0] == 56);
  CHECK(c.kernels[0].conv.in_channels == 64);

  KernelMeasurement add{"add", "Tesla T4", "t4", 1e-3, {64, 1000}, "", {}};
  c = cost_operator(add);
  CHECK(scaled(c.kernels[0].bytes, c.batch) == 3.0 * 4 * 64 * 1000);
  KernelMeasurement ln{"ln", "Tesla T4", "t4", 1e-3, {64, 1000}, "", {}};
  c = cost_operator(ln);
  CHECK(c.kernels[0].op_class == OpClass::normalization);
}

TEST_CASE("kernel measurements: priced with the math they ran with (no TF32, cuDNN's fastest)",
          "[kernels]") {
  // collect.py sets torch.backends.cudnn.allow_tf32 = False and cudnn.benchmark = True: an
  // A100's fp32 convolutions ran on CUDA cores, as its GEMMs did.
  const GpuSpec* a100 = bundled_gpu_catalogue().find("a100-pcie-80gb");
  REQUIRE(a100 != nullptr);
  const sim::DeviceModel model(*a100, default_profile(), kKernelMeasurementPrecision,
                               kKernelMeasurementConvolution);
  CHECK_FALSE(model.conv_tensor_cores());
  CHECK_FALSE(model.tensor_cores());
  CHECK(kKernelMeasurementConvolution.cudnn_benchmark);
}

TEST_CASE("kernel measurements: each row says what the model runs, beside the library's kernel",
          "[kernels]") {
  const std::vector<KernelMeasurement> rows = sample();
  const std::vector<std::string> modelled =
      modelled_kernels(rows, default_profile(), bundled_gpu_catalogue());
  REQUIRE(modelled.size() == rows.size());
  int gemms = 0, convolutions = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    INFO(rows[i].op << " on " << rows[i].gpu_id << ": " << modelled[i]);
    CHECK_FALSE(modelled[i].empty());
    if (rows[i].op == "linear" || rows[i].op == "bmm") {
      ++gemms;
      CHECK_THAT(modelled[i], Catch::StartsWith("GEMM") && Catch::Contains("tiles"));
    } else if (rows[i].op == "conv") {
      ++convolutions;  // the longest part of cuDNN's algorithm: its GEMM or a transform
      CHECK_THAT(modelled[i], Catch::StartsWith("implicit GEMM") || Catch::StartsWith("Winograd") ||
                                  Catch::StartsWith("FFT") || Catch::StartsWith("inverse FFT"));
    }
  }
  CHECK(gemms > 0);
  CHECK(convolutions > 0);
}

TEST_CASE("simplex search finds the minimum of a curved valley, the same way every run",
          "[kernels]") {
  // Rosenbrock's valley: minimum 0 at (1, 1).
  auto rosenbrock = [](const std::vector<double>& x) {
    return 100 * std::pow(x[1] - x[0] * x[0], 2) + std::pow(1 - x[0], 2);
  };
  SimplexResult a = simplex_search(rosenbrock, {-1.2, 1.0}, 0.5, 1e-14, 5000);
  CHECK(a.x[0] == Approx(1).margin(1e-3));
  CHECK(a.x[1] == Approx(1).margin(2e-3));
  SimplexResult b = simplex_search(rosenbrock, {-1.2, 1.0}, 0.5, 1e-14, 5000);
  CHECK(a.x == b.x);
  CHECK(a.evaluations == b.evaluations);
}

TEST_CASE("kernel figures: a synthetic truth's figures and measuring offsets are recovered",
          "[kernels]") {
  // The sample's shapes and floors, measured times replaced by what a known profile predicts.
  const std::vector<KernelMeasurement> real = sample();
  const MeasurementFloors floors = measurement_floors(real);
  HardwareProfile truth = default_profile();
  set_profile_figure(truth, "gpu.efficiency.gemm", 0.55);
  set_profile_figure(truth, "gpu.efficiency.conv", 0.45);
  // Streaming at each board's own figure (the catalogue's), which the fit does not move.
  set_profile_figure(truth, "gpu.bandwidth_relative.normalization", 0.5);
  // Per-architecture figures would override the ones moved: the truth has none.
  truth.gpu.by_architecture.clear();
  // Each operator's host path has its own share of the floor before the launch.
  const MeasuringOffsets offsets = {{"add", 0.45},     {"bmm", 0.8}, {"conv", 0.9}, {"gelu", 0.5},
                                    {"linear", 0.7},   {"ln", 0.95}, {"mul", 0.45}, {"relu", 0.4},
                                    {"softmax", 0.85}, {"tanh", 0.5}};
  std::vector<KernelMeasurement> synthetic = real;
  const std::vector<KernelPrediction> made =
      predict_kernels(real, truth, bundled_gpu_catalogue(), floors, offsets);
  for (std::size_t i = 0; i < synthetic.size(); ++i)
    synthetic[i].seconds = made[i].predicted_s;

  HardwareProfile prior = default_profile();
  prior.gpu.by_architecture.clear();
  KernelFit fit =
      fit_kernel_figures(synthetic, prior, bundled_gpu_catalogue(), floors, kernel_fit_stages());
  INFO("staging " << fit.figures["gpu.tile_staging_cycles"]);
  CHECK(fit.figures["gpu.efficiency.gemm"] == Approx(0.55).epsilon(0.02));
  CHECK(fit.figures["gpu.efficiency.conv"] == Approx(0.45).epsilon(0.02));
  CHECK_FALSE(fit.figures.contains("gpu.memory_efficiency"));
  CHECK(fit.figures["gpu.bandwidth_relative.normalization"] == Approx(0.5).epsilon(0.02));
  for (const auto& [op, offset] : offsets) {
    INFO(op);
    CHECK(offset_for(fit.offsets, op) == Approx(offset).epsilon(0.05));
  }
  CHECK(fit.cost < 1e-4);
}

TEST_CASE(
    "kernel model: figures fitted on four GPUs predict the fifth within the committed "
    "figures (leave one GPU out, committed sample of shared/data/kernels)",
    "[kernels]") {
  // tests/validate/kernels-leave-one-gpu-out.csv: class, held-out GPU(s), MAPE (%) not to exceed.
  // A regression guard: the goal (issue 44: 15% everywhere) is tracked in the notes.
  std::map<std::pair<std::string, std::string>, double> limits;
  const std::string limits_file = test::source_file("tests/validate/kernels-leave-one-gpu-out.csv");
  std::ifstream in(limits_file);
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty() || line.front() == '#' || line.starts_with("class,")) continue;
    std::vector<CsvCell> cells = split_csv_line(line, limits_file, number);
    REQUIRE(cells.size() == 3);
    limits[{cells[0].text, cells[1].text}] = std::stod(cells[2].text);
  }
  REQUIRE(!limits.empty());

  const std::vector<LeaveOneOut> runs =
      leave_one_gpu_out(sample(), default_profile(), bundled_gpu_catalogue(), kernel_fit_stages());
  std::size_t checked = 0;
  for (const LeaveOneOut& run : runs) {
    for (const ClassAccuracy& a : run.held_out) {
      const std::string cls(name_of(a.kernel_class));
      INFO(cls << " on " << run.gpu_id << ": " << 100 * a.mape << "% over " << a.gpu_decided
               << " rows");
      auto limit = limits.find({cls, run.gpu_id});
      REQUIRE(limit != limits.end());
      CHECK(100 * a.mape <= limit->second);
      ++checked;
    }
  }
  CHECK(checked == limits.size());
}

// Kernel times from profiler traces: kernels attributed to the operators that launched them, rows
// in the kernel measurements' columns with no measuring floor, the kernel model's figures
// recovered from a synthetic truth's trace, and bad traces refused with what to do.
#include <fstream>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "core/input_error.h"
#include "core/spec/profile_figures.h"
#include "core/spec/profile_spec.h"
#include "support/paths.h"
#include "validate/kernel_fit.h"
#include "validate/kernel_trace.h"

using namespace epochcast;
using namespace epochcast::validate;
using Catch::Contains;
using Json = nlohmann::json;

namespace {

// A trace as Kineto writes one: operators on the main thread, their launches within them, the
// kernels on the GPU's stream joined by correlation id.
class TraceWriter {
 public:
  explicit TraceWriter(std::string device = "NVIDIA H100 SXM5 80GB") {
    trace_["schemaVersion"] = 1;
    trace_["deviceProperties"] = Json::array({{{"id", 0}, {"name", std::move(device)}}});
    trace_["traceEvents"] = Json::array();
  }
  // An operator of `us` microseconds of kernels: `name` with its inputs' dims and types (and
  // scalar arguments as "Concrete Inputs"), an inner ATen call and one launch inside it.
  void op(const std::string& name, const Json& dims, const Json& types, double kernel_us,
          const Json& concrete = Json()) {
    Json args = {{"Input Dims", dims}, {"Input type", types}};
    if (!concrete.is_null()) args["Concrete Inputs"] = concrete;
    complete_event("cpu_op", name, 1, 1, now_, 20, args);
    complete_event("cpu_op", "aten::addmm", 1, 1, now_ + 2, 15, Json::object());
    launch(now_ + 5, 1, kernel_us);
    now_ += 100;
  }
  // A kernel launched from another thread (autograd's), outside every operator of the main one.
  void stray_kernel(double kernel_us) {
    launch(now_, 2, kernel_us);
    now_ += 100;
  }
  // How the steps ran, as epochcast's tools record it.
  void ran_with(bool cudnn_allow_tf32) {
    trace_["epochcast"] = {{"precision", "fp32"}, {"cudnn_allow_tf32", cudnn_allow_tf32}};
  }
  void write(const std::string& path) const { std::ofstream(path) << trace_.dump(1); }

 private:
  Json& events() { return trace_["traceEvents"]; }
  void launch(double at, int thread, double kernel_us) {
    ++correlation_;
    complete_event("cuda_runtime", "cudaLaunchKernel", 1, thread, at, 4,
                   {{"correlation", correlation_}});
    complete_event("kernel", "sm90_xmma_gemm_f32f32_tilesize128x128x32", 0, 7, at + 10, kernel_us,
                   {{"correlation", correlation_},
                    {"grid", {66, 2, 1}},
                    {"block", {256, 1, 1}},
                    {"device", 0}});
  }
  // A complete ("X") event of Chrome's trace format, `us` long from `at`.
  void complete_event(const std::string& category, const std::string& name, int pid, int tid,
                      double at, double us, Json args) {
    events().push_back({{"ph", "X"},
                        {"cat", category},
                        {"name", name},
                        {"pid", pid},
                        {"tid", tid},
                        {"ts", at},
                        {"dur", us},
                        {"args", std::move(args)}});
  }
  Json trace_;
  double now_ = 1000;
  int correlation_ = 0;
};

std::string error_of(const std::string& text) {
  const std::string path = test::output_file("trace-bad.json");
  std::ofstream(path) << text;
  try {
    read_kernel_trace(path, bundled_gpu_catalogue());
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("kernel trace: kernels belong to the operator that launched them, repeats are one row",
          "[kernels]") {
  TraceWriter w;
  const Json fp32x2 = {"float", "float", "float"};
  // aten::linear of [32, 128, 512] by a [1024, 512] weight, three times (three steps).
  for (double us : {50.0, 70.0, 60.0})
    w.op("aten::linear", {{32, 128, 512}, {1024, 512}, {1024}}, fp32x2, us);
  w.op("aten::layer_norm", {{32, 128, 1024}, {}, {1024}, {1024}},
       {"float", "ScalarList", "float", "float"}, 12.5);
  w.op("aten::add", {{64, 256}, {}}, {"float", "Scalar"}, 3);  // a scalar operand
  w.op("aten::relu", {{64, 256}}, {"c10::BFloat16"}, 2);       // not float32
  w.op("aten::conv2d", {{8, 64, 56, 56}, {64, 64, 3, 3}, {}}, fp32x2, 40,
       {"", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "1"});
  // A 1x1 convolution without padding (ResNet's) is a row too.
  w.op("aten::conv2d", {{8, 64, 56, 56}, {256, 64, 1, 1}, {}}, fp32x2, 20,
       {"", "", "", "[1, 1]", "[0, 0]", "[1, 1]", "1"});
  w.stray_kernel(30);
  w.ran_with(/*cudnn_allow_tf32=*/false);
  const std::string path = test::output_file("trace.json");
  w.write(path);

  KernelTrace trace = read_kernel_trace(path, bundled_gpu_catalogue());
  CHECK(trace.device == "NVIDIA H100 SXM5 80GB");
  CHECK(trace.kernels == 9);
  CHECK(trace.attributed == 8);  // all but the stray one
  CHECK(trace.skipped["not two tensors of one shape"] == 1);
  CHECK(trace.skipped["not float32"] == 1);
  REQUIRE(trace.rows.size() == 4);
  // Sorted by operator, then shape.
  CHECK(trace.rows[0].op == "conv");
  CHECK(trace.rows[0].shape == std::vector<std::int64_t>{8, 64, 64, 3, 56, 1, 1});
  CHECK(trace.rows[1].shape == std::vector<std::int64_t>{8, 64, 256, 1, 56, 1, 0});
  const KernelMeasurement& linear = trace.rows[2];
  CHECK(linear.op == "linear");
  CHECK(linear.gpu_id == "h100-sxm");
  CHECK(linear.shape == std::vector<std::int64_t>{4096, 1, 512, 1024});
  CHECK(linear.seconds == Approx(60e-6));  // the median of 50, 70 and 60
  CHECK(linear.kernel_only);
  CHECK_THAT(linear.library_kernel, Contains("sm90_xmma_gemm") && Contains("grid [66,2,1]") &&
                                        Contains("block [256,1,1]"));
  CHECK(trace.rows[3].op == "ln");
  CHECK(trace.rows[3].shape == std::vector<std::int64_t>{4096, 1024});

  // A kernel's own time has no measuring floor: it is predicted as the kernel model's time.
  const MeasurementFloors floors = measurement_floors(trace.rows);
  CHECK(floors.empty());
  const std::vector<KernelPrediction> p = predict_kernels(
      trace.rows, load_profile(test::source_dir() / "topologies/profiles/default.yaml"),
      bundled_gpu_catalogue(), floors);
  for (const KernelPrediction& k : p) {
    CHECK(k.predicted_s == k.kernel_s);
    CHECK(k.gpu_decided);
  }

  // On a GPU with TF32, cuDNN's default runs a float32 convolution in TF32: a trace that does not
  // say TF32 was off gives no convolution row (the kernel fit prices them without).
  w.ran_with(/*cudnn_allow_tf32=*/true);
  w.write(path);
  trace = read_kernel_trace(path, bundled_gpu_catalogue());
  CHECK(trace.rows.size() == 2);
  CHECK(trace.skipped.size() == 3);
  // A GPU without TF32 (the V100) runs it in float32 whatever the flag.
  CHECK(read_kernel_trace(path, bundled_gpu_catalogue(), "v100-sxm2-16gb").rows.size() == 4);
}

TEST_CASE("kernel trace: the kernel model's figures are recovered from a synthetic truth's trace",
          "[kernels]") {
  // GEMMs, LayerNorms and adds of the shapes a transformer launches, their kernel times what a
  // known profile gives on the H100: the fit that builds the default profile recovers it.
  HardwareProfile truth = load_profile(test::source_dir() / "topologies/profiles/default.yaml");
  truth.gpu.by_architecture.clear();
  set_profile_figure(truth, "gpu.efficiency.gemm", 0.55);
  set_profile_figure(truth, "gpu.bandwidth_relative.normalization", 0.6);
  std::vector<KernelMeasurement> shapes;
  auto row = [&](std::string op, std::vector<std::int64_t> shape) {
    KernelMeasurement m;
    m.op = std::move(op);
    m.gpu_id = "h100-sxm";
    m.shape = std::move(shape);
    m.kernel_only = true;
    shapes.push_back(m);
  };
  for (std::int64_t tokens : {512, 2048, 8192, 32768}) {
    row("linear", {tokens, 1, 768, 768});
    row("linear", {tokens, 1, 768, 3072});
    row("linear", {tokens, 1, 3072, 768});
    row("ln", {tokens, 768});
    row("ln", {tokens, 1024});
    row("add", {tokens, 768});
    row("add", {tokens, 3072});
  }
  const std::vector<KernelPrediction> made =
      predict_kernels(shapes, truth, bundled_gpu_catalogue(), {});
  TraceWriter w;
  const Json fp32x3 = {"float", "float", "float"};
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const std::vector<std::int64_t>& s = shapes[i].shape;
    const double us = made[i].kernel_s * 1e6;
    if (shapes[i].op == "linear") {
      w.op("aten::linear", {{s[0], s[2]}, {s[3], s[2]}, {s[3]}}, fp32x3, us);
    } else if (shapes[i].op == "ln") {
      w.op("aten::layer_norm", {{s[0], s[1]}, {}, {s[1]}, {s[1]}},
           {"float", "ScalarList", "float", "float"}, us);
    } else {
      w.op("aten::add", {{s[0], s[1]}, {s[0], s[1]}, {}}, {"float", "float", "Scalar"}, us);
    }
  }
  const std::string path = test::output_file("trace-truth.json");
  w.write(path);
  KernelTrace trace = read_kernel_trace(path, bundled_gpu_catalogue());
  REQUIRE(trace.rows.size() == shapes.size());

  HardwareProfile prior = load_profile(test::source_dir() / "topologies/profiles/default.yaml");
  prior.gpu.by_architecture.clear();
  const KernelFit fit = fit_kernel_figures(trace.rows, prior, bundled_gpu_catalogue(),
                                           measurement_floors(trace.rows), kernel_fit_stages());
  CHECK(fit.figures.at("gpu.efficiency.gemm") == Approx(0.55).epsilon(0.02));
  CHECK(fit.figures.at("gpu.bandwidth_relative.normalization") == Approx(0.6).epsilon(0.02));
  CHECK(fit.cost < 1e-4);
}

TEST_CASE("kernel trace: a trace that is not one, or has no GPU kernel, is refused with what to do",
          "[kernels]") {
  CHECK_THAT(error_of("{\"traceEvents\": [\n  {\"ph\": \"X\",, }\n]}"),
             Contains("trace-bad.json:2:") && Contains("not a JSON profiler trace"));
  // A field of another type than Kineto writes.
  CHECK_THAT(error_of(R"({"traceEvents": [{"ph": 5}, {"ph": "X", "cat": "kernel", "ts": 1,
                        "dur": 2, "args": {"correlation": 1, "grid": 3}}, {"ph": "X", "cat": 7}]})"),
             Contains("trace-bad.json") && Contains("not as a PyTorch profiler trace writes it"));
  CHECK_THAT(error_of("{\"schemaVersion\": 1}"),
             Contains("traceEvents") && Contains("export_chrome_trace"));
  // A CPU-only trace: operators, no kernel.
  CHECK_THAT(error_of(R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::linear",
                        "ts": 1, "dur": 2, "args": {}}]})"),
             Contains("no GPU kernel") && Contains("ProfilerActivity.CUDA"));
  // A device the catalogue does not know by name.
  TraceWriter w("NVIDIA H200");
  w.op("aten::relu", {{4, 4}}, {"float"}, 2);
  const std::string path = test::output_file("trace-h200.json");
  w.write(path);
  try {
    read_kernel_trace(path, bundled_gpu_catalogue());
    FAIL("an ambiguous device name was accepted");
  } catch (const InputError& e) {
    CHECK_THAT(e.what(), Contains("'NVIDIA H200' is no catalogue entry") && Contains("--gpu"));
  }
  CHECK(read_kernel_trace(path, bundled_gpu_catalogue(), "h200-sxm").rows.size() == 1);
  CHECK(is_kernel_trace(path));
  CHECK_FALSE(is_kernel_trace(test::source_dir() / "tests/validate/kernels/add.csv"));
  CHECK_FALSE(is_kernel_trace(test::source_dir() / "validate/data/host-cpu/cpu-mnist-cnn.json"));
}

// Profiler traces into kernel measurements: operators, their launches and their kernels joined
// by thread, time span and correlation id (kernel_trace.h).
#include "validate/kernel_trace.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <zlib.h>

#include "core/measure/measurements.h"

namespace epochcast::validate {

namespace {

using Json = nlohmann::json;

// Larger than any trace of a few profiled steps (a ResNet-50 step's is a few MB); beyond it a
// file is refused before it exhausts memory.
constexpr std::size_t kLargestTrace = std::size_t{1} << 30;

// The whole file, through zlib so that a .json.gz needs no unpacking.
std::string read_all(const std::filesystem::path& file) {
  gzFile in = gzopen(file.string().c_str(), "rb");
  if (in == nullptr) {
    throw InputError(SourceMark{file.string(), 0, 0}, "", "cannot open the trace");
  }
  std::string text, block(1 << 16, '\0');
  while (true) {
    const int got = gzread(in, block.data(), static_cast<unsigned>(block.size()));
    if (got < 0) {
      gzclose(in);
      throw InputError(SourceMark{file.string(), 0, 0}, "",
                       "the compressed trace is damaged (zlib could not read on)");
    }
    if (got == 0) break;
    text.append(block, 0, static_cast<std::size_t>(got));
    if (text.size() > kLargestTrace) {
      gzclose(in);
      throw InputError(SourceMark{file.string(), 0, 0}, "",
                       "the trace is larger than 1 GiB; profile fewer steps (torch.profiler's "
                       "schedule, active=1 or 2)");
    }
  }
  gzclose(in);
  return text;
}

// The operators the kernel fit knows, by the ATen name the profiler records.
std::optional<std::string> operator_kind(const std::string& name) {
  static const std::map<std::string, std::string> kinds = {
      {"aten::linear", "linear"}, {"aten::bmm", "bmm"},         {"aten::conv2d", "conv"},
      {"aten::layer_norm", "ln"}, {"aten::softmax", "softmax"}, {"aten::_softmax", "softmax"},
      {"aten::add", "add"},       {"aten::add_", "add"},        {"aten::mul", "mul"},
      {"aten::mul_", "mul"},      {"aten::relu", "relu"},       {"aten::relu_", "relu"},
      {"aten::gelu", "gelu"},     {"aten::tanh", "tanh"},       {"aten::tanh_", "tanh"}};
  auto found = kinds.find(name);
  if (found == kinds.end()) return std::nullopt;
  return found->second;
}

struct Operator {
  std::string kind;  // of kKernelOperators
  Json args;
  double start = 0, end = 0;  // microseconds
  double kernel_us = 0;
  std::string longest_kernel;
  double longest_us = -1;
};

struct Launch {
  double time = 0;
  std::string thread;  // "pid/tid"
};

std::string thread_of(const Json& event) {
  return fmt::format("{}/{}", event.value("pid", Json()).dump(), event.value("tid", Json()).dump());
}

// A number of the event (ts, dur) or nullopt.
std::optional<double> number(const Json& event, const char* key) {
  auto found = event.find(key);
  if (found == event.end() || !found->is_number()) return std::nullopt;
  const double value = found->get<double>();
  if (!std::isfinite(value)) return std::nullopt;
  return value;
}

// "Input Dims" entry i as integers; nullopt when absent or not a list of non-negative integers.
std::optional<std::vector<std::int64_t>> dims(const Json& args, std::size_t i) {
  auto all = args.find("Input Dims");
  if (all == args.end() || !all->is_array() || i >= all->size()) return std::nullopt;
  const Json& d = (*all)[i];
  if (!d.is_array()) return std::nullopt;
  std::vector<std::int64_t> out;
  for (const Json& v : d) {
    if (!v.is_number_integer() || v.get<std::int64_t>() < 0) return std::nullopt;
    out.push_back(v.get<std::int64_t>());
  }
  return out;
}

// "Concrete Inputs" entry i (a scalar argument as text: "[1, 1]", "-1"), or "" when not recorded.
std::string concrete(const Json& args, std::size_t i) {
  auto all = args.find("Concrete Inputs");
  if (all == args.end() || !all->is_array() || i >= all->size() || !(*all)[i].is_string())
    return "";
  return (*all)[i].get<std::string>();
}

// The integers of "[2, 2]" or "1".
std::vector<std::int64_t> integers(const std::string& text) {
  std::vector<std::int64_t> out;
  std::string digits;
  for (char c : text + ",") {
    if ((c >= '0' && c <= '9') || (c == '-' && digits.empty())) {
      digits += c;
    } else if (!digits.empty()) {
      if (digits == "-" || digits.size() > 18) return {};
      out.push_back(std::stoll(digits));
      digits.clear();
    }
  }
  return out;
}

std::int64_t product(const std::vector<std::int64_t>& d, std::size_t from, std::size_t to) {
  std::int64_t p = 1;
  for (std::size_t i = from; i < to; ++i)
    p = d[i] > 0 && p > (std::int64_t{1} << 60) / d[i] ? -1 : p * d[i];
  return p;
}

// The operator's shape in the kernel measurement columns of its kind
// (kernel_measurements.h), or the reason it cannot be one.
struct Shape {
  std::vector<std::int64_t> values;
  std::string why_not;
};
Shape shape_of(const Operator& op) {
  auto types = op.args.find("Input type");
  if (types != op.args.end() && types->is_array()) {
    for (const Json& t : *types) {
      // Tensor inputs are typed ("float", "c10::BFloat16"); scalars and lists have "" or
      // "Scalar" / "ScalarList".
      if (!t.is_string()) continue;
      const std::string type = t.get<std::string>();
      if (!type.empty() && type != "float" && type != "Scalar" && type != "ScalarList" &&
          type != "int" && type != "bool")
        return {{}, "not float32"};
    }
  }
  const auto input = dims(op.args, 0);
  if (!input || input->empty()) return {{}, "no input shape (record_shapes off)"};
  const std::vector<std::int64_t>& d = *input;
  const std::size_t rank = d.size();
  auto leading = [&](std::size_t to) { return product(d, 0, to); };
  if (op.kind == "linear") {
    const auto weight = dims(op.args, 1);
    if (!weight || weight->size() != 2 || rank < 2) return {{}, "unexpected shapes"};
    return {{leading(rank - 1), 1, d[rank - 1], (*weight)[0]}, ""};
  }
  if (op.kind == "bmm") {
    const auto other = dims(op.args, 1);
    if (!other || other->size() != 3 || rank != 3) return {{}, "unexpected shapes"};
    return {{d[0], d[1], d[2], (*other)[2]}, ""};
  }
  if (op.kind == "conv") {
    const auto weight = dims(op.args, 1);
    if (!weight || weight->size() != 4 || rank != 4) return {{}, "unexpected shapes"};
    const std::vector<std::int64_t> stride = integers(concrete(op.args, 3));
    const std::vector<std::int64_t> padding = integers(concrete(op.args, 4));
    const std::vector<std::int64_t> dilation = integers(concrete(op.args, 5));
    const std::vector<std::int64_t> groups = integers(concrete(op.args, 6));
    if (stride.size() != 2 || padding.size() != 2)
      return {{}, "stride and padding not recorded (Concrete Inputs, PyTorch 2.1 or later)"};
    const bool square = d[2] == d[3] && (*weight)[2] == (*weight)[3] && stride[0] == stride[1] &&
                        padding[0] == padding[1];
    const bool plain = (dilation.empty() || (dilation == std::vector<std::int64_t>{1, 1})) &&
                       (groups.empty() || groups == std::vector<std::int64_t>{1});
    if (!square || !plain) return {{}, "not a square, ungrouped, undilated convolution"};
    const auto bias = dims(op.args, 2);
    if (bias && !bias->empty())
      return {{}, "a convolution with a bias (the kernel data's have none)"};
    return {{d[0], d[1], (*weight)[0], (*weight)[2], d[2], stride[0], padding[0]}, ""};
  }
  if (op.kind == "ln" && integers(concrete(op.args, 1)).size() > 1)
    return {{}, "normalised over more than the last dimension"};
  if (op.kind == "softmax") {
    const std::vector<std::int64_t> dim = integers(concrete(op.args, 1));
    if (!dim.empty() && dim[0] != -1 && dim[0] != static_cast<std::int64_t>(rank) - 1)
      return {{}, "not over the last dimension"};
  }
  if (op.kind == "add" || op.kind == "mul") {
    // Two tensors of one shape, as the kernel data measured; a scalar or broadcast operand
    // launches another kernel.
    const auto other = dims(op.args, 1);
    if (!other || *other != d) return {{}, "not two tensors of one shape"};
  }
  return {{leading(rank - 1), d[rank - 1]}, ""};
}

}  // namespace

bool is_kernel_trace(const std::filesystem::path& file) {
  gzFile in = gzopen(file.string().c_str(), "rb");
  if (in == nullptr) return false;
  // Kineto writes its short header (schemaVersion, deviceProperties) before the events.
  std::string head(1 << 16, '\0');
  const int got = gzread(in, head.data(), static_cast<unsigned>(head.size()));
  gzclose(in);
  head.resize(static_cast<std::size_t>(std::max(got, 0)));
  const std::size_t first = head.find_first_not_of(" \t\r\n");
  return first != std::string::npos && head[first] == '{' &&
         (head.find("\"traceEvents\"") != std::string::npos ||
          head.find("\"schemaVersion\"") != std::string::npos);
}

namespace {
KernelTrace read_parsed_trace(const std::string& name, const std::string& text,
                              const GpuCatalogue& catalogue, const std::string& gpu_id);
}  // namespace

KernelTrace read_kernel_trace(const std::filesystem::path& file, const GpuCatalogue& catalogue,
                              const std::string& gpu_id) {
  const std::string name = file.string();
  const std::string text = read_all(file);
  try {
    return read_parsed_trace(name, text, catalogue, gpu_id);
  } catch (const Json::exception& e) {
    // A field of another type than Kineto writes ("ph": 5, "args": [...]).
    throw InputError(
        SourceMark{name, 0, 0}, "traceEvents",
        fmt::format("an event is not as a PyTorch profiler trace writes it: {}", e.what()));
  }
}

namespace {

KernelTrace read_parsed_trace(const std::string& name, const std::string& text,
                              const GpuCatalogue& catalogue, const std::string& gpu_id) {
  Json trace;
  try {
    trace = Json::parse(text);
  } catch (const Json::parse_error&) {
    // The measurement files' reader says where the syntax broke, at its line and column.
    try {
      check_json_syntax(text, name);
    } catch (const InputError& e) {
      throw InputError(e.mark(), "", fmt::format("not a JSON profiler trace ({})", e.problem()));
    }
    throw;
  }
  const SourceMark whole{name, 0, 0};
  if (!trace.is_object() || !trace.contains("traceEvents") || !trace["traceEvents"].is_array()) {
    throw InputError(whole, "traceEvents",
                     "no traceEvents list: not a PyTorch profiler trace (write one with "
                     "torch.profiler's export_chrome_trace, or `epochcast run --kernel-trace`)");
  }

  KernelTrace out;
  std::map<std::string, std::vector<Operator>> operators;  // by thread
  std::map<std::int64_t, Launch> launches;                 // by correlation id
  struct Kernel {
    std::string name;
    double us = 0;
    std::string launch;  // "grid [x, y, z] block [x, y, z]"
  };
  std::map<std::int64_t, Kernel> kernels;  // by correlation id
  for (const Json& event : trace["traceEvents"]) {
    if (!event.is_object() || event.value("ph", "") != "X") continue;
    const std::string category = event.value("cat", "");
    const auto ts = number(event, "ts"), dur = number(event, "dur");
    if (!ts || !dur || *dur < 0) continue;
    const Json args = event.value("args", Json::object());
    if (category == "cpu_op" || category == "Operator") {
      const std::string op_name = event.value("name", "");
      if (auto kind = operator_kind(op_name)) {
        Operator op;
        op.kind = *kind;
        op.args = args;
        op.start = *ts;
        op.end = *ts + *dur;
        operators[thread_of(event)].push_back(std::move(op));
      }
    } else if (category == "cuda_runtime" || category == "cuda_driver") {
      if (args.contains("correlation") && args["correlation"].is_number_integer())
        launches[args["correlation"].get<std::int64_t>()] = {*ts, thread_of(event)};
    } else if (category == "kernel") {
      ++out.kernels;
      if (!args.contains("correlation") || !args["correlation"].is_number_integer()) continue;
      kernels[args["correlation"].get<std::int64_t>()] = {
          event.value("name", ""), *dur,
          fmt::format("grid {} block {}", args.value("grid", Json()).dump(),
                      args.value("block", Json()).dump())};
    }
  }
  if (out.kernels == 0) {
    throw InputError(whole, "traceEvents",
                     "the trace holds no GPU kernel: profile on a GPU with "
                     "ProfilerActivity.CUDA (a CPU-only trace has no kernel times)");
  }

  // The device: the trace's first GPU (one process profiles one GPU).
  if (trace.contains("deviceProperties") && trace["deviceProperties"].is_array() &&
      !trace["deviceProperties"].empty() && trace["deviceProperties"][0].is_object())
    out.device = trace["deviceProperties"][0].value("name", "");
  std::string gpu = gpu_id.empty() ? gpu_for_device(out.device, catalogue) : gpu_id;
  if (gpu.empty() || catalogue.find(gpu) == nullptr) {
    throw InputError(whole, "deviceProperties",
                     fmt::format("the trace's GPU '{}' is no catalogue entry by that name; say "
                                 "which it is (`kernels --gpu ID`, or calibrate it with its "
                                 "scenario)",
                                 out.device));
  }

  // Outermost known operators per thread, in time order: one nested in another (aten::add
  // inside aten::linear's bias path, aten::_softmax inside aten::softmax) is the outer one's.
  for (auto& [thread, ops] : operators) {
    std::sort(ops.begin(), ops.end(), [](const Operator& a, const Operator& b) {
      return a.start != b.start ? a.start < b.start : a.end > b.end;
    });
    std::vector<Operator> outer;
    for (Operator& op : ops) {
      if (!outer.empty() && op.end <= outer.back().end) continue;
      outer.push_back(std::move(op));
    }
    ops = std::move(outer);
  }
  for (const auto& [correlation, kernel] : kernels) {
    auto launch = launches.find(correlation);
    if (launch == launches.end()) continue;
    auto thread = operators.find(launch->second.thread);
    if (thread == operators.end()) continue;
    std::vector<Operator>& ops = thread->second;
    auto after = std::upper_bound(ops.begin(), ops.end(), launch->second.time,
                                  [](double time, const Operator& op) { return time < op.start; });
    if (after == ops.begin()) continue;
    Operator& op = *std::prev(after);
    if (launch->second.time > op.end) continue;
    op.kernel_us += kernel.us;
    if (kernel.us > op.longest_us) {
      op.longest_us = kernel.us;
      op.longest_kernel = kernel.name + " " + kernel.launch;
    }
    ++out.attributed;
  }

  // cuDNN runs float32 convolutions in TF32 by default where the GPU has TF32 tensor cores; the
  // kernel fit prices them without (kKernelMeasurementPrecision), so a convolution counts only
  // where the trace says TF32 was off (the "epochcast" object our tools add) or the GPU has none.
  const GpuSpec& spec = *catalogue.find(gpu);
  const auto tf32 = spec.peak_for(Precision::tf32), fp32 = spec.peak_for(Precision::fp32);
  const bool tf32_capable = tf32 && fp32 && tf32->value() > fp32->value();
  const bool cudnn_tf32_off = trace.contains("epochcast") && trace["epochcast"].is_object() &&
                              trace["epochcast"].value("cudnn_allow_tf32", Json()) == Json(false);
  const bool convolutions_priced = !tf32_capable || cudnn_tf32_off;

  // One row per operator kind and shape: the median of its repeats.
  std::map<std::pair<std::string, std::vector<std::int64_t>>, std::vector<double>> times;
  std::map<std::pair<std::string, std::vector<std::int64_t>>, std::string> library;
  for (const auto& [thread, ops] : operators) {
    for (const Operator& op : ops) {
      if (op.longest_us < 0) continue;  // launched nothing on the GPU
      if (op.kind == "conv" && !convolutions_priced) {
        ++out.skipped
              ["a convolution that may have run in TF32 (the trace does not say "
               "cudnn_allow_tf32 false)"];
        continue;
      }
      Shape shape = shape_of(op);
      if (shape.why_not.empty()) {
        if (shape_problem(op.kind, shape.values))
          shape.why_not = "a shape the kernel model cannot cost";
      }
      if (shape.why_not.empty() && op.kernel_us <= 0) shape.why_not = "no kernel time";
      if (!shape.why_not.empty()) {
        ++out.skipped[shape.why_not];
        continue;
      }
      const auto key = std::make_pair(op.kind, shape.values);
      times[key].push_back(op.kernel_us * 1e-6);
      library.emplace(key, op.longest_kernel);
    }
  }
  for (const auto& [key, seconds] : times) {
    KernelMeasurement m;
    m.op = key.first;
    m.device = out.device;
    m.gpu_id = gpu;
    m.seconds = spread_of(seconds).median;
    m.shape = key.second;
    m.library_kernel = library[key];
    m.mark = whole;
    m.kernel_only = true;
    out.rows.push_back(std::move(m));
  }
  return out;
}

}  // namespace

}  // namespace epochcast::validate

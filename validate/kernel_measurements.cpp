// Kernel measurement files: rows of (operator, device, latency, shape), read through zlib so
// that the public data set's .csv.gz files need no unpacking; each row costed by core/model.
#include "validate/kernel_measurements.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>

#include <fmt/format.h>
#include <zlib.h>

#include "core/format/csv_line.h"
#include "core/measure/csv_cells.h"
#include "core/model/kernel_launches.h"
#include "core/model/model_spec.h"

namespace epochcast::validate {

namespace {

// The shape columns of each operator, in the order KernelMeasurement::shape keeps them.
const std::vector<std::string_view>& shape_columns(std::string_view op) {
  static const std::vector<std::string_view> matrix = {"B", "M", "N", "K"};
  static const std::vector<std::string_view> conv = {
      "B", "Input_Channel", "Output_Channel", "Kernel_Szie", "Input_Size", "Stride", "Padding"};
  static const std::vector<std::string_view> rows = {"B", "H"};
  if (op == "linear" || op == "bmm") return matrix;
  if (op == "conv") return conv;
  return rows;
}

// The public data set's devices (shared/data/kernels/device_configs) by the names CUDA gave.
constexpr std::array<std::pair<std::string_view, std::string_view>, 6> kKnownDevices = {{
    {"Tesla P4", "p4"},
    {"Tesla P100-PCIE-16GB", "p100-pcie-16gb"},
    {"Tesla T4", "t4"},
    {"Tesla V100-PCIE-32GB", "v100-pcie-32gb"},
    {"NVIDIA A100-PCIE-40GB", "a100-pcie-40gb"},
    {"NVIDIA A100 80GB PCIe", "a100-pcie-80gb"},
}};

// Lines of a plain or gzip-compressed file (gzread passes plain files through), read in blocks
// and split on '\n'. A NUL byte, a line over 1 MiB or more lines than a SourceMark counts mean
// a file of another kind, refused before it is buffered.
class LineReader {
 public:
  explicit LineReader(const std::filesystem::path& file) : name_(file.string()) {
    file_ = gzopen(name_.c_str(), "rb");
    if (file_ == nullptr) {
      throw InputError(SourceMark{name_, 0, 0}, "", "cannot open the kernel measurement file");
    }
  }
  ~LineReader() { gzclose(file_); }
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // The next line without its end of line; false at the end of the file.
  bool next(std::string& line) {
    line.clear();
    while (true) {
      if (start_ == block_.size()) {
        if (!refill()) break;
      }
      const std::size_t newline = block_.find('\n', start_);
      const std::size_t end = newline == std::string::npos ? block_.size() : newline;
      line.append(block_, start_, end - start_);
      start_ = end;
      if (line.size() > kLongestLine) refuse("a line longer than 1 MiB");
      if (newline != std::string::npos) {
        ++start_;
        return finish(line);
      }
    }
    if (line.empty()) return false;
    return finish(line);
  }
  int number() const { return number_; }
  const std::string& name() const { return name_; }

 private:
  static constexpr std::size_t kLongestLine = std::size_t{1} << 20;

  [[noreturn]] void refuse(const std::string& what) const {
    throw InputError(SourceMark{name_, number_ + 1, 1}, "",
                     what + ": not a kernel measurement CSV");
  }
  bool refill() {
    block_.resize(1 << 16);
    const int got = gzread(file_, block_.data(), static_cast<unsigned>(block_.size()));
    if (got < 0) {
      throw InputError(SourceMark{name_, number_ + 1, 0}, "",
                       "the compressed file is damaged (zlib could not read on)");
    }
    block_.resize(static_cast<std::size_t>(got));
    start_ = 0;
    return got > 0;
  }
  bool finish(std::string& line) {
    if (line.find('\0') != std::string::npos) refuse("a NUL byte");
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (number_ == std::numeric_limits<int>::max()) refuse("more than 2^31 lines");
    ++number_;
    // A byte-order mark before the header is an editor's, not a column name's.
    if (number_ == 1 && line.starts_with("\xEF\xBB\xBF")) line.erase(0, 3);
    return true;
  }

  std::string name_;
  gzFile file_ = nullptr;
  std::string block_;
  std::size_t start_ = 0;
  int number_ = 0;
};

// A measured latency: milliseconds above 0 and at most a day.
double latency_seconds(const CsvCell& cell) {
  return positive_cell(cell, "Latency", 8.64e7, "milliseconds") * 1e-3;
}

// The largest shape value: what one CUDA launch dimension holds, 2^31 - 1.
constexpr std::int64_t kMaxShapeValue = 2'147'483'647;

// The GPUs of the catalogue (a CPU entry is no GPU a kernel measurement can be of).
std::string catalogue_gpu_ids(const GpuCatalogue& catalogue) {
  std::string ids;
  for (const GpuSpec& gpu : catalogue.gpus) {
    if (!is_cpu_architecture(gpu.architecture)) ids += (ids.empty() ? "" : ", ") + gpu.id;
  }
  return ids;
}

// More rows than any public kernel data set has (NeuSight's: 204,009) by a wide margin; beyond
// it a file is refused before it exhausts memory (a few hundred bytes a row).
constexpr std::size_t kMaxRows = 2'000'000;
// An operator's shape product (B x M x N x K, ...) at most 2^60: every count costed from it
// stays inside 64 bits, and no real kernel comes near (the data set's largest is 2.9e12).
constexpr double kMaxShapeProduct = static_cast<double>(std::int64_t{1} << 60);

Layer layer_of(LayerType type, std::string name) {
  Layer layer;
  layer.type = type;
  layer.name = std::move(name);
  return layer;
}

// The operator's kernels (below, after the public functions that read rows).
CostedOperator cost_shape(const KernelMeasurement& m);

// The forward kernels of a one-layer model on a per-sample input.
std::vector<KernelWork> forward_kernels(Layer layer, std::vector<std::int64_t> input) {
  ModelSpec spec;
  spec.name = "kernel";
  spec.input_shape.dims = std::move(input);
  ModelNode node;
  node.layer = std::move(layer);
  spec.layers.push_back(std::move(node));
  ModelAnalysis analysis = analyze_model(spec);
  return analysis.layers.front().forward;
}

}  // namespace

std::optional<ShapeProblem> shape_problem(std::string_view op,
                                          const std::vector<std::int64_t>& shape) {
  const std::vector<std::string_view>& columns = shape_columns(op);
  if (shape.size() != columns.size()) return ShapeProblem{"", "not the operator's columns"};
  const bool conv = op == "conv";
  double product = 1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    const std::int64_t lowest = conv && columns[i] == "Padding" ? 0 : 1;
    if (shape[i] < lowest || shape[i] > kMaxShapeValue) {
      return ShapeProblem{std::string(columns[i]),
                          fmt::format("{} is outside {} to {}", shape[i], lowest, kMaxShapeValue)};
    }
    product *= static_cast<double>(std::max<std::int64_t>(shape[i], 1));
  }
  if (product > kMaxShapeProduct) {
    return ShapeProblem{"B", fmt::format("the shape's sizes multiply to {:.3g}, more than 2^60: "
                                         "no kernel a GPU runs",
                                         product)};
  }
  if (conv && shape[3] > shape[4] + 2 * shape[6])
    return ShapeProblem{"Kernel_Szie", "the kernel is larger than the padded input"};
  return std::nullopt;
}

KernelClass kernel_class(std::string_view op) {
  if (op == "linear") return KernelClass::gemm;
  if (op == "bmm") return KernelClass::batched_gemm;
  if (op == "conv") return KernelClass::conv;
  if (op == "ln") return KernelClass::layernorm;
  if (op == "softmax") return KernelClass::softmax;
  return KernelClass::elementwise;
}

std::string gpu_for_device(std::string_view device, const GpuCatalogue& catalogue) {
  for (const auto& [name, id] : kKnownDevices) {
    if (name == device && catalogue.find(id) != nullptr) return std::string(id);
  }
  for (const GpuSpec& gpu : catalogue.gpus) {
    if (is_cpu_architecture(gpu.architecture)) continue;
    if (gpu.id == device || gpu.name == device || "NVIDIA " + std::string(device) == gpu.name) {
      return gpu.id;
    }
  }
  return "";
}

std::vector<KernelMeasurement> read_kernel_measurements(const std::filesystem::path& file,
                                                        const GpuCatalogue& catalogue) {
  LineReader reader(file);
  std::string line;
  // Comment lines ('#') and blank lines may precede the header.
  do {
    if (!reader.next(line)) {
      throw InputError(SourceMark{reader.name(), reader.number(), 1}, "",
                       "the file holds no header; expected OPName, Latency, Device, ...");
    }
  } while (line.empty() || line.front() == '#');
  const int header_line = reader.number();
  std::map<std::string, std::size_t> columns;
  for (const CsvCell& cell : split_csv_line(line, reader.name(), reader.number())) {
    if (!columns.emplace(cell.text, columns.size()).second) {
      throw InputError(cell.mark, cell.text, "the column is named twice in the header");
    }
  }
  auto column = [&](std::string_view name) -> std::size_t {
    auto found = columns.find(std::string(name));
    if (found == columns.end()) {
      throw InputError(SourceMark{reader.name(), header_line, 1}, std::string(name),
                       "the header lacks this column (kernel measurements need OPName, Latency, "
                       "Device and the operator's shape columns)");
    }
    return found->second;
  };
  const std::size_t op_column = column("OPName"), latency_column = column("Latency"),
                    device_column = column("Device");
  const auto kernel_column = columns.find("Kernel Name");

  std::vector<KernelMeasurement> rows;
  std::map<std::string, std::string> known;  // device -> catalogue id
  while (reader.next(line)) {
    if (line.empty() || line.front() == '#') continue;
    std::vector<CsvCell> cells = split_csv_line(line, reader.name(), reader.number());
    if (cells.size() != columns.size()) {
      throw InputError(
          SourceMark{reader.name(), reader.number(), 1}, "",
          fmt::format("{} cells where the header names {}", cells.size(), columns.size()));
    }
    KernelMeasurement m;
    m.mark = cells.front().mark;
    const CsvCell& op = cells[op_column];
    auto op_index = std::find(std::begin(kKernelOperators), std::end(kKernelOperators), op.text);
    if (op_index == std::end(kKernelOperators)) {
      throw InputError(
          op.mark, "OPName",
          fmt::format("expected one of {}; got '{}'{}", join_alternatives(kKernelOperators),
                      op.text, did_you_mean(op.text, kKernelOperators)));
    }
    m.op = op.text;
    m.seconds = latency_seconds(cells[latency_column]);
    const CsvCell& device = cells[device_column];
    m.device = device.text;
    auto id = known.find(m.device);
    if (id == known.end()) {
      std::string found = gpu_for_device(m.device, catalogue);
      if (found.empty()) {
        throw InputError(device.mark, "Device",
                         fmt::format("no GPU of the catalogue is '{}'; write a catalogue id or "
                                     "name (ids: {}), or add the GPU with --catalogue",
                                     m.device, catalogue_gpu_ids(catalogue)));
      }
      id = known.emplace(m.device, found).first;
    }
    m.gpu_id = id->second;
    const bool conv = m.op == "conv";
    for (std::string_view name : shape_columns(m.op)) {
      // Only a convolution's padding may be 0.
      const std::int64_t lowest = conv && name == "Padding" ? 0 : 1;
      m.shape.push_back(integer_cell(cells[column(name)], name, lowest, kMaxShapeValue));
    }
    if (auto bad = shape_problem(m.op, m.shape))
      throw InputError(cells[column(bad->column)].mark, bad->column, bad->problem);
    if (kernel_column != columns.end()) m.library_kernel = cells[kernel_column->second].text;
    if (rows.size() == kMaxRows) {
      throw InputError(m.mark, "", "more than 2,000,000 rows: split the file");
    }
    rows.push_back(std::move(m));
  }
  if (rows.empty()) {
    throw InputError(SourceMark{reader.name(), reader.number(), 1}, "",
                     "a header and no measurement under it");
  }
  return rows;
}

std::vector<KernelMeasurement> read_kernel_directory(const std::filesystem::path& directory,
                                                     const GpuCatalogue& catalogue) {
  std::error_code error;
  if (!std::filesystem::is_directory(directory, error)) {
    throw InputError(SourceMark{directory.string(), 0, 0}, "",
                     "not a directory of kernel measurement files");
  }
  std::vector<std::filesystem::path> files;
  std::filesystem::recursive_directory_iterator entries(directory, error), end;
  for (; !error && entries != end; entries.increment(error)) {
    const auto& entry = *entries;
    const std::string name = entry.path().filename().string();
    auto ends_with = [&](std::string_view tail) {
      return name.size() >= tail.size() &&
             name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
    };
    if (entry.is_regular_file() && (ends_with(".csv") || ends_with(".csv.gz"))) {
      files.push_back(entry.path());
    }
  }
  if (error) {
    throw InputError(SourceMark{directory.string(), 0, 0}, "",
                     fmt::format("cannot list the directory: {}", error.message()));
  }
  std::sort(files.begin(), files.end());
  std::vector<KernelMeasurement> all;
  for (const auto& file : files) {
    std::vector<KernelMeasurement> rows = read_kernel_measurements(file, catalogue);
    if (all.size() + rows.size() > kMaxRows) {
      throw InputError(SourceMark{file.string(), 0, 0}, "",
                       "the directory holds more than 2,000,000 rows: give fewer files");
    }
    all.insert(all.end(), std::make_move_iterator(rows.begin()),
               std::make_move_iterator(rows.end()));
  }
  if (all.empty()) {
    throw InputError(SourceMark{directory.string(), 0, 0}, "",
                     "no kernel measurements (*.csv, *.csv.gz) below this directory");
  }
  return all;
}

CostedOperator cost_operator(const KernelMeasurement& m) {
  try {
    return cost_shape(m);
  } catch (const InputError& e) {
    // The one-layer model has no file: the row is where the problem was written.
    throw InputError(m.mark, "shape", e.problem());
  }
}

namespace {

CostedOperator cost_shape(const KernelMeasurement& m) {
  const std::vector<std::int64_t>& s = m.shape;
  CostedOperator c;
  c.batch = s[0];
  const std::int64_t fp32 = 4;
  if (m.op == "linear") {
    // nn.Linear(N, K) on an input [B, M, N] (NeuSight's collect.py): one addmm of (B x M) rows
    // of N features into K, its bias fused.
    Layer layer = layer_of(LayerType::linear, "linear");
    layer.out_features = s[3];
    c.kernels = forward_kernels(layer, {s[1], s[2]});
  } else if (m.op == "bmm") {
    // torch.bmm of [B, M, N] by [B, N, K] (NeuSight's collect.py): B products of (M x N) by
    // (N x K), N the reduction; one batched GEMM launch.
    KernelWork k;
    k.name = "bmm";
    k.op_class = OpClass::gemm;
    k.flops = {Flops(2 * s[1] * s[2] * s[3]), Flops(0)};
    k.bytes = {Bytes(fp32 * (s[1] * s[2] + s[2] * s[3] + s[1] * s[3])), Bytes(0)};
    k.has_gemm_shape = true;
    k.gemm.batches = {1, 0};
    k.gemm.m = {0, s[1]};
    k.gemm.n = {0, s[3]};
    k.gemm.k = {0, s[2]};
    c.kernels = {k};
  } else if (m.op == "conv") {
    // nn.Conv2d without bias: the measured kernels list cuDNN's alone, no bias add.
    Layer layer = layer_of(LayerType::conv2d, "conv");
    layer.out_features = s[2];
    layer.kernel = {s[3], s[3]};
    layer.stride = {s[5], s[5]};
    layer.padding = {s[6], s[6]};
    layer.dilation = {1, 1};
    layer.bias = false;
    c.kernels = forward_kernels(layer, {s[1], s[4], s[4]});
  } else if (m.op == "ln") {
    c.kernels = forward_kernels(layer_of(LayerType::layernorm, "ln"), {s[1]});
  } else if (m.op == "softmax") {
    c.kernels = forward_kernels(layer_of(LayerType::softmax, "softmax"), {s[1]});
  } else if (m.op == "relu" || m.op == "gelu" || m.op == "tanh") {
    const LayerType type = m.op == "relu"   ? LayerType::relu
                           : m.op == "gelu" ? LayerType::gelu
                                            : LayerType::tanh;
    c.kernels = forward_kernels(layer_of(type, m.op), {s[1]});
  } else {
    // add, mul: two tensors in, one out, through TensorIterator's element-wise kernel.
    KernelWork k;
    k.name = m.op == "add" ? "add" : "mul";
    k.op_class = OpClass::elementwise;
    k.flops = {Flops(s[1]), Flops(0)};
    k.bytes = {Bytes(3 * fp32 * s[1]), Bytes(0)};
    k.launch = launch::elementwise({s[1], 0});
    c.kernels = {k};
  }
  return c;
}

}  // namespace

}  // namespace epochcast::validate

// Measurement files: what `epochcast run` measured on real devices, point by point, and what
// `epochcast bench` measured of the machine. The runtime writes them; calibration and
// validation read them (strictly, like every other input: file:line:col on any problem).
//
// The format is JSON, versioned by `format` and `version` (docs/formats.md, "Measurements").
// Times are seconds, sizes bytes, rates in the unit their name says.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/enum_name.h"

namespace epochcast {

namespace yaml {
class MapReader;
}

inline constexpr std::string_view kMeasurementsFormat = "epochcast-measurements";
inline constexpr int kMeasurementsVersion = 1;

// Where and with what the measurements were taken.
struct MeasuredEnvironment {
  std::string host;
  std::string device_kind;  // "cuda" or "cpu"
  std::string device_name;  // "NVIDIA H100 80GB HBM3", or the CPU model
  int device_count = 0;     // devices visible to one rank
  std::int64_t device_memory_bytes = 0;
  std::string driver_version;  // CUDA driver (empty on the CPU)
  std::string cuda_version;    // CUDA runtime (empty on the CPU)
  std::string nccl_version;    // empty without NCCL
  std::string torch_version;   // LibTorch
  std::string mpi_version;     // empty when not launched by MPI
  int ranks = 1;               // processes in the run
  // What started the ranks: name_of(Launcher) ("none": one process started alone, "mpi",
  // "torchrun", "slurm"); empty in files written before it was recorded.
  std::string launcher;
  int cpu_threads = 0;         // LibTorch intra-op threads per rank
  std::string host_allocator;  // how malloc was set (runtime/measure/host_memory.h); may be empty
  // The NCCL_* environment variables the run had ("NCCL_ALGO=Ring"), sorted: they decide what
  // NCCL runs, so a measurement says under which.
  std::vector<std::string> nccl_settings;

  std::string epochcast_version;
  std::string started_at;  // UTC, ISO 8601
  // The math the run set on a GPU (nullopt on the CPU): torch.backends.cuda.matmul.allow_tf32,
  // torch.backends.cudnn.allow_tf32 and torch.backends.cudnn.benchmark.
  std::optional<bool> cublas_allow_tf32;
  std::optional<bool> cudnn_allow_tf32;
  std::optional<bool> cudnn_benchmark;
};

// The spread of a repeated measurement, as nccl-tests reports it (and percentiles beside).
struct Spread {
  double median = 0;
  double p10 = 0;
  double p90 = 0;
  double mean = 0;
  double min = 0;
  double max = 0;
  int count = 0;
};

// One layer timed alone in the profiling pass (forward, and backward with respect to its input
// and parameters), in the analysis' layer order.
struct LayerTiming {
  int index = 0;
  std::string name;
  std::string type;
  double forward_s = 0;
  double backward_s = 0;
};

enum class PointStatus { ok, oom, timeout, skipped, failed };
inline constexpr std::string_view kPointStatusNames[] = {"ok", "oom", "timeout", "skipped",
                                                         "failed"};
inline std::string_view name_of(PointStatus value) {
  return enum_name(kPointStatusNames, value);
}

struct MeasuredPoint {
  int gpus = 1;
  std::int64_t global_batch = 0;
  std::int64_t per_gpu_batch = 0;
  PointStatus status = PointStatus::ok;
  std::string reason;  // why a point is not ok, in words

  std::string device;  // "cuda" or "cpu"
  int ranks = 1;       // processes that trained this point
  int warmup_iterations = 0;
  // Time per training iteration (the maximum across ranks of each iteration), including waiting
  // for the loader, the copy to the device, forward, backward, communication and the step.
  Spread iteration_s;
  std::vector<double> iteration_samples_s;
  std::int64_t iterations_per_epoch = 0;      // full batches
  std::int64_t partial_batch = 0;             // samples in the last batch (0: none or dropped)
  std::optional<double> partial_iteration_s;  // median, when there is a partial batch
  std::int64_t validation_iterations = 0;
  std::optional<double> validation_iteration_s;  // median forward-only iteration
  double epoch_s_estimated = 0;                  // from the iteration times above
  std::optional<double> epoch_s_measured;        // a whole epoch run for real (--full-epoch)
  double samples_per_s = 0;                      // global batch / mean iteration time
  double loader_wait_s = 0;        // mean time per iteration the training loop waited for data
  double loader_sample_cpu_s = 0;  // CPU time per sample in the loader (generate + transform)
  std::int64_t peak_memory_bytes = 0;
  std::string memory_source;  // "cuda_caching_allocator" or "process_peak_rss"
  double first_loss = 0;
  double last_loss = 0;
  // A process per GPU: whether every rank ended with bit-identical parameters (nullopt for one
  // rank).
  std::optional<bool> parameters_identical;
  // FNV-1a of the trained parameters' bytes (rank 0), 16 hex digits ("" when not recorded): two
  // strategies that trained alike end with the same.
  std::string parameters_hash;
  std::vector<LayerTiming> layers;  // empty unless profiled
  int rounds = 1;                   // interleaved rounds its figures combine (combine_rounds)
  // On a GPU: the caching allocator's peak reserved bytes (allocated plus its cache, what
  // nvidia-smi sees of the process beside the context) and the CUDA context's own bytes.
  std::optional<std::int64_t> peak_reserved_bytes;
  std::optional<std::int64_t> cuda_context_bytes;
  // Why `layers` is empty although profiling was asked for, or why a --kernel-trace was not
  // written: the point's timings stand either way.
  std::string profile_note;
};

// nccl-tests' figures for one collective size.
struct CollectiveMeasurement {
  std::string operation;  // "all_reduce"
  int ranks = 0;
  std::int64_t bytes = 0;
  double time_s = 0;  // mean over the timed iterations, maximum across ranks
  double algbw_gbps = 0;
  double busbw_gbps = 0;
  bool correct = true;  // the result equals the known answer
  // Collective kernels one host thread launched in turn each iteration: nccl-tests' -g (1 with
  // a process per GPU, 0 under -G's CUDA graphs); sim::CollectiveSweep's figure of the same name.
  int launches_per_iteration = 1;
};

struct CopyMeasurement {
  std::string kind;  // "host_to_device", "device_to_host", "peer", "host_memcpy"
  bool pinned = false;
  int source = 0;       // a device index, or -1 for the host
  int destination = 0;  // likewise
  std::int64_t bytes = 0;
  double time_s = 0;
  double gbps = 0;
};

// Throughput of one operation at one size and precision.
struct ThroughputMeasurement {
  std::string operation;  // "gemm" or "conv2d"
  std::string precision;  // "fp32", "tf32", "fp16", "bf16"
  std::string shape;      // "m=n=k=4096", "n=32 c=64 hw=56 k=64 r=3"
  double flops = 0;       // per call
  double time_s = 0;      // median per call
  double tflops = 0;
};

struct DispatchMeasurement {
  double op_dispatch_s = 0;    // host time per tiny eager op (framework dispatch + launch)
  double kernel_launch_s = 0;  // host time per empty CUDA kernel launch (0 on the CPU)
  double kernel_device_s = 0;  // device time per empty kernel launched back to back
  // The same op from a Python loop (PyTorch eager): what a user's training script pays per op.
  // nullopt where python3 with torch was not found.
  std::optional<double> python_op_dispatch_s;
  // Host time per call of a module that does nothing (LibTorch's nn::Identity), and per
  // foreach Adam step over 16 one-element parameters, which issues optimizer_step_ops ops
  // (0: not measured, older files).
  double module_call_s = 0;
  double optimizer_step_s = 0;
  int optimizer_step_ops = 0;
  // The same from Python: an nn.Module call, torch.optim.Adam(foreach=True).step().
  std::optional<double> python_module_call_s;
  std::optional<double> python_optimizer_step_s;
};

struct LargestBatch {
  std::string model;
  std::int64_t largest_fitting = 0;  // per device
  std::int64_t first_failing = 0;    // 0: the search hit its cap without failing
  std::int64_t cap = 0;
};

struct Benchmarks {
  std::vector<CollectiveMeasurement> collectives;
  std::vector<CopyMeasurement> copies;
  std::optional<DispatchMeasurement> dispatch;
  std::vector<ThroughputMeasurement> throughput;
  std::optional<LargestBatch> largest_batch;
  std::vector<std::string> skipped;  // "peer copies: one device"
};

struct RunSettings {
  int warmup_iterations = 0;
  int timed_iterations = 0;
  double timeout_s = 0;
  bool full_epoch = false;
  bool profile_layers = false;
  std::uint64_t seed = 0;
  int rounds = 1;  // passes over the sweep, each measuring every point (run --rounds)
};

struct MeasurementFile {
  std::string scenario_name;  // empty for benchmarks alone
  std::string scenario_file;
  std::string model;
  std::string strategy;
  std::string precision;
  std::string optimizer;
  std::vector<std::string> arguments;  // --set/--gpus/--batch as given
  RunSettings settings;
  MeasuredEnvironment environment;
  std::vector<MeasuredPoint> points;
  Benchmarks benchmarks;
};

// The file as JSON text (stable key order; numbers round-trip exactly).
std::string to_json(const MeasurementFile& file);
// Refuses text that is not JSON with the line and column of the first fault (the strict YAML
// reader that gives values their positions would accept YAML that is not JSON).
void check_json_syntax(const std::string& text, const std::string& name);
// Reads a measurement file; raises InputError with file:line:col on anything unexpected.
MeasurementFile load_measurements(const std::filesystem::path& path);
MeasurementFile load_measurements_from_string(const std::string& text, const std::string& name);

// The spread of `samples` (linear-interpolated percentiles, as numpy computes them).
Spread spread_of(std::vector<double> samples);

// One point measured in several interleaved rounds (each a pass over the whole sweep), as one
// record: the iteration samples of all rounds pooled, the epoch re-estimated from their median,
// each layer's time the median over rounds, loader figures averaged, the peak memory the
// largest. A round that did not end ok decides the record (an OOM in any round is an OOM).
// On a shared machine whose speed drifts over minutes, every point then sees the same mix of
// fast and slow periods, instead of each point its own.
MeasuredPoint combine_rounds(const std::vector<MeasuredPoint>& rounds);

// Reads a measurement-like file's `format` and `version` keys, refusing another file (`what`
// names the kind expected, e.g. "measurement file") or a version this epochcast does not read.
void check_file_kind(yaml::MapReader& reader, std::string_view format, int version,
                     std::string_view what);

}  // namespace epochcast

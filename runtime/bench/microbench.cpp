// The microbenchmarks (see microbench.h).
#include "runtime/bench/microbench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <torch/version.h>

#include "core/io/child_process.h"
#include "core/system_failure.h"
#include "runtime/cuda/cuda_api.h"
#include "runtime/measure/device_clock.h"
#include "runtime/model/torch_model.h"
#include "runtime/train/optimizers.h"
#include "runtime/train/profiler.h"

namespace epochcast::runtime {

namespace {

using Clock = std::chrono::steady_clock;

double median_of(std::vector<double> values) {
  return spread_of(std::move(values)).median;
}

bool wanted(const BenchOptions& options, std::string_view section) {
  if (options.sections.empty()) return section != "fit";
  return options.sections.count(std::string(section)) > 0;
}

// --- collectives ---------------------------------------------------------------------------------

void bench_collectives(const BenchOptions& options, const DevicePlan& devices, World& world,
                       Benchmarks& out) {
  if (world.size() < 2) {
    out.skipped.push_back("collectives: one rank; launch with `mpirun -np N` to measure them");
    return;
  }
  Group group = Group::first_ranks(world, world.size());
  const int n = group.size();
  std::int64_t max_bytes = options.max_collective_bytes > 0
                               ? options.max_collective_bytes
                               : (devices.cuda ? std::int64_t{1} << 30 : std::int64_t{64} << 20);
  std::unique_ptr<cuda::Stream> stream;
  std::unique_ptr<cuda::NcclCommunicator> nccl;
  int device = devices.cuda ? world.local_rank() : -1;
  // All ranks on GPUs or all on CPUs (NCCL on some and host collectives on others would never
  // meet), and every rank with a GPU of its own before any of them waits in NCCL's
  // initialisation: agreed over the host transport, so that a rank that cannot take part stops
  // them all with the reason.
  if (!group.all(devices.cuda) && !group.all(!devices.cuda)) {
    throw SystemFailure(
        "collectives: some ranks see CUDA devices and others none: run all of them with "
        "--device cuda, or all with --device cpu");
  }
  const bool has_device = !devices.cuda || device < devices.device_count;
  if (!group.all(has_device)) {
    throw SystemFailure(
        has_device ? "collectives: another rank has no GPU of its own"
                   : fmt::format("collectives: {} has {} CUDA device(s) visible and its local "
                                 "rank {} needs one of its own: launch one rank per GPU "
                                 "(mpirun -np N with N at most the GPUs per node)",
                                 world.host(), devices.device_count, world.local_rank()));
  }
  if (devices.cuda) {
    std::string id(cuda::NcclCommunicator::kUniqueIdBytes, '\0');
    if (group.rank() == 0) id = cuda::NcclCommunicator::create_unique_id();
    group.broadcast(id.data(), id.size(), 0);
    cuda::set_device(device);
    stream = std::make_unique<cuda::Stream>(device);
    nccl = std::make_unique<cuda::NcclCommunicator>(group.rank(), n, id, device);
  }
  const float expected = static_cast<float>(n * (n + 1) / 2);  // ranks contribute 1..n
  for (std::int64_t bytes = options.min_collective_bytes; bytes <= max_bytes; bytes *= 2) {
    auto count = static_cast<std::size_t>(bytes / 4);
    bool correct = true;
    double time_s = 0;
    int iterations = bytes >= (std::int64_t{256} << 20) ? 5 : options.timed_iterations;
    if (devices.cuda) {
      cuda::DeviceBuffer buffer(device, count * 4);
      buffer.fill_float(static_cast<float>(group.rank() + 1), *stream);
      nccl->all_reduce_sum(buffer.data(), count, cuda::ElementType::float32, *stream);
      stream->synchronize();
      auto [first, last] = buffer.read_ends_float();
      correct = first == expected && last == expected;
      for (int i = 0; i < options.warmup_iterations; ++i)
        nccl->all_reduce_sum(buffer.data(), count, cuda::ElementType::float32, *stream);
      stream->synchronize();
      group.barrier();
      cuda::EventTimer timer(stream.get());
      timer.start();
      for (int i = 0; i < iterations; ++i)
        nccl->all_reduce_sum(buffer.data(), count, cuda::ElementType::float32, *stream);
      timer.stop();
      time_s = timer.elapsed_seconds() / iterations;
    } else {
      std::vector<float> buffer(count, static_cast<float>(group.rank() + 1));
      group.all_reduce_sum(buffer.data(), count);
      correct = buffer.front() == expected && buffer.back() == expected;
      for (int i = 0; i < options.warmup_iterations; ++i)
        group.all_reduce_sum(buffer.data(), count);
      group.barrier();
      auto start = Clock::now();
      for (int i = 0; i < iterations; ++i)
        group.all_reduce_sum(buffer.data(), count);
      time_s = seconds_since(start) / iterations;
    }
    time_s = group.max(time_s);
    correct = group.all(correct);
    CollectiveMeasurement m;
    m.operation = "all_reduce";
    m.ranks = n;
    m.bytes = bytes;
    m.time_s = time_s;
    m.algbw_gbps = static_cast<double>(bytes) / time_s / 1e9;
    m.busbw_gbps = all_reduce_bus_bandwidth(m.algbw_gbps, n);
    m.correct = correct;
    out.collectives.push_back(m);
  }
}

// --- copies
// ----------------------------------------------------------------------------------------

const std::int64_t kCopySizes[] = {4 << 10, 64 << 10, 1 << 20, 16 << 20, 256 << 20};

void bench_copies(const DevicePlan& devices, Benchmarks& out) {
  if (!devices.cuda) {
    // No device to copy to: the host's own memory bandwidth, as a CPU run's "link".
    for (std::int64_t bytes : kCopySizes) {
      torch::Tensor source = torch::ones({bytes / 4});
      torch::Tensor target = torch::empty_like(source);
      target.copy_(source);
      std::vector<double> times;
      for (int r = 0; r < 10; ++r) {
        auto start = Clock::now();
        target.copy_(source);
        times.push_back(seconds_since(start));
      }
      double t = median_of(times);
      out.copies.push_back(
          {"host_memcpy", false, 0, 0, bytes, t, static_cast<double>(bytes) / t / 1e9});
    }
    out.skipped.push_back("host<->device and peer copies: no CUDA device");
    return;
  }
  for (std::int64_t bytes : kCopySizes) {
    auto size = static_cast<std::size_t>(bytes);
    for (bool pinned : {true, false}) {
      cuda::CopyResult up = cuda::host_to_device_copy(0, size, pinned, 10);
      out.copies.push_back({"host_to_device", pinned, -1, 0, bytes, up.seconds, up.gbps()});
      cuda::CopyResult down = cuda::device_to_host_copy(0, size, pinned, 10);
      out.copies.push_back({"device_to_host", pinned, 0, -1, bytes, down.seconds, down.gbps()});
    }
  }
  if (devices.device_count < 2) {
    out.skipped.push_back("peer copies: one CUDA device");
    return;
  }
  for (int a = 0; a < devices.device_count; ++a) {
    for (int b = 0; b < devices.device_count; ++b) {
      if (a == b) continue;
      cuda::CopyResult r = cuda::peer_copy(a, b, std::size_t{256} << 20, 10);
      out.copies.push_back({"peer", false, a, b, std::int64_t{256} << 20, r.seconds, r.gbps()});
    }
  }
}

// --- dispatch and launch
// --------------------------------------------------------------------------

// The C++ loops below (bench_dispatch), written in Python: same ops, tensors, warm-ups, counts
// and median of five. Printed as one JSON object: seconds per eager op (`op`), per call of an
// nn.Module that does nothing (`module_call`: the Python around every layer of a forward pass),
// and per torch.optim.Adam(foreach=True).step() over 16 one-element parameters
// (`optimizer_step`: its kernels' dispatch plus torch.optim's Python around them).
constexpr const char* kPythonDispatchLoop = R"(
import json, sys, time, torch
d, parameters = sys.argv[1], int(sys.argv[2])
def sync():
    if d == 'cuda':
        torch.cuda.synchronize()
def per_call(body, warmup, count):
    for _ in range(warmup):
        body()
    sync()
    t = []
    for _ in range(5):
        s = time.perf_counter()
        for _ in range(count):
            body()
        t.append((time.perf_counter() - s) / count)
        sync()
    t.sort()
    return t[2]
x = torch.ones(1, device=d)
identity = torch.nn.Identity()
params = [torch.zeros(1, device=d, requires_grad=True) for _ in range(parameters)]
for p in params:
    p.grad = torch.ones(1, device=d)
adam = torch.optim.Adam(params, foreach=True)
with torch.no_grad():
    op = per_call(lambda: x.add_(1), 200, 5000)
    module_call = per_call(lambda: identity(x), 200, 5000)
step = per_call(adam.step, 20, 200)
print(json.dumps({'op': op, 'module_call': module_call, 'optimizer_step': step}))
)";

// Parameters and ops of the optimizer step both loops time: foreach Adam issues 7 multi-tensor
// ops a step in PyTorch 2 and 8 in 1.13, before _foreach_lerp_ (runtime/train/optimizers.cpp),
// whatever the parameter count. The Python loop runs PyTorch 2.
constexpr int kBenchOptimizerParameters = 16;
constexpr int kBenchOptimizerOps = TORCH_VERSION_MAJOR >= 2 ? 7 : 8;

struct PythonDispatch {
  double op_s = 0;
  double module_call_s = 0;
  double optimizer_step_s = 0;
};

// The Python loop's figures, by a python3 child (EPOCHCAST_PYTHON names another interpreter)
// started without a shell (`python -c SCRIPT DEVICE PARAMETERS`, under timeout(1): one that hangs
// importing torch or starting CUDA costs two minutes); nullopt, with the reason in `why`, where
// none imports torch.
std::optional<PythonDispatch> python_dispatch(bool cuda, std::string& why) {
  const char* configured = std::getenv("EPOCHCAST_PYTHON");
  std::string python = configured != nullptr && *configured ? configured : "python3";
  why = fmt::format("{} with torch was not found (or its loop failed)", python);
  ChildOptions quiet;
  quiet.discard_errors = true;
  const ChildResult child =
      run_program({"timeout", "120", python, "-c", kPythonDispatchLoop, cuda ? "cuda" : "cpu",
                   std::to_string(kBenchOptimizerParameters)},
                  quiet);
  if (!child.succeeded()) return std::nullopt;
  const std::string& output = child.output;
  nlohmann::json answer = nlohmann::json::parse(output, nullptr, /*allow_exceptions=*/false);
  auto seconds = [&](const char* key) -> std::optional<double> {
    if (!answer.is_object() || !answer.contains(key) || !answer[key].is_number())
      return std::nullopt;
    const double value = answer[key].get<double>();
    if (!(value > 0 && value < 1)) return std::nullopt;
    return value;
  };
  auto op = seconds("op"), module_call = seconds("module_call"), step = seconds("optimizer_step");
  if (!op || !module_call || !step) {
    why = fmt::format("{} answered something other than the loop's three figures", python);
    return std::nullopt;
  }
  return PythonDispatch{*op, *module_call, *step};
}

// Host seconds per call of `body` (launches are asynchronous: host time only), median of five.
template <typename Body>
double host_seconds_per_call(const torch::Device& device, int warmup, int count, Body&& body) {
  for (int i = 0; i < warmup; ++i)
    body();
  synchronize(device);
  std::vector<double> per_call;
  for (int r = 0; r < 5; ++r) {
    auto start = Clock::now();
    for (int i = 0; i < count; ++i)
      body();
    per_call.push_back(seconds_since(start) / count);
    synchronize(device);
  }
  return median_of(per_call);
}

void bench_dispatch(const DevicePlan& devices, bool single_process, Benchmarks& out) {
  torch::Device device = devices.cuda ? torch::Device(torch::kCUDA, 0) : torch::Device(torch::kCPU);
  DispatchMeasurement d;
  {
    torch::NoGradGuard no_grad;
    torch::Tensor x = torch::ones({1}, torch::TensorOptions().device(device));
    d.op_dispatch_s = host_seconds_per_call(device, 200, 5000, [&] { x.add_(1); });
    torch::nn::Identity identity;
    d.module_call_s = host_seconds_per_call(device, 200, 5000, [&] { identity(x); });
  }
  {
    std::vector<torch::Tensor> parameters;
    for (int i = 0; i < kBenchOptimizerParameters; ++i) {
      parameters.push_back(
          torch::zeros({1}, torch::TensorOptions().device(device).requires_grad(true)));
      parameters.back().mutable_grad() = torch::ones({1}, torch::TensorOptions().device(device));
    }
    auto adam = make_step_optimizer(Optimizer::adam, OptimizerImplementation::foreach, parameters);
    d.optimizer_step_s = host_seconds_per_call(device, 20, 200, [&] { adam->step(); });
    d.optimizer_step_ops = kBenchOptimizerOps;
  }
  if (devices.cuda) {
    cuda::LaunchResult launch = cuda::empty_kernel_launch(0, 10000);
    d.kernel_launch_s = launch.host_seconds_per_launch;
    d.kernel_device_s = launch.device_seconds_per_kernel;
  }
  // Users train from Python: its interpreter, nn.Module and torch.optim come on top of the same
  // dispatch. Not with several ranks (under MPI forking a child is unsafe; elsewhere the child
  // would compete with the other ranks for the cores it is timed on).
  std::string why;
  if (!single_process) {
    out.skipped.push_back("python dispatch: not measured with several ranks");
  } else if (auto python = python_dispatch(devices.cuda, why)) {
    d.python_op_dispatch_s = python->op_s;
    d.python_module_call_s = python->module_call_s;
    d.python_optimizer_step_s = python->optimizer_step_s;
  } else {
    out.skipped.push_back("python dispatch: " + why);
  }
  out.dispatch = d;
}

// --- throughput ----------------------------------------------------------------------------------

template <typename Body>
double median_call_seconds(const torch::Device& device, int repetitions, Body&& body) {
  body();
  synchronize(device);
  std::vector<double> times;
  for (int r = 0; r < repetitions; ++r) {
    auto start = Clock::now();
    body();
    synchronize(device);
    times.push_back(seconds_since(start));
  }
  return median_of(times);
}

void bench_throughput(const DevicePlan& devices, Benchmarks& out) {
  torch::Device device = devices.cuda ? torch::Device(torch::kCUDA, 0) : torch::Device(torch::kCPU);
  torch::NoGradGuard no_grad;
  struct Precision {
    const char* name;
    torch::ScalarType dtype;
    bool tf32;
  };
  std::vector<Precision> precisions = {{"fp32", torch::kFloat32, false}};
  if (devices.cuda) {
    precisions.push_back({"tf32", torch::kFloat32, true});
    precisions.push_back({"fp16", torch::kFloat16, false});
    precisions.push_back({"bf16", torch::kBFloat16, false});
  }
  std::vector<std::int64_t> sizes = devices.cuda ? std::vector<std::int64_t>{1024, 4096, 8192}
                                                 : std::vector<std::int64_t>{256, 512, 1024};
  // The "fp32" rows are strict float32 (no TF32 anywhere); the flags are put back as found.
  const bool cublas_tf32_before = at::globalContext().allowTF32CuBLAS();
  const bool cudnn_tf32_before = at::globalContext().allowTF32CuDNN();
  for (const Precision& p : precisions) {
    if (devices.cuda) {
      at::globalContext().setAllowTF32CuBLAS(p.tf32);
      at::globalContext().setAllowTF32CuDNN(p.tf32);
    }
    auto options = torch::TensorOptions().device(device).dtype(p.dtype);
    for (std::int64_t n : sizes) {
      torch::Tensor a = torch::randn({n, n}, options), b = torch::randn({n, n}, options);
      double t = median_call_seconds(device, 5, [&] { torch::mm(a, b); });
      double flops = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
      out.throughput.push_back(
          {"gemm", p.name, fmt::format("m=n=k={}", n), flops, t, flops / t / 1e12});
    }
    // A ResNet-50 stage-1 3x3 convolution.
    std::int64_t batch = devices.cuda ? 64 : 8, channels = 64, hw = 56, kernel = 3;
    torch::Tensor input = torch::randn({batch, channels, hw, hw}, options);
    torch::Tensor weight = torch::randn({channels, channels, kernel, kernel}, options);
    double t = median_call_seconds(
        device, 5, [&] { torch::conv2d(input, weight, {}, /*stride=*/1, /*padding=*/1); });
    double flops =
        2.0 * static_cast<double>(batch * channels * hw * hw * channels * kernel * kernel);
    out.throughput.push_back(
        {"conv2d", p.name,
         fmt::format("n={} c={} hw={} k={} r={}", batch, channels, hw, channels, kernel), flops, t,
         flops / t / 1e12});
  }
  if (devices.cuda) {
    at::globalContext().setAllowTF32CuBLAS(cublas_tf32_before);
    at::globalContext().setAllowTF32CuDNN(cudnn_tf32_before);
  }
}

// --- largest batch that fits
// -----------------------------------------------------------------------

bool is_out_of_memory(const std::exception& error) {
  if (dynamic_cast<const std::bad_alloc*>(&error) != nullptr) return true;
  std::string text = error.what();
  return text.find("out of memory") != std::string::npos ||
         text.find("can't allocate memory") != std::string::npos ||
         text.find("not enough memory") != std::string::npos;
}

void bench_fit(const BenchOptions& options, const DevicePlan& devices, Benchmarks& out) {
  if (options.scenario == nullptr) {
    out.skipped.push_back("fit: needs a scenario (its model)");
    return;
  }
  const ScenarioSpec& scenario = *options.scenario;
  torch::Device device = devices.cuda ? torch::Device(torch::kCUDA, 0) : torch::Device(torch::kCPU);
  torch::manual_seed(1);
  TorchModel model = build_torch_model(scenario.model);
  model->to(device);
  model->train();
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(1e-3));
  const ModelAnalysis& analysis = model->analysis();
  // One training step at `batch`; false when the device runs out of memory.
  auto fits = [&](std::int64_t batch) {
    try {
      torch::Tensor input = random_model_input(analysis, batch).to(device);
      torch::Tensor output = model->forward(input);
      output.to(torch::kFloat32).square().mean().backward();
      optimizer.step();
      model->zero_grad();
      synchronize(device);
      return true;
    } catch (const std::exception& error) {
      if (!is_out_of_memory(error)) throw;
      model->zero_grad();
      return false;
    }
  };
  LargestBatch result;
  result.model = scenario.model.name;
  result.cap = options.fit_cap > 0 ? options.fit_cap : scenario.dataset.train_samples;
  std::int64_t good = 0, bad = 0;
  for (std::int64_t b = 1; b <= result.cap; b *= 2) {
    if (fits(b)) {
      good = b;
    } else {
      bad = b;
      break;
    }
  }
  if (bad == 0 && good < result.cap) {  // the doubling overshot the cap: try the cap itself
    if (fits(result.cap)) {
      good = result.cap;
    } else {
      bad = result.cap;
    }
  }
  while (bad > 0 && bad - good > 1) {  // bisect between the last fit and the first failure
    std::int64_t mid = good + (bad - good) / 2;
    (fits(mid) ? good : bad) = mid;
  }
  result.largest_fitting = good;
  result.first_failing = bad;
  out.largest_batch = result;
}

}  // namespace

double all_reduce_bus_bandwidth(double algbw_gbps, int ranks) {
  return ranks > 1 ? algbw_gbps * 2.0 * (ranks - 1) / ranks : algbw_gbps;
}

Benchmarks run_benchmarks(const BenchOptions& options, const DevicePlan& devices, World& world) {
  Benchmarks out;
  // Collectives involve every rank; the rest run on rank 0 only, while the others wait.
  if (wanted(options, "collectives")) bench_collectives(options, devices, world, out);
  if (world.rank() == 0) {
    if (wanted(options, "copies")) bench_copies(devices, out);
    if (wanted(options, "dispatch")) bench_dispatch(devices, world.size() == 1, out);
    if (wanted(options, "throughput")) bench_throughput(devices, out);
    if (wanted(options, "fit")) bench_fit(options, devices, out);
  }
  world.barrier();
  return out;
}

}  // namespace epochcast::runtime

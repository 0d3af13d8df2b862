// The Kineto profiler around a few steps, its trace written through OutputFile.
#include "runtime/train/kernel_trace.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <ATen/Context.h>
#include <fmt/format.h>
#include <torch/csrc/autograd/profiler_kineto.h>
#include <unistd.h>

#include "core/io/output_file.h"
#include "core/system_failure.h"

namespace epochcast::runtime {

std::string kernel_trace_path(const std::string& directory, const SweepPoint& point) {
  return (std::filesystem::path(directory) /
          fmt::format("kernels-{}gpu-batch{}.json", point.gpus, point.global_batch))
      .string();
}

bool kernel_tracing_available(std::string& why) {
  namespace profiler = torch::autograd::profiler;
  using torch::profiler::impl::ActivityType;
  using torch::profiler::impl::ProfilerConfig;
  using torch::profiler::impl::ProfilerState;
  const std::filesystem::path probe =
      std::filesystem::temp_directory_path() / fmt::format("epochcast-kineto-{}.json", getpid());
  try {
    const ProfilerConfig config(ProfilerState::KINETO);
    profiler::prepareProfiler(config, {ActivityType::CPU});
    profiler::enableProfiler(config, {ActivityType::CPU});
    profiler::disableProfiler()->save(probe.string());
  } catch (const std::exception& error) {
    const std::string what = error.what();
    why = what.substr(0, what.find('\n'));
    std::filesystem::remove(probe);
    return false;
  }
  std::filesystem::remove(probe);
  return true;
}

void record_kernel_trace(const torch::Device& device, TrainingPrecision precision,
                         const std::string& path, const std::function<void()>& steps) {
  namespace profiler = torch::autograd::profiler;
  using torch::profiler::impl::ActivityType;
  using torch::profiler::impl::ProfilerConfig;
  using torch::profiler::impl::ProfilerState;
  const OutputFile output = OutputFile::resolve(path, "--kernel-trace");
  std::set<ActivityType> activities{ActivityType::CPU};
  if (device.is_cuda()) activities.insert(ActivityType::CUDA);
  // report_input_shapes: the operators' "Input Dims" (and, from PyTorch 2.1, their scalar
  // arguments), which say what each kernel computed.
  const ProfilerConfig config(ProfilerState::KINETO, /*report_input_shapes=*/true);
  profiler::prepareProfiler(config, activities);
  profiler::enableProfiler(config, activities);
  std::unique_ptr<profiler::ProfilerResult> result;
  try {
    steps();
    if (device.is_cuda()) torch::cuda::synchronize(device.index());
  } catch (...) {
    profiler::disableProfiler();
    throw;
  }
  result = profiler::disableProfiler();
  // Kineto writes the file itself: into a temporary beside the target, read back and written
  // whole through OutputFile.
  const std::string temporary = output.target().string() + ".kineto";
  result->save(temporary);
  std::stringstream text;
  text << std::ifstream(temporary).rdbuf();
  std::filesystem::remove(temporary);
  std::string trace = text.str();
  const std::size_t brace = trace.find('{');
  if (brace == std::string::npos) throw SystemFailure("the profiler wrote no trace");
  trace.insert(
      brace + 1,
      fmt::format("\n  \"epochcast\": {{\"precision\": \"{}\", \"cudnn_allow_tf32\": {}}},",
                  name_of(precision), at::globalContext().allowTF32CuDNN() ? "true" : "false"));
  output.write(trace);
}

}  // namespace epochcast::runtime

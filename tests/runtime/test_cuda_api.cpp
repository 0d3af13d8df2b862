// Tests of runtime/cuda (cuda_api.h). The [gpu] cases need a CUDA device and skip, with a
// warning, when there is none; the others run anywhere.
#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <string>

#include <catch2/catch.hpp>

#include "runtime/cuda/cuda_api.h"

namespace cuda = epochcast::cuda;

namespace {

// False, after a warning, when no device is visible: the calling [gpu] test then returns.
bool have_device() {
  if (cuda::device_count() > 0) return true;
  WARN("skipped: no CUDA device visible");
  return false;
}

void check_ends(const cuda::DeviceBuffer& buffer, float expected) {
  const auto [first, last] = buffer.read_ends_float();
  CHECK(first == expected);
  CHECK(last == expected);
}

}  // namespace

TEST_CASE("compiled_with_cuda is true exactly when the build has CUDA", "[cuda]") {
#ifdef EPOCHCAST_HAVE_CUDA
  CHECK(cuda::compiled_with_cuda());
#else
  CHECK_FALSE(cuda::compiled_with_cuda());
#endif
}

TEST_CASE("device_count returns zero or more without throwing, with or without a driver",
          "[cuda]") {
  int count = -1;
  REQUIRE_NOTHROW(count = cuda::device_count());
  CHECK(count >= 0);
}

TEST_CASE("a stream on a device that does not exist throws CudaError naming the call and file",
          "[cuda]") {
  cuda::set_error_context(3, "node-a");
  const int missing = cuda::device_count();  // one past the last device: never valid
  try {
    const cuda::Stream stream(missing);
    FAIL("constructing the stream did not throw");
  } catch (const cuda::CudaError& error) {
    const std::string message = error.what();
    INFO(message);
#ifdef EPOCHCAST_HAVE_CUDA
    CHECK(message.find("cudaSetDevice") != std::string::npos);
    CHECK(message.find("runtime/cuda/cuda_api.cpp:") != std::string::npos);
    CHECK(message.find("device " + std::to_string(missing)) != std::string::npos);
    CHECK(message.find("rank 3") != std::string::npos);
    CHECK(message.find("host node-a") != std::string::npos);
#else
    CHECK(message.find("built without CUDA") != std::string::npos);
#endif
  }
}

TEST_CASE("a device buffer on a device that does not exist throws CudaError naming the call",
          "[cuda]") {
  const int missing = cuda::device_count();
  try {
    const cuda::DeviceBuffer buffer(missing, 1024);
    FAIL("constructing the buffer did not throw");
  } catch (const cuda::CudaError& error) {
    const std::string message = error.what();
    INFO(message);
#ifdef EPOCHCAST_HAVE_CUDA
    CHECK(message.find("cudaSetDevice") != std::string::npos);
    CHECK(message.find("runtime/cuda/cuda_api.cpp:") != std::string::npos);
#else
    CHECK(message.find("built without CUDA") != std::string::npos);
#endif
  }
}

TEST_CASE("a copy benchmark without repetitions is rejected before touching a device", "[cuda]") {
#ifdef EPOCHCAST_HAVE_CUDA
  CHECK_THROWS_AS(cuda::host_to_device_copy(0, 1024, true, 0), std::invalid_argument);
  CHECK_THROWS_AS(cuda::device_to_host_copy(0, 0, true, 3), std::invalid_argument);
  CHECK_THROWS_AS(cuda::empty_kernel_launch(0, 0), std::invalid_argument);
#else
  CHECK_THROWS_AS(cuda::host_to_device_copy(0, 1024, true, 0), cuda::CudaError);
#endif
}

TEST_CASE("CopyResult gbps is bytes over seconds in units of 1e9 bytes per second", "[cuda]") {
  const std::size_t bytes = std::size_t{1} << 30;
  const double seconds = 0.025;
  const cuda::CopyResult result{bytes, seconds};
  CHECK(result.gbps() == Approx(static_cast<double>(bytes) / seconds / 1e9));
  CHECK(cuda::CopyResult{bytes, 0}.gbps() == 0);
}

TEST_CASE("device_info describes every visible device", "[cuda][gpu]") {
  if (!have_device()) return;
  for (int device = 0; device < cuda::device_count(); ++device) {
    const cuda::DeviceInfo info = cuda::device_info(device);
    INFO(info.name << " at " << info.pci_bus_id);
    CHECK(info.index == device);
    CHECK_FALSE(info.name.empty());
    CHECK_FALSE(info.pci_bus_id.empty());
    CHECK(info.memory_bytes > 0);
    CHECK(info.sm_count > 0);
    CHECK(info.compute_capability_major > 0);
    CHECK(info.driver_version.find('.') != std::string::npos);
    CHECK(info.runtime_version.find('.') != std::string::npos);
    // "major.minor.patch"
    CHECK(std::count(info.nccl_version.begin(), info.nccl_version.end(), '.') == 2);
  }
}

TEST_CASE("a filled device buffer reads back the fill value at both ends", "[cuda][gpu]") {
  if (!have_device()) return;
  const cuda::Stream stream(0);
  cuda::DeviceBuffer buffer(0, 1000003 * sizeof(float));  // odd count: not a multiple of a block
  buffer.fill_float(1.5f, stream);
  check_ends(buffer, 1.5f);
}

TEST_CASE("a stream ordered after the default stream and back keeps the fill order",
          "[cuda][gpu]") {
  if (!have_device()) return;
  const cuda::Stream first(0);
  const cuda::Stream second(0);
  cuda::DeviceBuffer buffer(0, 1 << 24);
  buffer.fill_float(1.0f, first);
  second.wait_for(&first);
  buffer.fill_float(2.0f, second);
  second.make_default_stream_wait();
  first.wait_for(nullptr);
  first.synchronize();
  check_ends(buffer, 2.0f);
}

TEST_CASE("an event timer measures a positive time around device work", "[cuda][gpu]") {
  if (!have_device()) return;
  const cuda::Stream stream(0);
  cuda::DeviceBuffer buffer(0, 1 << 26);
  cuda::EventTimer timer(&stream);
  timer.start();
  buffer.fill_float(0.0f, stream);
  timer.stop();
  CHECK(timer.elapsed_seconds() > 0);
}

TEST_CASE("pinned host-to-device copies run faster than 1 GB/s", "[cuda][gpu]") {
  if (!have_device()) return;
  const std::size_t bytes = std::size_t{64} << 20;
  const cuda::CopyResult result = cuda::host_to_device_copy(0, bytes, true, 5);
  INFO(result.gbps() << " GB/s");
  CHECK(result.bytes == bytes);
  CHECK(result.gbps() > 1.0);
  CHECK(cuda::device_to_host_copy(0, bytes, false, 3).gbps() > 0);
}

TEST_CASE("a one-rank NCCL all-reduce leaves values unchanged and broadcast from 0 copies them",
          "[cuda][gpu]") {
  if (!have_device()) return;
  const std::string id = cuda::NcclCommunicator::create_unique_id();
  REQUIRE(id.size() == cuda::NcclCommunicator::kUniqueIdBytes);
  cuda::NcclCommunicator communicator(0, 1, id, 0);
  const cuda::Stream stream(0);
  const std::size_t count = 4096;
  cuda::DeviceBuffer buffer(0, count * sizeof(float));

  buffer.fill_float(2.5f, stream);
  communicator.all_reduce_sum(buffer.data(), count, cuda::ElementType::float32, stream);
  check_ends(buffer, 2.5f);

  buffer.fill_float(-4.0f, stream);
  communicator.broadcast(buffer.data(), count, cuda::ElementType::float32, 0, stream);
  check_ends(buffer, -4.0f);

  // With one rank, reduce-scatter and all-gather copy the input to the output.
  cuda::DeviceBuffer output(0, count * sizeof(float));
  communicator.reduce_scatter_sum(buffer.data(), output.data(), count, cuda::ElementType::float32,
                                  stream);
  check_ends(output, -4.0f);
  buffer.fill_float(7.0f, stream);
  communicator.all_gather(buffer.data(), output.data(), count, cuda::ElementType::float32, stream);
  check_ends(output, 7.0f);

  // Healthy, then aborted: what follows an abort fails at once instead of waiting.
  CHECK_NOTHROW(communicator.check_health());
  communicator.abort();
  CHECK_THROWS_AS(
      communicator.all_reduce_sum(buffer.data(), count, cuda::ElementType::float32, stream),
      cuda::CudaError);
  CHECK_THROWS_AS(communicator.check_health(), cuda::CudaError);
}

TEST_CASE("an empty kernel launch costs the host less than a millisecond", "[cuda][gpu]") {
  if (!have_device()) return;
  const cuda::LaunchResult result = cuda::empty_kernel_launch(0, 200);
  INFO(result.host_seconds_per_launch * 1e6
       << " us per launch, " << result.device_seconds_per_kernel * 1e6 << " us per kernel");
  CHECK(result.host_seconds_per_launch > 0);
  CHECK(result.host_seconds_per_launch < 1e-3);
  CHECK(result.device_seconds_per_kernel > 0);
}

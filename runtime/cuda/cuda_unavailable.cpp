// cuda_api.h for a build without the CUDA Toolkit or NCCL: no devices, and every other call
// throws CudaError saying so. Includes no CUDA header.
#include <string>

#include "runtime/cuda/cuda_api.h"

namespace epochcast::cuda {
namespace {

[[noreturn]] void unavailable(const std::string& what) {
  throw CudaError("epochcast was built without CUDA: " + what +
                  " is unavailable (rebuild with the CUDA Toolkit and NCCL installed)");
}

}  // namespace

bool compiled_with_cuda() {
  return false;
}
int device_count() {
  return 0;
}
void set_device(int) {
  unavailable("set_device");
}
DeviceInfo device_info(int) {
  unavailable("device_info");
}
std::int64_t memory_in_use(int) {
  unavailable("memory_in_use");
}
// Error messages name the rank and host only in the CUDA build; nothing to record here.
void set_error_context(int, const std::string&) {}

Stream::Stream(int device) : device_(device) {
  unavailable("Stream");
}
Stream::Stream(int device, void*) : device_(device), owned_(false) {
  unavailable("Stream");
}
Stream::~Stream() = default;
void hold_stream(const Stream*, double) {
  unavailable("hold_stream");
}
void Stream::synchronize() const {
  unavailable("Stream::synchronize");
}
void Stream::wait_for(const Stream*) const {
  unavailable("Stream::wait_for");
}
void Stream::wait_for(const Event&) const {
  unavailable("Stream::wait_for");
}
void Stream::make_default_stream_wait() const {
  unavailable("Stream::make_default_stream_wait");
}

EventTimer::EventTimer(const Stream* stream) : stream_(stream) {
  unavailable("EventTimer");
}
EventTimer::~EventTimer() = default;
void EventTimer::start() {
  unavailable("EventTimer::start");
}
void EventTimer::stop() {
  unavailable("EventTimer::stop");
}
double EventTimer::elapsed_seconds() {
  unavailable("EventTimer::elapsed_seconds");
}

Event::Event(int device) : device_(device) {
  unavailable("Event");
}
Event::~Event() = default;
void Event::record(const Stream&) {
  unavailable("Event::record");
}
bool Event::finished() const {
  return true;
}

std::string NcclCommunicator::create_unique_id() {
  unavailable("NcclCommunicator::create_unique_id");
}
NcclCommunicator::NcclCommunicator(int rank, int size, const std::string&, int device,
                                   double timeout_s)
    : rank_(rank), size_(size), device_(device), timeout_s_(timeout_s) {
  unavailable("NcclCommunicator");
}
NcclCommunicator::~NcclCommunicator() = default;
void NcclCommunicator::check_health() {
  unavailable("NcclCommunicator::check_health");
}
void NcclCommunicator::abort() {}
void NcclCommunicator::all_reduce_sum(void*, std::size_t, ElementType, const Stream&) {
  unavailable("NcclCommunicator::all_reduce_sum");
}
void NcclCommunicator::broadcast(void*, std::size_t, ElementType, int, const Stream&) {
  unavailable("NcclCommunicator::broadcast");
}
void NcclCommunicator::reduce_scatter_sum(const void*, void*, std::size_t, ElementType,
                                          const Stream&) {
  unavailable("NcclCommunicator::reduce_scatter_sum");
}
void NcclCommunicator::all_gather(const void*, void*, std::size_t, ElementType, const Stream&) {
  unavailable("NcclCommunicator::all_gather");
}

DeviceBuffer::DeviceBuffer(int device, std::size_t bytes) : device_(device), bytes_(bytes) {
  unavailable("DeviceBuffer");
}
DeviceBuffer::~DeviceBuffer() = default;
void DeviceBuffer::fill_float(float, const Stream&) {
  unavailable("DeviceBuffer::fill_float");
}
std::pair<float, float> DeviceBuffer::read_ends_float() const {
  unavailable("DeviceBuffer::read_ends_float");
}

CopyResult host_to_device_copy(int, std::size_t, bool, int) {
  unavailable("host_to_device_copy");
}
CopyResult device_to_host_copy(int, std::size_t, bool, int) {
  unavailable("device_to_host_copy");
}
CopyResult peer_copy(int, int, std::size_t, int) {
  unavailable("peer_copy");
}
bool peer_access_supported(int, int) {
  unavailable("peer_access_supported");
}
LaunchResult empty_kernel_launch(int, int) {
  unavailable("empty_kernel_launch");
}

}  // namespace epochcast::cuda

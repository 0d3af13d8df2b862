// The MPI transport (transport.h): MPI_COMM_WORLD and communicators split from it, for processes
// an MPI launcher started. Sums are MPI_SUM, in the order the MPI library's algorithm chooses.
#include <array>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "core/system_failure.h"
#include "runtime/comm/transport.h"

#ifdef EPOCHCAST_HAVE_MPI
// The C API only: MPI's deprecated C++ bindings are not used (and do not compile warning-free).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace epochcast::runtime::detail {

#ifdef EPOCHCAST_HAVE_MPI
namespace {

// Who this process is, for messages: its world rank (-1 before MPI knows it) and host.
struct Identity {
  int rank = -1;
  std::string host;
};

void check(int code, const char* call, const Identity& self) {
  if (code == MPI_SUCCESS) return;
  std::array<char, MPI_MAX_ERROR_STRING> text{};
  int length = 0;
  MPI_Error_string(code, text.data(), &length);
  throw SystemFailure(fmt::format("{} failed on rank {} ({}): {}", call, self.rank, self.host,
                                  std::string(text.data(), static_cast<std::size_t>(length))));
}
#define EPOCHCAST_MPI(call) check((call), #call, self_)

// MPI counts are ints: a larger message is refused rather than wrapped.
int mpi_count(std::size_t count) {
  if (count > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
    throw SystemFailure(
        fmt::format("a host collective of {} elements exceeds MPI's count limit of {}", count,
                    std::numeric_limits<int>::max()));
  }
  return static_cast<int>(count);
}

class MpiChannel final : public Channel {
 public:
  // `owned`: a communicator split from the world, freed with the channel.
  MpiChannel(MPI_Comm comm, bool owned, Identity self)
      : comm_(comm), owned_(owned), self_(std::move(self)) {
    EPOCHCAST_MPI(MPI_Comm_rank(comm_, &rank_));
    EPOCHCAST_MPI(MPI_Comm_size(comm_, &size_));
  }
  ~MpiChannel() override {
    if (owned_) MPI_Comm_free(&comm_);
  }
  MpiChannel(const MpiChannel&) = delete;
  MpiChannel& operator=(const MpiChannel&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void all_reduce_sum(std::span<float> data) override {
    EPOCHCAST_MPI(MPI_Allreduce(MPI_IN_PLACE, data.data(), mpi_count(data.size()), MPI_FLOAT,
                                MPI_SUM, comm_));
  }
  void all_reduce_sum(std::span<double> data) override {
    EPOCHCAST_MPI(MPI_Allreduce(MPI_IN_PLACE, data.data(), mpi_count(data.size()), MPI_DOUBLE,
                                MPI_SUM, comm_));
  }
  void all_reduce_max(std::span<double> data) override {
    EPOCHCAST_MPI(MPI_Allreduce(MPI_IN_PLACE, data.data(), mpi_count(data.size()), MPI_DOUBLE,
                                MPI_MAX, comm_));
  }
  void broadcast(std::span<std::byte> data, int root) override {
    EPOCHCAST_MPI(MPI_Bcast(data.data(), mpi_count(data.size()), MPI_BYTE, root, comm_));
  }
  void all_gather(std::span<const std::byte> send, std::span<std::byte> receive) override {
    EPOCHCAST_MPI(MPI_Allgather(send.data(), mpi_count(send.size()), MPI_BYTE, receive.data(),
                                mpi_count(send.size()), MPI_BYTE, comm_));
  }
  void reduce_scatter_sum(std::span<const float> send, std::span<float> receive) override {
    EPOCHCAST_MPI(MPI_Reduce_scatter_block(send.data(), receive.data(), mpi_count(receive.size()),
                                           MPI_FLOAT, MPI_SUM, comm_));
  }
  void barrier() override { EPOCHCAST_MPI(MPI_Barrier(comm_)); }

 private:
  MPI_Comm comm_;
  bool owned_;
  Identity self_;
  int rank_ = 0;
  int size_ = 1;
};

class MpiTransport final : public Transport {
 public:
  MpiTransport(int* argc, char*** argv, const std::string& host) {
    self_.host = host;
    int provided = 0;
    EPOCHCAST_MPI(MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided));
    if (provided < MPI_THREAD_SERIALIZED) {
      MPI_Finalize();
      throw SystemFailure(
          "MPI provides no MPI_THREAD_SERIALIZED support, which the communication thread of "
          "ddp needs");
    }
    try {
      EPOCHCAST_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &self_.rank));
      world_ = std::make_unique<MpiChannel>(MPI_COMM_WORLD, false, self_);
      MPI_Comm local;
      EPOCHCAST_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, self_.rank,
                                        MPI_INFO_NULL, &local));
      const int ranked = MPI_Comm_rank(local, &local_rank_);
      MPI_Comm_free(&local);
      EPOCHCAST_MPI(ranked);
    } catch (...) {
      world_.reset();
      MPI_Finalize();
      throw;
    }
  }
  ~MpiTransport() override {
    world_.reset();
    MPI_Finalize();
  }
  MpiTransport(const MpiTransport&) = delete;
  MpiTransport& operator=(const MpiTransport&) = delete;

  Channel& world() override { return *world_; }
  int local_rank() const override { return local_rank_; }

  std::unique_ptr<Channel> first_ranks(int participants) override {
    MPI_Comm comm = MPI_COMM_NULL;
    const bool member = self_.rank < participants;
    EPOCHCAST_MPI(MPI_Comm_split(MPI_COMM_WORLD, member ? 0 : MPI_UNDEFINED, self_.rank, &comm));
    if (comm == MPI_COMM_NULL) return nullptr;
    return std::make_unique<MpiChannel>(comm, true, self_);
  }

  std::string mpi_version() const override {
    std::array<char, MPI_MAX_LIBRARY_VERSION_STRING> text{};
    int length = 0;
    MPI_Get_library_version(text.data(), &length);
    std::string version(text.data(), static_cast<std::size_t>(length));
    // Only the first line ("Open MPI v4.1.4, package: ...") names the library.
    version = version.substr(0, version.find_first_of("\r\n"));
    return version.substr(0, version.find(','));
  }

 private:
  Identity self_;
  int local_rank_ = 0;
  std::unique_ptr<MpiChannel> world_;
};

}  // namespace

std::unique_ptr<Transport> start_mpi_transport(int* argc, char*** argv, const std::string& host) {
  return std::make_unique<MpiTransport>(argc, argv, host);
}

#else

std::unique_ptr<Transport> start_mpi_transport(int* /*argc*/, char*** /*argv*/,
                                               const std::string& /*host*/) {
  throw SystemFailure(
      "launched by an MPI launcher (mpirun, mpiexec or srun --mpi), but this epochcast-run was "
      "built without MPI: install libopenmpi-dev and rebuild, or start the ranks with torchrun "
      "or with plain srun and MASTER_ADDR/MASTER_PORT (docs/guide.md, section 1.7)");
}

#endif

}  // namespace epochcast::runtime::detail

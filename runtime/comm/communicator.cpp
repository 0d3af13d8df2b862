// World and groups over MPI, or the trivial one-process world when not launched by mpirun.
#include "runtime/comm/communicator.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>
#include <unistd.h>

#ifdef EPOCHCAST_HAVE_MPI
// The C API only: MPI's deprecated C++ bindings are not used (and do not compile warning-free).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace epochcast::runtime {

namespace {

World* the_world = nullptr;

std::string host_name() {
  std::array<char, 256> name{};
  if (gethostname(name.data(), name.size() - 1) != 0) return "unknown-host";
  return name.data();
}

// mpirun (Open MPI, MPICH/Hydra, Slurm's PMI) marks the processes it starts.
bool started_by_mpi_launcher() {
  for (const char* variable : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) {
    if (std::getenv(variable) != nullptr) return true;
  }
  return false;
}

#ifdef EPOCHCAST_HAVE_MPI
// MPI counts are ints: a larger message is refused rather than wrapped.
int mpi_count(std::size_t count) {
  if (count > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
    throw std::runtime_error(
        fmt::format("a host collective of {} elements exceeds MPI's count limit of {}", count,
                    std::numeric_limits<int>::max()));
  }
  return static_cast<int>(count);
}

void check(int code, const char* call) {
  if (code == MPI_SUCCESS) return;
  std::array<char, MPI_MAX_ERROR_STRING> text{};
  int length = 0;
  MPI_Error_string(code, text.data(), &length);
  int rank = the_world != nullptr ? the_world->rank() : -1;
  throw std::runtime_error(fmt::format("{} failed on rank {} ({}): {}", call, rank, host_name(),
                                       std::string(text.data(), static_cast<std::size_t>(length))));
}
#define EPOCHCAST_MPI(call) check((call), #call)

MPI_Comm as_comm(void* comm) {
  return *static_cast<MPI_Comm*>(comm);
}
#endif

}  // namespace

World& World::initialize(int* argc, char*** argv) {
  if (the_world != nullptr) return *the_world;
  the_world = new World();
  World& w = *the_world;
  w.host_ = host_name();
#ifdef EPOCHCAST_HAVE_MPI
  if (started_by_mpi_launcher()) {
    int provided = 0;
    EPOCHCAST_MPI(MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided));
    if (provided < MPI_THREAD_SERIALIZED) {
      throw std::runtime_error(
          "MPI provides no MPI_THREAD_SERIALIZED support, which the "
          "communication thread of ddp needs");
    }
    w.mpi_ = true;
    EPOCHCAST_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &w.rank_));
    EPOCHCAST_MPI(MPI_Comm_size(MPI_COMM_WORLD, &w.size_));
    MPI_Comm local;
    EPOCHCAST_MPI(
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, w.rank_, MPI_INFO_NULL, &local));
    EPOCHCAST_MPI(MPI_Comm_rank(local, &w.local_rank_));
    MPI_Comm_free(&local);
  }
#else
  (void)argc;
  (void)argv;
  if (started_by_mpi_launcher()) {
    throw std::runtime_error(
        "launched by mpirun, but this epochcast-run was built without MPI: install "
        "libopenmpi-dev and rebuild, or run without mpirun");
  }
#endif
  return w;
}

World& World::get() {
  if (the_world == nullptr) throw std::logic_error("World::get() before World::initialize()");
  return *the_world;
}

void World::finalize() {
  delete the_world;
  the_world = nullptr;
}

World::~World() {
#ifdef EPOCHCAST_HAVE_MPI
  if (mpi_) MPI_Finalize();
#endif
}

std::string World::mpi_version() const {
#ifdef EPOCHCAST_HAVE_MPI
  if (!mpi_) return "";
  std::array<char, MPI_MAX_LIBRARY_VERSION_STRING> text{};
  int length = 0;
  MPI_Get_library_version(text.data(), &length);
  std::string version(text.data(), static_cast<std::size_t>(length));
  // Only the first line ("Open MPI v4.1.4, package: ...") names the library.
  version = version.substr(0, version.find_first_of("\r\n"));
  return version.substr(0, version.find(','));
#else
  return "";
#endif
}

void World::barrier() const {
#ifdef EPOCHCAST_HAVE_MPI
  if (mpi_) EPOCHCAST_MPI(MPI_Barrier(MPI_COMM_WORLD));
#endif
}

bool World::all(bool value) const {
#ifdef EPOCHCAST_HAVE_MPI
  if (mpi_) {
    int in = value ? 1 : 0, out = 0;
    EPOCHCAST_MPI(MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    return out == 1;
  }
#endif
  return value;
}

Group Group::first_ranks(const World& world, int participants) {
  Group g;
  g.member_ = world.rank() < participants;
  g.size_ = std::min(participants, world.size());
  g.rank_ = g.member_ ? world.rank() : -1;
#ifdef EPOCHCAST_HAVE_MPI
  if (world.launched_by_mpi()) {
    auto* comm = new MPI_Comm(MPI_COMM_NULL);
    EPOCHCAST_MPI(
        MPI_Comm_split(MPI_COMM_WORLD, g.member_ ? 0 : MPI_UNDEFINED, world.rank(), comm));
    if (*comm == MPI_COMM_NULL) {
      delete comm;
    } else {
      g.comm_ = comm;
      EPOCHCAST_MPI(MPI_Comm_rank(*comm, &g.rank_));
      EPOCHCAST_MPI(MPI_Comm_size(*comm, &g.size_));
    }
  }
#endif
  return g;
}

Group::~Group() {
#ifdef EPOCHCAST_HAVE_MPI
  if (comm_ != nullptr) {
    auto* comm = static_cast<MPI_Comm*>(comm_);
    MPI_Comm_free(comm);
    delete comm;
  }
#endif
}

Group::Group(Group&& other) noexcept
    : member_(other.member_), rank_(other.rank_), size_(other.size_), comm_(other.comm_) {
  other.comm_ = nullptr;
}

Group& Group::operator=(Group&& other) noexcept {
  std::swap(member_, other.member_);
  std::swap(rank_, other.rank_);
  std::swap(size_, other.size_);
  std::swap(comm_, other.comm_);
  return *this;
}

// Without a communicator the group is one process: every reduction is the identity.
void Group::all_reduce_sum(float* data, std::size_t count) const {
#ifdef EPOCHCAST_HAVE_MPI
  if (comm_ != nullptr) {
    EPOCHCAST_MPI(
        MPI_Allreduce(MPI_IN_PLACE, data, mpi_count(count), MPI_FLOAT, MPI_SUM, as_comm(comm_)));
  }
#else
  (void)data;
  (void)count;
#endif
}

void Group::all_reduce_sum(double* data, std::size_t count) const {
#ifdef EPOCHCAST_HAVE_MPI
  if (comm_ != nullptr) {
    EPOCHCAST_MPI(
        MPI_Allreduce(MPI_IN_PLACE, data, mpi_count(count), MPI_DOUBLE, MPI_SUM, as_comm(comm_)));
  }
#else
  (void)data;
  (void)count;
#endif
}

void Group::all_reduce_max(double* data, std::size_t count) const {
#ifdef EPOCHCAST_HAVE_MPI
  if (comm_ != nullptr) {
    EPOCHCAST_MPI(
        MPI_Allreduce(MPI_IN_PLACE, data, mpi_count(count), MPI_DOUBLE, MPI_MAX, as_comm(comm_)));
  }
#else
  (void)data;
  (void)count;
#endif
}

double Group::max(double value) const {
  all_reduce_max(&value, 1);
  return value;
}

bool Group::all(bool value) const {
  double failed = value ? 0.0 : 1.0;
  all_reduce_max(&failed, 1);
  return failed == 0.0;
}

void Group::broadcast(void* data, std::size_t bytes, int root) const {
#ifdef EPOCHCAST_HAVE_MPI
  if (comm_ != nullptr) {
    EPOCHCAST_MPI(MPI_Bcast(data, mpi_count(bytes), MPI_BYTE, root, as_comm(comm_)));
  }
#else
  (void)data;
  (void)bytes;
  (void)root;
#endif
}

std::vector<std::uint64_t> Group::all_gather(std::uint64_t value) const {
  std::vector<std::uint64_t> values(static_cast<std::size_t>(size_), value);
#ifdef EPOCHCAST_HAVE_MPI
  if (comm_ != nullptr) {
    EPOCHCAST_MPI(
        MPI_Allgather(&value, 1, MPI_UINT64_T, values.data(), 1, MPI_UINT64_T, as_comm(comm_)));
  }
#endif
  return values;
}

void Group::all_gather(const float* send, float* receive, std::size_t count) const {
#ifdef EPOCHCAST_HAVE_MPI
  if (comm_ != nullptr) {
    EPOCHCAST_MPI(MPI_Allgather(send, mpi_count(count), MPI_FLOAT, receive, mpi_count(count),
                                MPI_FLOAT, as_comm(comm_)));
    return;
  }
#endif
  std::copy(send, send + count, receive);
}

void Group::reduce_scatter_sum(const float* send, float* receive, std::size_t count) const {
#ifdef EPOCHCAST_HAVE_MPI
  if (comm_ != nullptr) {
    EPOCHCAST_MPI(MPI_Reduce_scatter_block(send, receive, mpi_count(count), MPI_FLOAT, MPI_SUM,
                                           as_comm(comm_)));
    return;
  }
#endif
  std::copy(send, send + count, receive);
}

void Group::barrier() const {
#ifdef EPOCHCAST_HAVE_MPI
  if (comm_ != nullptr) EPOCHCAST_MPI(MPI_Barrier(as_comm(comm_)));
#endif
}

}  // namespace epochcast::runtime

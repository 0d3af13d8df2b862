// The seam under World and Group (communicator.h): a transport joins the processes of a run and
// hands out channels, each the host-memory collectives among a set of ranks. One file per
// transport: mpi_transport.cpp (mpirun, mpiexec, srun --mpi) and tcp_transport.cpp (torchrun,
// plain srun). A new transport implements Transport and Channel and a start function in a file
// of its own; World::initialize picks it from the launcher.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>

namespace epochcast::runtime::detail {

// The collectives among the ranks of one channel. Every member calls each collective in the same
// order, with the same sizes (as MPI requires on a communicator); calls from several threads of
// a process take turns (the caller serialises them, as MPI_THREAD_SERIALIZED asks). Failures
// raise SystemFailure (core/system_failure.h) naming the call, the rank and the host.
class Channel {
 public:
  virtual ~Channel() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // In place. The order in which a sum's terms are added is each transport's (its header says).
  virtual void all_reduce_sum(std::span<float> data) = 0;
  virtual void all_reduce_sum(std::span<double> data) = 0;
  virtual void all_reduce_max(std::span<double> data) = 0;
  virtual void broadcast(std::span<std::byte> data, int root) = 0;
  // `send` from every rank into `receive` (size() x send.size() bytes), in rank order.
  virtual void all_gather(std::span<const std::byte> send, std::span<std::byte> receive) = 0;
  // `send` holds size() blocks of receive.size() elements; rank r receives the sum of block r.
  virtual void reduce_scatter_sum(std::span<const float> send, std::span<float> receive) = 0;
  virtual void barrier() = 0;
};

// The processes of a run, joined. Destroying it leaves the job (MPI_Finalize, sockets closed):
// every channel it handed out must be gone by then.
class Transport {
 public:
  virtual ~Transport() = default;
  // Every rank of the run.
  virtual Channel& world() = 0;
  // Rank among the processes on this host (selects the GPU).
  virtual int local_rank() const = 0;
  // The first `participants` ranks; null on the ranks beyond. Every rank of the world calls it.
  virtual std::unique_ptr<Channel> first_ranks(int participants) = 0;
  // The MPI library's name and version ("Open MPI v4.1.4"); empty for a transport without MPI.
  virtual std::string mpi_version() const = 0;
};

// MPI_Init_thread and MPI_COMM_WORLD (mpi_transport.cpp). Raises, saying what to do instead,
// when this build has no MPI. `host` names this process in messages.
std::unique_ptr<Transport> start_mpi_transport(int* argc, char*** argv, const std::string& host);

}  // namespace epochcast::runtime::detail

// The processes of a run and the groups of them that train one sweep point.
//
// Launched by mpirun (or mpiexec, or srun with an MPI plugin), every process is a rank of an MPI
// world; launched by torchrun, or by plain srun with MASTER_ADDR and MASTER_PORT exported, the
// ranks meet over TCP at rank 0 (tcp_transport.h); launched alone, the world is this one
// process. One device per rank, chosen by the local rank. A point that needs fewer ranks than
// the world has runs on the first ones, the others wait for the next point. Host-memory
// collectives go through the transport (an honest all-reduce on the CPU; transport.h is the
// seam); device collectives use NCCL, bootstrapped with the bytes of its unique id broadcast
// over the same transport, as nccl-tests does over MPI.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/io/launcher_environment.h"

namespace epochcast::runtime {

namespace detail {
class Channel;
class Transport;
}  // namespace detail

class World {
 public:
  // Joins the ranks the launcher started (core/io/launcher_environment.h): MPI_Init under an
  // MPI launcher (refused when MPI support is not built in), the TCP rendezvous under torchrun
  // or plain srun (an InputError naming the variable when MASTER_ADDR or MASTER_PORT is
  // missing). Threads: the training thread and one communication thread take turns calling
  // collectives.
  static World& initialize(int* argc, char*** argv);
  static World& get();  // after initialize()
  // Ends MPI or closes the connections (every rank must reach it); the world is gone afterwards.
  static void finalize();
  ~World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // Rank among the processes on this host (selects the GPU).
  int local_rank() const { return local_rank_; }
  // Which launcher started the ranks (Launcher::none: one process started alone).
  Launcher launcher() const { return launcher_; }
  bool launched_by_mpi() const { return launcher_ == Launcher::mpi; }
  const std::string& host() const { return host_; }
  // The MPI library's name and version under an MPI launcher, else empty.
  std::string mpi_version() const;
  void barrier() const;
  // The logical AND over all ranks.
  bool all(bool value) const;

 private:
  friend class Group;
  World() = default;
  int rank_ = 0;
  int size_ = 1;
  int local_rank_ = 0;
  Launcher launcher_ = Launcher::none;
  std::string host_;
  std::unique_ptr<detail::Transport> transport_;  // null for a process started alone
};

// The first `participants` ranks of the world. Every rank of the world creates it, in the same
// order; ranks beyond `participants` get a group they are not a member of.
class Group {
 public:
  static Group first_ranks(const World& world, int participants);
  ~Group();
  Group(Group&&) noexcept;
  Group& operator=(Group&&) noexcept;
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  bool member() const { return member_; }
  int rank() const { return rank_; }
  int size() const { return size_; }

  // In place, on host memory. A sum adds the ranks' terms in its transport's order: over TCP in
  // rank order, the bits of a serial loop over the ranks (tcp_transport.h); under MPI in the
  // order of MPI's algorithm, the same bits with two ranks.
  void all_reduce_sum(float* data, std::size_t count) const;
  void all_reduce_sum(double* data, std::size_t count) const;
  void all_reduce_max(double* data, std::size_t count) const;
  double max(double value) const;
  bool all(bool value) const;
  void broadcast(void* data, std::size_t bytes, int root) const;
  std::vector<std::uint64_t> all_gather(std::uint64_t value) const;
  // `count` elements from every rank into `receive` (size() x count), in rank order.
  void all_gather(const float* send, float* receive, std::size_t count) const;
  // `send` holds size() x count elements; rank r receives the sum over ranks of block r.
  void reduce_scatter_sum(const float* send, float* receive, std::size_t count) const;
  void barrier() const;

 private:
  Group() = default;
  bool member_ = false;
  int rank_ = 0;
  int size_ = 1;
  std::unique_ptr<detail::Channel> channel_;  // null for a single process and for non-members
};

}  // namespace epochcast::runtime

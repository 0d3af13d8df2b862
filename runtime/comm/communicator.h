// The processes of a run and the groups of them that train one sweep point.
//
// Launched by mpirun, every process is a rank of an MPI world (one device per rank); launched
// alone, the world is this one process. A point that needs fewer ranks than the world has runs
// on the first ones, the others wait for the next point. Host-memory collectives go through MPI
// (an honest all-reduce on the CPU); device collectives use NCCL, bootstrapped with the bytes of
// its unique id broadcast over MPI, as nccl-tests does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace epochcast::runtime {

class World {
 public:
  // Initialises MPI when the process was launched by mpirun (and MPI support is built in).
  // Threads: the training thread and one communication thread take turns calling MPI.
  static World& initialize(int* argc, char*** argv);
  static World& get();  // after initialize()
  // Ends MPI (every rank must reach it); the world is gone afterwards.
  static void finalize();
  ~World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // Rank among the processes on this host (selects the GPU).
  int local_rank() const { return local_rank_; }
  bool launched_by_mpi() const { return mpi_; }
  const std::string& host() const { return host_; }
  std::string mpi_version() const;
  void barrier() const;
  // The logical AND over all ranks.
  bool all(bool value) const;

 private:
  World() = default;
  int rank_ = 0;
  int size_ = 1;
  int local_rank_ = 0;
  bool mpi_ = false;
  std::string host_;
};

// The first `participants` ranks of the world. Creating one is collective over the whole world;
// ranks beyond `participants` get a group they are not a member of.
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

  // In place, on host memory.
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
  void* comm_ = nullptr;  // MPI_Comm (heap-held), null for a single process
};

}  // namespace epochcast::runtime

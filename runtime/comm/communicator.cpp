// World and groups over the transport the launcher calls for (transport.h), or the trivial
// one-process world when the process was started alone.
#include "runtime/comm/communicator.h"

#include <algorithm>
#include <array>
#include <span>
#include <stdexcept>

#include <fmt/format.h>
#include <unistd.h>

#include "core/input_error.h"
#include "runtime/comm/tcp_transport.h"
#include "runtime/comm/transport.h"

namespace epochcast::runtime {

namespace {

World* the_world = nullptr;

std::string host_name() {
  std::array<char, 256> name{};
  if (gethostname(name.data(), name.size() - 1) != 0) return "unknown-host";
  return name.data();
}

// Where rank 0 listens, from torchrun's variables or those a Slurm job script exports; refused
// as bad input, with what to write, when they are missing.
detail::TcpRendezvous tcp_rendezvous(const LaunchEnvironment& launch, const std::string& host) {
  if (launch.master_address.empty() || launch.master_port == 0) {
    const char* missing = launch.master_address.empty() ? "MASTER_ADDR" : "MASTER_PORT";
    if (launch.launcher == Launcher::slurm) {
      throw InputError(
          {"<environment>", 0, 0}, missing,
          fmt::format(
              "srun started this process as task {} of {} without an MPI plugin: its ranks meet "
              "at rank 0's host, which the job script names before srun:\n"
              "  export MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n "
              "1)\n"
              "  export MASTER_PORT=29500\n"
              "(any free port; or srun --mpi=pmix with an epochcast-run built with MPI)",
              launch.rank, launch.size));
    }
    throw InputError({"<environment>", 0, 0}, missing,
                     fmt::format("{} says this process is rank {} of {}, but not where rank 0 "
                                 "listens: set MASTER_ADDR (rank 0's host) and MASTER_PORT, as "
                                 "torchrun does",
                                 launch.rank_variable, launch.rank, launch.size));
  }
  detail::TcpRendezvous r;
  r.rank = launch.rank;
  r.size = launch.size;
  r.local_rank = launch.local_rank;
  r.master_address = launch.master_address;
  r.master_port = launch.master_port;
  r.host = host;
  // torchrun's static rendezvous keeps its own store on MASTER_PORT of rank 0's host for the
  // whole run: the ranks meet on the port after it.
  if (launch.master_port_taken_by_torchrun) {
    if (launch.master_port == 65535) {
      throw InputError({"<environment>", 0, 0}, "MASTER_PORT",
                       "torchrun's store holds port 65535 and the ranks meet on the next one: "
                       "give torchrun a lower --master_port");
    }
    r.master_port = launch.master_port + 1;
  }
  return r;
}

}  // namespace

World& World::initialize(int* argc, char*** argv) {
  if (the_world != nullptr) return *the_world;
  std::unique_ptr<World> w(new World());
  w->host_ = host_name();
  const LaunchEnvironment launch = read_launch_environment();
  w->launcher_ = launch.launcher;
  if (launch.launcher == Launcher::mpi) {
    w->transport_ = detail::start_mpi_transport(argc, argv, w->host_);
  } else if (launch.launcher != Launcher::none && launch.size > 1) {
    w->transport_ = detail::start_tcp_transport(tcp_rendezvous(launch, w->host_));
  }
  if (w->transport_ != nullptr) {
    w->rank_ = w->transport_->world().rank();
    w->size_ = w->transport_->world().size();
    w->local_rank_ = w->transport_->local_rank();
  }
  the_world = w.release();
  return *the_world;
}

World& World::get() {
  if (the_world == nullptr) throw std::logic_error("World::get() before World::initialize()");
  return *the_world;
}

void World::finalize() {
  delete the_world;
  the_world = nullptr;
}

World::~World() = default;

std::string World::mpi_version() const {
  return transport_ != nullptr ? transport_->mpi_version() : "";
}

void World::barrier() const {
  if (transport_ != nullptr) transport_->world().barrier();
}

bool World::all(bool value) const {
  if (transport_ == nullptr) return value;
  double failed = value ? 0.0 : 1.0;
  transport_->world().all_reduce_max(std::span<double>(&failed, 1));
  return failed == 0.0;
}

Group Group::first_ranks(const World& world, int participants) {
  Group g;
  g.member_ = world.rank() < participants;
  g.size_ = std::min(participants, world.size());
  g.rank_ = g.member_ ? world.rank() : -1;
  if (world.transport_ != nullptr) {
    g.channel_ = world.transport_->first_ranks(participants);
    if (g.channel_ != nullptr) {
      g.rank_ = g.channel_->rank();
      g.size_ = g.channel_->size();
    }
  }
  return g;
}

Group::~Group() = default;
Group::Group(Group&&) noexcept = default;
Group& Group::operator=(Group&&) noexcept = default;

// Without a channel the group is one process: every reduction is the identity.
void Group::all_reduce_sum(float* data, std::size_t count) const {
  if (channel_ != nullptr) channel_->all_reduce_sum(std::span<float>(data, count));
}

void Group::all_reduce_sum(double* data, std::size_t count) const {
  if (channel_ != nullptr) channel_->all_reduce_sum(std::span<double>(data, count));
}

void Group::all_reduce_max(double* data, std::size_t count) const {
  if (channel_ != nullptr) channel_->all_reduce_max(std::span<double>(data, count));
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
  if (channel_ != nullptr) {
    channel_->broadcast(std::span<std::byte>(static_cast<std::byte*>(data), bytes), root);
  }
}

std::vector<std::uint64_t> Group::all_gather(std::uint64_t value) const {
  std::vector<std::uint64_t> values(static_cast<std::size_t>(size_), value);
  if (channel_ != nullptr) {
    channel_->all_gather(std::as_bytes(std::span<const std::uint64_t>(&value, 1)),
                         std::as_writable_bytes(std::span<std::uint64_t>(values)));
  }
  return values;
}

void Group::all_gather(const float* send, float* receive, std::size_t count) const {
  if (channel_ != nullptr) {
    channel_->all_gather(
        std::as_bytes(std::span<const float>(send, count)),
        std::as_writable_bytes(std::span<float>(receive, count * static_cast<std::size_t>(size_))));
    return;
  }
  std::copy(send, send + count, receive);
}

void Group::reduce_scatter_sum(const float* send, float* receive, std::size_t count) const {
  if (channel_ != nullptr) {
    channel_->reduce_scatter_sum(
        std::span<const float>(send, count * static_cast<std::size_t>(size_)),
        std::span<float>(receive, count));
    return;
  }
  std::copy(send, send + count, receive);
}

void Group::barrier() const {
  if (channel_ != nullptr) channel_->barrier();
}

}  // namespace epochcast::runtime

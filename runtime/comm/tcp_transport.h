// Ranks joined over TCP, for launchers that start processes without MPI (torchrun, plain srun):
// rank 0 listens at MASTER_PORT, every other rank connects to MASTER_ADDR:MASTER_PORT, and the
// host collectives of Channel (transport.h) run over those connections. POSIX sockets only.
//
// Shape: a star. Each rank holds one connection, to rank 0; rank 0 holds one to each. A
// collective sends every rank's part to rank 0, which combines them and sends back what each
// rank receives. Rank 0 carries (n - 1) times the data of the others: meant for the runtime's
// own agreements, NCCL's unique id and CPU runs of a few ranks, not as a fast all-reduce.
//
// Reduction order: rank 0 adds the parts in rank order, element by element, in the element's
// own type: element i of a sum is ((x0[i] + x1[i]) + x2[i]) + ... + x{n-1}[i], the result of a
// serial loop over the ranks, the same bits on every run and every rank (reduce_scatter_sum
// likewise, block by block). MPI leaves the order to its algorithm: with two ranks every order
// gives these bits (addition commutes), so runs under mpirun and under torchrun or srun end
// with the same parameters; with more ranks the last bits may differ from Open MPI's.
//
// Time limits. Joining: rank 0 waits for the others, and each of them retries its connection to
// rank 0, until `connect_timeout_s`; then the error names the address and who is missing. In a
// collective a rank may wait as long as its peers live (a rank beyond a point's ranks waits for
// that point to finish; the runtime's watchdogs bound a point): a peer that ends closes its
// connections and the rank waiting on it fails at once; a peer whose host goes silent is given
// up by TCP keep-alive and TCP_USER_TIMEOUT (`dead_host_timeout_s`). `collective_timeout_s`
// bounds each collective as well, when set. After a failure every connection is shut down, so
// the other ranks fail too instead of waiting, and later collectives fail at once.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "runtime/comm/transport.h"

namespace epochcast::runtime::detail {

struct TcpRendezvous {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  std::string master_address;  // rank 0's host, as the other ranks reach it (name or address)
  int master_port = 0;         // where rank 0 listens (on every address of its host)
  std::string host;            // this process's host name, for messages
};

struct TcpOptions {
  double connect_timeout_s = 300;
  std::optional<double> collective_timeout_s;  // none: as long as the peers live
  int dead_host_timeout_s = 120;
};

// Joins the `rendezvous.size` ranks; returns once all have joined. Raises SystemFailure
// naming the call, the rank, the host and the address on failure or timeout.
std::unique_ptr<Transport> start_tcp_transport(const TcpRendezvous& rendezvous,
                                               const TcpOptions& options = {});

}  // namespace epochcast::runtime::detail

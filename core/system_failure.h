// The third of the three error channels (the others: InputError for bad input, raised while
// loading; std::logic_error for a broken invariant, from always-on checks). A SystemFailure is
// something outside the program failing while it works: CUDA or NCCL, MPI or a peer rank's
// socket, another process of a sweep, a program it runs (gnuplot), the C library. what() names
// the call or program that failed and, where there are ranks, the rank and its host.
#pragma once

#include <stdexcept>

namespace epochcast {

class SystemFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace epochcast

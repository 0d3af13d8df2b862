// How much memory a command may take, and the cap that turns running out of it into a message
// instead of swapping or the kernel's out-of-memory killer.
#pragma once

#include <cstdint>

namespace epochcast {

// This machine's memory for this process: its physical memory, or its control group's limit
// where that is lower (a container, a batch job's allocation). 0 when it cannot be read.
std::uint64_t machine_memory_bytes();

// The default of --max-memory: nine tenths of machine_memory_bytes() (0 when unknown).
std::uint64_t default_memory_limit_bytes();

// Caps this process's data (heap and private mappings, RLIMIT_DATA) at `bytes`, never above the
// hard limit already set: an allocation past it fails with std::bad_alloc, which commands turn
// into a refusal naming what needed the memory. False when the cap could not be set.
bool cap_process_memory(std::uint64_t bytes);

}  // namespace epochcast

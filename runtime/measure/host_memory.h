// How the run's host memory allocator is set, so that CPU step times measure the step's work.
#pragma once

#include <string>

namespace epochcast::runtime {

// On the CPU every tensor of a step comes from malloc. glibc serves large blocks with mmap and
// hands freed memory back to the kernel, so each step faults its activations in again, page by
// page: on virtual machines that costs more than the layers themselves, grows with the batch in
// jumps, and no roofline reproduces it. Keeping freed memory in the process (every block from the
// heap, the heap never trimmed) gives the CPU what the caching allocator gives a GPU: after the
// warm-up a step reuses the last one's memory. Returns the description recorded in the
// measurement file (environment.host_allocator); throws if glibc refuses the settings.
std::string retain_freed_host_memory();

// "glibc default" until retain_freed_host_memory() has run.
std::string host_allocator_description();

}  // namespace epochcast::runtime

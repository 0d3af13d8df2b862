// glibc's mallopt settings for retain_freed_host_memory().
#include "runtime/measure/host_memory.h"

#include <limits>
#include <stdexcept>

#include <malloc.h>

#include "core/system_failure.h"

namespace epochcast::runtime {

namespace {

const char* const kDefault = "glibc default";
const char* const kRetained = "glibc, freed memory retained (M_MMAP_MAX 0, M_TRIM_THRESHOLD 2 GiB)";
std::string g_description = kDefault;

}  // namespace

std::string retain_freed_host_memory() {
  // M_MMAP_MAX 0: no block is mmap'ed (the heap serves all); M_TRIM_THRESHOLD at its largest:
  // free() never shrinks the heap. mallopt returns 0 when it refuses a setting.
  if (mallopt(M_MMAP_MAX, 0) == 0 ||
      mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max()) == 0) {
    throw SystemFailure(
        "glibc refused the allocator settings (mallopt M_MMAP_MAX, "
        "M_TRIM_THRESHOLD)");
  }
  g_description = kRetained;
  return g_description;
}

std::string host_allocator_description() {
  return g_description;
}

}  // namespace epochcast::runtime

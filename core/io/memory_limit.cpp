// Physical memory from sysconf, a control group's limit from /sys/fs/cgroup (v2: memory.max; v1:
// memory/memory.limit_in_bytes), the cap through setrlimit(RLIMIT_DATA), which Linux applies to
// brk and to private writable mappings alike (since 4.7), so malloc's large blocks count too.
#include "core/io/memory_limit.h"

#include <algorithm>
#include <fstream>
#include <string>

#include <sys/resource.h>
#include <unistd.h>

namespace epochcast {

namespace {

// A control group's limit in bytes, or 0 for none ("max") or no such file.
std::uint64_t cgroup_limit(const char* path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text == "max") return 0;
  try {
    return std::stoull(text);
  } catch (...) {
    return 0;
  }
}

}  // namespace

std::uint64_t machine_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  std::uint64_t bytes = pages > 0 && page > 0
                            ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page)
                            : 0;
  for (const char* path :
       {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    const std::uint64_t limit = cgroup_limit(path);
    if (limit > 0 && (bytes == 0 || limit < bytes)) bytes = limit;
  }
  return bytes;
}

std::uint64_t default_memory_limit_bytes() {
  return machine_memory_bytes() / 10 * 9;
}

bool cap_process_memory(std::uint64_t bytes) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_DATA, &limit) != 0) return false;
  rlim_t cap = static_cast<rlim_t>(bytes);
  if (limit.rlim_max != RLIM_INFINITY) cap = std::min(cap, limit.rlim_max);
  limit.rlim_cur = cap;
  return ::setrlimit(RLIMIT_DATA, &limit) == 0;
}

}  // namespace epochcast

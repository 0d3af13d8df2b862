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

// The lowest memory limit of the control groups this process is in, along each one's path to
// the root (a limit applies to everything below it); 0 for none.
std::uint64_t control_group_limit() {
  std::ifstream groups("/proc/self/cgroup");
  std::uint64_t lowest = 0;
  for (std::string line; std::getline(groups, line);) {
    // v2: "0::/path"; v1: "N:memory:/path" (the memory controller's hierarchy).
    std::string base, file;
    if (line.rfind("0::", 0) == 0) {
      base = "/sys/fs/cgroup";
      file = "memory.max";
      line = line.substr(3);
    } else if (const std::size_t at = line.find(":memory:"); at != std::string::npos) {
      base = "/sys/fs/cgroup/memory";
      file = "memory.limit_in_bytes";
      line = line.substr(at + 8);
    } else {
      continue;
    }
    for (std::string path = line.empty() ? "/" : line;;) {
      const std::string folder = path == "/" ? base : base + path;
      const std::uint64_t limit = cgroup_limit((folder + "/" + file).c_str());
      if (limit > 0 && (lowest == 0 || limit < lowest)) lowest = limit;
      if (path == "/") break;
      const std::size_t slash = path.rfind('/');
      path = slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
    }
  }
  return lowest;
}

}  // namespace

std::uint64_t machine_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  std::uint64_t bytes = pages > 0 && page > 0
                            ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page)
                            : 0;
  const std::uint64_t limit = control_group_limit();
  if (limit > 0 && (bytes == 0 || limit < bytes)) bytes = limit;
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

// An allocator for the engine's large tables (task slots, dependency edges). On Linux a block
// of 2 MiB or more is aligned to huge pages and advised to use them (MADV_HUGEPAGE): with every
// rank of a large cluster the slots span hundreds of MiB touched in finishing order, and with
// 4 KiB pages most of those touches missed the TLB as well as the cache. Smaller blocks, and
// other systems, get plain operator new. Where it is placed changes nothing simulated.
#pragma once

#include <cstddef>
#include <new>

namespace epochcast::sim {

namespace huge_pages {
// Returns memory for `bytes` aligned to `alignment` (a power of two); release with release()
// and the same sizes.
void* acquire(std::size_t bytes, std::size_t alignment);
void release(void* block, std::size_t bytes, std::size_t alignment) noexcept;
}  // namespace huge_pages

template <typename T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() = default;
  template <typename U>
  explicit HugePageAllocator(const HugePageAllocator<U>&) {}
  T* allocate(std::size_t n) {
    if (n > static_cast<std::size_t>(-1) / sizeof(T)) throw std::bad_array_new_length();
    return static_cast<T*>(huge_pages::acquire(n * sizeof(T), alignof(T)));
  }
  void deallocate(T* block, std::size_t n) noexcept {
    huge_pages::release(block, n * sizeof(T), alignof(T));
  }
  friend bool operator==(const HugePageAllocator&, const HugePageAllocator&) { return true; }
};

}  // namespace epochcast::sim

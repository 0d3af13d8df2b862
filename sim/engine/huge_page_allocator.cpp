// Huge-page blocks for the engine's tables.
#include "sim/engine/huge_page_allocator.h"

#include <cstdlib>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace epochcast::sim::huge_pages {

namespace {

constexpr std::size_t kHugePage = std::size_t{2} << 20;

bool huge(std::size_t bytes) {
  return bytes >= kHugePage;
}

std::size_t rounded(std::size_t bytes) {
  return (bytes + kHugePage - 1) / kHugePage * kHugePage;
}

}  // namespace

void* acquire(std::size_t bytes, std::size_t alignment) {
#if defined(__linux__)
  if (huge(bytes) && alignment <= kHugePage) {
    void* block = std::aligned_alloc(kHugePage, rounded(bytes));
    if (block == nullptr) throw std::bad_alloc();
    // Only advice: without huge pages the block works the same.
    (void)madvise(block, rounded(bytes), MADV_HUGEPAGE);
    return block;
  }
#endif
  return ::operator new(bytes, std::align_val_t(alignment));
}

void release(void* block, std::size_t bytes, std::size_t alignment) noexcept {
#if defined(__linux__)
  if (huge(bytes) && alignment <= kHugePage) {
    std::free(block);
    return;
  }
#endif
  ::operator delete(block, std::align_val_t(alignment));
}

}  // namespace epochcast::sim::huge_pages

// TransferDeps: the transfers one transfer of a plan waits for, as a small vector of indices
// that holds up to two in place. Nearly every transfer waits for one or two (the step before on
// its own GPU, the chunk arriving from the previous one), and a large flat ring has millions of
// them: a std::vector each costs an allocation and a free per transfer (what that cost:
// docs/performance.md, "The flow network").
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <stdexcept>
#include <vector>

namespace epochcast::sim {

class TransferDeps {
 public:
  TransferDeps() = default;
  TransferDeps(std::initializer_list<int> deps) { append(deps.begin(), deps.end()); }
  explicit TransferDeps(const std::vector<int>& deps) { append(deps.begin(), deps.end()); }
  TransferDeps(const TransferDeps& other) { append(other.begin(), other.end()); }
  TransferDeps(TransferDeps&& other) noexcept { take(other); }
  TransferDeps& operator=(const TransferDeps& other) {
    if (this != &other) {
      clear();
      append(other.begin(), other.end());
    }
    return *this;
  }
  TransferDeps& operator=(TransferDeps&& other) noexcept {
    if (this != &other) {
      release();
      take(other);
    }
    return *this;
  }
  TransferDeps& operator=(std::initializer_list<int> deps) {
    clear();
    append(deps.begin(), deps.end());
    return *this;
  }
  ~TransferDeps() { release(); }

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  int* begin() { return data(); }
  int* end() { return data() + size_; }
  const int* begin() const { return data(); }
  const int* end() const { return data() + size_; }
  int back() const { return data()[size_ - 1]; }

  void clear() { size_ = 0; }
  void push_back(int dep) { append(&dep, &dep + 1); }
  // Appends [first, last) at the end (the only place a plan inserts); the range may be this
  // list's own.
  template <typename It>
  void insert(const int* at, It first, It last) {
    if (at != end()) throw std::logic_error("TransferDeps inserts at its end only");
    append(first, last);
  }

  friend bool operator==(const TransferDeps& a, const std::vector<int>& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  static constexpr std::size_t kInPlace = 2;

  bool on_heap() const { return capacity_ > kInPlace; }
  int* data() { return on_heap() ? heap_ : in_place_; }
  const int* data() const { return on_heap() ? heap_ : in_place_; }

  template <typename It>
  void append(It first, It last) {
    const auto count = static_cast<std::size_t>(std::distance(first, last));
    const std::size_t size = size_ + count;
    if (size > std::numeric_limits<std::uint32_t>::max()) {
      throw std::length_error("a transfer waits for over 4 billion others");
    }
    if (size > capacity_) {
      // The new block is filled before the old one goes, so the range may lie in it.
      const std::size_t capacity = std::min<std::size_t>(std::max(size, std::size_t{capacity_} * 2),
                                                         std::numeric_limits<std::uint32_t>::max());
      int* bigger = new int[capacity];
      std::copy(begin(), end(), bigger);
      std::copy(first, last, bigger + size_);
      release();
      heap_ = bigger;
      capacity_ = static_cast<std::uint32_t>(capacity);
    } else {
      std::copy(first, last, data() + size_);
    }
    size_ = static_cast<std::uint32_t>(size);
  }
  void release() {
    if (on_heap()) delete[] heap_;
    capacity_ = kInPlace;
  }
  // Takes `other`'s indices, leaving it empty.
  void take(TransferDeps& other) {
    size_ = other.size_;
    capacity_ = other.capacity_;
    if (other.on_heap()) {
      heap_ = other.heap_;
    } else {
      std::copy(other.in_place_, other.in_place_ + other.size_, in_place_);
    }
    other.size_ = 0;
    other.capacity_ = kInPlace;
  }

  union {
    int in_place_[kInPlace];
    int* heap_;
  };
  std::uint32_t size_ = 0;
  std::uint32_t capacity_ = kInPlace;
};

}  // namespace epochcast::sim

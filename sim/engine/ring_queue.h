// A first-in first-out queue in one block that doubles as it fills. libstdc++'s std::deque
// allocates its first 512-byte block and its map as it is constructed: with every rank of a
// large cluster simulated, its many servers (most of them loader workers holding a batch or two)
// held those before any task arrived (docs/performance.md). This one allocates nothing until its
// first element, and keeps its block when emptied. T must be default-constructible; a popped
// element stays in its slot until overwritten (the engine queues plain values).
#pragma once

#include <cstddef>
#include <stdexcept>
#include <utility>
#include <vector>

namespace epochcast::sim {

template <typename T>
class RingQueue {
 public:
  RingQueue() = default;
  // Not copied or moved: nothing needs to, and a default move would keep the size.
  RingQueue(const RingQueue&) = delete;
  RingQueue& operator=(const RingQueue&) = delete;

  bool empty() const { return size_ == 0; }
  std::size_t size() const { return size_; }
  T& front() {
    require_element();
    return slots_[head_];
  }
  const T& front() const {
    require_element();
    return slots_[head_];
  }
  // The i-th element from the front.
  const T& operator[](std::size_t i) const { return slots_[wrap(head_ + i)]; }

  void push_back(T value) {
    if (size_ == slots_.size()) grow();
    slots_[wrap(head_ + size_)] = std::move(value);
    ++size_;
  }
  void pop_front() {
    require_element();
    head_ = wrap(head_ + 1);
    --size_;
  }

 private:
  // A programming error, always checked (a branch that is never taken costs nothing measurable).
  void require_element() const {
    if (size_ == 0) throw std::logic_error("the front of an empty queue");
  }
  // Capacities are powers of two, so wrapping is a mask.
  std::size_t wrap(std::size_t i) const { return i & (slots_.size() - 1); }
  void grow() {
    std::vector<T> larger(slots_.empty() ? 2 : 2 * slots_.size());
    for (std::size_t i = 0; i < size_; ++i)
      larger[i] = std::move(slots_[wrap(head_ + i)]);
    slots_ = std::move(larger);
    head_ = 0;
  }

  std::vector<T> slots_;
  std::size_t head_ = 0;
  std::size_t size_ = 0;
};

}  // namespace epochcast::sim

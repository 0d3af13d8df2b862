// A priority queue of timed items for a clock that never goes back: a radix heap. Every item
// pushed is due no earlier than the last instant popped, which holds for a simulation's events
// (nothing is scheduled in the past). Items sit in 65 buckets by the highest bit in which their
// time (as an unsigned key, sign bit flipped) differs from that instant's, so a push is an
// append and a pop moves the items of one bucket into lower ones; between shifts an item moves
// down at most 64 times, in practice once or twice. A binary heap of the 2,000 flows of a
// 1,024-rank ring moved each one through 11 levels twice a flow (its latency's end and its
// transfer's): a quarter of the network's instructions went to it.
//
// Items due at the same instant come out together, in no particular order: the caller orders
// them (the network by arrival). Item must have a `SimTime time` member.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <vector>

#include "sim/engine/sim_time.h"

namespace epochcast::sim {

template <typename Item>
class MonotoneQueue {
 public:
  bool empty() const { return size_ == 0; }
  std::size_t size() const { return size_; }
  // The earliest item's time. Not empty.
  SimTime min_time() const {
    if (size_ == 0) throw std::logic_error("the earliest item of an empty queue");
    return time_of(min_);
  }

  // `item.time` must be at or after the last instant popped.
  void push(const Item& item) {
    const std::uint64_t key = key_of(item.time);
    if (key < last_) throw std::logic_error("an item scheduled before the last instant popped");
    buckets_[bucket_of(key)].push_back(item);
    if (size_ == 0 || key < min_) min_ = key;
    ++size_;
  }

  // Removes every item due at or before `now`, passing each to `out`, which must not push.
  template <typename Out>
  void pop_until(SimTime now, Out&& out) {
    const std::uint64_t until = key_of(now);
    while (size_ > 0 && min_ <= until) {
      // The earliest items are in the lowest bucket that holds any. Measured from their time,
      // that bucket's items each fall into a lower one, the earliest into bucket 0.
      last_ = min_;
      const std::size_t lowest = lowest_bucket();
      if (lowest > 0) {
        std::vector<Item>& from = buckets_[lowest];
        for (const Item& item : from)
          buckets_[bucket_of(key_of(item.time))].push_back(item);
        from.clear();
      }
      std::vector<Item>& due = buckets_[0];
      size_ -= due.size();
      for (const Item& item : due)
        out(item);
      due.clear();
      find_min([](const Item&) { return false; });
    }
  }

  // Drops the items for which `stale` holds in the lowest buckets, until the lowest bucket left
  // holds one that is not stale (or the queue is empty): min_time() is then the earliest time
  // of an item that counts. Stale items in higher buckets stay.
  template <typename Stale>
  void drop_stale_front(Stale&& stale) {
    if (size_ > 0) find_min(stale);
  }

  // Drops every item for which `stale` holds.
  template <typename Stale>
  void erase_if(Stale&& stale) {
    for (std::vector<Item>& bucket : buckets_) {
      const auto before = bucket.size();
      std::erase_if(bucket, stale);
      size_ -= before - bucket.size();
    }
    if (size_ > 0) find_min([](const Item&) { return false; });
  }

  // Moves every item, and the last instant popped, `delta` later (or earlier). Throws
  // TimeOverflow where an instant would leave SimTime's range.
  void shift(SimTime delta) {
    std::vector<Item> all;
    all.reserve(size_);
    for (std::vector<Item>& bucket : buckets_) {
      all.insert(all.end(), bucket.begin(), bucket.end());
      bucket.clear();
    }
    if (last_ != 0) last_ = key_of(time_of(last_) + delta);
    size_ = 0;
    for (Item& item : all) {
      item.time += delta;
      push(item);
    }
  }

 private:
  // Times as unsigned keys in the same order (the sign bit flipped).
  static std::uint64_t key_of(SimTime time) {
    return static_cast<std::uint64_t>(time.ns()) ^ (std::uint64_t{1} << 63);
  }
  static SimTime time_of(std::uint64_t key) {
    return SimTime::from_ns(static_cast<std::int64_t>(key ^ (std::uint64_t{1} << 63)));
  }
  std::size_t bucket_of(std::uint64_t key) const {
    return static_cast<std::size_t>(std::bit_width(key ^ last_));
  }
  std::size_t lowest_bucket() const {
    std::size_t b = 0;
    while (buckets_[b].empty())
      ++b;
    return b;
  }
  // The earliest key, from the lowest bucket that holds an item that is not stale (the stale
  // ones met on the way are dropped). Not empty.
  template <typename Stale>
  void find_min(Stale&& stale) {
    for (std::vector<Item>& bucket : buckets_) {
      if (bucket.empty()) continue;
      const auto before = bucket.size();
      std::erase_if(bucket, stale);
      size_ -= before - bucket.size();
      if (bucket.empty()) continue;
      min_ = std::numeric_limits<std::uint64_t>::max();
      for (const Item& item : bucket)
        min_ = std::min(min_, key_of(item.time));
      return;
    }
  }

  std::array<std::vector<Item>, 65> buckets_;
  std::uint64_t last_ = 0;  // the key of the last instant popped (0: none yet)
  std::uint64_t min_ = 0;   // the earliest key held, while not empty
  std::size_t size_ = 0;
};

}  // namespace epochcast::sim

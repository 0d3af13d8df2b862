// A 64-bit FNV-1a digest of bytes, to tell whether two things are the same (the shards of one
// sweep, the files two runs of a command read). It catches mistakes, not forgery.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace epochcast {

class Digest {
 public:
  // Adds `bytes` as one piece, its length first: pieces never run into each other ("ab", "c"
  // and "a", "bc" differ).
  void add(std::string_view bytes) {
    std::uint64_t size = bytes.size();
    for (int i = 0; i < 8; ++i, size >>= 8)
      mix(static_cast<unsigned char>(size & 0xff));
    for (char c : bytes)
      mix(static_cast<unsigned char>(c));
  }
  // 16 lowercase hexadecimal digits.
  std::string hex() const { return fmt::format("{:016x}", state_); }

 private:
  void mix(unsigned char byte) {
    state_ ^= byte;
    state_ *= 0x100000001b3ull;  // FNV's 64-bit prime
  }
  std::uint64_t state_ = 0xcbf29ce484222325ull;  // FNV's 64-bit offset basis
};

}  // namespace epochcast

// A point's result (or the error that stopped it) as bytes and back, so that points simulated
// in other processes (an MPI sweep: `mpirun -np N epochcast predict ...`) or on other machines
// (a shard file: `--shard K/N`, then `epochcast merge`) reach the process that writes the output
// exactly as its own would be. Every field of PointResult travels, doubles bit for bit; a test
// checks that the table, CSV and JSON of decoded results equal the originals'.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "core/input_error.h"
#include "sim/predict/predict.h"

namespace epochcast::sim {

// Values as bytes, the same on every machine: fixed-width integers in little-endian order,
// doubles bit for bit (IEEE 754, in the same order), strings with their length.
class ByteWriter {
 public:
  void i64(std::int64_t v);
  void f64(double v);
  void flag(bool v);
  void time(SimTime t) { i64(t.ns()); }
  void bytes(Bytes b) { i64(b.value()); }
  void text(std::string_view s);
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

// Bytes that no writer of this layout wrote (truncated, or another version's). The reader says
// what that means where it read them: a shard file's InputError, a sweep process's failure.
class DamagedEncoding : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Reads what a ByteWriter wrote; raises DamagedEncoding past the end.
class ByteReader {
 public:
  explicit ByteReader(std::string_view in) : in_(in) {}
  std::int64_t i64();
  double f64();
  bool flag();
  SimTime time() { return SimTime::from_ns(i64()); }
  Bytes bytes() { return Bytes(i64()); }
  std::size_t count();  // a length or count, never more than the bytes left
  std::string text();
  bool done() const { return at_ == in_.size(); }

 private:
  void take(void* out, std::size_t n);
  [[noreturn]] static void fail();
  std::string_view in_;
  std::size_t at_ = 0;
};

std::string encode_point(const PointResult& result);
// Raises DamagedEncoding on bytes that encode_point did not write (truncated, or another
// version's layout).
PointResult decode_point(std::string_view bytes);

// A point that stopped on something other than its input (a broken invariant, a failure of the
// system), raised again with its message where the sweep is reported, maybe in another process.
class PointFailed : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What became of one point of a sweep: its result, or the error that stopped it, kept so that
// the process (or the merge) that reports the sweep raises it where the serial run would.
struct PointOutcome {
  std::optional<PointResult> result;
  std::optional<InputError> input_error;
  std::string internal_error;  // any other exception's message, when neither of the above

  bool failed() const { return !result; }
  // The result, or the error raised again: an InputError as itself, any other as a
  // PointFailed with its message.
  PointResult take() &&;
};

// Runs `point` and keeps what it returned or what it raised.
PointOutcome outcome_of(const std::function<PointResult()>& point);

std::string encode_outcome(const PointOutcome& outcome);
// Raises DamagedEncoding on bytes that encode_outcome did not write.
PointOutcome decode_outcome(std::string_view bytes);

}  // namespace epochcast::sim

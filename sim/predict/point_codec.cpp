// PointResult <-> bytes: fixed-width little-endian values, strings with lengths.
#include "sim/predict/point_codec.h"

#include <bit>
#include <cstdint>
#include <cstring>
#include <exception>
#include <limits>
#include <stdexcept>

namespace epochcast::sim {

namespace {

// The layout's version: bump it with any change below, so mismatched binaries fail loudly.
constexpr std::int64_t kLayout = 3;

void write_stats(ByteWriter& w, const EpochStats& s) {
  w.time(s.epoch);
  for (const auto* times : {&s.gpu_busy, &s.gpu_idle, &s.cpu_busy}) {
    for (SimTime t : *times)
      w.time(t);
  }
  w.time(s.gpu_idle_other);
  w.time(s.communication);
  for (std::int64_t v : {s.collective_bytes, s.collectives, s.kernels, s.iterations,
                         s.simulated_iterations, s.simulated_tasks})
    w.i64(v);
}

EpochStats read_stats(ByteReader& r) {
  EpochStats s;
  s.epoch = r.time();
  for (auto* times : {&s.gpu_busy, &s.gpu_idle, &s.cpu_busy}) {
    for (SimTime& t : *times)
      t = r.time();
  }
  s.gpu_idle_other = r.time();
  s.communication = r.time();
  for (std::int64_t* v : {&s.collective_bytes, &s.collectives, &s.kernels, &s.iterations,
                          &s.simulated_iterations, &s.simulated_tasks})
    *v = r.i64();
  return s;
}

}  // namespace

void ByteWriter::i64(std::int64_t v) {
  auto bits = static_cast<std::uint64_t>(v);
  for (int i = 0; i < 8; ++i, bits >>= 8)
    out_.push_back(static_cast<char>(bits & 0xff));
}
void ByteWriter::f64(double v) {
  static_assert(std::numeric_limits<double>::is_iec559);
  i64(static_cast<std::int64_t>(std::bit_cast<std::uint64_t>(v)));
}
void ByteWriter::flag(bool v) {
  out_.push_back(v ? 1 : 0);
}
void ByteWriter::text(std::string_view s) {
  i64(static_cast<std::int64_t>(s.size()));
  out_.append(s);
}

void ByteReader::take(void* out, std::size_t n) {
  if (in_.size() - at_ < n) fail();
  std::memcpy(out, in_.data() + at_, n);
  at_ += n;
}
std::int64_t ByteReader::i64() {
  unsigned char bytes[8];
  take(bytes, sizeof bytes);
  std::uint64_t bits = 0;
  for (int i = 7; i >= 0; --i)
    bits = bits << 8 | bytes[i];
  return static_cast<std::int64_t>(bits);
}
double ByteReader::f64() {
  return std::bit_cast<double>(static_cast<std::uint64_t>(i64()));
}
bool ByteReader::flag() {
  char v = 0;
  take(&v, 1);
  return v != 0;
}
std::size_t ByteReader::count() {
  const std::int64_t n = i64();
  if (n < 0 || static_cast<std::size_t>(n) > in_.size() - at_) fail();
  return static_cast<std::size_t>(n);
}
std::string ByteReader::text() {
  const std::size_t n = count();
  std::string s(in_.substr(at_, n));
  at_ += n;
  return s;
}
void ByteReader::fail() {
  throw DamagedEncoding("encoded bytes are damaged (truncated, or another layout)");
}

std::string encode_point(const PointResult& p) {
  ByteWriter w;
  w.i64(kLayout);
  w.i64(p.point.gpus);
  w.i64(p.point.global_batch);
  w.i64(p.point.per_gpu_batch);
  w.i64(p.train_iterations);
  w.i64(p.validation_iterations);
  const MemoryEstimate& m = p.memory;
  for (Bytes b : {m.capacity, m.context, m.weights, m.gradients, m.optimizer_state, m.weight_copies,
                  m.workspace, m.activations, m.transient, m.strategy_buffers, m.peak})
    w.bytes(b);
  w.flag(m.fits);
  w.i64(m.largest_batch);
  w.flag(p.simulated);
  write_stats(w, p.stats);
  for (double v : {p.epoch_seconds, p.iteration_seconds, p.samples_per_second})
    w.f64(v);
  const Breakdown& b = p.breakdown;
  for (double v :
       {b.data, b.h2d, b.forward, b.backward, b.optimizer, b.communication, b.host, b.other})
    w.f64(v);
  for (double v : {p.communication_seconds, p.gpu_busy_fraction, p.speedup, p.scaling_efficiency})
    w.f64(v);
  w.flag(p.one_gpu_faster);
  w.flag(p.even_runs.has_value());
  if (p.even_runs) {
    const EvenRuns& e = *p.even_runs;
    const Breakdown& u = e.uncontended;
    for (double v : {e.even_speed_epoch, e.uncontended_epoch, u.data, u.h2d, u.forward, u.backward,
                     u.optimizer, u.communication, u.host, u.other})
      w.f64(v);
  }
  w.flag(p.scaling_loss.has_value());
  if (p.scaling_loss) {
    const ScalingLoss& l = *p.scaling_loss;
    w.i64(l.reference_batch);
    for (double v : {l.ideal_epoch, l.loss, l.strategy, l.communication, l.compute, l.stragglers,
                     l.contention, l.input, l.host, l.other})
      w.f64(v);
  }
  w.text(p.bottleneck);
  w.text(p.diagnosis);
  w.flag(p.epoch_interval.has_value());
  if (p.epoch_interval) {
    w.f64(p.epoch_interval->first);
    w.f64(p.epoch_interval->second);
  }
  w.f64(p.epoch_relative_sd);
  for (const std::vector<std::string>* held : {&p.trace.tracks, &p.trace.names}) {
    w.i64(static_cast<std::int64_t>(held->size()));
    for (const std::string& text : *held)
      w.text(text);
  }
  w.i64(static_cast<std::int64_t>(p.trace.events.size()));
  for (const Trace::Event& e : p.trace.events) {
    w.i64(e.track);
    w.i64(e.name);
    w.i64(static_cast<std::int64_t>(e.category));
    w.time(e.start);
    w.time(e.end);
  }
  w.i64(static_cast<std::int64_t>(p.trace.counters.size()));
  for (const Trace::Counter& c : p.trace.counters) {
    w.i64(c.link);
    w.time(c.time);
    w.f64(c.utilisation);
  }
  w.text(p.ranks_simulated);
  w.i64(static_cast<std::int64_t>(p.conditions.size()));
  for (const std::string& c : p.conditions)
    w.text(c);
  return w.take();
}

PointResult decode_point(std::string_view bytes) {
  ByteReader r(bytes);
  if (r.i64() != kLayout) throw DamagedEncoding("a point's result in another layout");
  PointResult p;
  p.point.gpus = static_cast<int>(r.i64());
  p.point.global_batch = r.i64();
  p.point.per_gpu_batch = r.i64();
  p.train_iterations = r.i64();
  p.validation_iterations = r.i64();
  MemoryEstimate& m = p.memory;
  for (Bytes* b :
       {&m.capacity, &m.context, &m.weights, &m.gradients, &m.optimizer_state, &m.weight_copies,
        &m.workspace, &m.activations, &m.transient, &m.strategy_buffers, &m.peak})
    *b = r.bytes();
  m.fits = r.flag();
  m.largest_batch = r.i64();
  p.simulated = r.flag();
  p.stats = read_stats(r);
  for (double* v : {&p.epoch_seconds, &p.iteration_seconds, &p.samples_per_second})
    *v = r.f64();
  Breakdown& b = p.breakdown;
  for (double* v : {&b.data, &b.h2d, &b.forward, &b.backward, &b.optimizer, &b.communication,
                    &b.host, &b.other})
    *v = r.f64();
  for (double* v :
       {&p.communication_seconds, &p.gpu_busy_fraction, &p.speedup, &p.scaling_efficiency})
    *v = r.f64();
  p.one_gpu_faster = r.flag();
  if (r.flag()) {
    EvenRuns e;
    Breakdown& u = e.uncontended;
    for (double* v : {&e.even_speed_epoch, &e.uncontended_epoch, &u.data, &u.h2d, &u.forward,
                      &u.backward, &u.optimizer, &u.communication, &u.host, &u.other})
      *v = r.f64();
    p.even_runs = e;
  }
  if (r.flag()) {
    ScalingLoss l;
    l.reference_batch = r.i64();
    for (double* v : {&l.ideal_epoch, &l.loss, &l.strategy, &l.communication, &l.compute,
                      &l.stragglers, &l.contention, &l.input, &l.host, &l.other})
      *v = r.f64();
    p.scaling_loss = l;
  }
  p.bottleneck = r.text();
  p.diagnosis = r.text();
  if (r.flag()) {
    const double low = r.f64();
    p.epoch_interval = std::make_pair(low, r.f64());
  }
  p.epoch_relative_sd = r.f64();
  for (std::vector<std::string>* held : {&p.trace.tracks, &p.trace.names}) {
    held->resize(r.count());
    for (std::string& text : *held)
      text = r.text();
  }
  // Indices into the names just read: a message that points elsewhere is corrupt.
  auto index = [&](std::size_t size) {
    const std::int64_t i = r.i64();
    if (i < 0 || static_cast<std::size_t>(i) >= size)
      throw DamagedEncoding("point codec: a trace event refers to nothing");
    return static_cast<std::uint32_t>(i);
  };
  p.trace.events.resize(r.count());
  for (Trace::Event& e : p.trace.events) {
    e.track = index(p.trace.tracks.size());
    e.name = index(p.trace.names.size());
    e.category = static_cast<Category>(index(kCategoryCount));
    e.start = r.time();
    e.end = r.time();
  }
  p.trace.counters.resize(r.count());
  for (Trace::Counter& c : p.trace.counters) {
    c.link = index(p.trace.tracks.size());
    c.time = r.time();
    c.utilisation = r.f64();
  }
  p.ranks_simulated = r.text();
  p.conditions.resize(r.count());
  for (std::string& c : p.conditions)
    c = r.text();
  if (!r.done()) throw DamagedEncoding("a point's result with bytes left over");
  return p;
}

PointResult PointOutcome::take() && {
  if (result) return std::move(*result);
  if (input_error) throw *input_error;
  throw PointFailed(internal_error);
}

PointOutcome outcome_of(const std::function<PointResult()>& point) {
  PointOutcome o;
  try {
    o.result = point();
  } catch (const InputError& e) {
    o.input_error = e;
  } catch (const std::exception& e) {
    o.internal_error = e.what();
  }
  return o;
}

// Status first: 0 a result, 1 an InputError, 2 another error.
std::string encode_outcome(const PointOutcome& o) {
  ByteWriter out;
  if (o.result) {
    out.i64(0);
    out.text(encode_point(*o.result));
  } else if (o.input_error) {
    out.i64(1);
    out.text(o.input_error->mark().file);
    out.i64(o.input_error->mark().line);
    out.i64(o.input_error->mark().column);
    out.text(o.input_error->key());
    out.text(o.input_error->problem());
  } else {
    out.i64(2);
    out.text(o.internal_error);
  }
  return out.take();
}

PointOutcome decode_outcome(std::string_view bytes) {
  ByteReader in(bytes);
  PointOutcome o;
  switch (in.i64()) {
    case 0:
      o.result = decode_point(in.text());
      break;
    case 1: {
      SourceMark mark;
      mark.file = in.text();
      mark.line = static_cast<int>(in.i64());
      mark.column = static_cast<int>(in.i64());
      std::string key = in.text();
      o.input_error = InputError(mark, std::move(key), in.text());
      break;
    }
    case 2:
      o.internal_error = in.text();
      break;
    default:
      throw DamagedEncoding("a point's outcome of no known kind (damaged, or another layout)");
  }
  if (!in.done()) throw DamagedEncoding("a point's outcome with bytes left over");
  return o;
}

}  // namespace epochcast::sim

// The TCP transport (tcp_transport.h): rendezvous at rank 0, then collectives through rank 0,
// over non-blocking POSIX sockets whose every wait is a poll with the time left.
#include "runtime/comm/tcp_transport.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/system_failure.h"

namespace epochcast::runtime::detail {

namespace {

using Clock = std::chrono::steady_clock;

std::string errno_text(int error) {
  return std::system_category().message(error);
}

// A point in time a wait may not pass, or none.
class Deadline {
 public:
  static Deadline never() { return Deadline(); }
  static Deadline in(double seconds) {
    Deadline d;
    d.at_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                               std::chrono::duration<double>(std::max(0.0, seconds)));
    return d;
  }
  static Deadline in(const std::optional<double>& seconds) {
    return seconds ? in(*seconds) : never();
  }
  Deadline earlier(const Deadline& other) const {
    if (!at_) return other;
    if (!other.at_) return *this;
    return *at_ <= *other.at_ ? *this : other;
  }
  bool passed() const { return at_ && Clock::now() >= *at_; }
  // poll's timeout: -1 for none, else the milliseconds left, rounded up.
  int poll_ms() const {
    if (!at_) return -1;
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(*at_ - Clock::now()).count();
    return static_cast<int>(std::clamp<decltype(left)>(left, 0, INT_MAX));
  }

 private:
  std::optional<Clock::time_point> at_;
};

// An owned file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    std::swap(fd_, other.fd_);
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// --- waiting, reading and writing: nullopt on success, else why not ---------------------------

std::optional<std::string> wait_for(int fd, short events, const Deadline& deadline) {
  for (;;) {
    pollfd query{fd, events, 0};
    const int ready = ::poll(&query, 1, deadline.poll_ms());
    // Ready, or an error or hang-up that the next call on the socket reports.
    if (ready > 0) return std::nullopt;
    if (ready == 0) {
      if (deadline.passed()) return std::string("timed out");
      continue;
    }
    if (errno == EINTR) continue;  // a signal: the campaign reads its flag between iterations
    return "poll: " + errno_text(errno);
  }
}

std::optional<std::string> write_all(int fd, std::span<const std::byte> bytes,
                                     const Deadline& deadline) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    // MSG_NOSIGNAL: a peer that is gone is an error here, not a SIGPIPE that ends the process.
    const ssize_t sent = ::send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (sent > 0) {
      done += static_cast<std::size_t>(sent);
    } else if (sent < 0 && errno == EINTR) {
      continue;
    } else if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (auto why = wait_for(fd, POLLOUT, deadline)) return "send: " + *why;
    } else {
      return "send: " + errno_text(errno);
    }
  }
  return std::nullopt;
}

std::optional<std::string> read_all(int fd, std::span<std::byte> bytes, const Deadline& deadline) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t got = ::recv(fd, bytes.data() + done, bytes.size() - done, 0);
    if (got > 0) {
      done += static_cast<std::size_t>(got);
    } else if (got == 0) {
      return std::string("recv: the connection closed");
    } else if (errno == EINTR) {
      continue;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (auto why = wait_for(fd, POLLIN, deadline)) return "recv: " + *why;
    } else {
      return "recv: " + errno_text(errno);
    }
  }
  return std::nullopt;
}

// --- the wire ------------------------------------------------------------------------------

// "ecT" and the protocol's version: a process of another build, or of another program that
// connects to the port, is told apart before anything else is read.
constexpr std::uint32_t kMagic = 0x65635401;

enum class Op : std::uint32_t {
  hello = 1,    // a rank to rank 0: a = its rank, b = the world's size as it was told
  welcome = 2,  // rank 0 to each rank once all have joined: a = the world's size
  all_reduce_sum_float = 3,
  all_reduce_sum_double = 4,
  all_reduce_max = 5,
  broadcast = 6,
  all_gather = 7,
  reduce_scatter_sum = 8,
  barrier = 9,
};

const char* op_name(Op op) {
  switch (op) {
    case Op::hello:
      return "hello";
    case Op::welcome:
      return "welcome";
    case Op::all_reduce_sum_float:
      return "all_reduce_sum(float)";
    case Op::all_reduce_sum_double:
      return "all_reduce_sum(double)";
    case Op::all_reduce_max:
      return "all_reduce_max";
    case Op::broadcast:
      return "broadcast";
    case Op::all_gather:
      return "all_gather";
    case Op::reduce_scatter_sum:
      return "reduce_scatter_sum";
    case Op::barrier:
      return "barrier";
  }
  return "an unknown message";
}

// Before every message: what it is, the size of the channel it belongs to (a) and the bytes
// that follow (b); the rendezvous uses a and b as Op says. Host byte order: the ranks of a run
// share one architecture, as MPI's do.
struct Header {
  std::uint32_t magic = kMagic;
  Op op = Op::hello;
  std::uint64_t a = 0;
  std::uint64_t b = 0;
};
constexpr std::size_t kHeaderBytes = 24;
using HeaderBytes = std::array<std::byte, kHeaderBytes>;

HeaderBytes encode(const Header& h) {
  HeaderBytes out{};
  const auto op = static_cast<std::uint32_t>(h.op);
  std::memcpy(out.data(), &h.magic, 4);
  std::memcpy(out.data() + 4, &op, 4);
  std::memcpy(out.data() + 8, &h.a, 8);
  std::memcpy(out.data() + 16, &h.b, 8);
  return out;
}

Header decode(const HeaderBytes& in) {
  Header h;
  std::uint32_t op = 0;
  std::memcpy(&h.magic, in.data(), 4);
  std::memcpy(&op, in.data() + 4, 4);
  std::memcpy(&h.a, in.data() + 8, 8);
  std::memcpy(&h.b, in.data() + 16, 8);
  h.op = static_cast<Op>(op);
  return h;
}

// Parts of sums are received and added a chunk at a time.
constexpr std::size_t kChunkBytes = std::size_t{1} << 20;

// --- the connections -----------------------------------------------------------------------

// The connections of one process and what every channel over them shares: rank 0 holds one per
// other rank (indexed by rank), the others one to rank 0 (index 0). The mutex serialises
// collectives, world and groups alike, as MPI_THREAD_SERIALIZED does.
class Link {
 public:
  Link(const TcpRendezvous& who, const TcpOptions& options)
      : rank_(who.rank), size_(who.size), host_(who.host), options_(options) {
    peers_.resize(static_cast<std::size_t>(size_));
    peer_names_.resize(static_cast<std::size_t>(size_));
    peer_names_[0] = fmt::format("rank 0 at {}:{}", who.master_address, who.master_port);
    for (int p = 1; p < size_; ++p)
      peer_names_[static_cast<std::size_t>(p)] = fmt::format("rank {}", p);
  }

  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::string& host() const { return host_; }
  const TcpOptions& options() const { return options_; }
  std::mutex& mutex() { return mutex_; }

  Fd& peer(int p) { return peers_[static_cast<std::size_t>(p)]; }
  const std::string& peer_name(int p) const { return peer_names_[static_cast<std::size_t>(p)]; }
  void set_peer(int p, Fd fd, std::string name) {
    peers_[static_cast<std::size_t>(p)] = std::move(fd);
    peer_names_[static_cast<std::size_t>(p)] = std::move(name);
  }

  // Raises `message`; from now on every connection is shut down, so that the peers waiting on
  // this rank fail too instead of waiting, and every later collective fails at once.
  [[noreturn]] void fail(const std::string& message) {
    if (!failure_) failure_ = message;
    for (Fd& fd : peers_) {
      if (fd.valid()) ::shutdown(fd.get(), SHUT_RDWR);
    }
    throw SystemFailure(message);
  }

  void check_usable(const char* call) const {
    if (failure_) {
      throw SystemFailure(fmt::format(
          "{} on rank {} ({}): the connections to the other ranks were shut down after an "
          "earlier failure: {}",
          call, rank_, host_, *failure_));
    }
  }

 private:
  int rank_;
  int size_;
  std::string host_;
  TcpOptions options_;
  std::vector<Fd> peers_;
  std::vector<std::string> peer_names_;
  std::mutex mutex_;
  std::optional<std::string> failure_;
};

// One collective on a channel of `size` ranks: holds the link for its duration, frames what it
// sends, checks that what it receives is the same collective, and names both ends on failure.
class Collective {
 public:
  Collective(Link& link, Op op, int size)
      : lock_(link.mutex()),
        link_(link),
        op_(op),
        size_(size),
        deadline_(Deadline::in(link.options().collective_timeout_s)) {
    link_.check_usable(op_name(op_));
  }

  void send(int peer, std::span<const std::byte> payload) {
    const HeaderBytes header =
        encode({kMagic, op_, static_cast<std::uint64_t>(size_), payload.size()});
    const int fd = link_.peer(peer).get();
    auto why = write_all(fd, header, deadline_);
    if (!why) why = write_all(fd, payload, deadline_);
    if (why) fail_with(peer, "send to", *why);
  }

  // Reads the header of what `peer` sends next: this collective, of `bytes` bytes.
  void expect(int peer, std::size_t bytes) {
    HeaderBytes raw{};
    if (auto why = read_all(link_.peer(peer).get(), raw, deadline_)) {
      fail_with(peer, "recv from", *why);
    }
    const Header h = decode(raw);
    if (h.magic != kMagic || h.op != op_ || h.a != static_cast<std::uint64_t>(size_) ||
        h.b != bytes) {
      // A broken invariant: the ranks' programs diverged.
      link_.fail(fmt::format(
          "{} on rank {} ({}): {} sent {} of {} bytes among {} ranks where {} of {} bytes among "
          "{} ranks was expected: the ranks called collectives in different orders or with "
          "different sizes",
          op_name(op_), link_.rank(), link_.host(), link_.peer_name(peer),
          h.magic == kMagic ? op_name(h.op) : "something unknown", h.b, h.a, op_name(op_), bytes,
          size_));
    }
  }

  void receive(int peer, std::span<std::byte> bytes) {
    if (auto why = read_all(link_.peer(peer).get(), bytes, deadline_)) {
      fail_with(peer, "recv from", *why);
    }
  }

 private:
  [[noreturn]] void fail_with(int peer, const char* direction, const std::string& why) {
    const bool timed_out = why.ends_with("timed out");
    link_.fail(
        fmt::format("{}: {} {} failed on rank {} ({}): {}{}", op_name(op_), direction,
                    link_.peer_name(peer), link_.rank(), link_.host(), why,
                    timed_out ? fmt::format(" (the collective's limit, {:g} s)",
                                            link_.options().collective_timeout_s.value_or(0))
                    : peer == 0 && link_.rank() != 0
                        ? " (rank 0 ended, or stopped after an error of its own or of another rank)"
                        : fmt::format(" (rank {} ended, or its host is unreachable)", peer)));
  }

  std::lock_guard<std::mutex> lock_;
  Link& link_;
  Op op_;
  int size_;
  Deadline deadline_;
};

// --- channels ------------------------------------------------------------------------------

class TcpChannel final : public Channel {
 public:
  TcpChannel(std::shared_ptr<Link> link, int size) : link_(std::move(link)), size_(size) {}

  int rank() const override { return link_->rank(); }
  int size() const override { return size_; }

  void all_reduce_sum(std::span<float> data) override {
    reduce(Op::all_reduce_sum_float, data, [](float& sum, float term) { sum += term; });
  }
  void all_reduce_sum(std::span<double> data) override {
    reduce(Op::all_reduce_sum_double, data, [](double& sum, double term) { sum += term; });
  }
  void all_reduce_max(std::span<double> data) override {
    reduce(Op::all_reduce_max, data, [](double& most, double value) {
      if (value > most) most = value;
    });
  }

  void broadcast(std::span<std::byte> data, int root) override {
    if (root < 0 || root >= size_) {
      throw std::logic_error(fmt::format("broadcast from rank {} among {}", root, size_));
    }
    Collective c(*link_, Op::broadcast, size_);
    if (size_ == 1) return;
    if (rank() == 0) {
      if (root != 0) {
        c.expect(root, data.size());
        c.receive(root, data);
      }
      for (int p = 1; p < size_; ++p) {
        if (p != root) c.send(p, data);
      }
    } else if (rank() == root) {
      c.send(0, data);
    } else {
      c.expect(0, data.size());
      c.receive(0, data);
    }
  }

  void all_gather(std::span<const std::byte> send, std::span<std::byte> receive) override {
    const std::size_t n = send.size();
    if (receive.size() != n * static_cast<std::size_t>(size_)) {
      throw std::logic_error(
          fmt::format("all_gather of {} bytes into {} among {} ranks", n, receive.size(), size_));
    }
    Collective c(*link_, Op::all_gather, size_);
    if (rank() == 0) {
      std::copy(send.begin(), send.end(), receive.begin());
      for (int p = 1; p < size_; ++p) {
        c.expect(p, n);
        c.receive(p, receive.subspan(static_cast<std::size_t>(p) * n, n));
      }
      for (int p = 1; p < size_; ++p)
        c.send(p, receive);
    } else {
      c.send(0, send);
      c.expect(0, receive.size());
      c.receive(0, receive);
    }
  }

  void reduce_scatter_sum(std::span<const float> send, std::span<float> receive) override {
    const std::size_t count = receive.size();
    if (send.size() != count * static_cast<std::size_t>(size_)) {
      throw std::logic_error(fmt::format("reduce_scatter_sum of {} elements into {} among {} ranks",
                                         send.size(), count, size_));
    }
    Collective c(*link_, Op::reduce_scatter_sum, size_);
    if (rank() == 0) {
      std::vector<float> sum(send.begin(), send.end());
      for (int p = 1; p < size_; ++p) {
        c.expect(p, std::as_bytes(send).size());
        add_part(c, p, std::span<float>(sum), [](float& s, float term) { s += term; });
      }
      for (int p = 1; p < size_; ++p) {
        c.send(p, std::as_bytes(std::span<const float>(sum).subspan(
                      static_cast<std::size_t>(p) * count, count)));
      }
      std::copy_n(sum.begin(), count, receive.begin());
    } else {
      c.send(0, std::as_bytes(send));
      c.expect(0, std::as_bytes(receive).size());
      c.receive(0, std::as_writable_bytes(receive));
    }
  }

  void barrier() override {
    Collective c(*link_, Op::barrier, size_);
    if (rank() == 0) {
      for (int p = 1; p < size_; ++p)
        c.expect(p, 0);
      for (int p = 1; p < size_; ++p)
        c.send(p, {});
    } else {
      c.send(0, {});
      c.expect(0, 0);
    }
  }

 private:
  // Rank 0 folds every rank's part into its own, in rank order; the others send theirs and
  // receive the result.
  template <typename T, typename Combine>
  void reduce(Op op, std::span<T> data, Combine combine) {
    Collective c(*link_, op, size_);
    const std::span<std::byte> bytes = std::as_writable_bytes(data);
    if (rank() == 0) {
      for (int p = 1; p < size_; ++p) {
        c.expect(p, bytes.size());
        add_part(c, p, data, combine);
      }
      for (int p = 1; p < size_; ++p)
        c.send(p, bytes);
    } else if (size_ > 1) {
      c.send(0, bytes);
      c.expect(0, bytes.size());
      c.receive(0, bytes);
    }
  }

  // Receives rank p's part of `into` a chunk at a time, each element combined into its own.
  template <typename T, typename Combine>
  static void add_part(Collective& c, int p, std::span<T> into, Combine combine) {
    std::vector<T> part(std::min(into.size(), kChunkBytes / sizeof(T)));
    for (std::size_t at = 0; at < into.size(); at += part.size()) {
      const std::size_t n = std::min(part.size(), into.size() - at);
      c.receive(p, std::as_writable_bytes(std::span<T>(part).first(n)));
      for (std::size_t i = 0; i < n; ++i)
        combine(into[at + i], part[i]);
    }
  }

  std::shared_ptr<Link> link_;
  int size_;
};

class TcpTransport final : public Transport {
 public:
  TcpTransport(std::shared_ptr<Link> link, int local_rank)
      : link_(link), world_(link, link->size()), local_rank_(local_rank) {}

  Channel& world() override { return world_; }
  int local_rank() const override { return local_rank_; }
  // Every group holds rank 0, through which all traffic goes: a group is the world's
  // connections to its members, and creating one needs no messages.
  std::unique_ptr<Channel> first_ranks(int participants) override {
    if (link_->rank() >= participants) return nullptr;
    return std::make_unique<TcpChannel>(link_, std::min(participants, link_->size()));
  }
  std::string mpi_version() const override { return ""; }

 private:
  std::shared_ptr<Link> link_;
  TcpChannel world_;
  int local_rank_;
};

// --- the rendezvous ------------------------------------------------------------------------

// What every connection gets: no Nagle delay for the small messages; keep-alive probes and a
// limit on unacknowledged data, so that a peer whose host goes silent is given up.
std::optional<std::string> configure(int fd, const TcpOptions& options) {
  const int seconds = std::max(options.dead_host_timeout_s, 2);
  const struct {
    int level;
    int name;
    int value;
    const char* text;
  } settings[] = {
      {IPPROTO_TCP, TCP_NODELAY, 1, "TCP_NODELAY"},
      {SOL_SOCKET, SO_KEEPALIVE, 1, "SO_KEEPALIVE"},
      {IPPROTO_TCP, TCP_KEEPIDLE, seconds / 2, "TCP_KEEPIDLE"},
      {IPPROTO_TCP, TCP_KEEPINTVL, std::max(1, seconds / 10), "TCP_KEEPINTVL"},
      {IPPROTO_TCP, TCP_KEEPCNT, 5, "TCP_KEEPCNT"},
      {IPPROTO_TCP, TCP_USER_TIMEOUT, seconds * 1000, "TCP_USER_TIMEOUT"},
  };
  for (const auto& s : settings) {
    if (::setsockopt(fd, s.level, s.name, &s.value, sizeof s.value) != 0) {
      return fmt::format("setsockopt({}): {}", s.text, errno_text(errno));
    }
  }
  return std::nullopt;
}

std::string numeric_address(const sockaddr_storage& address, socklen_t length) {
  std::array<char, NI_MAXHOST> text{};
  if (::getnameinfo(reinterpret_cast<const sockaddr*>(&address), length, text.data(),
                    static_cast<socklen_t>(text.size()), nullptr, 0, NI_NUMERICHOST) != 0) {
    return "an unknown address";
  }
  // An IPv4 peer of the dual-stack listener, as IPv4.
  const std::string_view numeric(text.data());
  const std::string_view mapped = "::ffff:";
  if (numeric.starts_with(mapped) && numeric.find('.') != std::string_view::npos) {
    return std::string(numeric.substr(mapped.size()));
  }
  return std::string(numeric);
}

// Rank 0's listening socket on every address of its host: IPv6 accepting IPv4 too, or IPv4
// alone where the kernel has no IPv6.
Fd listen_on(const TcpRendezvous& who, const std::string& where) {
  auto fail = [&](const std::string& call, int error) -> Fd {
    throw SystemFailure(fmt::format(
        "{} failed on rank 0 ({}) for {}: {}{}", call, who.host, where, errno_text(error),
        error == EADDRINUSE ? ": another process listens on that port (choose another "
                              "MASTER_PORT)"
                            : ""));
  };
  Fd fd(::socket(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  const bool ipv6 = fd.valid();
  if (!ipv6) {
    if (errno != EAFNOSUPPORT) return fail("socket(AF_INET6)", errno);
    fd = Fd(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd.valid()) return fail("socket(AF_INET)", errno);
  }
  const int on = 1, off = 0;
  if (::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) != 0) {
    return fail("setsockopt(SO_REUSEADDR)", errno);
  }
  const auto port = htons(static_cast<std::uint16_t>(who.master_port));
  int bound = 0;
  if (ipv6) {
    if (::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off) != 0) {
      return fail("setsockopt(IPV6_V6ONLY)", errno);
    }
    sockaddr_in6 address{};
    address.sin6_family = AF_INET6;
    address.sin6_addr = in6addr_any;
    address.sin6_port = port;
    bound = ::bind(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address);
  } else {
    sockaddr_in address{};  // sin_addr zero: INADDR_ANY
    address.sin_family = AF_INET;
    address.sin_port = port;
    bound = ::bind(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address);
  }
  if (bound != 0) return fail(fmt::format("bind(port {})", who.master_port), errno);
  if (::listen(fd.get(), SOMAXCONN) != 0) return fail("listen", errno);
  return fd;
}

// Rank 0: every other rank connects and says which it is; once all have, each is welcomed.
void accept_ranks(Link& link, const TcpRendezvous& who, const TcpOptions& options) {
  const std::string where = fmt::format("MASTER_PORT {}", who.master_port);
  const Fd listener = listen_on(who, where);
  const Deadline deadline = Deadline::in(options.connect_timeout_s);
  int joined = 0;
  while (joined < who.size - 1) {
    if (auto why = wait_for(listener.get(), POLLIN, deadline)) {
      std::vector<std::string> missing;
      for (int p = 1; p < who.size; ++p) {
        if (!link.peer(p).valid()) missing.push_back(std::to_string(p));
      }
      throw SystemFailure(fmt::format(
          "rank 0 ({}) listening on port {}: {} of the {} other ranks joined within {:g} s "
          "(missing: rank{} {}; {}); were they started, with MASTER_ADDR naming this host and "
          "the same MASTER_PORT?",
          who.host, who.master_port, joined, who.size - 1, options.connect_timeout_s,
          missing.size() == 1 ? "" : "s", fmt::join(missing, ", "), *why));
    }
    sockaddr_storage from{};
    socklen_t length = sizeof from;
    Fd connection(::accept4(listener.get(), reinterpret_cast<sockaddr*>(&from), &length,
                            SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!connection.valid()) {
      // Nothing to accept after all, or a connection that was reset before it was accepted.
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED) {
        continue;
      }
      throw SystemFailure(fmt::format("accept failed on rank 0 ({}) for {}: {}", who.host, where,
                                      errno_text(errno)));
    }
    const std::string address = numeric_address(from, length);
    if (auto why = configure(connection.get(), options)) {
      throw SystemFailure(fmt::format("{} failed on rank 0 ({}) for {}", *why, who.host, address));
    }
    // A connection that says nothing recognisable soon is not a rank (a port scanner, a health
    // check): dropped, and the wait goes on.
    HeaderBytes raw{};
    if (read_all(connection.get(), raw, deadline.earlier(Deadline::in(10.0)))) continue;
    const Header hello = decode(raw);
    if (hello.magic != kMagic || hello.op != Op::hello) continue;
    if (hello.b != static_cast<std::uint64_t>(who.size)) {
      throw SystemFailure(fmt::format(
          "rank 0 ({}): rank {} at {} was started for {} ranks, this one for {}: every rank "
          "needs the same WORLD_SIZE (or SLURM_NTASKS)",
          who.host, hello.a, address, hello.b, who.size));
    }
    if (hello.a < 1 || hello.a >= hello.b) {
      throw SystemFailure(fmt::format("rank 0 ({}): {} says it is rank {} of {}", who.host, address,
                                      hello.a, who.size));
    }
    const int p = static_cast<int>(hello.a);
    if (link.peer(p).valid()) {
      throw SystemFailure(fmt::format(
          "rank 0 ({}): two processes say they are rank {} ({} and {}): every rank needs its "
          "own RANK (or SLURM_PROCID)",
          who.host, p, link.peer_name(p), address));
    }
    link.set_peer(p, std::move(connection), fmt::format("rank {} at {}", p, address));
    ++joined;
  }
  const HeaderBytes welcome = encode({kMagic, Op::welcome, static_cast<std::uint64_t>(who.size)});
  for (int p = 1; p < who.size; ++p) {
    if (auto why = write_all(link.peer(p).get(), welcome, deadline)) {
      throw SystemFailure(
          fmt::format("welcoming {} failed on rank 0 ({}): {}", link.peer_name(p), who.host, *why));
    }
  }
}

// One attempt to connect to `address`, until `deadline`.
std::optional<std::string> try_connect(const addrinfo& address, const Deadline& deadline, Fd& out) {
  Fd fd(::socket(address.ai_family, address.ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                 address.ai_protocol));
  if (!fd.valid()) return "socket: " + errno_text(errno);
  if (::connect(fd.get(), address.ai_addr, address.ai_addrlen) != 0) {
    if (errno != EINPROGRESS && errno != EINTR) return "connect: " + errno_text(errno);
    if (auto why = wait_for(fd.get(), POLLOUT, deadline)) return "connect: " + *why;
    int error = 0;
    socklen_t length = sizeof error;
    if (::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &length) != 0) {
      return "getsockopt(SO_ERROR): " + errno_text(errno);
    }
    if (error != 0) return "connect: " + errno_text(error);
  }
  out = std::move(fd);
  return std::nullopt;
}

// Every other rank: connect to rank 0 (which may not listen yet: tried again until the
// deadline), say which rank this is, and wait to be welcomed once all have joined.
void join_rank_zero(Link& link, const TcpRendezvous& who, const TcpOptions& options) {
  const std::string target = fmt::format("{}:{}", who.master_address, who.master_port);
  const Deadline deadline = Deadline::in(options.connect_timeout_s);
  auto fail = [&](const std::string& what) {
    throw SystemFailure(fmt::format("rank {} ({}): {}", who.rank, who.host, what));
  };
  std::string last_error;
  auto pause = std::chrono::milliseconds(50);
  Fd connection;
  while (!connection.valid()) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    const int resolved = ::getaddrinfo(who.master_address.c_str(),
                                       std::to_string(who.master_port).c_str(), &hints, &found);
    if (resolved == EAI_AGAIN) {
      last_error = fmt::format("getaddrinfo({}): {}", who.master_address, gai_strerror(resolved));
    } else if (resolved != 0) {
      fail(fmt::format("getaddrinfo({}) failed: {}{}: MASTER_ADDR must name rank 0's host",
                       who.master_address, gai_strerror(resolved),
                       resolved == EAI_SYSTEM ? " (" + errno_text(errno) + ")" : ""));
    } else {
      for (const addrinfo* a = found; a != nullptr && !connection.valid(); a = a->ai_next) {
        if (auto why = try_connect(*a, deadline.earlier(Deadline::in(5.0)), connection)) {
          last_error = *why;
        }
      }
      ::freeaddrinfo(found);
    }
    if (connection.valid()) break;
    if (deadline.passed()) {
      fail(fmt::format(
          "could not connect to rank 0 at {} within {:g} s (last: {}); is rank 0 running, and "
          "are MASTER_ADDR and MASTER_PORT the same on every rank?",
          target, options.connect_timeout_s, last_error));
    }
    // Rank 0 not listening yet: again shortly, backing off to a second.
    std::this_thread::sleep_for(
        std::min<Clock::duration>(pause, std::chrono::milliseconds(deadline.poll_ms())));
    pause = std::min(pause * 2, std::chrono::milliseconds(1000));
  }
  if (auto why = configure(connection.get(), options)) {
    fail(fmt::format("{} for the connection to rank 0 at {}", *why, target));
  }
  const HeaderBytes hello = encode({kMagic, Op::hello, static_cast<std::uint64_t>(who.rank),
                                    static_cast<std::uint64_t>(who.size)});
  if (auto why = write_all(connection.get(), hello, deadline)) {
    fail(fmt::format("saying hello to rank 0 at {} failed: {}", target, *why));
  }
  HeaderBytes raw{};
  if (auto why = read_all(connection.get(), raw, deadline)) {
    fail(fmt::format(
        "rank 0 at {} took this rank in, but {} before every rank had joined within {:g} s "
        "(rank 0's own message names the missing ones)",
        target, why->ends_with("timed out") ? "timed out" : "then " + *why,
        options.connect_timeout_s));
  }
  const Header welcome = decode(raw);
  if (welcome.magic != kMagic || welcome.op != Op::welcome ||
      welcome.a != static_cast<std::uint64_t>(who.size)) {
    fail(
        fmt::format("rank 0 at {} answered with something other than epochcast's welcome", target));
  }
  link.set_peer(0, std::move(connection), fmt::format("rank 0 at {}", target));
}

}  // namespace

std::unique_ptr<Transport> start_tcp_transport(const TcpRendezvous& rendezvous,
                                               const TcpOptions& options) {
  if (rendezvous.size < 1 || rendezvous.rank < 0 || rendezvous.rank >= rendezvous.size ||
      rendezvous.master_port < 1 || rendezvous.master_port > 65535) {
    throw std::logic_error(fmt::format("start_tcp_transport: rank {} of {}, port {}",
                                       rendezvous.rank, rendezvous.size, rendezvous.master_port));
  }
  auto link = std::make_shared<Link>(rendezvous, options);
  if (rendezvous.size > 1) {
    if (rendezvous.rank == 0) {
      accept_ranks(*link, rendezvous, options);
    } else {
      join_rank_zero(*link, rendezvous, options);
    }
  }
  return std::make_unique<TcpTransport>(std::move(link), rendezvous.local_rank);
}

}  // namespace epochcast::runtime::detail

// The TCP transport on loopback: ranks as threads (or a forked process, for one that dies), its
// sums bit for bit a serial loop over the ranks, every collective of the Group API, groups of
// the first ranks, and failures that come within their limits with a message naming the peer.
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <catch2/catch.hpp>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/comm/tcp_transport.h"

namespace epochcast::runtime::detail {
namespace {

using Clock = std::chrono::steady_clock;

// A port nothing listens on now (the kernel's pick for a socket bound to port 0, released).
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0);
  socklen_t length = sizeof address;
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0);
  ::close(fd);
  return ntohs(address.sin_port);
}

TcpRendezvous rendezvous(int rank, int size, int port) {
  TcpRendezvous r;
  r.rank = rank;
  r.size = size;
  r.master_address = "127.0.0.1";
  r.master_port = port;
  r.host = "test-host";
  return r;
}

TcpOptions quick(double connect_s = 20) {
  TcpOptions o;
  o.connect_timeout_s = connect_s;
  o.collective_timeout_s = 30;
  return o;
}

// `body(transport, rank)` on `n` ranks, each a thread with its own transport; what each raised
// ("" for none). Catch's assertions stay on this thread.
std::vector<std::string> on_ranks(int n, const std::function<void(Transport&, int)>& body,
                                  const TcpOptions& options = quick()) {
  const int port = free_port();
  std::vector<std::string> errors(static_cast<std::size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        std::unique_ptr<Transport> t = start_tcp_transport(rendezvous(r, n, port), options);
        body(*t, r);
      } catch (const std::exception& error) {
        errors[static_cast<std::size_t>(r)] = error.what();
      }
    });
  }
  for (std::thread& t : threads)
    t.join();
  return errors;
}

void require_no_errors(const std::vector<std::string>& errors) {
  for (std::size_t r = 0; r < errors.size(); ++r) {
    INFO("rank " << r);
    REQUIRE(errors[r].empty());
  }
}

// Rank r's terms: wide-ranging magnitudes of both signs, so the order of additions shows.
template <typename T>
std::vector<T> terms(int rank, std::size_t count) {
  std::mt19937 random(static_cast<unsigned>(1000 + rank));
  std::uniform_real_distribution<double> mantissa(-1.0, 1.0);
  std::uniform_int_distribution<int> exponent(-24, 24);
  std::vector<T> out(count);
  for (T& x : out)
    x = static_cast<T>(std::ldexp(mantissa(random), exponent(random)));
  return out;
}

// The sum of every rank's terms added in rank order, as a serial loop over the ranks adds them.
template <typename T>
std::vector<T> serial_sum(int n, std::size_t count) {
  std::vector<T> sum = terms<T>(0, count);
  for (int r = 1; r < n; ++r) {
    const std::vector<T> part = terms<T>(r, count);
    for (std::size_t i = 0; i < count; ++i)
      sum[i] += part[i];
  }
  return sum;
}

template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

TEST_CASE("sums over TCP are bit for bit a serial loop over the ranks in rank order") {
  // More than one 1 MiB chunk of floats, so rank 0 adds each part a chunk at a time.
  const std::size_t count = (std::size_t{1} << 18) + 12345;
  for (int n : {2, 3, 4}) {
    INFO(n << " ranks");
    std::vector<std::vector<float>> floats(static_cast<std::size_t>(n));
    std::vector<std::vector<double>> doubles(static_cast<std::size_t>(n));
    require_no_errors(on_ranks(n, [&](Transport& t, int r) {
      auto& f = floats[static_cast<std::size_t>(r)];
      f = terms<float>(r, count);
      t.world().all_reduce_sum(std::span<float>(f));
      auto& d = doubles[static_cast<std::size_t>(r)];
      d = terms<double>(r, 1000);
      t.world().all_reduce_sum(std::span<double>(d));
    }));
    const std::vector<float> expected = serial_sum<float>(n, count);
    const std::vector<double> expected_doubles = serial_sum<double>(n, 1000);
    for (int r = 0; r < n; ++r) {
      INFO("rank " << r);
      CHECK(same_bits(floats[static_cast<std::size_t>(r)], expected));
      CHECK(same_bits(doubles[static_cast<std::size_t>(r)], expected_doubles));
    }
    if (n >= 3) {
      // The check can tell orders apart: adding the last ranks' terms first gives other bits.
      std::vector<float> reversed = terms<float>(n - 1, count);
      for (int r = n - 2; r >= 0; --r) {
        const std::vector<float> part = terms<float>(r, count);
        for (std::size_t i = 0; i < count; ++i)
          reversed[i] += part[i];
      }
      CHECK_FALSE(same_bits(reversed, expected));
    }
  }
}

TEST_CASE("the maximum over TCP is every rank's largest value") {
  std::vector<std::vector<double>> values(3);
  require_no_errors(on_ranks(3, [&](Transport& t, int r) {
    auto& v = values[static_cast<std::size_t>(r)];
    v = {static_cast<double>(r), -static_cast<double>(r), r == 1 ? 7.5 : 0.0};
    t.world().all_reduce_max(std::span<double>(v));
  }));
  for (const auto& v : values)
    CHECK(v == std::vector<double>{2.0, 0.0, 7.5});
}

TEST_CASE("a broadcast over TCP gives every rank the root's bytes from any root") {
  for (int root : {0, 2}) {
    INFO("root " << root);
    std::vector<std::vector<std::byte>> received(4);
    require_no_errors(on_ranks(4, [&](Transport& t, int r) {
      auto& b = received[static_cast<std::size_t>(r)];
      b.assign(300000, std::byte{0});
      if (r == root) {
        for (std::size_t i = 0; i < b.size(); ++i)
          b[i] = static_cast<std::byte>(i * 7 + 3);
      }
      t.world().broadcast(std::span<std::byte>(b), root);
    }));
    for (const auto& b : received)
      CHECK(b == received[static_cast<std::size_t>(root)]);
    CHECK(received[0][1] == std::byte{10});
  }
}

TEST_CASE("an all-gather over TCP puts every rank's part in rank order") {
  std::vector<std::vector<std::uint64_t>> numbers(3);
  std::vector<std::vector<float>> blocks(3);
  require_no_errors(on_ranks(3, [&](Transport& t, int r) {
    const std::uint64_t mine = (std::uint64_t{1} << 40) + static_cast<std::uint64_t>(r);
    auto& n = numbers[static_cast<std::size_t>(r)];
    n.resize(3);
    t.world().all_gather(std::as_bytes(std::span<const std::uint64_t>(&mine, 1)),
                         std::as_writable_bytes(std::span<std::uint64_t>(n)));
    const std::vector<float> part(5, static_cast<float>(r) + 0.5f);
    auto& b = blocks[static_cast<std::size_t>(r)];
    b.resize(15);
    t.world().all_gather(std::as_bytes(std::span<const float>(part)),
                         std::as_writable_bytes(std::span<float>(b)));
  }));
  const std::uint64_t base = std::uint64_t{1} << 40;
  for (int r = 0; r < 3; ++r) {
    CHECK(numbers[static_cast<std::size_t>(r)] ==
          std::vector<std::uint64_t>{base, base + 1, base + 2});
    const auto& b = blocks[static_cast<std::size_t>(r)];
    CHECK(b[0] == 0.5f);
    CHECK(b[5] == 1.5f);
    CHECK(b[14] == 2.5f);
  }
}

TEST_CASE("a reduce-scatter over TCP gives rank r block r of the serial sum") {
  const int n = 3;
  const std::size_t count = 100000;
  std::vector<std::vector<float>> received(n);
  require_no_errors(on_ranks(n, [&](Transport& t, int r) {
    const std::vector<float> send = terms<float>(r, count * n);
    auto& out = received[static_cast<std::size_t>(r)];
    out.resize(count);
    t.world().reduce_scatter_sum(send, out);
  }));
  const std::vector<float> sum = serial_sum<float>(n, count * n);
  for (int r = 0; r < n; ++r) {
    const auto begin = sum.begin() + static_cast<std::ptrdiff_t>(count) * r;
    CHECK(same_bits(received[static_cast<std::size_t>(r)],
                    std::vector<float>(begin, begin + static_cast<std::ptrdiff_t>(count))));
  }
}

TEST_CASE("a barrier over TCP holds every rank until the last arrives") {
  std::atomic<int> arrived{0};
  std::vector<int> seen(3, -1);
  require_no_errors(on_ranks(3, [&](Transport& t, int r) {
    if (r == 2) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    ++arrived;
    t.world().barrier();
    seen[static_cast<std::size_t>(r)] = arrived.load();
  }));
  CHECK(seen == std::vector<int>{3, 3, 3});
}

TEST_CASE("a group of the first ranks over TCP leaves the others out and the world usable") {
  std::vector<double> sums(3, -1);
  std::vector<int> sizes(3, -1);
  std::vector<double> world_sums(3, -1);
  require_no_errors(on_ranks(3, [&](Transport& t, int r) {
    std::unique_ptr<Channel> group = t.first_ranks(2);
    if (group != nullptr) {
      double x = r + 1.0;
      group->all_reduce_sum(std::span<double>(&x, 1));
      group->barrier();
      sums[static_cast<std::size_t>(r)] = x;
      sizes[static_cast<std::size_t>(r)] = group->size();
    }
    double y = 10.0 * r;
    t.world().all_reduce_sum(std::span<double>(&y, 1));
    world_sums[static_cast<std::size_t>(r)] = y;
  }));
  CHECK(sums == std::vector<double>{3, 3, -1});
  CHECK(sizes == std::vector<int>{2, 2, -1});
  CHECK(world_sums == std::vector<double>{30, 30, 30});
}

TEST_CASE("ranks that call different collectives are told so instead of exchanging garbage") {
  const auto errors = on_ranks(2, [&](Transport& t, int r) {
    if (r == 0) {
      t.world().barrier();
    } else {
      double x = 1;
      t.world().all_reduce_sum(std::span<double>(&x, 1));
    }
  });
  CHECK_THAT(errors[0], Catch::Contains("different orders") && Catch::Contains("barrier"));
  // Rank 1 learns of it as rank 0 shuts its connections down.
  CHECK_THAT(errors[1], Catch::Contains("rank 0"));
}

TEST_CASE("a peer that stays silent fails the collective at its limit naming the peer") {
  TcpOptions options = quick();
  options.collective_timeout_s = 0.5;
  std::atomic<bool> done{false};
  double elapsed = 0;
  const auto errors = on_ranks(
      2,
      [&](Transport& t, int r) {
        if (r == 1) {
          while (!done)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
          return;
        }
        const auto start = Clock::now();
        try {
          t.world().barrier();
        } catch (...) {
          elapsed = std::chrono::duration<double>(Clock::now() - start).count();
          done = true;
          throw;
        }
        done = true;
      },
      options);
  CHECK_THAT(errors[0], Catch::Contains("barrier: recv from rank 1") &&
                            Catch::Contains("timed out") && Catch::Contains("0.5 s") &&
                            Catch::Contains("on rank 0 (test-host)"));
  CHECK(elapsed >= 0.5);
  CHECK(elapsed < 5);
}

TEST_CASE("a peer process that dies makes the waiting rank fail at once not at a limit") {
  const int port = free_port();
  TcpOptions options = quick();
  options.collective_timeout_s = 60;
  // Rank 0 is a child process that joins, then waits to be killed; no thread runs at the fork.
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    try {
      std::unique_ptr<Transport> t = start_tcp_transport(rendezvous(0, 2, port), options);
      ::pause();
    } catch (...) {
    }
    ::_exit(1);
  }
  std::string error;
  double elapsed = 0;
  try {
    std::unique_ptr<Transport> t = start_tcp_transport(rendezvous(1, 2, port), options);
    std::thread killer([child] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      ::kill(child, SIGKILL);
    });
    const auto start = Clock::now();
    try {
      t->world().barrier();
    } catch (const std::exception& e) {
      error = e.what();
    }
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    killer.join();
    // Every later collective fails at once, naming the first failure.
    double x = 1;
    CHECK_THROWS_WITH(t->world().all_reduce_sum(std::span<double>(&x, 1)),
                      Catch::Contains("earlier failure") && Catch::Contains("barrier"));
  } catch (const std::exception& e) {
    error = std::string("setting up: ") + e.what();
  }
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  CHECK_THAT(error, Catch::Contains("barrier: recv from rank 0 at 127.0.0.1") &&
                        Catch::Contains("on rank 1 (test-host)") &&
                        (Catch::Contains("closed") || Catch::Contains("reset")));
  CHECK(elapsed < 10);  // far inside the 60 s limit: the closed connection, not the limit
}

TEST_CASE("a rank that finds no rank 0 names the address it tried within its limit") {
  const int port = free_port();
  const auto start = Clock::now();
  CHECK_THROWS_WITH(start_tcp_transport(rendezvous(1, 2, port), quick(1.0)),
                    Catch::Contains("rank 1 (test-host)") &&
                        Catch::Contains("127.0.0.1:" + std::to_string(port)) &&
                        Catch::Contains("within 1 s") && Catch::Contains("refused"));
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  CHECK(elapsed >= 1.0);
  CHECK(elapsed < 5);
}

TEST_CASE("rank 0 names the ranks that never joined when its limit passes") {
  const int port = free_port();
  std::string rank0_error, rank1_error;
  std::thread one([&] {
    try {
      start_tcp_transport(rendezvous(1, 3, port), quick(1.0));
    } catch (const std::exception& e) {
      rank1_error = e.what();
    }
  });
  try {
    start_tcp_transport(rendezvous(0, 3, port), quick(1.0));
  } catch (const std::exception& e) {
    rank0_error = e.what();
  }
  one.join();
  CHECK_THAT(rank0_error, Catch::Contains("1 of the 2 other ranks joined within 1 s") &&
                              Catch::Contains("missing: rank 2"));
  CHECK_THAT(rank1_error, Catch::Contains("before every rank had joined"));
}

TEST_CASE("a rank started for another world size is refused by rank 0") {
  const int port = free_port();
  std::string rank0_error;
  std::thread one([&] {
    try {
      start_tcp_transport(rendezvous(1, 3, port), quick(2.0));
    } catch (const std::exception&) {
    }
  });
  try {
    start_tcp_transport(rendezvous(0, 2, port), quick(2.0));
  } catch (const std::exception& e) {
    rank0_error = e.what();
  }
  one.join();
  CHECK_THAT(rank0_error, Catch::Contains("started for 3 ranks, this one for 2"));
}

}  // namespace
}  // namespace epochcast::runtime::detail

// Iteration plans: a block of one rank's ops repeated for every rank reads exactly as the same
// ops added rank by rank, and what cannot be repeated is refused.
#include <stdexcept>

#include <catch2/catch.hpp>

#include "sim/strategy/iteration_plan.h"

using namespace epochcast::sim;

namespace {

struct Rank {
  int gpu;
  int loader;
};

PlanOp cpu_op(int rank, std::int64_t work, std::vector<std::int32_t> deps = {}) {
  PlanOp op;
  op.lane = Lane{LaneKind::cpu, rank};
  op.work = work;
  op.deps = std::move(deps);
  return op;
}

PlanOp kernel_op(int rank, std::int64_t work, std::vector<std::int32_t> deps) {
  PlanOp op;
  op.lane = Lane{LaneKind::compute, rank};
  op.category = Category::backward;
  op.work = work;
  op.deps = std::move(deps);
  return op;
}

PlanOp shared_op(int src, std::vector<std::int32_t> deps) {
  PlanOp op;
  op.lane = Lane{LaneKind::network, 0};
  op.src_gpu = src;
  op.dst_gpu = src + 1;
  op.work = 1000;
  op.deps = std::move(deps);
  return op;
}

// A step of three ranks: each takes its batch and launches a kernel; a shared op per rank
// waits for them; each rank then copies back after its shared op and after its first kernel.
// Built rank by rank (repeat = false) or as two blocks (repeat = true).
IterationPlan step(const std::vector<Rank>& ranks, bool repeat) {
  IterationPlan plan;
  std::vector<Replica> replicas;
  for (const Rank& r : ranks)
    replicas.push_back(Replica{r.gpu, r.gpu, r.loader});
  // A rank's own ops; returns its kernel.
  auto rank_ops = [&plan](const Rank& r) {
    std::int32_t fetch = plan.add(cpu_op(r.gpu, 10), "fetch");
    plan.set_consumes_loader(fetch, r.loader);
    PlanOp launch = cpu_op(r.gpu, 5);
    launch.launches_on_gpu = r.gpu;
    std::int32_t launched = plan.add(launch, "launch");
    PlanOp copy = kernel_op(r.gpu, 7, {launched});
    copy.lane = Lane{LaneKind::copy, r.gpu};
    copy.after_lane = Lane{LaneKind::compute, r.gpu};
    plan.add(copy, "copy");
    return plan.add(kernel_op(r.gpu, 100, {launched, fetch}), "kernel");
  };
  std::vector<std::int32_t> kernels;
  if (repeat) {
    plan.begin_replicas(replicas.front());
    std::int32_t kernel = rank_ops(ranks.front());
    plan.end_replicas(replicas);
    for (std::size_t i = 0; i < ranks.size(); ++i)
      kernels.push_back(plan.replica_op(kernel, i));
  } else {
    for (const Rank& r : ranks)
      kernels.push_back(rank_ops(r));
  }
  std::vector<std::int32_t> shared;
  for (std::size_t i = 0; i < ranks.size(); ++i)
    shared.push_back(plan.add(shared_op(ranks[i].gpu, {kernels[i]}), "flow"));
  if (repeat) {
    plan.begin_replicas(replicas.front());
    plan.add(kernel_op(ranks.front().gpu, 3, {plan.per_replica(shared), kernels.front()}),
             "copy back");
    plan.end_replicas(replicas);
  } else {
    for (std::size_t i = 0; i < ranks.size(); ++i)
      plan.add(kernel_op(ranks[i].gpu, 3, {shared[i], kernels[i]}), "copy back");
  }
  return plan;
}

void check_same_op(const IterationPlan& a, const IterationPlan& b, std::size_t i) {
  INFO("op " << i);
  const PlanEntry x = a.op(i);
  const PlanEntry y = b.op(i);
  CHECK(a.name(x) == b.name(y));
  CHECK(x.work == y.work);
  CHECK(x.lane == y.lane);
  CHECK(x.after_lane == y.after_lane);
  CHECK(x.consumes_loader == y.consumes_loader);
  CHECK(x.launches_on_gpu == y.launches_on_gpu);
  CHECK(x.src_gpu == y.src_gpu);
  CHECK(x.dst_gpu == y.dst_gpu);
  CHECK(x.category == y.category);
  CHECK(x.dep_count == y.dep_count);
  CHECK(a.deps(i) == b.deps(i));
}

}  // namespace

TEST_CASE("a block repeated for every rank reads as the same ops added rank by rank") {
  const std::vector<Rank> ranks{{0, 0}, {1, 1}, {8, 2}};
  const IterationPlan by_rank = step(ranks, false);
  const IterationPlan repeated = step(ranks, true);
  REQUIRE(repeated.size() == by_rank.size());
  REQUIRE(repeated.size() == 3 * 4 + 3 + 3);
  for (std::size_t i = 0; i < by_rank.size(); ++i)
    check_same_op(by_rank, repeated, i);
  // Walked in one pass, the same ops.
  std::size_t visited = 0;
  std::vector<std::size_t> stored_as;  // by op, its stored op
  repeated.for_each_op([&](std::size_t i, std::size_t stored, const PlanEntry& op,
                           std::span<const std::int32_t> deps) {
    CHECK(i == visited++);
    stored_as.push_back(stored);
    CHECK(op.lane == by_rank.op(i).lane);
    CHECK(op.consumes_loader == by_rank.op(i).consumes_loader);
    CHECK(std::vector<std::int32_t>(deps.begin(), deps.end()) == by_rank.deps(i));
  });
  CHECK(visited == by_rank.size());
  CHECK(repeated.kernels == by_rank.kernels);
  CHECK(repeated.kernels == 3 * 3);  // per rank a copy, a kernel and the copy back
  // Stored once per block: one rank's ops and the shared ones.
  CHECK(by_rank.stored_size() == by_rank.size());
  CHECK(repeated.stored_size() == 4 + 3 + 1);
  // Every rank's copy of a block op is stored as rank 0's; the shared ops each as themselves.
  for (std::size_t k = 0; k < 4; ++k) {
    CHECK(stored_as[4 + k] == stored_as[k]);
    CHECK(stored_as[8 + k] == stored_as[k]);
  }
  CHECK(stored_as[12] != stored_as[13]);
  CHECK(stored_as[13] != stored_as[14]);
  CHECK(stored_as[15] == stored_as[16]);  // the copies back, one block
  CHECK(stored_as[16] == stored_as[17]);
}

TEST_CASE("a repeated block refuses what another rank would not repeat") {
  IterationPlan plan;
  const std::int32_t shared = plan.add(shared_op(0, {}), "flow");
  plan.begin_replicas(Replica{0, 0, 0});
  // Another rank's lane, the network, or a shared op (each rank's own must be per_replica).
  CHECK_THROWS_AS(plan.add(cpu_op(1, 5), "x"), std::logic_error);
  CHECK_THROWS_AS(plan.add(shared_op(0, {}), "x"), std::logic_error);
  CHECK_THROWS_AS(plan.add(cpu_op(0, 5, {shared}), "x"), std::logic_error);
  PlanOp launch = cpu_op(0, 5);
  launch.launches_on_gpu = 3;
  CHECK_THROWS_AS(plan.add(launch, "x"), std::logic_error);
  const std::int32_t fetch = plan.add(cpu_op(0, 5), "fetch");
  CHECK_THROWS_AS(plan.set_consumes_loader(fetch, 4), std::logic_error);
  plan.add(cpu_op(0, 5, {plan.per_replica({shared, shared})}), "wait");
  // Its per_replica list names two ranks: three replicas do not match it.
  CHECK_THROWS_AS(plan.end_replicas({Replica{0, 0, 0}, Replica{1, 1, 1}, Replica{2, 2, 2}}),
                  std::logic_error);
  plan.end_replicas({Replica{0, 0, 0}, Replica{1, 1, 1}});
  CHECK(plan.size() == 1 + 2 * 2);
  CHECK(plan.deps(4) == std::vector<std::int32_t>{shared});
  // Outside a block a per_replica list means nothing.
  CHECK_THROWS_AS(plan.per_replica({shared}), std::logic_error);
  CHECK_THROWS_AS(plan.replica_op(shared, 1), std::logic_error);
}

TEST_CASE("a block depends on another block only where the same replicas repeat both") {
  IterationPlan plan;
  plan.begin_replicas(Replica{0, 0, -1});
  const std::int32_t first = plan.add(cpu_op(0, 5), "first");
  plan.end_replicas({Replica{0, 0, -1}, Replica{1, 1, -1}});
  plan.begin_replicas(Replica{0, 0, -1});
  plan.add(cpu_op(0, 5, {first}), "second");
  CHECK_THROWS_AS(plan.end_replicas({Replica{0, 0, -1}, Replica{2, 2, -1}}), std::logic_error);

  IterationPlan loaders;
  loaders.begin_replicas(Replica{0, 0, 0});
  loaders.set_consumes_loader(loaders.add(cpu_op(0, 5), "fetch"), 0);
  // Every replica takes a batch where the first does.
  CHECK_THROWS_AS(loaders.end_replicas({Replica{0, 0, 0}, Replica{1, 1, -1}}), std::logic_error);
}

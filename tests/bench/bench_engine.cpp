// Raw engine throughput: events and tasks per second on the pattern the simulator produces
// most, a CPU thread dispatching kernels to a GPU stream in order.
#include <benchmark/benchmark.h>

#include "sim/engine/engine.h"
#include "sim/engine/fifo_server.h"

using namespace epochcast::sim;

static void BM_DispatchPipeline(benchmark::State& state) {
  const std::int64_t kernels = state.range(0);
  std::int64_t events = 0;
  std::int64_t tasks = 0;
  for (auto _ : state) {
    Engine engine;
    ResourceId cpu = engine.add_resource(std::make_unique<FifoServer>("cpu"));
    ResourceId gpu = engine.add_resource(std::make_unique<FifoServer>("gpu"));
    TaskHandle dispatch{};
    // Built in windows, as the simulator does, so live tasks stay few.
    const std::int64_t window = 256;
    for (std::int64_t start = 0; start < kernels; start += window) {
      for (std::int64_t k = start; k < std::min(kernels, start + window); ++k) {
        TaskHandle after_previous[] = {dispatch};
        dispatch = engine.add_task(cpu, 5'000, static_cast<std::uint64_t>(2 * k), after_previous);
        TaskHandle after_dispatch[] = {dispatch};
        engine.add_task(gpu, 3'000 + (k % 7) * 1'000, static_cast<std::uint64_t>(2 * k + 1),
                        after_dispatch);
      }
      engine.run();
    }
    events += engine.events_processed();
    tasks += engine.tasks_finished();
  }
  state.counters["events/s"] =
      benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
  state.counters["tasks/s"] =
      benchmark::Counter(static_cast<double>(tasks), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_DispatchPipeline)->Arg(100'000)->Unit(benchmark::kMillisecond);

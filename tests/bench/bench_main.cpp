// Entry point of the benchmark binary (benchmarks register themselves in the other files).
#include <benchmark/benchmark.h>

BENCHMARK_MAIN();

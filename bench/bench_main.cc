// Entry point of kvedge_bench_kernels; the benchmark files register themselves.
#include <benchmark/benchmark.h>

BENCHMARK_MAIN();

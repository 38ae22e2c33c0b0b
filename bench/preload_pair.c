/* The tiny cached pair through the CUDA runtime's own calls, for instruction
 * counts of the preloaded path (the shim in libcudalloc.so, then the core)
 * under callgrind (docs/benchmarks.md):
 *
 *   CUDALLOC_CONF=backend:sim LD_PRELOAD=build/libcudalloc.so valgrind --tool=callgrind \
 *     --callgrind-out-file=/dev/null --toggle-collect=timed build/bench/preload_pair PAIRS WARM_PASSES [STREAM]
 *
 * "Collected" / PAIRS is one cudaMallocAsync + cudaFreeAsync pair of the same
 * 16 B..1 KiB sequence as pair_instructions' tiny one, a window of 16 live
 * blocks, on the default stream (STREAM 0, the legacy one, so that
 * legacy_queue:auto's mode holds) or on one created stream (STREAM 1). */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include "bench.h"
static void *live[16];
static cudaStream_t stream;
static void run(uint32_t *sizes, size_t n) {
  for (size_t k = 0; k < n; k++) {
    void **slot = &live[k % 16];
    if (*slot && cudaFreeAsync(*slot, stream)) exit(2);
    if (cudaMallocAsync(slot, sizes[k % BENCH_SEQ_N], stream)) exit(2);
  }
}
__attribute__((noinline)) void timed(uint32_t *sizes, size_t n) { run(sizes, n); }
int main(int argc, char **argv) {
  if (argc < 3) return 1;
  size_t n = strtoull(argv[1], NULL, 10), warm = strtoull(argv[2], NULL, 10) * BENCH_SEQ_N;
  if (argc > 3 && atoi(argv[3]) && cudaStreamCreate(&stream)) return 1;
  uint32_t *sizes = bench_named_sizes("tiny");
  if (!sizes) return 1;
  run(sizes, warm);
  timed(sizes, n);
  return 0;
}

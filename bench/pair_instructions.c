/* Cached alloc+free pairs of cudalloc alone, for instruction counts under
 * callgrind, which do not depend on the machine's load (docs/benchmarks.md):
 *
 *   valgrind --tool=callgrind --callgrind-out-file=/dev/null --toggle-collect=timed \
 *     build/bench/pair_instructions PAIRS tiny|gpu|mix WARM_PASSES [STREAMS [,conf]]
 *
 * "Collected" / PAIRS is the instructions of one pair. The same 65,536-size
 * sequences as bench_alloc's (a), (b) and (m) (bench.h), a window of 16 live blocks per
 * stream, pairs round-robin over STREAMS streams (1 to 64); WARM_PASSES
 * passes of the sequence run first, outside the count. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cudalloc.h"
#include "backend_sim.h"
#include "bench.h"
static void *live[64][16];
static size_t next[64];
static ca_stream_t streams[64];
static int nl = 1;
static void run(uint32_t *sizes, size_t n) {
  for (size_t i = 0; i < n; i++) {
    int l = (int)(i % (size_t)nl);
    size_t k = next[l]++;
    void **slot = &live[l][k % 16];
    if (*slot) cudalloc_free(*slot, (cudaStream_t)streams[l]);
    if (cudalloc_malloc(slot, sizes[k % (1 << 16)], (cudaStream_t)streams[l])) exit(2);
  }
}
__attribute__((noinline)) void timed(uint32_t *sizes, size_t n) { run(sizes, n); }
int main(int argc, char **argv) {
  size_t n = strtoull(argv[1], NULL, 10);
  int tiny = !strcmp(argv[2], "tiny"), mix = !strcmp(argv[2], "mix");
  /* the mix's 16 live blocks reach 2 GiB: bench_alloc's capacity */
  char conf[256]; snprintf(conf, sizeof conf, "backend:sim,sim_capacity_mb:%d%s", mix ? 8192 : 4096, argc > 5 ? argv[5] : "");
  if (cudalloc_init(conf)) return 1;
  ca_sim_thread_init();
  nl = argc > 4 ? atoi(argv[4]) : 1;
  for (int i = 0; i < nl; i++)
    if (ca_sim_stream_create(&streams[i], 1)) return 1;
  uint32_t *sizes = tiny ? bench_sizes(1 << 16, 16, 1024, 2)
                 : mix ? bench_mix_sizes(1 << 16, 3) : bench_sizes(1 << 16, 512, 8u << 20, 1);
  size_t warm = strtoull(argv[3], NULL, 10) << 16;
  run(sizes, warm);
  timed(sizes, n);
  return 0;
}

/* Cached alloc+free pairs of cudalloc alone, for instruction counts under
 * callgrind, which do not depend on the machine's load (docs/benchmarks.md):
 *
 *   valgrind --tool=callgrind --callgrind-out-file=/dev/null --toggle-collect=timed \
 *     build/bench/pair_instructions PAIRS tiny|gpu|gpu-turns|gpu-small|gpu-large|mix WARM_PASSES [STREAMS[:eq] [,conf]]
 *
 * "Collected" / PAIRS is the instructions of one pair. The same 65,536-size
 * sequences as bench_alloc's (a), (a2), (a<), (a>), (b) and (m) (bench.h), a window of 16 live blocks per
 * stream, pairs round-robin over STREAMS streams (1 to 64); WARM_PASSES
 * passes of the sequence run first, outside the count. STREAMS:eq holds the
 * working set at 1,024 live blocks whatever the number of streams (bench_alloc's
 * (s=) figure): windows of 1024 / STREAMS, each stream repeating its own
 * slice of 65,536 / STREAMS sizes, so that a pass asks for the same sizes
 * (STREAMS a power of two; bench_alloc's sides are 1 and 64). It prints what the timed part asked of the driver
 * (slow paths, event and memory calls), which does not depend on the load. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cudalloc.h"
#include "backend_sim.h"
#include "bench.h"
static void *live[64][1024];
static size_t next[64];
static size_t win = 16, slice = BENCH_SEQ_N;   /* a window; each stream's part of the sequence */
static ca_stream_t streams[64];
static int nl = 1;
static void run(uint32_t *sizes, size_t n) {
  for (size_t i = 0; i < n; i++) {
    int l = (int)(i % (size_t)nl);
    size_t k = next[l]++;
    void **slot = &live[l][k % 16];
    if (*slot) cudalloc_free(*slot, (cudaStream_t)streams[l]);
    if (cudalloc_malloc(slot, sizes[k % BENCH_SEQ_N], (cudaStream_t)streams[l])) exit(2);
  }
}
/* The same with STREAMS:eq's windows and slices (apart: the plain loop's
 * instructions stay those of the figures measured before it). */
static void run_eq(uint32_t *sizes, size_t n) {
  for (size_t i = 0; i < n; i++) {
    int l = (int)(i % (size_t)nl);
    size_t k = next[l]++;
    void **slot = &live[l][k & (win - 1)];
    if (*slot) cudalloc_free(*slot, (cudaStream_t)streams[l]);
    size_t first = slice < BENCH_SEQ_N ? (size_t)l * slice : 0;
    if (cudalloc_malloc(slot, sizes[first + (k & (slice - 1))], (cudaStream_t)streams[l])) exit(2);
  }
}
static bool eq;
__attribute__((noinline)) void timed(uint32_t *sizes, size_t n) { eq ? run_eq(sizes, n) : run(sizes, n); }
int main(int argc, char **argv) {
  size_t n = strtoull(argv[1], NULL, 10);
  int mix = !strcmp(argv[2], "mix");
  /* the mix's 16 live blocks reach 2 GiB: bench_alloc's capacity */
  char conf[256]; snprintf(conf, sizeof conf, "backend:sim,sim_capacity_mb:%d%s", mix ? 8192 : 4096, argc > 5 ? argv[5] : "");
  if (cudalloc_init(conf)) return 1;
  ca_sim_thread_init();
  nl = argc > 4 ? atoi(argv[4]) : 1;
  if (nl < 1 || nl > 64) return 2;
  if ((eq = argc > 4 && strstr(argv[4], ":eq"))) {
    if (nl & (nl - 1)) return 2;   /* a power of two: the windows and slices divide evenly */
    win = 1024 / (size_t)nl, slice = BENCH_SEQ_N / (size_t)nl;
  }
  for (int i = 0; i < nl; i++)
    if (ca_sim_stream_create(&streams[i], 1)) return 1;
  uint32_t *sizes = bench_named_sizes(argv[2]);
  if (!sizes) return 2;
  size_t warm = strtoull(argv[3], NULL, 10) * BENCH_SEQ_N;
  eq ? run_eq(sizes, warm) : run(sizes, warm);
  cudalloc_stats_t a, b;
  cudalloc_get_stats(0, &a);
  timed(sizes, n);
  cudalloc_get_stats(0, &b);
  /* What the timed part asked of the (simulated) driver: not the load's doing, unlike times (the
   * counts still move with address-space randomisation; setarch -R repeats them). */
#define D(f) (long long)(b.f.total - a.f.total)
  printf("timed part: %lld slow paths; backend calls: %lld event records, %lld event queries, %lld waits, "
         "%lld memory (create %lld, map %lld, unmap %lld, set-access %lld); reserved %.1f MiB\n",
         D(num_retries), D(backend_event_record), D(backend_event_query), D(backend_sync),
         D(backend_create) + D(backend_release) + D(backend_map) + D(backend_unmap) + D(backend_set_access) +
             D(backend_reserve) + D(backend_va_free),
         D(backend_create), D(backend_map), D(backend_unmap), D(backend_set_access),
         (double)b.reserved_bytes.current / (1 << 20));
#undef D
  return 0;
}

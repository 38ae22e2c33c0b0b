/* jemalloc's cached pair (mallocx/dallocx, as bench_alloc calls it) on the
 * same sequences and window as pair_instructions, for instruction counts
 * side by side under callgrind (docs/benchmarks.md, twenty-sixth session):
 *
 *   valgrind --tool=callgrind --callgrind-out-file=/dev/null --toggle-collect=timed \
 *     build/bench/je_pair_instructions PAIRS tiny|gpu|gpu-turns|gpu-small|gpu-large|mix WARM_PASSES
 *
 * "Collected" / PAIRS is the instructions of one pair, its loop included
 * (pair_instructions' loop is longer: cudalloc's calls take a stream).
 * A binary of its own: jemalloc linked in replaces the process's malloc,
 * which pair_instructions' figures of earlier sessions did not have. */
#include <stdio.h>
#include <stdlib.h>
#include <jemalloc/jemalloc.h>
#include "bench.h"

static void *live[16];

static void run(const uint32_t *sizes, size_t from, size_t n) {
  for (size_t k = from; k < from + n; k++) {
    void **slot = &live[k % 16];
    if (*slot) dallocx(*slot, 0);
    if (!(*slot = mallocx(sizes[k % BENCH_SEQ_N], 0))) exit(2);
  }
}

__attribute__((noinline)) void timed(const uint32_t *sizes, size_t from, size_t n) { run(sizes, from, n); }

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: je_pair_instructions PAIRS " BENCH_SEQ_NAMES " WARM_PASSES\n");
    return 2;
  }
  size_t n = strtoull(argv[1], NULL, 10), warm = strtoull(argv[3], NULL, 10) * BENCH_SEQ_N;
  uint32_t *sizes = bench_named_sizes(argv[2]);
  if (!sizes) return 2;
  run(sizes, 0, warm);
  timed(sizes, warm, n);
  for (int i = 0; i < 16; i++)
    if (live[i]) dallocx(live[i], 0);
  free(sizes);
  return 0;
}

/* Pinned host memory: cudalloc's cached alloc+free pair (the pinned arena,
 * through the public API) against two references on the same sizes:
 *   - pinning each time: mmap + touching every page + munmap, what
 *     cudaHostAlloc/cudaFreeHost cost at the least without a cache (the
 *     driver also locks and maps the pages: on a GPU it is far slower);
 *     with --backend cuda, the driver itself (cuMemHostAlloc per pair)
 *   - jemalloc's plain mallocx/dallocx (pageable memory, the floor).
 * It prints ns per pair and the ratios; it passes or fails nothing.
 *
 *   build/bench/bench_pinned [--backend sim|cuda] [--pairs N]
 *
 * A window of 8 live blocks: each pair frees the oldest and allocates the
 * next size of a seeded sequence, 4 KiB to 4 MiB, log-uniform (data
 * loaders' staging buffers). */
#define _GNU_SOURCE
#include <jemalloc/jemalloc.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bench.h"
#include "cudalloc.h"

#define WINDOW 8
#define SEQ 4096

static const uint32_t *sizes;

static void check(cudaError_t err, const char *what) {
  if (err != cudaSuccess) {
    fprintf(stderr, "bench_pinned: %s failed (%d)\n", what, (int)err);
    exit(1);
  }
}

static double cudalloc_pairs(size_t n) {
  void *live[WINDOW] = {0};
  double t0 = bench_now_ns();
  for (size_t i = 0; i < n; i++) {
    void **slot = &live[i % WINDOW];
    if (*slot) check(cudalloc_host_free(*slot), "cudalloc_host_free");
    check(cudalloc_host_alloc(slot, sizes[i % SEQ], 0), "cudalloc_host_alloc");
  }
  double t = bench_now_ns() - t0;
  for (int k = 0; k < WINDOW; k++) cudalloc_host_free(live[k]);
  return t / (double)n;
}

/* Uncached pinning at its cheapest: fresh pages, every one touched. */
static double pin_pairs(size_t n) {
  void *live[WINDOW] = {0};
  size_t len[WINDOW] = {0}, page = (size_t)sysconf(_SC_PAGESIZE);
  double t0 = bench_now_ns();
  for (size_t i = 0; i < n; i++) {
    size_t k = i % WINDOW;
    if (live[k]) munmap(live[k], len[k]);
    len[k] = (sizes[i % SEQ] + page - 1) / page * page;
    live[k] = mmap(NULL, len[k], PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (live[k] == MAP_FAILED) check(cudaErrorMemoryAllocation, "mmap");
  }
  double t = bench_now_ns() - t0;
  for (int k = 0; k < WINDOW; k++) munmap(live[k], len[k]);
  return t / (double)n;
}

static double jemalloc_pairs(size_t n) {
  void *live[WINDOW] = {0};
  double t0 = bench_now_ns();
  for (size_t i = 0; i < n; i++) {
    void **slot = &live[i % WINDOW];
    if (*slot) dallocx(*slot, 0);
    *slot = mallocx(sizes[i % SEQ], 0);
  }
  double t = bench_now_ns() - t0;
  for (int k = 0; k < WINDOW; k++) dallocx(live[k], 0);
  return t / (double)n;
}

int main(int argc, char **argv) {
  bool cuda = false;
  size_t pairs = 200000;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--backend") && i + 1 < argc) cuda = !strcmp(argv[++i], "cuda");
    else if (!strcmp(argv[i], "--pairs") && i + 1 < argc) pairs = strtoull(argv[++i], NULL, 10);
  }
  check(cudalloc_init(cuda ? "backend:cuda,quiet:true" : "backend:sim,sim_pinned_mb:4096,quiet:true"), "cudalloc_init");
  sizes = bench_sizes(SEQ, 4096, 4u << 20, 7);
  if (!sizes) return 1;
  cudalloc_pairs(2 * SEQ);   /* warm-up: the arena's chunks */
  cudalloc_pinned_stats_t before, after;
  cudalloc_get_pinned_stats(&before);
  /* ROUNDS rounds, the three in a rotated order each round (the two CPUs
   * of a shared machine run at different speeds: pin with taskset), and
   * the medians of the per-round ratios. Uncached pinning is slow: it
   * runs a twentieth of the pairs. */
  enum { ROUNDS = 9 };
  double ca[ROUNDS], pin[ROUNDS], je[ROUNDS], r_pin[ROUNDS], r_je[ROUNDS];
  size_t pin_n = pairs / 20 ? pairs / 20 : 1;
  for (int r = 0; r < ROUNDS; r++) {
    for (int k = 0; k < 3; k++) {
      switch ((r + k) % 3) {
      case 0: ca[r] = cudalloc_pairs(pairs); break;
      case 1: pin[r] = pin_pairs(pin_n); break;
      default: je[r] = jemalloc_pairs(pairs); break;
      }
    }
    r_pin[r] = ca[r] / pin[r];
    r_je[r] = ca[r] / je[r];
  }
  cudalloc_get_pinned_stats(&after);
  printf("pinned alloc+free pair, sizes 4 KiB .. 4 MiB (log-uniform), window %d, %s; medians of %d rounds\n", WINDOW,
         cuda ? "CUDA" : "simulated device", ROUNDS);
  printf("| %-36s | %12s |\n", "allocator", "ns per pair");
  printf("| %-36s | %12.1f |\n", "cudalloc pinned cache", bench_median(ca, ROUNDS));
  printf("| %-36s | %12.1f |\n", "mmap + touch + munmap (no cache)", bench_median(pin, ROUNDS));
  printf("| %-36s | %12.1f |\n", "jemalloc mallocx/dallocx (pageable)", bench_median(je, ROUNDS));
  printf("median ratio cudalloc / uncached pinning = %.4f\n", bench_median(r_pin, ROUNDS));
  printf("median ratio cudalloc / jemalloc = %.2f\n", bench_median(r_je, ROUNDS));
  printf("chunks pinned during the timed pairs: %" PRId64 "\n",
         after.pinned_backend_alloc.total - before.pinned_backend_alloc.total);
  cudalloc_shutdown();
  return 0;
}

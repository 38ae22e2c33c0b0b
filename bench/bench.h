/* Small helpers of the benchmarks, after jemalloc's test/include/test/bench.h:
 * time two functions on the same work, print ns per iteration for each and
 * their ratio. Benchmarks print figures; none of them passes or fails. */
#ifndef CUDALLOC_BENCH_H
#define CUDALLOC_BENCH_H

#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static inline double bench_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* splitmix64: a seeded generator, so that both allocators see one sequence. */
static inline uint64_t bench_rand(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* n sizes drawn log-uniformly in [lo, hi]: as many 1 KiB requests as 1 MiB
 * ones per octave, which is how tensor sizes spread. */
static inline uint32_t *bench_sizes(size_t n, uint32_t lo, uint32_t hi, uint64_t seed) {
  uint32_t *s = malloc(n * sizeof *s);
  if (!s) return NULL;
  double a = log((double)lo), b = log((double)hi + 1.0);
  for (size_t i = 0; i < n; i++) {
    double u = (double)(bench_rand(&seed) >> 11) / 9007199254740992.0; /* [0, 1) */
    double v = exp(a + u * (b - a));
    s[i] = v < lo ? lo : v > hi ? hi : (uint32_t)v;
  }
  return s;
}

/* A PyTorch-like size mix: what one transformer training step under
 * autocast asks for (docs/benchmarks.md): many sub-KiB scalars (losses,
 * grad-norm partials, loss scales), norm weights and their gradients,
 * MiB activations, attention scores and MLP intermediates of tens of MiB,
 * and now and then the logits, about 100 MiB. bench_alloc's (m) and
 * pair_instructions' mix. */
static inline uint32_t *bench_mix_sizes(size_t n, uint64_t seed) {
  static const struct { unsigned weight; uint32_t lo, hi; } bands[] = {
      {40, 4, 1024},                      /* scalars and small vectors, fp32 */
      {25, 2u << 10, 64u << 10},          /* layernorm weights and biases, their grads */
      {25, 1u << 20, 32u << 20},          /* activations (batch x seq x hidden, bf16) */
      {8, 32u << 20, 96u << 20},          /* attention scores, MLP intermediates */
      {2, 96u << 20, 128u << 20},         /* logits (batch x seq x vocab) */
  };
  uint32_t *s = malloc(n * sizeof *s);
  if (!s) return NULL;
  for (size_t i = 0; i < n; i++) {
    unsigned pick = (unsigned)(bench_rand(&seed) % 100), b = 0;
    while (pick >= bands[b].weight) pick -= bands[b++].weight;
    uint64_t one = bench_rand(&seed);
    uint32_t *v = bench_sizes(1, bands[b].lo, bands[b].hi, one);
    if (!v) return free(s), NULL;
    s[i] = *v;
    free(v);
  }
  return s;
}

/* The same n sizes reordered: those of at most `split` bytes and the larger
 * ones in turn, each kind in its own order, the longer kind's rest at the
 * end. An allocator whose path forks at one size (cudalloc's front cache at
 * 64 KiB) then takes each side in turn, a branch the CPU predicts, where
 * random sizes make it a coin toss (docs/benchmarks.md, twenty-sixth
 * session). */
static inline uint32_t *bench_alternate_sizes(const uint32_t *sizes, size_t n, uint32_t split) {
  uint32_t *s = malloc(n * sizeof *s);
  if (!s) return NULL;
  size_t small = 0, large = 0, k = 0;
  while (k < n) {
    while (small < n && sizes[small] > split) small++;
    while (large < n && sizes[large] <= split) large++;
    bool want_small = small < n && (large >= n || k % 2 == 0);
    s[k++] = want_small ? sizes[small++] : sizes[large++];
  }
  return s;
}

/* The sizes of one side of split alone (small: those of at most split),
 * in their order, repeated until there are n: what each side of (a)'s fork
 * costs without the other's branches and cache lines in between
 * (docs/benchmarks.md, twenty-seventh session). NULL without memory or
 * when no size is on that side. */
static inline uint32_t *bench_side_sizes(const uint32_t *sizes, size_t n, uint32_t split, bool small) {
  size_t on_side = 0;
  for (size_t i = 0; i < n; i++) on_side += (sizes[i] <= split) == small;
  uint32_t *s = on_side ? malloc(n * sizeof *s) : NULL;
  for (size_t i = 0, k = 0; s && k < n; i = (i + 1) % n)
    if ((sizes[i] <= split) == small) s[k++] = sizes[i];
  return s;
}

/* The named sequence of SEQ_N sizes that bench_alloc's rows time and the
 * instruction counters count: "tiny" (b), "gpu" (a), "gpu-turns" (a2),
 * "gpu-small" and "gpu-large" (a<) and (a>), "mix" (m); NULL for another
 * name or without memory. */
#define BENCH_SEQ_N (1u << 16)
#define BENCH_SEQ_NAMES "tiny|gpu|gpu-turns|gpu-small|gpu-large|mix"   /* for usage lines */
#define BENCH_GPU_SPLIT (64u << 10)   /* the front cache's small blocks: (a)'s fork */
static inline uint32_t *bench_named_sizes(const char *name) {
  if (!strcmp(name, "tiny")) return bench_sizes(BENCH_SEQ_N, 16, 1024, 2);
  if (!strcmp(name, "mix")) return bench_mix_sizes(BENCH_SEQ_N, 3);
  bool turns = !strcmp(name, "gpu-turns"), small = !strcmp(name, "gpu-small"), large = !strcmp(name, "gpu-large");
  if (strcmp(name, "gpu") && !turns && !small && !large) return NULL;
  uint32_t *gpu = bench_sizes(BENCH_SEQ_N, 512, 8u << 20, 1);
  if (!gpu || !(turns || small || large)) return gpu;
  uint32_t *s = turns ? bench_alternate_sizes(gpu, BENCH_SEQ_N, BENCH_GPU_SPLIT)
                      : bench_side_sizes(gpu, BENCH_SEQ_N, BENCH_GPU_SPLIT, small);
  free(gpu);
  return s;
}

static int bench_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* The median of n values (n <= 64); sorts a copy. */
static inline double bench_median(const double *v, int n) {
  double c[64];
  if (n > 64) n = 64;
  memcpy(c, v, (size_t)n * sizeof *c);
  qsort(c, (size_t)n, sizeof *c, bench_cmp_double);
  return n % 2 ? c[n / 2] : (c[n / 2 - 1] + c[n / 2]) / 2;
}

/* "1.50 KiB" for 1536. */
static inline const char *bench_bytes(double b, char *buf, size_t cap) {
  static const char *unit[] = {"B", "KiB", "MiB", "GiB"};
  int u = 0;
  while (b >= 1024 && u < 3) b /= 1024, u++;
  snprintf(buf, cap, b == (double)(int64_t)b ? "%.0f %s" : "%.2f %s", b, unit[u]);
  return buf;
}

#endif /* CUDALLOC_BENCH_H */

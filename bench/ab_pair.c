/* Two builds of cudalloc side by side in one process: the cached pair of
 * pair_instructions' sequences (tiny, GPU-like, the PyTorch-like mix), a
 * window of 16 live blocks on one created stream of the simulated device,
 * timed in rounds that alternate the two builds, the order rotated from
 * round to round. It prints each build's median ns per pair and the median
 * of the rounds' own ratios (B/A) with its quartiles: a change worth a few
 * percent shows through a shared machine's drift, which a comparison of
 * two processes does not (docs/benchmarks.md, eighteenth session).
 *
 * Built by bench/ab_pair.sh, which links build A's libcudalloc.a as it is
 * and build B's with every global symbol prefixed B_ (each a relocatable
 * object after link-time optimization, so the code is the shipped one's):
 *
 *   bench/ab_pair.sh BASE_REV [tiny|gpu|mix ...]    A = BASE_REV, B = the working tree
 *
 * A sequence may name streams as pair_instructions does, gpu/64:eq: the
 * pairs round-robin over 64 streams that hold 1,024 live blocks between
 * them, each repeating its own slice of the sequence (bench_alloc's (s=)).
 *
 * Usage of the binary: ab_pair NAME[/STREAMS:eq] PAIRS ROUNDS (NAME: bench.h's
 * bench_named_sizes). Figures, no verdict. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend_sim.h"
#include "bench.h"
#include "cudalloc.h"

/* Build B's entry points, renamed by bench/ab_pair.sh. */
cudaError_t B_cudalloc_init(const char *conf);
void B_ca_sim_thread_init(void);
CUresult B_ca_sim_stream_create(ca_stream_t *stream, int nonblocking);
cudaError_t B_cudalloc_malloc(void **ptr, size_t size, cudaStream_t stream);
cudaError_t B_cudalloc_free(void *ptr, cudaStream_t stream);

#define WINDOW 16
#define EQUAL_WINDOW 1024   /* STREAMS:eq's live blocks, all streams together */
#define SEQ BENCH_SEQ_N
#define MAX_ROUNDS 64
#define MAX_LANES 64

typedef struct {
  void *live[EQUAL_WINDOW];
  size_t next, first;   /* the lane's pairs so far; where its slice starts */
  ca_stream_t stream;
} lane_t;

static uint32_t *sizes;
static lane_t lanes[2][MAX_LANES];
static size_t nlanes = 1, window = WINDOW, slice = SEQ;   /* all three powers of two */

/* One loop per build, the same code: neither pays an indirect call. */
#define PAIRS(name, alloc, release)                                                   \
  static __attribute__((noinline)) void name(lane_t *lanes, size_t n) {               \
    for (size_t i = 0; i < n; i++) {                                                  \
      lane_t *l = &lanes[i & (nlanes - 1)];   /* a power of two: no division */       \
      size_t k = l->next++;                                                           \
      void **slot = &l->live[k & (window - 1)];                                       \
      if (*slot && release(*slot, (cudaStream_t)l->stream)) exit(3);                  \
      if (alloc(slot, sizes[l->first + (k & (slice - 1))], (cudaStream_t)l->stream))  \
        exit(4);                                                                      \
    }                                                                                 \
  }
PAIRS(pairs_a, cudalloc_malloc, cudalloc_free)
PAIRS(pairs_b, B_cudalloc_malloc, B_cudalloc_free)

static void pairs(int build, size_t n) { build ? pairs_b(lanes[1], n) : pairs_a(lanes[0], n); }

/* "/STREAMS:eq" after the sequence's name: the lanes, windows and slices. */
static bool parse_lanes(const char *seq) {
  const char *at = strchr(seq, '/');
  if (!at) return true;
  char *end;
  unsigned long n = strtoul(at + 1, &end, 10);
  if (strcmp(end, ":eq") || n < 1 || n > MAX_LANES || (n & (n - 1))) return false;
  nlanes = n, window = EQUAL_WINDOW / n, slice = SEQ / n;
  return true;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: ab_pair " BENCH_SEQ_NAMES "[/STREAMS:eq] PAIRS ROUNDS\n");
    return 2;
  }
  const char *seq = argv[1];
  size_t n = strtoull(argv[2], NULL, 10);
  int rounds = atoi(argv[3]);
  if (rounds < 4) rounds = 4;
  if (rounds > MAX_ROUNDS) rounds = MAX_ROUNDS;
  bool mix = !strncmp(seq, "mix", 3);
  if (!parse_lanes(seq)) return 2;
  char name[16];
  snprintf(name, sizeof name, "%.*s", (int)strcspn(seq, "/"), seq);   /* the sequence before its lanes */
  sizes = bench_named_sizes(name);
  if (!sizes || n < 1) return 2;
  /* the mix's 16 live blocks reach 2 GiB: pair_instructions' capacity */
  const char *conf = mix ? "backend:sim,sim_capacity_mb:8192" : "backend:sim,sim_capacity_mb:4096";
  if (cudalloc_init(conf) || B_cudalloc_init(conf)) return 1;
  ca_sim_thread_init();
  B_ca_sim_thread_init();
  for (size_t i = 0; i < nlanes; i++) {
    lanes[0][i].first = lanes[1][i].first = i * slice;   /* one lane: 0, the whole sequence */
    if (ca_sim_stream_create(&lanes[0][i].stream, 1) || B_ca_sim_stream_create(&lanes[1][i].stream, 1)) return 1;
  }
  for (int pass = 0; pass < 12; pass++) {   /* warm: both quiet (bench_alloc's warm-up takes up to 12 here) */
    pairs(0, SEQ);
    pairs(1, SEQ);
  }
  double ns[2][MAX_ROUNDS], ratio[MAX_ROUNDS];
  for (int r = 0; r < rounds; r++) {
    for (int j = 0; j < 2; j++) {
      int build = (r & 1) ? 1 - j : j;
      double t0 = bench_now_ns();
      pairs(build, n);
      ns[build][r] = (bench_now_ns() - t0) / (double)n;
    }
    ratio[r] = ns[1][r] / ns[0][r];
  }
  double sorted[MAX_ROUNDS];
  memcpy(sorted, ratio, sizeof(double) * (size_t)rounds);
  qsort(sorted, (size_t)rounds, sizeof *sorted, bench_cmp_double);
  printf("%-4s %zu pairs x %d rounds: A %.2f ns/pair, B %.2f ns/pair; B/A median %.3f (quartiles %.3f..%.3f)\n", seq,
         n, rounds, bench_median(ns[0], rounds), bench_median(ns[1], rounds), bench_median(ratio, rounds),
         sorted[rounds / 4], sorted[(3 * rounds) / 4]);
  return 0;
}

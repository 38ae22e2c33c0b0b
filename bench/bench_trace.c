/* What recording the event log costs on cudalloc's cached alloc+free pair:
 * the same pairs timed with recording on and off, in turn, in one run
 * (each round runs both, the order alternating), and the median of the
 * rounds' differences divided by the events per pair (an alloc and a
 * stream-ordered free: 2). Full mode (trace:PATH, the writer thread
 * included: pin the run to one core, `taskset -c 0`, so that the writer's
 * work counts) and ring mode (trace_ring:N). It prints figures; it passes
 * or fails nothing. docs/trace.md quotes them.
 *
 *   build/bench/bench_trace [--pairs N] [--rounds R] [--conf MORE] [--log PATH] [--mode full|ring]
 *
 * --conf adds configuration to both sides (thread_cache_kb:0 takes the
 * per-thread front cache out of the comparison: recording turns it off);
 * --log sends the full log elsewhere than /tmp (/dev/null: what the file
 * system's share of the cost is); --mode runs one mode alone, in a fresh
 * process (the pair's own time was seen to differ between a process's
 * first cudalloc_init and its second, on and off alike). */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

#include "bench.h"
#include "cudalloc.h"

#define WINDOW 16
#define SEQ (1u << 14)
#define MAX_ROUNDS 64
#define EVENTS_PER_PAIR 2.0

/* The recorder's own switch (alloc/trace.h): linked from libcudalloc.a. */
void ca_trace_pause(void);
void ca_trace_resume(void);

static size_t pairs = 40000;
static int rounds = 9;
static void *live[WINDOW];
static size_t next;
static const uint32_t *sizes;
static const char *extra = "";   /* more configuration, for both sides */
static const char *log_to;       /* where the full log goes (default: a file in /tmp) */
static const char *only;         /* "full" or "ring": that mode alone, in a fresh process */

static void check(cudaError_t err, const char *what) {
  if (err == cudaSuccess) return;
  fprintf(stderr, "bench_trace: %s failed (%d)\n", what, (int)err);
  exit(1);
}

static double run_pairs(size_t n) {
  double t0 = bench_now_ns();
  for (size_t i = 0; i < n; i++, next++) {
    void **slot = &live[next % WINDOW];
    if (*slot) check(cudalloc_free(*slot, NULL), "cudalloc_free");
    check(cudalloc_malloc(slot, sizes[next % SEQ], NULL), "cudalloc_malloc");
  }
  return (bench_now_ns() - t0) / (double)n;
}

static void phase(const char *name, const char *conf) {
  check(cudalloc_init(conf), "cudalloc_init");
  for (int i = 0; i < 4; i++) run_pairs(SEQ);   /* warm: the cache holds the sequence */
  double on[MAX_ROUNDS], off[MAX_ROUNDS], diff[MAX_ROUNDS], ratio[MAX_ROUNDS];
  for (int r = 0; r < rounds; r++) {
    for (int k = 0; k < 2; k++) {
      bool recording = (r + k) % 2 == 0;   /* alternate which goes first */
      if (recording) ca_trace_resume();
      else ca_trace_pause();
      double ns = run_pairs(pairs);
      (recording ? on : off)[r] = ns;
    }
    ca_trace_resume();
    diff[r] = (on[r] - off[r]) / EVENTS_PER_PAIR;
    ratio[r] = on[r] / off[r];
  }
  for (int i = 0; i < WINDOW; i++) {
    if (live[i]) check(cudalloc_free(live[i], NULL), "cudalloc_free");
    live[i] = NULL;
  }
  cudalloc_shutdown();
  printf("| %s | %.1f | %.1f | %.2f | %.1f |\n", name, bench_median(off, rounds), bench_median(on, rounds),
         bench_median(ratio, rounds), bench_median(diff, rounds));
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--pairs") && i + 1 < argc) pairs = strtoull(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--conf") && i + 1 < argc) extra = argv[++i];
    else if (!strcmp(argv[i], "--log") && i + 1 < argc) log_to = argv[++i];
    else if (!strcmp(argv[i], "--mode") && i + 1 < argc) only = argv[++i];
    else {
      fprintf(stderr, "usage: bench_trace [--pairs N] [--rounds R] [--conf KEY:VALUE,...] [--log PATH] [--mode full|ring]\n");
      return 2;
    }
  }
  if (only && strcmp(only, "full") && strcmp(only, "ring")) {
    fprintf(stderr, "bench_trace: --mode %s: full or ring\n", only);
    return 2;
  }
  if (rounds < 1) rounds = 1;
  if (rounds > MAX_ROUNDS) rounds = MAX_ROUNDS;
  uint32_t *seq = bench_sizes(SEQ, 512, 8u << 20, 1);
  if (!seq) return 1;
  sizes = seq;
  char log[128], conf[256];
  if (log_to) snprintf(log, sizeof log, "%s", log_to);
  else snprintf(log, sizeof log, "/tmp/cudalloc-bench-trace-%d.log", (int)getpid());
  printf("event log recording on the cached pair (GPU-like sizes 512 B..8 MiB, simulated device), "
         "%zu pairs x %d rounds, on and off in turn; median of the rounds\n\n", pairs, rounds);
  printf("| mode | off ns/pair | on ns/pair | on/off | ns per event |\n| --- | --- | --- | --- | --- |\n");
  snprintf(conf, sizeof conf, "backend:sim,sim_capacity_mb:4096,quiet:true,trace:%s%s%s", log, *extra ? "," : "", extra);
  if (!only || !strcmp(only, "full")) phase("trace (every event, writer thread)", conf);
  snprintf(conf, sizeof conf, "backend:sim,sim_capacity_mb:4096,quiet:true,trace:%s,trace_ring:100000%s%s", log,
           *extra ? "," : "", extra);
  if (!only || !strcmp(only, "ring")) phase("trace_ring:100000", conf);
  /* Each event reads the log's raw clock once (docs/trace.md, "The clock"):
   * the TSC where it is invariant, else CLOCK_MONOTONIC. */
  struct timespec ts;
  double t0 = bench_now_ns();
  for (int i = 0; i < 1000000; i++) clock_gettime(CLOCK_MONOTONIC, &ts);
  printf("\nthe clocks on this machine: clock_gettime(CLOCK_MONOTONIC) %.1f ns", (bench_now_ns() - t0) / 1e6);
#if defined(__x86_64__) || defined(__i386__)
  volatile uint64_t sink = 0;
  t0 = bench_now_ns();
  for (int i = 0; i < 1000000; i++) sink += __rdtsc();
  printf(", rdtsc %.1f ns", (bench_now_ns() - t0) / 1e6);
#endif
  printf("\n");
  if (!log_to) unlink(log);
  free(seq);
  return 0;
}

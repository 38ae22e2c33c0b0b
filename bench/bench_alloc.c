/* The cached alloc+free pair of cudalloc (libcudalloc.a, the public API)
 * against jemalloc's mallocx/dallocx and mimalloc's mi_malloc/mi_free, on
 * the same size sequences, side by side in one run. It prints figures,
 * each target next to the figure it applies to; it passes or fails nothing.
 *
 *   build/bench/bench_alloc [--backend sim|cuda] [--pairs N] [--rounds R]
 *                           [--part single|threads|all|streams] [--conf ,key:value...] [--tracking]
 *
 * Each scenario keeps a window of 16 live blocks: every pair frees the
 * oldest and allocates the next size of a seeded sequence (it repeats every
 * SEQ pairs). cudalloc's warm-up runs whole passes of the sequence until one
 * makes no backend call, so that the timed part measures the cached path;
 * the backend calls that cudalloc_get_stats counts over the timed part are
 * printed to show it, and so is how long the warm-up took. Each figure is
 * the median of R rounds; in every round the three allocators run in turn,
 * the order rotated from round to round, so that a slow spell of the
 * machine touches all of them; a ratio is the median of the rounds' own
 * ratios. --part single is meant to run pinned (taskset -c 0, as
 * bench/run.sh does); --part threads pins its threads itself; --part streams runs only the
 * many-streams figures, (s) and the equal-working-set (s=), which holds
 * 1,024 live blocks on both sides. docs/benchmarks.md explains the
 * figures. */
#define _GNU_SOURCE
#include <jemalloc/jemalloc.h>
#include <mimalloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <unistd.h>

#include "backend_sim.h"
#include "bench.h"
#include "cudalloc.h"

#define WINDOW 16
#define SEQ BENCH_SEQ_N /* sizes per sequence (bench.h); the runs wrap around it */
#define MAX_ROUNDS 64
#define MAX_THREADS 4
#define STREAMS 64     /* the many-streams scenario */
#define EQUAL_WINDOW (STREAMS * WINDOW) /* live blocks of both sides of the equal-working-set figure */
#define WARM_MAX 40    /* passes of the sequence, at most, in the warm-up */
#define WARM_MAX_THREADS 8

typedef struct opts_s {
  bool cuda;
  bool tracking_only; /* --tracking: only the tracking-depth table */
  size_t pairs;       /* per round, GPU-like sequence; tiny sizes run 4x as many */
  int rounds;
  bool single, threads; /* which parts run */
  bool streams_only;  /* --part streams: of the single-thread part, only (s) and (s=) */
  const char *conf;   /* appended to every CUDALLOC configuration (",key:value...") */
} opts_t;

static opts_t opt = {false, false, 100000, 9, true, true, false, ""};

/* Design targets (docs/design.md, issue 12), printed next to the figures. */
#define TARGET_GPU_RATIO 0.20
#define TARGET_TINY_RATIO 1.0
#define TARGET_MIX_RATIO 0.25
#define TARGET_TWO_THREADS 1.8
#define TARGET_STREAMS 1.2

static void die(const char *what, int code) {
  fprintf(stderr, "bench_alloc: %s failed (%d): the figures would mean nothing\n", what, code);
  exit(1);
}

static void check(cudaError_t err, const char *what) {
  if (err != cudaSuccess) die(what, (int)err);
}

// ----------------------------------------------------------------------------
// One lane: a sequence, a window per allocator, a stream
// ----------------------------------------------------------------------------

typedef enum { CA, JE, MI, NALLOC } alloc_id_t;
static const char *const alloc_name[NALLOC] = {"cudalloc", "jemalloc", "mimalloc"};

typedef struct lane_s {
  const uint32_t *sizes;
  size_t next[NALLOC];          /* each allocator's position in the sequence */
  void *live[NALLOC][WINDOW];
  cudaStream_t stream;
  bool free_sync;               /* cudaFree's promise instead of a stream-ordered free */
  /* The equal-working-set figure's lanes (shaped): a window of `window`
   * blocks in win, and sizes[first .. first + slice) repeated. */
  bool shaped;
  uint32_t window, first, slice; /* powers of two but first */
  void **win[NALLOC];
} lane_t;

static inline void pair_at(lane_t *l, alloc_id_t a, void **slot, size_t size) {
  switch (a) {
  case CA:
    if (*slot) check(l->free_sync ? cudalloc_free_sync(*slot) : cudalloc_free(*slot, l->stream), "cudalloc_free");
    check(cudalloc_malloc(slot, size, l->stream), "cudalloc_malloc");
    break;
  case JE:
    if (*slot) dallocx(*slot, 0);
    if (!(*slot = mallocx(size, 0))) die("mallocx", 0);
    break;
  default:
    mi_free(*slot);
    if (!(*slot = mi_malloc(size))) die("mi_malloc", 0);
  }
}

static void one_pair(lane_t *l, alloc_id_t a) {
  size_t i = l->next[a]++;
  pair_at(l, a, &l->live[a][i % WINDOW], l->sizes[i % SEQ]);
}

static void one_pair_shaped(lane_t *l, alloc_id_t a) {
  size_t i = l->next[a]++;
  pair_at(l, a, &l->win[a][i & (l->window - 1)], l->sizes[l->first + (i & (l->slice - 1))]);
}

/* n pairs, round-robin over nl lanes (one pair each in turn). */
static void pairs_on(lane_t *lanes, int nl, alloc_id_t a, size_t n) {
  if (lanes->shaped)
    for (size_t i = 0; i < n; i++) one_pair_shaped(&lanes[i % (size_t)nl], a);
  else if (nl == 1)
    for (size_t i = 0; i < n; i++) one_pair(lanes, a);
  else
    for (size_t i = 0; i < n; i++) one_pair(&lanes[i % (size_t)nl], a);
}

static void lane_drain(lane_t *l) {
  for (uint32_t i = 0; l->shaped && i < l->window; i++) {
    if (l->win[CA][i]) check(cudalloc_free(l->win[CA][i], l->stream), "cudalloc_free");
    if (l->win[JE][i]) dallocx(l->win[JE][i], 0);
    mi_free(l->win[MI][i]);
  }
  for (int a = 0; l->shaped && a < NALLOC; a++) free(l->win[a]);
  for (int i = 0; i < WINDOW; i++) {
    if (l->live[CA][i]) check(cudalloc_free(l->live[CA][i], l->stream), "cudalloc_free");
    if (l->live[JE][i]) dallocx(l->live[JE][i], 0);
    mi_free(l->live[MI][i]);
    l->live[CA][i] = l->live[JE][i] = l->live[MI][i] = NULL;
  }
}

// ----------------------------------------------------------------------------
// Set-up: the allocator, streams, and what the backend did
// ----------------------------------------------------------------------------

static void start(const char *extra) {
  char conf[256];
  snprintf(conf, sizeof conf, "%s%s%s", opt.cuda ? "backend:cuda" : "backend:sim,sim_capacity_mb:8192", extra, opt.conf);
  check(cudalloc_init(conf), "cudalloc_init");
}

static cudaStream_t new_stream(void) {
  cudaStream_t s = NULL;
  if (opt.cuda) check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  else {
    ca_sim_thread_init();   /* the runtime's implicit start: this thread's current context */
    if (ca_sim_stream_create((ca_stream_t *)&s, 1)) die("ca_sim_stream_create", 0);
  }
  return s;
}

/* cudalloc is told, as the preload would tell it (it remembers streams'
 * devices, and a handle's value may come back). */
static void drop_stream(cudaStream_t s) {
  cudalloc_stream_unregister(s);
  if (opt.cuda) cudaStreamDestroy(s);
  else ca_sim_stream_destroy(s);
}

/* Backend calls as cudalloc counts them, plus the device lookups the
 * simulation counts (the current device, a stream's device), which the
 * stats do not. */
typedef struct calls_s {
  int64_t memory, events, waits, slow, lookups;
} calls_t;

static calls_t calls_now(void) {
  cudalloc_stats_t s;
  check(cudalloc_get_stats(0, &s), "cudalloc_get_stats");
  calls_t c = {s.backend_reserve.total + s.backend_va_free.total + s.backend_create.total +
                   s.backend_release.total + s.backend_map.total + s.backend_unmap.total +
                   s.backend_set_access.total,
               s.backend_event_record.total + s.backend_event_query.total, s.backend_sync.total,
               s.num_retries.total,
               opt.cuda ? -1 : (int64_t)(ca_sim_calls(CA_OP_get_device) + ca_sim_calls(CA_OP_stream_device))};
  return c;
}

static calls_t calls_since(calls_t a) {
  calls_t b = calls_now();
  return (calls_t){b.memory - a.memory, b.events - a.events, b.waits - a.waits, b.slow - a.slow,
                   opt.cuda ? -1 : b.lookups - a.lookups};
}

static bool busy(calls_t c) { return c.memory || c.events || c.waits || c.slow; }

/* cudalloc's warm-up: passes of SEQ pairs (over every lane) until one
 * makes no backend call, or WARM_MAX passes. Returns the passes run
 * (negative: never quiet); *during counts the calls after the first pass. */
static int warm_cudalloc(lane_t *lanes, int nl, calls_t *during) {
  calls_t first = calls_now(), c;
  int pass = 0;
  do {
    calls_t before = calls_now();
    pairs_on(lanes, nl, CA, SEQ);
    c = calls_since(before);
    if (++pass == 1) first = calls_now();
  } while (busy(c) && pass < WARM_MAX);
  *during = calls_since(first);
  return busy(c) ? -pass : pass;
}

static void print_warm(int passes, calls_t c) {
  if (passes < 0)
    printf("  warm-up: no pass of the sequence was free of backend calls within %d passes (%d x %u pairs); ",
           -passes, -passes, SEQ);
  else
    printf("  warm-up: %d pass%s of the sequence (%u pairs each) until one made no backend call; ", passes,
           passes == 1 ? "" : "es", SEQ);
  int n = passes < 0 ? -passes : passes;
  printf("after the first pass: %" PRId64 " memory calls, %" PRId64 " event calls, %" PRId64
         " slow paths in %d pass%s\n", c.memory, c.events, c.slow, n - 1, n == 2 ? "" : "es");
}

static void print_calls(calls_t c, double pairs) {
  printf("  timed part: backend calls %" PRId64 " (memory %" PRId64 ", events %" PRId64 ", waits %" PRId64
         "), slow paths %" PRId64,
         c.memory + c.events + c.waits, c.memory, c.events, c.waits, c.slow);
  if (c.lookups >= 0)
    printf("; device lookups (get_device, stream_device) %.2f per pair (not in the stats)\n",
           (double)c.lookups / pairs);
  else
    printf("\n");
}

// ----------------------------------------------------------------------------
// Single-thread scenarios
// ----------------------------------------------------------------------------

typedef struct row_s {
  char name[96];
  double ns[NALLOC];
  double vs_je, vs_mi;          /* cudalloc's ratios, medians of the rounds' own */
  double target;                /* cudalloc/jemalloc at most this; 0: none */
  int64_t calls;
} row_t;

static row_t rows[26];
static int nrows;

static void print_one(alloc_id_t a, const double *ns, int n) {
  double lo = ns[0], hi = ns[0];
  for (int i = 1; i < n; i++) lo = ns[i] < lo ? ns[i] : lo, hi = ns[i] > hi ? ns[i] : hi;
  printf("  %-9s %8.1f ns/pair   (rounds: best %.1f, worst %.1f)\n", alloc_name[a], bench_median(ns, n), lo, hi);
}

/* The median of the rounds' own ratios: each round ran every allocator
 * back to back, so a slow spell of the machine touches both sides. */
static double round_ratio(const double *a, const double *b, int n) {
  double r[MAX_ROUNDS];
  for (int i = 0; i < n; i++) r[i] = a[i] / b[i];
  return bench_median(r, n);
}

/* Times `pairs` pairs of every allocator for every round, in the round's
 * order, on nl lanes (round-robin); ns[a][r] per pair. */
static void timed_rounds(lane_t *lanes, int nl, size_t pairs, double ns[NALLOC][MAX_ROUNDS]) {
  for (int r = 0; r < opt.rounds; r++)
    for (int k = 0; k < NALLOC; k++) {
      alloc_id_t a = (alloc_id_t)((r + k) % NALLOC);
      double t0 = bench_now_ns();
      pairs_on(lanes, nl, a, pairs);
      ns[a][r] = (bench_now_ns() - t0) / (double)pairs;
    }
}

/* The lanes' shapes: each its own window of 16 over the whole sequence,
 * all in step (CLASSIC); for the equal-working-set figure, one lane with a
 * window of EQUAL_WINDOW over the whole sequence (ONE_BIG), or each lane a
 * window of 16 repeating its own slice of SEQ / nl sizes (SLICES), so that
 * a pass of SEQ pairs asks for the same sizes in both. */
typedef enum { CLASSIC, ONE_BIG, SLICES } shape_t;

static lane_t *lanes_new(int nl, const uint32_t *sizes, bool free_sync, shape_t shape) {
  lane_t *l = calloc((size_t)nl, sizeof *l);
  if (!l) die("calloc", 0);
  for (int i = 0; i < nl; i++) {
    l[i] = (lane_t){.sizes = sizes, .stream = free_sync ? NULL : new_stream(), .free_sync = free_sync};
    if (shape == CLASSIC) continue;
    l[i].shaped = true;
    l[i].window = shape == ONE_BIG ? EQUAL_WINDOW : WINDOW;
    l[i].slice = SEQ / (uint32_t)nl;
    l[i].first = (uint32_t)i * l[i].slice;
    for (int a = 0; a < NALLOC; a++)
      if (!(l[i].win[a] = calloc(l[i].window, sizeof(void *)))) die("calloc", 0);
  }
  return l;
}

static void lanes_drop(lane_t *l, int nl) {
  for (int i = 0; i < nl; i++) {
    lane_drain(&l[i]);
    if (l[i].stream) drop_stream(l[i].stream);
  }
  free(l);
}

/* One scenario on nl lanes: warm-up, rounds, its printout and its row. */
static row_t *scenario_on(const char *name, const uint32_t *sizes, int nl, size_t pairs, bool free_sync,
                          double target, shape_t shape) {
  lane_t *l = lanes_new(nl, sizes, free_sync, shape);
  double ns[NALLOC][MAX_ROUNDS];
  calls_t warm;
  int passes = warm_cudalloc(l, nl, &warm);
  pairs_on(l, nl, JE, 2 * SEQ);
  pairs_on(l, nl, MI, 2 * SEQ);
  calls_t before = calls_now();
  timed_rounds(l, nl, pairs, ns);
  calls_t c = calls_since(before);
  lanes_drop(l, nl);
  if (nrows == sizeof rows / sizeof rows[0]) die("a row past rows[] (its size)", nrows);
  row_t *row = &rows[nrows++];
  snprintf(row->name, sizeof row->name, "%s", name);
  for (int a = 0; a < NALLOC; a++) row->ns[a] = bench_median(ns[a], opt.rounds);
  row->vs_je = round_ratio(ns[CA], ns[JE], opt.rounds);
  row->vs_mi = round_ratio(ns[CA], ns[MI], opt.rounds);
  row->target = target;
  row->calls = c.memory + c.events + c.waits;
  printf("%s: %zu pairs x %d rounds\n", name, pairs, opt.rounds);
  print_warm(passes, warm);
  for (int a = 0; a < NALLOC; a++) print_one((alloc_id_t)a, ns[a], opt.rounds);
  printf("  ratio cudalloc/jemalloc = %.2f, cudalloc/mimalloc = %.2f (medians of the rounds' ratios)",
         row->vs_je, row->vs_mi);
  if (target > 0) printf("   (target: cudalloc/jemalloc <= %.2f)", target);
  printf("\n");
  print_calls(c, (double)pairs * opt.rounds);
  printf("\n");
  return row;
}

static row_t *scenario(const char *name, const uint32_t *sizes, size_t pairs, bool free_sync, double target) {
  return scenario_on(name, sizes, 1, pairs, free_sync, target, CLASSIC);
}

/* The same pairs on one stream and on STREAMS streams (round-robin, each
 * stream with its own window of 16, all in step over the same sequence):
 * the cost of many streams together with that of STREAMS x the live
 * blocks, and of a sequence that each stream sees only SEQ / STREAMS of
 * a pass (it repeats after STREAMS passes, beyond WARM_MAX); the other
 * allocators' ratio beside it is the cost of the larger working set. */
static double streams_ratio[2], equal_ratio[2];

static void streams_figure(const char *name, const uint32_t *sizes, size_t pairs, int which) {
  char n1[96], n64[96];
  snprintf(n1, sizeof n1, "(s) %s, 1 stream", name);
  snprintf(n64, sizeof n64, "(s) %s, %d streams", name, STREAMS);
  row_t *one = scenario_on(n1, sizes, 1, pairs, false, 0, CLASSIC);
  row_t *many = scenario_on(n64, sizes, STREAMS, pairs, false, 0, CLASSIC);
  streams_ratio[which] = many->ns[CA] / one->ns[CA];
  printf("  %d streams / 1 stream, ns per pair: cudalloc %.2f (target <= %.1f), jemalloc %.2f, mimalloc %.2f "
         "(they have no streams: theirs is the cost of %d windows instead of one)\n\n",
         STREAMS, streams_ratio[which], TARGET_STREAMS, many->ns[JE] / one->ns[JE], many->ns[MI] / one->ns[MI],
         STREAMS);
}

/* The per-stream cost alone: both sides hold EQUAL_WINDOW live blocks and
 * ask for the same sizes in a pass (docs/benchmarks.md). */
static void equal_figure(const char *name, const uint32_t *sizes, size_t pairs, int which) {
  char n1[96], n64[96];
  snprintf(n1, sizeof n1, "(s=) %s, 1 stream x %d live", name, EQUAL_WINDOW);
  snprintf(n64, sizeof n64, "(s=) %s, %d streams x %d live, a slice each", name, STREAMS, WINDOW);
  /* Each side from an empty cache, not from what the scenarios before it left. */
  check(cudalloc_empty_cache(), "cudalloc_empty_cache");
  row_t *one = scenario_on(n1, sizes, 1, pairs, false, 0, ONE_BIG);
  check(cudalloc_empty_cache(), "cudalloc_empty_cache");
  row_t *many = scenario_on(n64, sizes, STREAMS, pairs, false, 0, SLICES);
  equal_ratio[which] = many->ns[CA] / one->ns[CA];
  printf("  %d streams / 1 stream, the same %d live blocks, ns per pair: cudalloc %.2f (target <= %.1f), "
         "jemalloc %.2f, mimalloc %.2f (the working sets are equal: theirs should read near 1)\n\n",
         STREAMS, EQUAL_WINDOW, equal_ratio[which], TARGET_STREAMS, many->ns[JE] / one->ns[JE],
         many->ns[MI] / one->ns[MI]);
}

static void many_streams_figures(const uint32_t *gpu, const uint32_t *tiny) {
  streams_figure("GPU-like", gpu, opt.pairs, 0);
  streams_figure("tiny", tiny, 4 * opt.pairs, 1);
  equal_figure("GPU-like", gpu, opt.pairs, 0);
  equal_figure("tiny", tiny, 4 * opt.pairs, 1);
}

// ----------------------------------------------------------------------------
// Threads: each with its own stream and sequence
// ----------------------------------------------------------------------------

/* One crew of MAX_THREADS workers, worker i pinned to the i-th CPU this
 * process may use (in turn), runs every phase of a round: one thread on
 * the first CPU, one on the second, two, four. A phase's threads are
 * workers 0..n-1 (the second CPU's lone thread is worker 1); the others
 * wait at the gate. So a round's one-thread and many-thread figures are
 * taken moments apart, and "x one thread" is the median of the rounds'
 * own ratios: a slow spell of the shared machine touches both sides of a
 * ratio, as in the single-thread figures. */
#define PHASES 4
static const struct {
  int first, n;   /* workers first..first+n-1 */
} phase_of[PHASES] = {{0, 1}, {1, 1}, {0, 2}, {0, 4}};
_Static_assert(MAX_THREADS == 4, "the last phase runs every worker");

/* Each worker in lines of its own (aligned_alloc): a lane's counters are
 * written at every pair, and a line shared with another worker costs both
 * sides. A first version kept the crew in a static array that the linker
 * put in ca_trace_recording's line (the archive's data is linked beside the
 * benchmark's): two GPU-like threads read 1.05 to 1.65 times one, and 1.9
 * to 2.0 once aligned (docs/benchmarks.md, fifteenth session). Since then
 * the flags every allocation reads have lines of their own (alloc/line.h). */
typedef struct worker_s {
  pthread_t tid;
  int id;
  lane_t lane;
  size_t pairs;
  int cpu;                                 /* the CPU it is pinned to; -1: none */
  double t[MAX_ROUNDS][PHASES][NALLOC][2]; /* each of its runs' start and end on this thread */
} __attribute__((aligned(64))) worker_t;

static pthread_barrier_t gate;
static bool settled;

static bool in_phase(int p, int id) { return id >= phase_of[p].first && id < phase_of[p].first + phase_of[p].n; }

/* A round's phases, and its allocators within each, in orders rotated from
 * round to round; the main thread follows the same steps. */
static int phase_at(int r, int q) { return (r + q) % PHASES; }
static alloc_id_t alloc_at(int r, int k) { return (alloc_id_t)((r + k) % NALLOC); }

static void *worker(void *arg) {
  worker_t *w = arg;
  if (w->cpu >= 0) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(w->cpu, &one);
    if (pthread_setaffinity_np(pthread_self(), sizeof one, &one)) die("pthread_setaffinity_np", 0);
  }
  pairs_on(&w->lane, 1, JE, 2 * SEQ);
  pairs_on(&w->lane, 1, MI, 2 * SEQ);
  do {   /* passes of every worker together, until one makes no backend call */
    pairs_on(&w->lane, 1, CA, SEQ);
    pthread_barrier_wait(&gate);
    pthread_barrier_wait(&gate);                /* main has looked at the stats */
  } while (!__atomic_load_n(&settled, __ATOMIC_ACQUIRE));
  for (int r = 0; r < opt.rounds; r++)
    for (int q = 0; q < PHASES; q++)
      for (int k = 0; k < NALLOC; k++) {
        int p = phase_at(r, q);
        alloc_id_t a = alloc_at(r, k);
        pthread_barrier_wait(&gate);
        if (in_phase(p, w->id)) {
          w->t[r][p][a][0] = bench_now_ns();
          pairs_on(&w->lane, 1, a, w->pairs);
          w->t[r][p][a][1] = bench_now_ns();
        }
        pthread_barrier_wait(&gate);
      }
  lane_drain(&w->lane);
  return NULL;
}

/* A phase's pairs per second, millions, in one round: from its first
 * thread's start to its last one's end, on the threads' own clocks (the
 * main thread may wake up late from a barrier). */
static double phase_mpairs(const worker_t *w, int r, int p, alloc_id_t a) {
  const worker_t *f = &w[phase_of[p].first];
  double lo = f->t[r][p][a][0], hi = f->t[r][p][a][1];
  for (int i = 1; i < phase_of[p].n; i++) {
    lo = f[i].t[r][p][a][0] < lo ? f[i].t[r][p][a][0] : lo;
    hi = f[i].t[r][p][a][1] > hi ? f[i].t[r][p][a][1] : hi;
  }
  return (double)f->pairs * phase_of[p].n / (hi - lo) * 1e3;
}

typedef struct crew_result_s {
  double mpairs[PHASES][NALLOC];   /* medians of the rounds */
  double scaling[PHASES][NALLOC];  /* medians of the rounds' ratios to one thread */
  calls_t calls[PHASES];           /* cudalloc's, summed over the rounds */
  char warm[48];
} crew_result_t;

/* The CPUs this process may run on (at most MAX_THREADS of them), in
 * order: the workers are pinned across them in turn. */
static int bench_cpus(int *cpus) {
  cpu_set_t set;
  int n = 0;
  if (sched_getaffinity(0, sizeof set, &set)) return 0;
  for (int c = 0; c < CPU_SETSIZE && n < MAX_THREADS; c++)
    if (CPU_ISSET(c, &set)) cpus[n++] = c;
  return n;
}

static void calls_add(calls_t *sum, calls_t c) {
  sum->memory += c.memory, sum->events += c.events, sum->waits += c.waits, sum->slow += c.slow;
}

/* "One thread" in a round: the mean of the lone threads of the CPUs the
 * two-thread phase runs on (they may run at different speeds), or the
 * first's where there is one CPU. */
static double one_thread(const worker_t *w, int r, alloc_id_t a, int ncpus) {
  double first = phase_mpairs(w, r, 0, a);
  return ncpus > 1 ? (first + phase_mpairs(w, r, 1, a)) / 2 : first;
}

static void crew_run(size_t pairs, uint32_t **seqs, const int *cpus, int ncpus, crew_result_t *res) {
  worker_t *w = aligned_alloc(_Alignof(worker_t), MAX_THREADS * sizeof *w);
  if (!w) die("aligned_alloc", 0);
  memset(res, 0, sizeof *res);
  pthread_barrier_init(&gate, NULL, MAX_THREADS + 1);
  __atomic_store_n(&settled, false, __ATOMIC_RELEASE);
  calls_t mark = calls_now();
  for (int i = 0; i < MAX_THREADS; i++) {
    w[i] = (worker_t){.id = i,
                      .lane = {.sizes = seqs[i], .stream = new_stream()},
                      .pairs = pairs,
                      .cpu = ncpus ? cpus[i % ncpus] : -1};
    if (pthread_create(&w[i].tid, NULL, worker, &w[i])) die("pthread_create", 0);
  }
  int passes = 0;
  bool quiet;
  do {   /* one warm-up pass of every worker between two gates */
    pthread_barrier_wait(&gate);
    quiet = !busy(calls_since(mark));
    mark = calls_now();
    if (quiet || ++passes == WARM_MAX_THREADS) __atomic_store_n(&settled, true, __ATOMIC_RELEASE);
    pthread_barrier_wait(&gate);
  } while (!__atomic_load_n(&settled, __ATOMIC_ACQUIRE));
  for (int r = 0; r < opt.rounds; r++)
    for (int q = 0; q < PHASES; q++)
      for (int k = 0; k < NALLOC; k++) {
        calls_t before = calls_now();   /* the workers wait at the gate */
        pthread_barrier_wait(&gate);
        pthread_barrier_wait(&gate);
        if (alloc_at(r, k) == CA) calls_add(&res->calls[phase_at(r, q)], calls_since(before));
      }
  for (int i = 0; i < MAX_THREADS; i++) pthread_join(w[i].tid, NULL);
  for (int p = 0; p < PHASES; p++)
    for (int a = 0; a < NALLOC; a++) {
      double rate[MAX_ROUNDS], ratio[MAX_ROUNDS];
      for (int r = 0; r < opt.rounds; r++) {
        rate[r] = phase_mpairs(w, r, p, (alloc_id_t)a);
        ratio[r] = rate[r] / one_thread(w, r, (alloc_id_t)a, ncpus);
      }
      res->mpairs[p][a] = bench_median(rate, opt.rounds);
      res->scaling[p][a] = bench_median(ratio, opt.rounds);
    }
  for (int i = 0; i < MAX_THREADS; i++) drop_stream(w[i].lane.stream);
  free(w);
  pthread_barrier_destroy(&gate);
  if (quiet) snprintf(res->warm, sizeof res->warm, "%d pass%s", passes + 1, passes ? "es" : "");
  else snprintf(res->warm, sizeof res->warm, "not quiet within %d passes", WARM_MAX_THREADS);
}

static double two_thread_scaling[2];

static void threads_table(const char *name, int which, uint32_t lo, uint32_t hi, size_t pairs) {
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  int cpus[MAX_THREADS];
  int ncpus = bench_cpus(cpus);
  uint32_t *seqs[MAX_THREADS];
  for (int i = 0; i < MAX_THREADS; i++)
    if (!(seqs[i] = bench_sizes(SEQ, lo, hi, 100 + (uint64_t)i + 10 * (uint64_t)which))) die("malloc", 0);
  crew_result_t res;
  crew_run(pairs, seqs, cpus, ncpus, &res);
  printf("(c) threads, each with its own stream and its own %s sequence (16 live): %zu pairs per thread x %d "
         "rounds. Four workers, worker i pinned to the i-th of the %d CPUs this process may use (of %ld), in "
         "turn; each round runs, in an order rotated from round to round, one thread on each CPU alone, two, and "
         "four (beyond %d they share cores, and throughput cannot grow). \"x one thread\" is the median of the "
         "rounds' own ratios to the mean of that round's lone threads. cudalloc's warm-up (every worker): %s.\n\n",
         name, pairs, opt.rounds, ncpus, online, ncpus, res.warm);
  printf("| %s: threads | cudalloc Mpairs/s | x one thread | jemalloc Mpairs/s | x one thread | mimalloc Mpairs/s "
         "| x one thread | cudalloc backend calls, timed part |\n", name);
  printf("| --- | --- | --- | --- | --- | --- | --- | --- |\n");
  for (int p = 0; p < PHASES; p++) {
    if (p == 1 && ncpus < 2) continue;   /* the same CPU as the first */
    char label[32];
    if (phase_of[p].n == 1 && ncpus) snprintf(label, sizeof label, "1 (CPU %d)", cpus[phase_of[p].first % ncpus]);
    else snprintf(label, sizeof label, "%d", phase_of[p].n);
    const double *m = res.mpairs[p], *x = res.scaling[p];
    printf("| %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %" PRId64 " memory, %" PRId64 " events, %" PRId64
           " waits, %" PRId64 " slow paths |\n",
           label, m[CA], x[CA], m[JE], x[JE], m[MI], x[MI], res.calls[p].memory, res.calls[p].events,
           res.calls[p].waits, res.calls[p].slow);
  }
  printf("\n");
  two_thread_scaling[which] = res.scaling[2][CA];
  for (int i = 0; i < MAX_THREADS; i++) free(seqs[i]);
}

// ----------------------------------------------------------------------------
// Tracking depths side by side: the GPU-like cached pair under each `track`
// ----------------------------------------------------------------------------

#define TRACK_ROUNDS 3
#define TRACK_MODES 4

static const struct {
  const char *name, *conf;
} track_modes[TRACK_MODES] = {
  {"off", ",track:off"},
  {"caller (return address)", ",track:caller"},
  {"stack, 6 frames (default)", ",track:stack,track_depth:6"},
  {"backtrace, 16 frames (unwound every time)", ",track:backtrace,track_depth:16"},
};

/* One phase: the allocator started with the mode, warmed up on the
 * sequence until quiet, then `pairs` timed pairs. ns per pair. */
static double track_phase(int mode, const uint32_t *sizes, size_t pairs) {
  start(track_modes[mode].conf);
  lane_t *l = lanes_new(1, sizes, false, CLASSIC);
  calls_t warm;
  warm_cudalloc(l, 1, &warm);
  double t0 = bench_now_ns();
  pairs_on(l, 1, CA, pairs);
  double ns = (bench_now_ns() - t0) / (double)pairs;
  lanes_drop(l, 1);
  cudalloc_shutdown();
  return ns;
}

/* Each round runs the cheap modes once each, in an order rotated from the
 * last round's, so that a slow spell of the machine does not land on one
 * mode; each mode's figure against `caller` is the median of the rounds'
 * ratios. The backtrace reference runs once (its warm-up alone, 27 passes
 * of the sequence at ~2 us a pair, is most of the table's time), against
 * the median of caller's rounds. */
static void tracking_table(const uint32_t *sizes, size_t pairs) {
  double ns[TRACK_MODES][TRACK_ROUNDS];
  const int cheap = TRACK_MODES - 1;
  for (int r = 0; r < TRACK_ROUNDS; r++)
    for (int k = 0; k < cheap; k++) {
      int mode = (k + r) % cheap;
      ns[mode][r] = track_phase(mode, sizes, pairs);
    }
  double bt = track_phase(cheap, sizes, pairs / 4);
  printf("(f) call-site tracking on the GPU-like cached pair (512 B..8 MiB, 16 live): %zu pairs x %d rounds, "
         "modes in rotated order; vs caller = median of the rounds' ratios (backtrace: one round, %zu pairs).\n\n",
         pairs, TRACK_ROUNDS, pairs / 4);
  printf("| track | cudalloc ns/pair (median) | vs caller | design target |\n| --- | --- | --- | --- |\n");
  for (int m = 0; m < cheap; m++) {
    double ratio = round_ratio(ns[m], ns[1], TRACK_ROUNDS);
    printf("| %s | %.1f | %+.1f%% | %s |\n", track_modes[m].name, bench_median(ns[m], TRACK_ROUNDS),
           (ratio - 1) * 100, m == 2 ? "<= +10%" : "-");
  }
  printf("| %s | %.1f | %+.1f%% | - |\n\n", track_modes[cheap].name, bt,
         (bt / bench_median(ns[1], TRACK_ROUNDS) - 1) * 100);
}

// ----------------------------------------------------------------------------

/* Other work on the machine slows every side; the load says how much there was. */
static const char *loadavg(void) {
  static char buf[128];
  FILE *f = fopen("/proc/loadavg", "r");
  if (!f || !fgets(buf, sizeof buf, f)) snprintf(buf, sizeof buf, "unknown\n");
  if (f) fclose(f);
  return buf;
}

static void header(void) {
  const char *ver = "?";
  size_t sz = sizeof ver;
  mallctl("version", &ver, &sz, NULL, 0);
  char model[128] = "unknown CPU", line[256];
  FILE *f = fopen("/proc/cpuinfo", "r");
  while (f && fgets(line, sizeof line, f)) {
    char *colon = strchr(line, ':');
    if (!strncmp(line, "model name", 10) && colon) {
      snprintf(model, sizeof model, "%s", colon + 2);
      model[strcspn(model, "\n")] = 0;
      break;
    }
  }
  if (f) fclose(f);
  cpu_set_t set;
  int pinned = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : -1;
  printf("bench_alloc: cached alloc+free pairs, cudalloc (backend %s) vs jemalloc %.5s mallocx/dallocx vs mimalloc %d "
         "mi_malloc/mi_free\n", opt.cuda ? "cuda" : "sim", ver, mi_version());
  printf("machine: %ld CPUs (%s), this process may run on %d.%s\n", sysconf(_SC_NPROCESSORS_ONLN), model, pinned,
         opt.cuda ? "" : " CPU time on the simulated device: absolute times matter only on a GPU;"
                         " the ratios were measured side by side.");
  printf("load average at the start: %s", loadavg());
  printf("each figure: median of %d rounds; in each round the three allocators run the same sizes in turn (the "
         "order rotated every round); a window of %d live blocks, the oldest freed before each allocation.\n\n",
         opt.rounds, WINDOW);
}

static void summary(void) {
  printf("| benchmark | cudalloc ns/pair | jemalloc ns/pair | mimalloc ns/pair | cudalloc/jemalloc | target | "
         "cudalloc/mimalloc | cudalloc backend calls, timed part |\n");
  printf("| --- | --- | --- | --- | --- | --- | --- | --- |\n");
  for (int i = 0; i < nrows; i++) {
    row_t *r = &rows[i];
    char target[32] = "-";
    if (r->target > 0) snprintf(target, sizeof target, "<= %.2f", r->target);
    printf("| %s | %.1f | %.1f | %.1f | %.2f | %s | %.2f | %" PRId64 " |\n", r->name, r->ns[CA], r->ns[JE], r->ns[MI],
           r->vs_je, target, r->vs_mi, r->calls);
  }
  printf("\n");
}

/* ", with KEY:VALUE..." when --conf changed the configuration: a target's
 * row then names it (make bench runs the thread part again at arenas:1,
 * whose rows would otherwise read as the default's). */
static const char *conf_note(void) {
  static char note[300];
  if (!opt.conf || !*opt.conf) return "";
  snprintf(note, sizeof note, ", with %s", opt.conf + (opt.conf[0] == ','));
  return note;
}

static void targets(void) {
  printf("| target | figure | goal |\n| --- | --- | --- |\n");
  for (int i = 0; i < nrows; i++)
    if (rows[i].target > 0)
      printf("| %s, cudalloc/jemalloc%s | %.2f | <= %.2f |\n", rows[i].name, conf_note(), rows[i].vs_je,
             rows[i].target);
  if (opt.single) {
    printf("| %d streams / 1, tiny pair (%d x the working set: %d live per stream)%s | %.2f | <= %.1f |\n", STREAMS,
           STREAMS, WINDOW, conf_note(), streams_ratio[1], TARGET_STREAMS);
    printf("| %d streams / 1, GPU-like pair (%d x the working set)%s | %.2f | <= %.1f |\n", STREAMS, STREAMS,
           conf_note(), streams_ratio[0], TARGET_STREAMS);
    printf("| %d streams / 1, tiny pair, the same %d live blocks%s | %.2f | <= %.1f |\n", STREAMS, EQUAL_WINDOW,
           conf_note(), equal_ratio[1], TARGET_STREAMS);
    printf("| %d streams / 1, GPU-like pair, the same %d live blocks%s | %.2f | <= %.1f |\n", STREAMS, EQUAL_WINDOW,
           conf_note(), equal_ratio[0], TARGET_STREAMS);
  }
  if (opt.threads) {
    printf("| two threads / one, GPU-like sequence%s | %.2f | >= %.1f |\n", conf_note(), two_thread_scaling[0],
           TARGET_TWO_THREADS);
    printf("| two threads / one, tiny sequence%s | %.2f | >= %.1f |\n", conf_note(), two_thread_scaling[1],
           TARGET_TWO_THREADS);
  }
  printf("\n");
}

static void parse(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--backend") && i + 1 < argc) opt.cuda = !strcmp(argv[++i], "cuda");
    else if (!strcmp(argv[i], "--pairs") && i + 1 < argc) opt.pairs = strtoull(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) opt.rounds = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--tracking")) opt.tracking_only = true;
    else if (!strcmp(argv[i], "--conf") && i + 1 < argc) opt.conf = argv[++i];
    else if (!strcmp(argv[i], "--part") && i + 1 < argc) {
      const char *p = argv[++i];
      opt.streams_only = !strcmp(p, "streams");
      opt.single = !strcmp(p, "single") || !strcmp(p, "all") || opt.streams_only;
      opt.threads = !strcmp(p, "threads") || !strcmp(p, "all");
    } else {
      fprintf(stderr, "usage: bench_alloc [--backend sim|cuda] [--pairs N] [--rounds R] [--part single|threads|all|streams]"
                      " [--conf ,key:value...] [--tracking]\n");
      exit(2);
    }
  }
  if (opt.rounds < 1) opt.rounds = 1;
  if (opt.rounds > MAX_ROUNDS) opt.rounds = MAX_ROUNDS;
  if (opt.pairs < 1000) opt.pairs = 1000;
}

static void single_thread(void) {
  uint32_t *gpu = bench_named_sizes("gpu"), *tiny = bench_named_sizes("tiny"), *mix = bench_named_sizes("mix");
  if (!gpu || !tiny || !mix) die("malloc", 0);
  start("");
  if (opt.streams_only) {
    many_streams_figures(gpu, tiny);
    cudalloc_shutdown();
    free(gpu), free(tiny), free(mix);
    return;
  }
  row_t *gpu_caller = scenario("(a) GPU-like 512 B..8 MiB", gpu, opt.pairs, false, TARGET_GPU_RATIO);
  /* (a)'s sizes, small and large in turn: what (a)'s random order costs each allocator in branches */
  uint32_t *turns = bench_named_sizes("gpu-turns");
  if (!turns) die("malloc", 0);
  scenario("(a2) GPU-like, (a)'s sizes, <= 64 KiB and larger in turn", turns, opt.pairs, false, 0);
  free(turns);
  /* each side of that fork alone: where (a)'s ratio comes from */
  uint32_t *small = bench_named_sizes("gpu-small"), *large = bench_named_sizes("gpu-large");
  if (!small || !large) die("malloc", 0);
  scenario("(a<) GPU-like, (a)'s sizes <= 64 KiB alone", small, opt.pairs, false, 0);
  scenario("(a>) GPU-like, (a)'s sizes > 64 KiB alone", large, opt.pairs, false, 0);
  free(small), free(large);
  row_t *tiny_caller = scenario("(b) tiny 16 B..1 KiB", tiny, 4 * opt.pairs, false, TARGET_TINY_RATIO);
  scenario("(m) PyTorch-like mix, 4 B..128 MiB", mix, opt.pairs, false, TARGET_MIX_RATIO);
  scenario("(a, cudaFree) GPU-like, free_sync", gpu, opt.pairs, true, 0);
  many_streams_figures(gpu, tiny);
  cudalloc_shutdown();

  start(",track:off");
  row_t *gpu_off = scenario("(d) GPU-like, track:off", gpu, opt.pairs, false, 0);
  row_t *tiny_off = scenario("(d) tiny, track:off", tiny, 4 * opt.pairs, false, 0);
  cudalloc_shutdown();

  start(",track:backtrace");
  /* Tiny sizes: a backtrace costs the same at any size, and their warm-up is short. */
  row_t *tiny_bt = scenario("(e) tiny, track:backtrace", tiny, opt.pairs / 4, false, 0);
  cudalloc_shutdown();

  printf("call-site tracking, cudalloc ns/pair against track:off (phases of one run; design target for the "
         "default tracking: <= +5%%):\n  default (track:stack): GPU-like %+.1f%%, tiny %+.1f%%; "
         "backtrace (16 frames): tiny %+.1f%%\n\n",
         (gpu_caller->ns[CA] / gpu_off->ns[CA] - 1) * 100, (tiny_caller->ns[CA] / tiny_off->ns[CA] - 1) * 100,
         (tiny_bt->ns[CA] / tiny_off->ns[CA] - 1) * 100);
  tracking_table(gpu, opt.pairs / 2);
  free(gpu);
  free(tiny);
  free(mix);
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);   /* in order with cudalloc's messages on stderr */
  parse(argc, argv);
  header();
  if (opt.tracking_only) {
    uint32_t *gpu = bench_named_sizes("gpu");
    if (!gpu) die("malloc", 0);
    tracking_table(gpu, opt.pairs);
    free(gpu);
    return 0;
  }
  if (opt.single) single_thread();
  if (opt.threads) {
    start("");
    threads_table("GPU-like", 0, 512, 8u << 20, opt.pairs / 2);
    threads_table("tiny", 1, 16, 1024, 2 * opt.pairs);
    cudalloc_shutdown();
  }
  printf("load average at the end: %s\n", loadavg());
  if (opt.single) summary();
  targets();
  return 0;
}

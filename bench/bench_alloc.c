/* The cached alloc+free pair of cudalloc (libcudalloc.a, the public API)
 * against jemalloc's mallocx/dallocx, on the same size sequence, side by
 * side in one run. It prints figures; it passes or fails nothing.
 *
 *   build/bench/bench_alloc [--backend sim|cuda] [--pairs N] [--rounds R]
 *
 * Each scenario keeps a window of 16 live blocks: every pair frees the
 * oldest and allocates the next size of a seeded sequence (it repeats every
 * SEQ pairs). cudalloc's warm-up runs whole passes of the sequence until one
 * makes no backend call, so that the timed part measures the cached path;
 * the backend calls that cudalloc_get_stats counts over the timed part are
 * printed to show it, and so is how long the warm-up took. Each figure is
 * the median of R rounds, and in every round cudalloc and jemalloc run in
 * turn, so that a slow spell of the machine touches both. The thread
 * scenarios run the same way on 1, 2 and 4 threads, each with its own
 * stream. docs/benchmarks.md explains the figures. */
#define _GNU_SOURCE
#include <jemalloc/jemalloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <unistd.h>

#include "backend_sim.h"
#include "bench.h"
#include "cudalloc.h"

#define WINDOW 16
#define SEQ (1u << 16) /* sizes per sequence; the runs wrap around it */
#define MAX_ROUNDS 64
#define MAX_THREADS 4
#define WARM_MAX 40    /* passes of the sequence, at most, in the warm-up */
#define WARM_MAX_THREADS 8

typedef struct opts_s {
  bool cuda;
  bool tracking_only; /* --tracking: only the tracking-depth table */
  size_t pairs;       /* per round, GPU-like sequence; tiny sizes run 4x as many */
  int rounds;
} opts_t;

static opts_t opt = {false, false, 100000, 9};

/* Design targets (docs/benchmarks.md), printed next to the figures. */
#define TARGET_GPU_RATIO 0.25
#define TARGET_TINY_RATIO 4.0

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

typedef struct lane_s {
  const uint32_t *sizes;
  size_t next_ca, next_je;      /* each allocator's position in the sequence */
  void *live_ca[WINDOW], *live_je[WINDOW];
  cudaStream_t stream;
  bool free_sync;               /* cudaFree's promise instead of a stream-ordered free */
} lane_t;

static void cudalloc_pairs(lane_t *l, size_t n) {
  for (size_t i = 0; i < n; i++, l->next_ca++) {
    void **slot = &l->live_ca[l->next_ca % WINDOW];
    if (*slot) check(l->free_sync ? cudalloc_free_sync(*slot) : cudalloc_free(*slot, l->stream), "cudalloc_free");
    check(cudalloc_malloc(slot, l->sizes[l->next_ca % SEQ], l->stream), "cudalloc_malloc");
  }
}

static void jemalloc_pairs(lane_t *l, size_t n) {
  for (size_t i = 0; i < n; i++, l->next_je++) {
    void **slot = &l->live_je[l->next_je % WINDOW];
    if (*slot) dallocx(*slot, 0);
    if (!(*slot = mallocx(l->sizes[l->next_je % SEQ], 0))) die("mallocx", 0);
  }
}

static void lane_drain(lane_t *l) {
  for (int i = 0; i < WINDOW; i++) {
    if (l->live_ca[i]) check(cudalloc_free(l->live_ca[i], l->stream), "cudalloc_free");
    if (l->live_je[i]) dallocx(l->live_je[i], 0);
    l->live_ca[i] = l->live_je[i] = NULL;
  }
}

// ----------------------------------------------------------------------------
// Set-up: the allocator, streams, and what the backend did
// ----------------------------------------------------------------------------

static void start(const char *extra) {
  char conf[256];
  snprintf(conf, sizeof conf, "%s%s", opt.cuda ? "backend:cuda" : "backend:sim,sim_capacity_mb:4096", extra);
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

static void drop_stream(cudaStream_t s) {
  if (opt.cuda) cudaStreamDestroy(s);
  else ca_sim_stream_destroy(s);
}

/* Backend calls as cudalloc counts them, plus the current-device query of
 * every allocation, which it does not count (the simulation does). */
typedef struct calls_s {
  int64_t memory, events, waits, slow, get_device;
} calls_t;

static calls_t calls_now(void) {
  cudalloc_stats_t s;
  check(cudalloc_get_stats(0, &s), "cudalloc_get_stats");
  calls_t c = {s.backend_reserve.total + s.backend_va_free.total + s.backend_create.total +
                   s.backend_release.total + s.backend_map.total + s.backend_unmap.total +
                   s.backend_set_access.total,
               s.backend_event_record.total + s.backend_event_query.total, s.backend_sync.total,
               s.num_retries.total, opt.cuda ? -1 : (int64_t)ca_sim_calls(CA_OP_get_device)};
  return c;
}

static calls_t calls_since(calls_t a) {
  calls_t b = calls_now();
  return (calls_t){b.memory - a.memory, b.events - a.events, b.waits - a.waits, b.slow - a.slow,
                   opt.cuda ? -1 : b.get_device - a.get_device};
}

static bool busy(calls_t c) { return c.memory || c.events || c.waits || c.slow; }

/* cudalloc's warm-up: whole passes of the sequence until one makes no
 * backend call, or WARM_MAX passes. Returns the passes run; *during counts
 * the calls after the first pass (the first one fills the cache). */
static int warm_cudalloc(lane_t *l, calls_t *during) {
  calls_t first = calls_now(), c;
  int pass = 0;
  do {
    calls_t before = calls_now();
    cudalloc_pairs(l, SEQ);
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
  if (c.get_device >= 0)
    printf("; current-device queries %.2f per pair (not in the stats)\n", (double)c.get_device / pairs);
  else
    printf("; current-device queries not counted (cuda: cuCtxGetCurrent + cuCtxGetDevice per allocation)\n");
}

// ----------------------------------------------------------------------------
// Single-thread scenarios
// ----------------------------------------------------------------------------

typedef struct row_s {
  char name[96];
  double ca_ns, je_ns, ratio;
  double target;                /* cudalloc/jemalloc at most this; 0: none */
  int64_t calls;
} row_t;

static row_t rows[16];
static int nrows;

static void print_pair(const char *who, const double *ns, int n) {
  double lo = ns[0], hi = ns[0];
  for (int i = 1; i < n; i++) lo = ns[i] < lo ? ns[i] : lo, hi = ns[i] > hi ? ns[i] : hi;
  printf("  %-9s %8.1f ns/pair   (rounds: best %.1f, worst %.1f)\n", who, bench_median(ns, n), lo, hi);
}

/* The median of the rounds' own ratios: each round ran both allocators
 * back to back, so a slow spell of the machine touches both sides. */
static double round_ratio(const double *a, const double *b, int n) {
  double r[MAX_ROUNDS];
  for (int i = 0; i < n; i++) r[i] = a[i] / b[i];
  return bench_median(r, n);
}

/* Times `pairs` pairs of each allocator, in turn, for every round. */
static row_t *scenario(const char *name, const uint32_t *sizes, size_t pairs, bool free_sync, double target) {
  lane_t l = {.sizes = sizes, .stream = free_sync ? NULL : new_stream(), .free_sync = free_sync};
  double ca[MAX_ROUNDS], je[MAX_ROUNDS];
  calls_t warm;
  int passes = warm_cudalloc(&l, &warm);
  jemalloc_pairs(&l, 2 * SEQ);
  calls_t before = calls_now();
  for (int r = 0; r < opt.rounds; r++) {
    double t0 = bench_now_ns();
    cudalloc_pairs(&l, pairs);
    double t1 = bench_now_ns();
    jemalloc_pairs(&l, pairs);
    double t2 = bench_now_ns();
    ca[r] = (t1 - t0) / (double)pairs;
    je[r] = (t2 - t1) / (double)pairs;
  }
  calls_t c = calls_since(before);
  lane_drain(&l);
  if (l.stream) drop_stream(l.stream);
  row_t *row = &rows[nrows++];
  snprintf(row->name, sizeof row->name, "%s", name);
  row->ca_ns = bench_median(ca, opt.rounds);
  row->je_ns = bench_median(je, opt.rounds);
  row->ratio = round_ratio(ca, je, opt.rounds);
  row->target = target;
  row->calls = c.memory + c.events + c.waits;
  printf("%s: %zu pairs x %d rounds\n", name, pairs, opt.rounds);
  print_warm(passes, warm);
  print_pair("cudalloc", ca, opt.rounds);
  print_pair("jemalloc", je, opt.rounds);
  printf("  ratio cudalloc/jemalloc = %.2f (median of the rounds' ratios)", row->ratio);
  if (target > 0) printf("   (design target <= %.2f)", target);
  printf("\n");
  print_calls(c, (double)pairs * opt.rounds);
  printf("\n");
  return row;
}

// ----------------------------------------------------------------------------
// Threads: each with its own stream and sequence
// ----------------------------------------------------------------------------

typedef struct worker_s {
  pthread_t tid;
  lane_t lane;
  size_t pairs;
  double ca_ns[MAX_ROUNDS], je_ns[MAX_ROUNDS];   /* this thread's time per round */
  double ca_t[MAX_ROUNDS][2], je_t[MAX_ROUNDS][2]; /* its start and end */
} worker_t;

static pthread_barrier_t gate;
static bool settled;

static void *worker(void *arg) {
  worker_t *w = arg;
  jemalloc_pairs(&w->lane, 2 * SEQ);
  do {   /* passes of every thread together, until one makes no backend call */
    cudalloc_pairs(&w->lane, SEQ);
    pthread_barrier_wait(&gate);
    pthread_barrier_wait(&gate);                /* main has looked at the stats */
  } while (!__atomic_load_n(&settled, __ATOMIC_ACQUIRE));
  for (int r = 0; r < opt.rounds; r++) {
    pthread_barrier_wait(&gate);
    w->ca_t[r][0] = bench_now_ns();
    cudalloc_pairs(&w->lane, w->pairs);
    w->ca_t[r][1] = bench_now_ns();
    w->ca_ns[r] = w->ca_t[r][1] - w->ca_t[r][0];
    pthread_barrier_wait(&gate);
    pthread_barrier_wait(&gate);
    w->je_t[r][0] = bench_now_ns();
    jemalloc_pairs(&w->lane, w->pairs);
    w->je_t[r][1] = bench_now_ns();
    w->je_ns[r] = w->je_t[r][1] - w->je_t[r][0];
    pthread_barrier_wait(&gate);
  }
  lane_drain(&w->lane);
  return NULL;
}

/* From the first thread's start to the last one's end: the threads' own
 * clocks, since the main thread may wake up late from a barrier. */
static double wall_ns(const worker_t *w, int n, int r, bool ca) {
  double lo = ca ? w[0].ca_t[r][0] : w[0].je_t[r][0], hi = ca ? w[0].ca_t[r][1] : w[0].je_t[r][1];
  for (int i = 1; i < n; i++) {
    const double *t = ca ? w[i].ca_t[r] : w[i].je_t[r];
    lo = t[0] < lo ? t[0] : lo;
    hi = t[1] > hi ? t[1] : hi;
  }
  return hi - lo;
}

/* Mean over threads of the median over rounds. */
static double per_thread_ns(worker_t *w, int n, bool ca) {
  double sum = 0;
  for (int i = 0; i < n; i++) sum += bench_median(ca ? w[i].ca_ns : w[i].je_ns, opt.rounds) / (double)w[i].pairs;
  return sum / n;
}

static void threads_run(int n, size_t pairs, uint32_t **seqs) {
  worker_t w[MAX_THREADS];
  double wall_ca[MAX_ROUNDS], wall_je[MAX_ROUNDS];
  pthread_barrier_init(&gate, NULL, (unsigned)n + 1);
  __atomic_store_n(&settled, false, __ATOMIC_RELEASE);
  calls_t mark = calls_now(), c;
  for (int i = 0; i < n; i++) {
    w[i] = (worker_t){.lane = {.sizes = seqs[i], .stream = new_stream()}, .pairs = pairs};
    if (pthread_create(&w[i].tid, NULL, worker, &w[i])) die("pthread_create", 0);
  }
  int passes = 0;
  bool quiet;
  do {   /* one warm-up pass of every thread between two gates */
    pthread_barrier_wait(&gate);
    quiet = !busy(calls_since(mark));
    mark = calls_now();
    if (quiet || ++passes == WARM_MAX_THREADS) __atomic_store_n(&settled, true, __ATOMIC_RELEASE);
    pthread_barrier_wait(&gate);
  } while (!__atomic_load_n(&settled, __ATOMIC_ACQUIRE));
  for (int r = 0; r < opt.rounds; r++) {
    pthread_barrier_wait(&gate);
    pthread_barrier_wait(&gate);
    if (r == opt.rounds - 1) c = calls_since(mark);   /* workers wait at the gate */
    pthread_barrier_wait(&gate);
    pthread_barrier_wait(&gate);
  }
  for (int i = 0; i < n; i++) pthread_join(w[i].tid, NULL);
  for (int r = 0; r < opt.rounds; r++) {
    wall_ca[r] = wall_ns(w, n, r, true);
    wall_je[r] = wall_ns(w, n, r, false);
  }
  for (int i = 0; i < n; i++) drop_stream(w[i].lane.stream);
  pthread_barrier_destroy(&gate);
  double total = (double)pairs * n;
  double ca_tp = total / bench_median(wall_ca, opt.rounds) * 1e3;   /* pairs per ns x 1e3: Mpairs/s */
  double je_tp = total / bench_median(wall_je, opt.rounds) * 1e3;
  double ca_ns = per_thread_ns(w, n, true), je_ns = per_thread_ns(w, n, false);
  char warm[48];
  if (quiet) snprintf(warm, sizeof warm, "%d", passes + 1);
  else snprintf(warm, sizeof warm, "not within %d", WARM_MAX_THREADS);
  printf("| %d | %.1f | %.2f | %.1f | %.2f | %.2f | %s | %" PRId64 " memory, %" PRId64 " events, %" PRId64
         " waits, %" PRId64 " slow paths |\n",
         n, ca_ns, ca_tp, je_ns, je_tp, ca_ns / je_ns, warm, c.memory, c.events, c.waits, c.slow);
}

static void threads_table(size_t pairs) {
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  uint32_t *seqs[MAX_THREADS];
  for (int i = 0; i < MAX_THREADS; i++)
    if (!(seqs[i] = bench_sizes(SEQ, 512, 8u << 20, 100 + (uint64_t)i))) die("malloc", 0);
  printf("(c) threads, each with its own stream and its own GPU-like sequence (512 B..8 MiB, 16 live): "
         "%zu pairs per thread x %d rounds.\n"
         "    This machine has %ld CPUs: beyond %ld threads they share cores, so per-thread time grows "
         "and throughput cannot.\n\n",
         pairs, opt.rounds, cpus, cpus);
  printf("| threads | cudalloc ns/pair (per thread) | cudalloc Mpairs/s (all) | jemalloc ns/pair (per thread) "
         "| jemalloc Mpairs/s (all) | ratio | warm-up passes until quiet | cudalloc backend calls, timed part |\n");
  printf("| --- | --- | --- | --- | --- | --- | --- | --- |\n");
  for (int n = 1; n <= MAX_THREADS; n *= 2) threads_run(n, pairs, seqs);
  printf("\n");
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
  lane_t l = {.sizes = sizes, .stream = new_stream()};
  calls_t warm;
  warm_cudalloc(&l, &warm);
  double t0 = bench_now_ns();
  cudalloc_pairs(&l, pairs);
  double ns = (bench_now_ns() - t0) / (double)pairs;
  lane_drain(&l);
  drop_stream(l.stream);
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

/* Other work on the machine slows both sides; the load says how much there was. */
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
  printf("bench_alloc: cached alloc+free pairs, cudalloc (backend %s) vs jemalloc %.5s mallocx/dallocx\n",
         opt.cuda ? "cuda" : "sim", ver);
  printf("machine: %ld CPUs (%s).%s\n", sysconf(_SC_NPROCESSORS_ONLN), model,
         opt.cuda ? "" : " CPU time on the simulated device: absolute times matter only on a GPU;"
                         " the ratios were measured side by side.");
  printf("load average at the start: %s", loadavg());
  printf("each figure: median of %d rounds; in each round cudalloc, then jemalloc, run the same sizes; "
         "a window of %d live blocks, the oldest freed before each allocation.\n\n", opt.rounds, WINDOW);
}

static void summary(void) {
  printf("| benchmark | cudalloc ns/pair | jemalloc ns/pair | cudalloc/jemalloc | design target | "
         "cudalloc backend calls, timed part |\n");
  printf("| --- | --- | --- | --- | --- | --- |\n");
  for (int i = 0; i < nrows; i++) {
    row_t *r = &rows[i];
    char target[32] = "-";
    if (r->target > 0) snprintf(target, sizeof target, "<= %.2f", r->target);
    printf("| %s | %.1f | %.1f | %.2f | %s | %" PRId64 " |\n", r->name, r->ca_ns, r->je_ns, r->ratio,
           target, r->calls);
  }
}

static void parse(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--backend") && i + 1 < argc) opt.cuda = !strcmp(argv[++i], "cuda");
    else if (!strcmp(argv[i], "--pairs") && i + 1 < argc) opt.pairs = strtoull(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) opt.rounds = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--tracking")) opt.tracking_only = true;
    else {
      fprintf(stderr, "usage: bench_alloc [--backend sim|cuda] [--pairs N] [--rounds R] [--tracking]\n");
      exit(2);
    }
  }
  if (opt.rounds < 1) opt.rounds = 1;
  if (opt.rounds > MAX_ROUNDS) opt.rounds = MAX_ROUNDS;
  if (opt.pairs < 1000) opt.pairs = 1000;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);   /* in order with cudalloc's messages on stderr */
  parse(argc, argv);
  uint32_t *gpu = bench_sizes(SEQ, 512, 8u << 20, 1), *tiny = bench_sizes(SEQ, 16, 1024, 2);
  if (!gpu || !tiny) die("malloc", 0);
  header();
  if (opt.tracking_only) {
    tracking_table(gpu, opt.pairs);
    free(gpu);
    free(tiny);
    return 0;
  }

  start("");
  row_t *gpu_caller = scenario("(a) GPU-like 512 B..8 MiB", gpu, opt.pairs, false, TARGET_GPU_RATIO);
  row_t *tiny_caller = scenario("(b) tiny 16 B..1 KiB", tiny, 4 * opt.pairs, false, TARGET_TINY_RATIO);
  scenario("(a, cudaFree) GPU-like, free_sync", gpu, opt.pairs, true, 0);
  threads_table(opt.pairs / 2);
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
         "return address: <= +5%%):\n  return address (default): GPU-like %+.1f%%, tiny %+.1f%%; "
         "backtrace (16 frames): tiny %+.1f%%\n\n",
         (gpu_caller->ca_ns / gpu_off->ca_ns - 1) * 100, (tiny_caller->ca_ns / tiny_off->ca_ns - 1) * 100,
         (tiny_bt->ca_ns / tiny_off->ca_ns - 1) * 100);

  tracking_table(gpu, opt.pairs / 2);
  printf("load average at the end: %s\n", loadavg());
  summary();
  free(gpu);
  free(tiny);
  return 0;
}

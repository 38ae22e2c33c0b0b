/* Threads stress: blocks cross threads and streams. Every worker allocates
 * on its own stream and writes a cookie (its id, a sequence number, a
 * pattern) over the head and tail of each block; blocks are handed to
 * other threads through a mailbox and freed there, on the freeing
 * thread's stream (a cross-stream free) or with cudaFree's promise; in the
 * many-streams run each worker turns over six streams, frees small blocks
 * of its own (front-cache frees) and renews a stream of its own, while the
 * "device" thread disturbs every cache (stress_on's test says how). A
 * "device" thread completes the simulated streams' work at random, so
 * fences seal and complete while the workers run. A cookie that changed
 * between allocation and free means two live blocks overlapped. Run under
 * ThreadSanitizer and AddressSanitizer by make test-tsan / test-asan. */
#include "core_testing.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#define WORKERS 4
#define ROUNDS 4000
#define MAILBOX 16
#define COOKIE 48
#define LANES 6       /* streams per worker in the many-streams run */

typedef struct cookie_s {
  uint32_t owner, seq;
  size_t size;
} cookie_t;

static struct {
  pthread_mutex_t lock;
  void *slot[MAILBOX];
} mailbox = {.lock = PTHREAD_MUTEX_INITIALIZER};

static ca_stream_t streams[WORKERS][LANES];
static int lanes = 1;   /* streams each worker allocates and frees on, in turn */
static int running;
static bool disturbing; /* the many-streams run's disturbances (device() and worker()) */
#define DISTURBANCES 8
static int disturbed[DISTURBANCES];   /* how often device() made each (atomic: the workers read them) */
static int disturb_failed;            /* and how often one failed */
static char demand_report[96];        /* a file the reports asked by signal write ("": none asked) */
/* Past its rounds, a disturbed worker goes on until every disturbance has
 * been made and a report asked by signal has been written while it ran, up
 * to EXTRA_ROUNDS times its rounds: the run checks both, and on a loaded
 * machine the device thread, which yields at every turn, could be starved
 * while the workers' rounds ended in 0.12 s (a fuzzer on one of the two
 * CPUs: two runs in three failed with kinds never made). */
#define EXTRA_ROUNDS 100
static bool disturbed_enough(void) {
  for (int k = 0; k < DISTURBANCES; k++)
    if (!__atomic_load_n(&disturbed[k], __ATOMIC_ACQUIRE)) return false;
  return !demand_report[0] || access(demand_report, F_OK) == 0;
}

static size_t cookie_len(size_t size) { return size < COOKIE ? size : COOKIE; }

static void stamp(unsigned char *p, size_t size, uint32_t owner, uint32_t seq) {
  cookie_t c = {owner, seq, size};
  size_t n = cookie_len(size);
  memset(p, (int)(owner * 17 + seq), n);
  memset(p + size - n, (int)(owner * 17 + seq), n);
  if (size >= sizeof c) memcpy(p, &c, sizeof c);
}

/* true when the block still holds the cookie stamped at allocation. */
static bool intact(const unsigned char *p, size_t size) {
  cookie_t c;
  size_t n = cookie_len(size);
  if (size < sizeof c) return true;   /* too small to name its owner */
  memcpy(&c, p, sizeof c);
  if (c.size != size) return false;
  unsigned char v = (unsigned char)(c.owner * 17 + c.seq);
  for (size_t i = sizeof c; i < n; i++)
    if (p[i] != v) return false;
  for (size_t i = size - n > sizeof c ? size - n : sizeof c; i < size; i++)
    if (p[i] != v) return false;
  return true;
}

typedef struct worker_s {
  uint32_t id;
  uint64_t rng;
  uint32_t rounds;
  int broken, failed;
  ca_stream_t own;   /* a stream the worker alone uses, destroyed and made again */
  int renewed;
} worker_t;

static ca_stream_t lane_of(const worker_t *w, uint64_t r) { return streams[w->id][r % (uint64_t)lanes]; }

static size_t block_size(uint64_t r) { return r % 8 ? 24 + (r >> 8) % 60000 : (1u << 20) + (r >> 8) % (3u << 20); }

static void release(worker_t *w, void *p, uint64_t r) {
  cookie_t c;
  memcpy(&c, p, sizeof c);
  if (!intact(p, c.size)) w->broken++;
  cudaError_t err = r % 3 ? cudalloc_free(p, (cudaStream_t)lane_of(w, r >> 2)) : cudalloc_free_sync(p);
  if (err != cudaSuccess) w->failed++;
}

/* The worker's own stream goes (its cached blocks with it) and a new one
 * comes, while other threads' flushes run. */
static void drop_own_stream(worker_t *w) {
  ca_stream_destroyed(w->own);
  if (ca_sim_stream_destroy(w->own) != CUDA_SUCCESS) w->failed++;
  w->own = NULL;
}

static void renew_own_stream(worker_t *w) {
  if (w->own) drop_own_stream(w);
  if (ca_sim_stream_create(&w->own, w->id % 2) != CUDA_SUCCESS) w->failed++;
  ca_stream_created(w->own, w->id % 2);
  w->renewed++;
}

/* A small block on stream, stamped (NULL: the call failed, counted). */
static void *small_block(worker_t *w, uint64_t r, uint32_t seq, ca_stream_t stream, size_t *size) {
  void *p = NULL;
  *size = 24 + r % 8000;
  if (cudalloc_malloc(&p, *size, (cudaStream_t)stream) != cudaSuccess) {
    w->failed++;
    return NULL;
  }
  stamp(p, *size, w->id, seq);
  return p;
}

/* A small block on the worker's own stream, freed there: a front-cache pair. */
static void own_pair(worker_t *w, uint64_t r, uint32_t seq) {
  size_t small;
  void *p = small_block(w, r, seq, w->own, &small);
  if (!p) return;
  if (!intact(p, small)) w->broken++;
  void *base = NULL;
  size_t range = 0;   /* asked with every cache held still, while the other workers hit */
  if (cudalloc_get_address_range(p, &base, &range) != cudaSuccess || base != p || range != small) w->failed++;
  if (cudalloc_free(p, (cudaStream_t)w->own) != cudaSuccess) w->failed++;
}

static void *worker(void *arg) {
  worker_t *w = arg;
  if (disturbing) {
    ca_sim_thread_init();   /* the device's context current here, as a program's thread makes it */
    renew_own_stream(w);
  }
  for (uint32_t seq = 0; seq < w->rounds || (disturbing && seq < EXTRA_ROUNDS * w->rounds && !disturbed_enough()); seq++) {
    uint64_t r = rng_next(&w->rng);
    size_t size = block_size(r);
    void *p = NULL;
    if (cudalloc_malloc(&p, size, (cudaStream_t)lane_of(w, r >> 4)) != cudaSuccess) {
      w->failed++;
      continue;
    }
    stamp(p, size, w->id, seq);
    pthread_mutex_lock(&mailbox.lock);   /* swap with whatever another thread left */
    int k = (int)((r >> 40) % MAILBOX);
    void *other = mailbox.slot[k];
    mailbox.slot[k] = p;
    pthread_mutex_unlock(&mailbox.lock);
    if (other) release(w, other, r >> 20);
    /* sometimes freed where it was made, on the thread's own streams: front-cache frees */
    size_t small;
    void *mine;
    if (lanes > 1 && r % 4 == 0 && (mine = small_block(w, r >> 12, seq, lane_of(w, r >> 6), &small)))
      release(w, mine, r >> 24);
    if (disturbing) {
      own_pair(w, r >> 20, seq);
      if (seq % 256 == 255) renew_own_stream(w);
    }
  }
  if (disturbing) drop_own_stream(w);
  return NULL;
}

/* What another thread does to the caches while the workers run: empties
 * them, folds their counts into the statistics, checks the invariants,
 * writes the reports (which hold every cache still), ends a step, resets
 * the peaks, prints the statistics or raises the report signal (whose
 * reports some thread's next allocation or free writes). */
static bool disturb(uint64_t r) {
  static FILE *sink;
  cudalloc_stats_t st;
  int kind = (int)(r % DISTURBANCES);
  __atomic_add_fetch(&disturbed[kind], 1, __ATOMIC_RELEASE);
  if (!sink && !(sink = fopen("/dev/null", "w"))) return false;   /* what the reports and the table are written to */
  switch (kind) {
  case 0: return cudalloc_empty_cache() == cudaSuccess;
  case 1: return cudalloc_get_stats(0, &st) == cudaSuccess && st.allocated_bytes.current >= 0;
  case 2: return cudalloc_check() == 0;
  case 3: cudalloc_report(sink); return true;
  case 4: cudalloc_step(); return true;
  case 5: cudalloc_reset_peaks(); return true;
  case 7: return kill(getpid(), SIGUSR2) == 0;
  default: cudalloc_print_stats(sink); return true;
  }
}

static void *device(void *arg) {
  uint64_t rng = (uint64_t)(uintptr_t)arg;
  while (__atomic_load_n(&running, __ATOMIC_ACQUIRE)) {
    uint64_t r = rng_next(&rng);
    ca_sim_stream_complete(streams[r % WORKERS][(r >> 8) % (uint64_t)lanes]);
    if (rng_next(&rng) % 8 == 0) ca_sim_stream_complete(CA_STREAM_LEGACY);
    if (disturbing && r % 16 == 0 && !disturb(r >> 16)) disturb_failed++;   /* every cache, from outside */
    sched_yield();
  }
  return NULL;
}

TestSuite(stress_threads, .fini = cudalloc_shutdown, .timeout = 300);

static void stress_on(const char *conf, int nlanes, bool disturb_them) {
  SKIP_ON_CUDA("the simulated device's manual events");
  core_start(conf);
  lanes = nlanes, disturbing = disturb_them, disturb_failed = 0;
  memset(disturbed, 0, sizeof disturbed);
  uint64_t hits = ca_debug.tcache_hits;
  for (int i = 0; i < WORKERS; i++)
    for (int k = 0; k < lanes; k++) {
      streams[i][k] = test_stream((i + k) % 2);
      ca_stream_created(streams[i][k], (i + k) % 2);
    }
  /* The many-streams run's workers come in two waves: the first ones exit
   * (their caches with them) while blocks they made wait in the mailbox and
   * other threads' flushes run. */
  int waves = disturbing ? 2 : 1;
  worker_t w[2][WORKERS];
  pthread_t t[WORKERS], dev;
  __atomic_store_n(&running, 1, __ATOMIC_RELEASE);
  pthread_create(&dev, NULL, device, (void *)(uintptr_t)99);
  for (int v = 0; v < waves; v++) {
    for (int i = 0; i < WORKERS; i++) {
      w[v][i] = (worker_t){.id = (uint32_t)i, .rng = 500 + (uint64_t)(v * WORKERS + i), .rounds = ROUNDS / (uint32_t)waves};
      pthread_create(&t[i], NULL, worker, &w[v][i]);
    }
    for (int i = 0; i < WORKERS; i++) pthread_join(t[i], NULL);
  }
  __atomic_store_n(&running, 0, __ATOMIC_RELEASE);
  pthread_join(dev, NULL);
  for (int k = 0; disturbing && k < DISTURBANCES; k++)
    cr_expect_gt(disturbed[k], 0, "disturbance %d never ran while the workers did", k);
  cr_expect_eq(disturb_failed, 0, "%d disturbances failed while the workers ran", disturb_failed);
  cr_expect_gt(ca_debug.tcache_hits, hits, "no request was served by a front cache: the run tests the core alone");
  worker_t last = {.id = 0};
  for (int k = 0; k < MAILBOX; k++)
    if (mailbox.slot[k]) release(&last, mailbox.slot[k], 1), mailbox.slot[k] = NULL;
  for (int v = 0; v < waves; v++)
    for (int i = 0; i < WORKERS; i++) {
      worker_t *x = &w[v][i];
      cr_expect_eq(x->broken, 0, "worker %d.%d found %d blocks whose cookie changed", v, i, x->broken);
      cr_expect_eq(x->failed, 0, "worker %d.%d saw %d failed calls", v, i, x->failed);
      cr_expect(!disturbing || x->renewed > 1, "worker %d.%d never made its own stream again", v, i);
    }
  cr_assert_eq(last.broken + last.failed, 0);
  CHECK_CONSISTENT();
  cudalloc_stats_t s = stats0();
  cr_assert_eq(s.allocated_bytes.current, 0);
  cr_assert_eq(s.num_allocs.total, s.num_frees.total);
}

static void stress(const char *conf) { stress_on(conf, 1, false); }

Test(stress_threads, blocks_cross_threads_and_streams) { stress("sim_events:manual,sim_capacity_mb:512"); }

/* Each thread on six streams and one of its own that it destroys and
 * makes again, its front cache small enough to refuse and trim (a cap for
 * each of up to four streams' lists) and its large classes on (blocks of 1
 * to 4 MiB are cached too), threads that exit halfway, while
 * another thread empties every cache, reads the statistics, checks the
 * invariants, writes the reports, ends steps, resets the peaks, prints
 * the statistics and asks for the reports by signal (SIGUSR2 to the
 * process: any thread may take it, a worker in the middle of a hit
 * included), and the workers ask their blocks' ranges: the caches'
 * lists, held entries and caps change under their owners' hits and frees. */
Test(stress_threads, many_streams_a_thread_while_caches_are_disturbed) {
  char dir[64] = "/tmp/cudalloc-stress-XXXXXX", conf[256], leaks[96];
  cr_assert_not_null(mkdtemp(dir));
  snprintf(conf, sizeof conf,
           "sim_events:manual,sim_capacity_mb:512,thread_cache_kb:64,thread_cache_streams:4,thread_cache_large_mb:16,"
           "report_signal:SIGUSR2,report:%s/r",
           dir);
  snprintf(leaks, sizeof leaks, "%s/r-leaks.txt", dir);
  snprintf(demand_report, sizeof demand_report, "%s", leaks);
  capture_t c;   /* the reports asked by signal print their tables on stderr */
  capture_begin(&c);
  stress_on(conf, LANES, true);
  demand_report[0] = 0;
  bool written = access(leaks, F_OK) == 0;   /* before the shutdown's own reports */
  cudalloc_shutdown();
  char *out = capture_end_all(&c);
  cr_expect_gt(count_of(out, "cudalloc: report on demand"), 0, "no report asked by signal was written while the workers ran");
  free(out);
  cr_expect(written, "%s was not written while the workers ran", leaks);
  static const char *files[] = {"r-leaks.txt", "r-leaks.json", "r-peak.txt", "r-stats.json"};
  for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, files[i]);
    unlink(path);
  }
  cr_expect_eq(rmdir(dir), 0, "%s holds other files", dir);
}

Test(stress_threads, blocks_cross_threads_and_streams_classic) {
  stress("sim_events:manual,sim_capacity_mb:512,expandable_segments:false");
}

/* The cookie check is what finds overlap: a cookie overwritten by another
 * block's stamp is reported. */
Test(stress_threads, an_overwritten_cookie_is_caught) {
  unsigned char a[256];
  stamp(a, sizeof a, 1, 2);
  cr_assert(intact(a, sizeof a));
  stamp(a + 128, 128, 3, 4);   /* a second block laid over the tail */
  cr_assert_not(intact(a, sizeof a));
}

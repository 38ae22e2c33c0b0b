/* Arenas (alloc/arena.c): with arenas:N a device is N sibling devices.
 * Two streams land in two arenas, a block goes back to its own arena
 * whoever frees it, the ordinal's statistics and free memory are the sums
 * of its arenas', the cap is the ordinal's (an arena short of memory takes
 * what a sibling caches before it admits out-of-memory), and a random
 * workload of threads and streams keeps the reuse oracle silent and
 * cudalloc_check clean. The planted faults: arena_cap_per_arena (each
 * arena charged against the whole limit alone: the sum passes it),
 * arena_no_sibling_trim (a spurious out-of-memory), arena_no_fold (the
 * ordinal reads its arena 0 alone). */
#include "arena_testing.h"

#include <pthread.h>

TestSuite(core_arenas, .fini = core_fini, .timeout = 120);

#define CHECKED() cr_assert_eq(cudalloc_check(), 0, "cudalloc_check found a broken invariant")

// ----------------------------------------------------------------------------
// Routing, and frees by address
// ----------------------------------------------------------------------------

typedef struct {
  ca_stream_t stream;
  void *p;          /* allocated on stream by the thread */
  void *free_this;  /* another's block, freed on stream by the thread */
} thread_job_t;

static void *thread_job(void *arg) {
  thread_job_t *j = arg;
  ca_state.be->set_device(0);
  if (j->free_this) cr_assert_eq(cudalloc_free(j->free_this, (cudaStream_t)j->stream), cudaSuccess);
  j->p = alloc_on(3 * MiB, j->stream);
  return NULL;
}

Test(core_arenas, two_streams_land_in_two_arenas_and_blocks_go_home) {
  core_start("arenas:2,arena_spread:first");
  ca_stream_t s1 = test_stream(false), s2 = test_stream(false);
  void *a = alloc_on(1 * MiB, s1);
  void *b = alloc_on(1 * MiB, s2);
  CHECKED();
  cr_assert_eq(arena_of(a)->arena, 0, "the first stream seen: arena 0");
  cr_assert_eq(arena_of(b)->arena, 1, "the second: arena 1");
  cr_assert_eq(arena_of(alloc_on(200 << 10, s1))->arena, 0, "a stream stays in its arena");
  /* freed on the other stream: back to its own arena, not the freeing stream's */
  int64_t in0 = arena(0)->stats.allocated_bytes.current, in1 = arena(1)->stats.allocated_bytes.current;
  cr_assert_eq(cudalloc_free(a, (cudaStream_t)s2), cudaSuccess);
  CHECKED();
  cr_assert_eq(arena(0)->stats.allocated_bytes.current, in0 - (int64_t)(1 * MiB), "arena 0 got its block back");
  cr_assert_eq(arena(1)->stats.allocated_bytes.current, in1, "arena 1 is untouched");
  /* a thread of its own: a stream of its own is a first sight, the next arena
   * (the third first sight: arena 0); it frees arena 1's block meanwhile */
  thread_job_t j = {.stream = test_stream(false), .free_this = b};
  pthread_t t;
  pthread_create(&t, NULL, thread_job, &j);
  pthread_join(t, NULL);
  CHECKED();
  cr_assert_eq(arena(1)->stats.allocated_bytes.current, in1 - (int64_t)(1 * MiB), "arena 1 got its block back");
  cr_assert_eq(arena_of(j.p)->arena, 0, "the third first sight: arena 0 again");
  cr_assert_eq(cudalloc_free_sync(j.p), cudaSuccess);
  CHECKED();
}

/* Two threads, each on its own stream, never share an arena (round-robin
 * at first sight: a hash of the streams would put them together half the
 * time). */
Test(core_arenas, two_threads_on_their_streams_take_two_arenas) {
  core_start("arenas:2,arena_spread:first");
  thread_job_t j[2] = {{.stream = test_stream(false)}, {.stream = test_stream(true)}};
  pthread_t t[2];
  for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, thread_job, &j[i]);
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  cr_assert_neq(arena_of(j[0].p), arena_of(j[1].p), "both threads in one arena");
  CHECKED();
}

/* arenas:1 is today's allocator: a second stream shares the device. */
Test(core_arenas, one_arena_is_the_device) {
  core_start("");
  void *a = alloc_on(1 * MiB, test_stream(false)), *b = alloc_on(1 * MiB, test_stream(false));
  cr_assert_eq(arena_of(a), arena_of(b));
  cr_assert_eq(arena_of(a), dev0());
  cr_assert_null(arena(1));
}

// ----------------------------------------------------------------------------
// Folds
// ----------------------------------------------------------------------------

/* Blocks live in both arenas, and cached memory in both. */
static void two_arenas_busy(void **keep) {
  ca_stream_t s1 = test_stream(false), s2 = test_stream(false);
  keep[0] = alloc_on(5 * MiB, s1);
  keep[1] = alloc_on(7 * MiB, s2);
  cr_assert_eq(cudalloc_free(alloc_on(9 * MiB, s1), (cudaStream_t)s1), cudaSuccess);
  cr_assert_eq(cudalloc_free(alloc_on(11 * MiB, s2), (cudaStream_t)s2), cudaSuccess);
  cr_assert_eq(arena_of(keep[0])->arena, 0);
  cr_assert_eq(arena_of(keep[1])->arena, 1);
}

/* The ordinal's figures against its arenas' (read directly: one thread). */
static bool stats_are_the_sums(void) {
  cudalloc_stats_t s = stats0();
  const cudalloc_stats_t *a = &arena(0)->stats, *b = &arena(1)->stats;
  return s.allocated_bytes.current == a->allocated_bytes.current + b->allocated_bytes.current &&
         s.reserved_bytes.current == a->reserved_bytes.current + b->reserved_bytes.current &&
         s.num_allocs.current == a->num_allocs.current + b->num_allocs.current &&
         s.backend_create.current == a->backend_create.current + b->backend_create.current;
}

/* Everything freed and settled: memGetInfo says every byte is free when it
 * counts what both arenas could give back. */
static bool free_memory_counts_both(void **keep) {
  cr_assert_eq(cudalloc_free_sync(keep[0]), cudaSuccess);
  cr_assert_eq(cudalloc_free_sync(keep[1]), cudaSuccess);
  size_t free_b, total;
  cr_assert_eq(ca_mem_get_info(0, &free_b, &total), CUDA_SUCCESS);
  return free_b == total;
}

Test(core_arenas, the_ordinals_figures_are_the_sums) {
  core_start("arenas:2,arena_spread:first,sim_events:auto");
  void *keep[2];
  two_arenas_busy(keep);
  CHECKED();
  cr_assert(arena(1)->stats.allocated_bytes.current > 0 && arena(1)->stats.reserved_bytes.current > 0);
  cr_assert(stats_are_the_sums(), "cudalloc_get_stats is not the sum of the arenas'");
  cr_assert(free_memory_counts_both(keep), "memGetInfo leaves out an arena's cached memory");
  CHECKED();
}

Test(core_arenas, no_fold_is_caught) {
  core_start("arenas:2,arena_spread:first,sim_events:auto");
  void *keep[2];
  two_arenas_busy(keep);
  ca_debug.arena_no_fold = true;
  cr_assert_not(stats_are_the_sums(), "the planted fault went unnoticed by the stats");
  cr_assert_not(free_memory_counts_both(keep), "the planted fault went unnoticed by memGetInfo");
  ca_debug.arena_no_fold = false;
}

// ----------------------------------------------------------------------------
// The cap is the ordinal's
// ----------------------------------------------------------------------------

#define CAP_MB 64
#define CAP_CONF "memory_cap_mb:64"

/* An allocation whose out-of-memory line (a planted fault's) is swallowed. */
static cudaError_t malloc_quietly(void **p, size_t size, ca_stream_t s) {
  capture_t c;
  char sink[1];
  capture_begin(&c);
  cudaError_t rc = cudalloc_malloc(p, size, (cudaStream_t)s);
  capture_end(&c, sink, sizeof sink);
  return rc;
}

static size_t reserved_sum(void) {
  return (size_t)(arena(0)->stats.reserved_bytes.current + (arena(1) ? arena(1)->stats.reserved_bytes.current : 0));
}

/* Arena 0 caches 40 MiB (freed, completed); arena 1 asks for 40 MiB more
 * than the cap leaves. Returns arena 1's answer; the sum of reserved stays
 * in *most (its highest seen). */
static cudaError_t squeeze_workload(size_t *most) {
  core_start("arenas:2,arena_spread:first," CAP_CONF ",sim_capacity_mb:1024,oom_report:off,sim_events:auto");
  ca_stream_t s1 = test_stream(false), s2 = test_stream(false);
  void *a = alloc_on(40 * MiB, s1);
  cr_assert_eq(arena_of(a)->arena, 0);
  cr_assert_eq(cudalloc_free(a, (cudaStream_t)s1), cudaSuccess);   /* cached in arena 0 */
  *most = reserved_sum();
  void *b = NULL;
  cudaError_t rc = malloc_quietly(&b, 40 * MiB, s2);
  if (reserved_sum() > *most) *most = reserved_sum();
  if (rc == cudaSuccess) {
    cr_assert_eq(arena_of(b)->arena, 1);
    CHECKED();
    cr_assert_eq(cudalloc_free_sync(b), cudaSuccess);
  }
  CHECKED();
  return rc;
}

Test(core_arenas, an_arena_short_of_memory_takes_what_a_sibling_caches) {
  size_t most;
  cr_assert_eq(squeeze_workload(&most), cudaSuccess, "arena 1 ran out while arena 0 cached 40 MiB");
  cr_assert_leq(most, (size_t)CAP_MB * MiB, "reserved %zu bytes across the arenas, above the cap", most);
  cr_assert_leq(ca_arena_reserved(arena(0)), (size_t)CAP_MB * MiB);
  cr_assert_eq(ca_arena_reserved(arena(0)), reserved_sum(), "the ordinal's charge is its arenas' reserved bytes");
}

Test(core_arenas, no_sibling_trim_is_caught) {
  ca_debug.arena_no_sibling_trim = true;
  size_t most;
  cr_assert_eq(squeeze_workload(&most), cudaErrorMemoryAllocation, "the planted fault went unnoticed");
}

Test(core_arenas, a_per_arena_cap_is_caught) {
  ca_debug.arena_cap_per_arena = true;
  size_t most;
  squeeze_workload(&most);
  cr_assert_gt(most, (size_t)CAP_MB * MiB, "the planted fault went unnoticed: %zu bytes reserved", most);
}

/* The arenas' growths, at once, never pass the cap together: the peak of
 * the ordinal's charge, which each growth makes before its driver call (so
 * that it is never below what the arenas reserve), while two threads grow
 * their arenas until the cap refuses them. */
typedef struct {
  ca_stream_t stream;
  int ooms;
} grower_t;

static void *grow_until_full(void *arg) {
  grower_t *g = arg;
  ca_state.be->set_device(0);
  void *p[64] = {0};
  for (int i = 0; i < 64; i++)
    if (cudalloc_malloc(&p[i], 3 * MiB, (cudaStream_t)g->stream) != cudaSuccess) g->ooms++;
  for (int i = 0; i < 64; i++)
    if (p[i]) cudalloc_free_sync(p[i]);
  return NULL;
}

static size_t grow_at_once(void) {
  core_start("arenas:2,arena_spread:first," CAP_CONF ",oom_report:off,quiet:true");
  grower_t g[2] = {{.stream = test_stream(false)}, {.stream = test_stream(false)}};
  pthread_t t[2];
  capture_t c;
  char sink[1];
  capture_begin(&c);   /* the out-of-memory lines */
  for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, grow_until_full, &g[i]);
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  capture_end(&c, sink, sizeof sink);
  cr_assert_gt(g[0].ooms + g[1].ooms, 0, "128 blocks of 3 MiB fit a cap of %d MiB?", CAP_MB);
  cr_assert_eq(ca_arena_reserved(arena(0)), reserved_sum(), "the ordinal's charge is its arenas' reserved bytes");
  cr_assert_eq((size_t)stats0().reserved_bytes.peak, ca_arena_reserved_peak(arena(0)), "the ordinal's peak is the charge's");
  CHECKED();
  return ca_arena_reserved_peak(arena(0));
}

Test(core_arenas, arenas_growing_at_once_stay_within_the_cap) {
  size_t most = grow_at_once();
  cr_assert_leq(most, (size_t)CAP_MB * MiB, "the arenas reserved %zu bytes together, above the cap", most);
}

Test(core_arenas, arenas_growing_at_once_with_a_per_arena_cap_is_caught) {
  ca_debug.arena_cap_per_arena = true;
  size_t most = grow_at_once();
  cr_assert_gt(most, (size_t)CAP_MB * MiB, "the planted fault went unnoticed: at most %zu bytes reserved", most);
}

/* A squeeze's window, as test_stress_threads' classic run met it under
 * load: while arena 1 squeezes arena 0, its lock let go, a thread of arena
 * 0 (s1) allocates 20 MiB, frees it on another stream (pending: manual
 * events) and allocates 20 MiB again. Growing, not waiting for its free,
 * arena 0 takes back what the squeeze gave, and arena 1 fails with 20 MiB
 * of the 64 live; the claim makes arena 0 wait for its free instead. */
static struct {
  ca_stream_t s1, s2;
  pthread_t squeezer;
  bool done;
  cudaError_t rc[2];   /* the window's two allocations */
  void *p[2];
} win;

static void *window_thread(void *arg) {
  (void)arg;
  ca_state.be->set_device(0);
  win.rc[0] = cudalloc_malloc(&win.p[0], 20 * MiB, (cudaStream_t)win.s1);
  if (win.rc[0] == cudaSuccess) cudalloc_free(win.p[0], (cudaStream_t)win.s2);   /* pending on s2, in arena 0 */
  win.rc[1] = cudalloc_malloc(&win.p[1], 20 * MiB, (cudaStream_t)win.s1);
  return NULL;
}

static void squeeze_window(void) {
  if (win.done || !pthread_equal(pthread_self(), win.squeezer)) return;   /* once, the squeezer's own visit */
  win.done = true;
  pthread_t t;
  pthread_create(&t, NULL, window_thread, NULL);
  pthread_join(t, NULL);
}

static cudaError_t squeeze_with_a_sibling_growing(void) {
  core_start("arenas:2,arena_spread:first," CAP_CONF ",sim_capacity_mb:1024,oom_report:off,sim_events:manual,"
             "expandable_segments:false");
  win.s1 = test_stream(false), win.s2 = test_stream(false), win.squeezer = pthread_self(), win.done = false;
  void *a = alloc_on(40 * MiB, win.s1);
  cr_assert_eq(arena_of(a)->arena, 0);
  cr_assert_eq(cudalloc_free(a, (cudaStream_t)win.s1), cudaSuccess);   /* cached in arena 0 */
  ca_debug.squeeze_window = squeeze_window;
  void *b = NULL;
  cudaError_t rc = malloc_quietly(&b, 40 * MiB, win.s2);
  ca_debug.squeeze_window = NULL;
  cr_assert(win.done, "arena 1 never squeezed arena 0");
  cr_assert_eq(win.rc[0], cudaSuccess, "the window's first allocation");
  cr_assert_eq(win.rc[1], cudaSuccess, "the window's second allocation: arena 0 should have waited for its free");
  cr_assert_eq(arena_of(win.p[1])->arena, 0);
  if (rc == cudaSuccess) {
    cr_assert_eq(arena_of(b)->arena, 1);
    cr_assert_eq(cudalloc_free_sync(b), cudaSuccess);
  }
  cr_assert_eq(cudalloc_free_sync(win.p[1]), cudaSuccess);
  cr_assert_leq(ca_arena_reserved_peak(arena(0)), (size_t)CAP_MB * MiB);
  CHECKED();
  return rc;
}

Test(core_arenas, a_sibling_growing_in_the_squeeze_window_leaves_the_squeezer_its_claim) {
  cr_assert_eq(squeeze_with_a_sibling_growing(), cudaSuccess, "arena 1 ran out with 20 of 64 MiB live");
  cr_assert_eq(ca_state.claim[0], 0, "the claim outlived the squeeze");
}

Test(core_arenas, a_claim_ignored_is_caught) {
  ca_debug.arena_claim_ignored = true;
  cr_assert_eq(squeeze_with_a_sibling_growing(), cudaErrorMemoryAllocation, "the planted fault went unnoticed");
}

/* Arena 1 claims 40 MiB of the 64 (as while it squeezes); arena 0 asks
 * for 40 MiB. Its squeeze starts a thread that lets the claim go 200 ms
 * later: arena 0's retry, right after the squeeze, still meets the claim,
 * and it waits for the claim to go rather than fail. */
static struct {
  uint64_t token;
  bool started;
  pthread_t thread;
} held;

static void *let_claim_go(void *arg) {
  (void)arg;
  nanosleep(&(struct timespec){.tv_nsec = 200 * 1000 * 1000}, NULL);
  ca_arena_unclaim(0, held.token);
  return NULL;
}

static void start_letting_go(void) {
  if (!held.started) held.started = true, pthread_create(&held.thread, NULL, let_claim_go, NULL);
}

static cudaError_t ask_while_another_claims(void) {
  core_start("arenas:2,arena_spread:first," CAP_CONF ",sim_capacity_mb:1024,oom_report:off,sim_events:auto");
  ca_stream_t s1 = test_stream(false), s2 = test_stream(false);
  cr_assert_eq(cudalloc_free_sync(alloc_on(1 * MiB, s1)), cudaSuccess);
  cr_assert_eq(cudalloc_free_sync(alloc_on(1 * MiB, s2)), cudaSuccess);   /* arena 1 made */
  cr_assert_not_null(arena(1));
  cr_assert_neq(held.token = ca_arena_claim(arena(1), 40 * MiB), 0);
  held.started = false;
  ca_debug.squeeze_window = start_letting_go;
  void *p = NULL;
  cudaError_t rc = malloc_quietly(&p, 40 * MiB, s1);
  ca_debug.squeeze_window = NULL;
  cr_assert(held.started, "arena 0 never squeezed arena 1");
  pthread_join(held.thread, NULL);
  if (rc == cudaSuccess) {
    cr_assert_eq(arena_of(p)->arena, 0);
    cr_assert_eq(cudalloc_free_sync(p), cudaSuccess);
  }
  CHECKED();
  return rc;
}

Test(core_arenas, an_arena_short_of_memory_waits_for_anothers_claim_to_go) {
  cr_assert_eq(ask_while_another_claims(), cudaSuccess, "arena 0 failed while arena 1 held 40 MiB for 200 ms");
}

Test(core_arenas, no_wait_for_a_claim_is_caught) {
  ca_debug.arena_claim_no_wait = true;
  cr_assert_eq(ask_while_another_claims(), cudaErrorMemoryAllocation, "the planted fault went unnoticed");
}

// ----------------------------------------------------------------------------
// Random threads and streams, at 2 to 4 arenas
// ----------------------------------------------------------------------------

#define RT_THREADS 4
#define RT_OPS 1200
#define RT_SLOTS 24
#define RT_SHARED 8

static void *rt_shared[RT_SHARED];
static pthread_mutex_t rt_lock = PTHREAD_MUTEX_INITIALIZER;

typedef struct {
  int id;
  uint64_t rng;
  int failures;
} rt_worker_t;

static size_t rt_size(uint64_t *rng) {
  uint64_t r = rng_next(rng);
  return r % 4 == 0 ? 1 + rng_next(rng) % (8 * MiB) : r % 4 == 1 ? 512 + rng_next(rng) % (64 << 10)
                                                                  : 512 + rng_next(rng) % (1 * MiB);
}

/* A block is written on the stream it was allocated on, and freed on
 * either of the thread's streams: on the other one only once that stream
 * waits for the first's work (an event), as a program must order it (a
 * free orders the reuse after the freeing stream's work alone: a write on
 * the allocating stream left unordered is the program's race, which the
 * reuse oracle reports). A block handed to another thread is freed there
 * with cudaFree, which waits for every stream. */
typedef struct {
  void *p;
  int on;           /* the stream it was allocated on and written on */
} rt_slot_t;

static void rt_free(rt_worker_t *w, rt_slot_t *slot, ca_stream_t *streams, int f) {
  if (f != slot->on) {   /* the freeing stream waits for the block's work */
    ca_event_t e;
    if (ca_state.be->event_create(0, &e) || ca_state.be->event_record(e, streams[slot->on]) ||
        ca_sim_stream_wait_event(streams[f], e) || ca_state.be->event_destroy(e))
      w->failures++;
  }
  if (cudalloc_free(slot->p, (cudaStream_t)streams[f]) != cudaSuccess) w->failures++;
  slot->p = NULL;
}

static void *rt_work(void *arg) {
  rt_worker_t *w = arg;
  ca_state.be->set_device(0);
  ca_stream_t streams[2] = {test_stream(w->id % 2), test_stream(false)};
  /* as the shim tells it of every stream created: cudaFree's fence covers a
   * non-blocking one's work only once cudalloc knows of it */
  cr_assert_eq(ca_stream_created(streams[0], w->id % 2), CUDA_SUCCESS);
  rt_slot_t mine[RT_SLOTS] = {{0}};
  for (int op = 0; op < RT_OPS; op++) {
    int k = (int)(rng_next(&w->rng) % RT_SLOTS);
    int a = (int)(rng_next(&w->rng) % 2);   /* often another stream than the allocating one frees */
    if (mine[k].p) {
      rt_free(w, &mine[k], streams, a);
    } else if (cudalloc_malloc(&mine[k].p, rt_size(&w->rng), (cudaStream_t)streams[a]) != cudaSuccess) {
      w->failures++;
      mine[k].p = NULL;
    } else {
      mine[k].on = a;
      TOUCH(streams[a], mine[k].p, 512, true);
    }
    uint64_t r = rng_next(&w->rng) % 64;
    if (r == 0 && mine[k].p) {   /* a block to another thread, which frees it with cudaFree */
      pthread_mutex_lock(&rt_lock);
      int j = (int)(rng_next(&w->rng) % RT_SHARED);
      void *old = rt_shared[j];
      rt_shared[j] = mine[k].p;
      pthread_mutex_unlock(&rt_lock);
      mine[k].p = NULL;
      if (old && cudalloc_free_sync(old) != cudaSuccess) w->failures++;
    } else if (r == 1) {   /* a stream destroyed once its blocks are freed on it, a new one in its place */
      int i = (int)(rng_next(&w->rng) % 2);
      for (int j = 0; j < RT_SLOTS; j++)
        if (mine[j].p && mine[j].on == i) rt_free(w, &mine[j], streams, i);
      ca_stream_destroyed(streams[i]);
      cr_assert_eq(ca_sim_stream_destroy(streams[i]), CUDA_SUCCESS);
      streams[i] = test_stream(false);
    } else if (r == 2) {   /* the device synchronized, as cudaDeviceSynchronize */
      ca_sync_token_t t = ca_device_sync_begin();
      ca_device_sync_end(t, ca_state.be->device_sync(0) == CUDA_SUCCESS);
    } else if (r == 3 && cudalloc_check()) {
      w->failures++;
    }
  }
  for (int k = 0; k < RT_SLOTS; k++)
    if (mine[k].p) rt_free(w, &mine[k], streams, mine[k].on);
  return NULL;
}

static void random_threads(int arenas) {
  char conf[96];
  snprintf(conf, sizeof conf, "arenas:%d,arena_spread:first,sim_capacity_mb:2048", arenas);
  core_start(conf);
  pthread_t t[RT_THREADS];
  rt_worker_t w[RT_THREADS];
  for (int i = 0; i < RT_THREADS; i++) {
    w[i] = (rt_worker_t){.id = i, .rng = 77 + (uint64_t)i * 1000 + (uint64_t)arenas};
    pthread_create(&t[i], NULL, rt_work, &w[i]);
  }
  for (int i = 0; i < RT_THREADS; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < RT_THREADS; i++) cr_assert_eq(w[i].failures, 0, "thread %d: %d failures", i, w[i].failures);
  for (int j = 0; j < RT_SHARED; j++)
    if (rt_shared[j]) cr_assert_eq(cudalloc_free_sync(rt_shared[j]), cudaSuccess);
  CHECKED();
  int used = 0;
  for (int k = 0; k < arenas; k++) used += arena(k) && arena(k)->stats.num_allocs.current > 0;
  cr_assert_eq(used, arenas, "only %d of %d arenas allocated", used, arenas);
  cudalloc_stats_t s = stats0();
  cr_assert_eq(s.allocated_bytes.current, 0, "%lld bytes still allocated", (long long)s.allocated_bytes.current);
  cr_assert_eq(cudalloc_empty_cache(), cudaSuccess);
  CHECKED();
  size_t sum = 0;
  for (int k = 0; k < arenas; k++) sum += (size_t)arena(k)->stats.reserved_bytes.current;
  cr_assert_eq(ca_arena_reserved(arena(0)), sum, "the ordinal's charge %zu is not its arenas' reserved bytes %zu",
               ca_arena_reserved(arena(0)), sum);
  if (sum) ca_holdings_dump(0, stderr);   /* where it stayed */
  cr_assert_eq(sum, 0, "%zu bytes reserved after empty_cache", sum);
  cr_assert_eq(ca_sim_oracle_violations(), 0, "the reuse oracle: %s", ca_sim_oracle_report(0));
}

Test(core_arenas, random_threads_and_streams_at_two_arenas) { random_threads(2); }
Test(core_arenas, random_threads_and_streams_at_three_arenas) { random_threads(3); }
Test(core_arenas, random_threads_and_streams_at_four_arenas) { random_threads(4); }

// ----------------------------------------------------------------------------
// What every arena must know
// ----------------------------------------------------------------------------

/* A non-blocking stream registered while only arena 0 exists: arena 1,
 * made later, fences it too, so that a cudaFree'd block of arena 1 that a
 * kernel on it still writes is not handed out again (the reuse oracle
 * would see it; without the copy at arena 1's set-up it did). */
Test(core_arenas, a_later_arena_fences_the_non_blocking_streams) {
  core_start("arenas:2,arena_spread:first,sim_events:manual,legacy_queue:off");
  ca_stream_t s1 = test_stream(false), nb = test_stream(true);
  cr_assert_eq(ca_stream_created(nb, true), CUDA_SUCCESS);
  void *first = alloc_on(1 * MiB, s1);   /* arena 0 */
  ca_stream_t s2 = test_stream(false);
  void *p = alloc_on(2 * MiB, s2);        /* arena 1, made now: a page of its own */
  cr_assert_eq(arena_of(p)->arena, 1);
  TOUCH(nb, p, 4096, true);
  cr_assert_eq(cudalloc_free_sync(p), cudaSuccess);
  cudalloc_step();   /* seals cudaFree's queue: its fence's events are recorded now */
  ca_sim_stream_complete(CA_STREAM_LEGACY);   /* the legacy stream's event is done; nb's work is not */
  void *q = alloc_on(2 * MiB, s2);
  cr_assert_neq(q, p, "handed out again while a kernel on the non-blocking stream writes it");
  ca_sim_complete_all();
  cr_assert_eq(cudalloc_free_sync(q), cudaSuccess);
  cr_assert_eq(cudalloc_free_sync(first), cudaSuccess);
  CHECKED();
}
/* A non-blocking stream created and destroyed while arena 1 is made but
 * not set up yet (device.c's device_get_slow between its two halves: the
 * struct published, its set-up waiting for a lock): the destruction skips
 * an arena that is not ready, so the creation must not register the
 * stream there either; arena 1 then copies the registry, which no longer
 * names it. Before the fix the creation registered it on the half-made
 * arena, whose every cudaFree fence then failed to record on the dead
 * stream: the freed block never came back (random_threads_and_streams_at_
 * four_arenas saw it, 1 run in 10 to 30, once arena 1's set-up waited for
 * arena 0's lock). */
Test(core_arenas, a_stream_destroyed_while_an_arena_is_made_is_not_fenced_there) {
  core_start("arenas:2,arena_spread:first,legacy_queue:off");
  ca_stream_t s1 = test_stream(false);
  void *first = alloc_on(1 * MiB, s1);   /* arena 0 */
  ca_device_t *half = calloc(1, sizeof *half);
  cr_assert_not_null(half);
  ca_devlock_init(&half->lock);
  half->ordinal = 0;
  half->arena = 1;
  half->slot = CA_MAX_DEVICES;
  __atomic_store_n(&ca_state.devices[CA_MAX_DEVICES], half, __ATOMIC_RELEASE);
  ca_stream_t nb = test_stream(true);
  cr_assert_eq(ca_stream_created(nb, true), CUDA_SUCCESS);
  ca_stream_destroyed(nb);
  cr_assert_eq(ca_sim_stream_destroy(nb), CUDA_SUCCESS);
  ca_stream_t s2 = test_stream(false);
  void *p = alloc_on(2 * MiB, s2);   /* arena 1, set up now */
  cr_assert_eq(arena_of(p), half);
  for (int i = 0; i < half->nnonblocking; i++)
    cr_assert_neq(half->nonblocking[i], nb, "arena 1 fences a stream destroyed before it was set up");
  cr_assert_eq(cudalloc_free_sync(p), cudaSuccess);
  cr_assert_eq(cudalloc_empty_cache(), cudaSuccess);
  cr_assert_eq(half->stats.reserved_bytes.current, 0, "cudaFree's fence on arena 1 never recorded: %lld bytes kept",
               (long long)half->stats.reserved_bytes.current);
  cr_assert_eq(cudalloc_free_sync(first), cudaSuccess);
  CHECKED();
}

/* The same at arenas:1, the allocator as it was: the control. */
Test(core_arenas, random_threads_and_streams_at_one_arena) { random_threads(1); }

/* An arena that cannot be set up (its address reservation refused, at
 * each of the sizes tried) leaves its streams to the ordinal's first, said
 * once; the allocation succeeds. */
Test(core_arenas, an_arena_that_cannot_be_set_up_leaves_its_streams_to_the_first) {
  core_start("arenas:2,arena_spread:first,sim_fail:reserve@2,sim_fail:reserve@3,sim_fail:reserve@4");
  ca_stream_t s1 = test_stream(false), s2 = test_stream(false);
  void *a = alloc_on(1 * MiB, s1);
  capture_t c;
  char out[1024];
  capture_begin(&c);
  void *b = alloc_on(1 * MiB, s2);
  void *b2 = alloc_on(1 * MiB, s2);
  capture_end(&c, out, sizeof out);
  cr_assert_eq(arena_of(a)->arena, 0);
  cr_assert_eq(arena_of(b), arena_of(a), "arena 1 could not be set up: arena 0 serves its stream");
  cr_assert_eq(arena_of(b2), arena_of(a));
  cr_assert_not_null(strstr(out, "device 0, arena 1: cannot reserve virtual addresses"), "%s", out);
  cr_assert_eq(count_of(out, "arena 1"), 1, "said once: %s", out);
  cr_assert(arena(1)->passthrough);
  CHECKED();
}

/* Peer access reaches every arena's mappings: those made before it was
 * enabled (arenas 0 and 1) and those of an arena made after (arena 2). */
Test(core_arenas, peer_access_reaches_every_arena) {
  SKIP_ON_CUDA("reads the simulated device's access records");
  core_start("arenas:3,arena_spread:first,sim_devices:2");
  ca_state.be->set_device(1);   /* the streams below are device 1's */
  ca_stream_t s1 = test_stream(false), s2 = test_stream(false);
  void *a = alloc_on(3 * MiB, s1), *b = alloc_on(3 * MiB, s2);
  cr_assert_eq(arena_of(a)->ordinal, 1);
  cr_assert_neq(arena_of(a), arena_of(b), "two arenas of device 1");
  cr_assert_not(ca_sim_access(0, (uintptr_t)b), "device 0 reaches device 1's memory before enabling it");
  cr_assert_eq(ca_peer_access_enabled(0, 1), CUDA_SUCCESS);
  cr_assert(ca_sim_access(0, (uintptr_t)a) && ca_sim_access(0, (uintptr_t)b), "an arena's mappings were not granted");
  void *c = alloc_on(3 * MiB, test_stream(false));   /* the third first sight: arena 2, made now */
  cr_assert_eq(arena_of(c)->arena, 2);
  cr_assert(ca_sim_access(0, (uintptr_t)c), "an arena made after the enabling was not granted");
  cr_assert_eq(ca_sim_violations(), 0, "a grant broke a rule of the device");
  CHECKED();
}

static CUresult reset_rc;
static void reset0(void) { reset_rc = ca_device_reset(0); }
/* The reset's lines (a live block's memory given back) are not what this is about. */
static CUresult capture_discard_rc_reset(void) {
  capture_discard(reset0);
  return reset_rc;
}

/* A device reset tears every arena down, and the ordinal's charge with
 * them; both arenas serve again after it. */
Test(core_arenas, a_device_reset_tears_down_every_arena) {
  core_start("arenas:2,arena_spread:first,sim_events:auto");
  ca_stream_t s1 = test_stream(false), s2 = test_stream(false);
  alloc_on(5 * MiB, s1);
  alloc_on(7 * MiB, s2);   /* live at the reset: the program's memory goes with the device */
  cr_assert_gt(ca_arena_reserved(arena(0)), 0);
  cr_assert_eq(capture_discard_rc_reset(), CUDA_SUCCESS);
  cr_assert_eq(ca_arena_reserved(arena(0)), 0, "the charge outlived the reset");
  cr_assert_eq(arena(1)->stats.reserved_bytes.current, 0);
  s1 = test_stream(false);
  s2 = test_stream(false);
  void *a = alloc_on(5 * MiB, s1), *b = alloc_on(7 * MiB, s2);
  cr_assert_neq(arena_of(a), arena_of(b));
  cr_assert_eq(ca_arena_reserved(arena(0)), reserved_sum());
  CHECKED();
}

// ----------------------------------------------------------------------------
// The folded peaks (review8)
// ----------------------------------------------------------------------------

/* Arena 0 peaks at 40 MiB and gives it all back; arena 1 then peaks at 40
 * MiB: the ordinal never held more than about 40 MiB, yet its arenas'
 * allocated peaks add up to 80. The sum is a bound of the ordinal's peak,
 * and so is the ordinal's reserved peak (allocated <= reserved at every
 * moment): the folded allocated peak never passes the reserved one, and
 * the fragmentation (1 - allocated peak / reserved peak) is never
 * negative. */
Test(core_arenas, the_folded_peaks_never_pass_the_reserved_peak) {
  core_start("arenas:2,arena_spread:first,sim_events:auto");
  ca_stream_t s1 = test_stream(false), s2 = test_stream(false);
  void *a = alloc_on(40 * MiB, s1);
  cr_assert_eq(arena_of(a)->arena, 0);
  cr_assert_eq(cudalloc_free_sync(a), cudaSuccess);
  cr_assert_eq(cudalloc_empty_cache(), cudaSuccess);
  cr_assert_eq(reserved_sum(), 0, "arena 0 gave its memory back");
  void *b = alloc_on(40 * MiB, s2);
  cr_assert_eq(arena_of(b)->arena, 1);
  cudalloc_stats_t s = stats0();
  cr_assert_leq(s.allocated_bytes.peak, s.reserved_bytes.peak, "peak allocated %lld above peak reserved %lld",
                (long long)s.allocated_bytes.peak, (long long)s.reserved_bytes.peak);
  cr_assert_leq(s.active_bytes.peak, s.reserved_bytes.peak, "peak active above peak reserved");
  cr_assert_leq(s.mapped_bytes.peak, s.reserved_bytes.peak, "peak mapped above peak reserved");
  cr_assert_leq(s.cached_bytes.peak, s.reserved_bytes.peak, "peak cached above peak reserved");
  cr_assert_geq(s.fragmentation, 0.0, "fragmentation %f", s.fragmentation);
  cr_assert_eq(cudalloc_free_sync(b), cudaSuccess);
  CHECKED();
}

/* More non-blocking streams than a fence holds, registered while only
 * arena 0 exists: arena 0's cudaFree fence synchronizes the device from
 * then on, and so must arena 1's, made later (its copy of the ordinal's
 * streams holds the first 63 alone: without the overflow it fenced those
 * and the legacy stream, and a cudaFree'd block that a kernel on the 64th
 * still wrote was handed out again). */
Test(core_arenas, a_later_arena_knows_the_streams_overflowed) {
  core_start("arenas:2,arena_spread:first,sim_events:manual,legacy_queue:off");
  ca_stream_t s1 = test_stream(false), nb[CA_MAX_FENCE_EVENTS];
  void *first = alloc_on(1 * MiB, s1);   /* arena 0 */
  capture_t c;
  char out[4096];
  capture_begin(&c);   /* arena 0's line: more than 63 non-blocking streams */
  for (int i = 0; i < CA_MAX_FENCE_EVENTS; i++) {
    nb[i] = test_stream(true);
    cr_assert_eq(ca_stream_created(nb[i], true), CUDA_SUCCESS);
  }
  ca_stream_t s2 = test_stream(false);
  void *p = alloc_on(2 * MiB, s2);        /* arena 1, made now */
  capture_end(&c, out, sizeof out);
  cr_assert_eq(arena_of(p)->arena, 1);
  cr_assert(arena(0)->nonblocking_overflow);
  TOUCH(nb[CA_MAX_FENCE_EVENTS - 1], p, 4096, true);
  cr_assert_eq(cudalloc_free_sync(p), cudaSuccess);
  cudalloc_step();   /* seals cudaFree's queue */
  ca_sim_stream_complete(CA_STREAM_LEGACY);
  void *q = alloc_on(2 * MiB, s2);
  cr_assert(q != p || ca_sim_oracle_violations() == 0,
            "handed out again while a kernel on the 64th non-blocking stream writes it");
  ca_sim_complete_all();
  cr_assert_eq(cudalloc_free_sync(q), cudaSuccess);
  cr_assert_eq(cudalloc_free_sync(first), cudaSuccess);
  CHECKED();
}

/* An out-of-memory report's figures are the ordinal's now: a request
 * above the cap, after an earlier squeeze whose sibling figures no longer
 * stand (arena 0's 10 MiB freed and given back since), reports what every
 * arena allocates (arena 1's 40 MiB), not the stale sum (50 MiB, above the
 * 40 MiB reserved: a cached figure below zero). */
Test(core_arenas, an_out_of_memory_report_counts_the_siblings_now) {
  core_start("arenas:2,arena_spread:first," CAP_CONF ",sim_events:auto,oom_report:off");   /* the report on stderr */
  ca_stream_t s1 = test_stream(false), s2 = test_stream(false);
  void *keep = alloc_on(10 * MiB, s1);
  cr_assert_eq(arena_of(keep)->arena, 0);
  cr_assert_eq(cudalloc_free(alloc_on(30 * MiB, s1), (cudaStream_t)s1), cudaSuccess);   /* cached in arena 0 */
  void *b = alloc_on(40 * MiB, s2);   /* arena 1, once arena 0's cache is squeezed */
  cr_assert_eq(arena_of(b)->arena, 1);
  cr_assert_eq(cudalloc_free_sync(keep), cudaSuccess);
  cr_assert_eq(cudalloc_empty_cache(), cudaSuccess);
  cr_assert_eq(arena(0)->stats.reserved_bytes.current, 0);
  void *p = NULL;
  capture_t c;
  char out[8192];
  capture_begin(&c);
  cudaError_t rc = cudalloc_malloc(&p, (CAP_MB + 1) * MiB, (cudaStream_t)s2);
  capture_end(&c, out, sizeof out);
  cr_assert_eq(rc, cudaErrorMemoryAllocation);
  const char *line = strstr(out, "cudalloc          allocated ");
  cr_assert_not_null(line, "%s", out);
  double allocated = -1, cached = -1;
  cr_assert_eq(sscanf(line, "cudalloc          allocated %lf MiB, cached %lf MiB", &allocated, &cached), 2, "%s", line);
  cr_assert_float_eq(allocated, 40.0, 0.05, "allocated %.1f MiB in the report: %s", allocated, line);
  cr_assert_geq(cached, 0.0, "%s", line);
  cr_assert_eq(cudalloc_free_sync(b), cudaSuccess);
  CHECKED();
}

/* The verdict's usual step peak is the ordinal's, as its allocated figure
 * is: two arenas hold 60 MiB each, step after step, on a device of 128
 * MiB; 10 MiB more does not fit. The steady footprint (130 MiB against
 * the usual 120), not "one abnormal batch" (130 MiB against arena 1's own
 * usual 60: 2.2x). */
Test(core_arenas, the_usual_step_peak_is_the_ordinals) {
  core_start("arenas:2,arena_spread:first,sim_capacity_mb:128,sim_events:auto,oom_report:off");
  ca_stream_t s1 = test_stream(false), s2 = test_stream(false);
  void *a = alloc_on(60 * MiB, s1), *b = alloc_on(60 * MiB, s2);
  cr_assert_neq(arena_of(a), arena_of(b));
  for (int i = 0; i < 4; i++) cudalloc_step();
  void *p = NULL;
  capture_t c;
  char out[8192];
  capture_begin(&c);
  cudaError_t rc = cudalloc_malloc(&p, 10 * MiB, (cudaStream_t)s2);
  capture_end(&c, out, sizeof out);
  cr_assert_eq(rc, cudaErrorMemoryAllocation);
  cr_assert_not_null(strstr(out, "live memory itself does not fit"), "%s", out);
  cr_assert_null(strstr(out, "abnormal batch"), "%s", out);
  cr_assert_eq(cudalloc_free_sync(a), cudaSuccess);
  cr_assert_eq(cudalloc_free_sync(b), cudaSuccess);
  CHECKED();
}

// ----------------------------------------------------------------------------
// The front cache's trim reaches every arena
// ----------------------------------------------------------------------------

/* A thread fills its cache with 16 KiB blocks on s1 (arena 0), then works on
 * s2 (arena 1): with thread_cache_streams:1, s2 adds nothing to what the
 * thread may cache, so its frees there are refused until a trim makes room, and
 * the trim, which runs under arena 1's lock, must reach arena 0's blocks
 * too. Returns the cache's hits on s2 over 400 pairs. */
static uint64_t hits_after_moving_arena(const char *conf) {
  core_start(conf);
  ca_stream_t s1 = test_stream(false), s2 = test_stream(false);
  void *p[64];
  for (int i = 0; i < 4; i++) {   /* the thread's cache is made: from now on its blocks are held */
    p[0] = alloc_on(16 << 10, s1);
    cr_assert_eq(cudalloc_free(p[0], (cudaStream_t)s1), cudaSuccess);
  }
  for (int i = 0; i < 64; i++) p[i] = alloc_on(16 << 10, s1);
  for (int i = 0; i < 64; i++) cr_assert_eq(cudalloc_free(p[i], (cudaStream_t)s1), cudaSuccess);
  uint64_t before = ca_debug.tcache_hits;
  for (int i = 0; i < 400; i++) {
    void *q = alloc_on(16 << 10, s2);
    cr_assert_eq(cudalloc_free(q, (cudaStream_t)s2), cudaSuccess);
  }
  CHECKED();
  return ca_debug.tcache_hits - before;
}

Test(core_arenas, a_cache_full_of_another_arenas_blocks_is_trimmed) {
  uint64_t one = hits_after_moving_arena("arenas:1,thread_cache_streams:1");
  core_fini();
  uint64_t two = hits_after_moving_arena("arenas:2,arena_spread:first,thread_cache_streams:1");
  cr_log_info("hits on the second stream: %llu at arenas:1, %llu at arenas:2", (unsigned long long)one,
              (unsigned long long)two);
  cr_assert_gt(one, 0, "at arenas:1 the trim makes room (%llu hits)", (unsigned long long)one);
  cr_assert_geq(two, one / 2, "at arenas:2, %llu hits on the second stream where arenas:1 had %llu",
                (unsigned long long)two, (unsigned long long)one);
}

Test(core_arenas, a_trim_of_its_own_arena_only_is_caught) {
  ca_debug.tcache_trim_own_arena_only = true;
  uint64_t two = hits_after_moving_arena("arenas:2,arena_spread:first,thread_cache_streams:1");
  cr_assert_eq(two, 0, "the planted fault leaves the cache full of arena 0's blocks (%llu hits)",
               (unsigned long long)two);
}

/* The ordinal's peaks of allocated and requested bytes at arenas:N are
 * exact (alloc/arena.h's leases), not the sum of its arenas' own peaks:
 * arenas that peak one after the other hold no more than one of them
 * did; arenas that hold memory at once add up; a reset starts from what
 * is live; two and three threads on as many arenas, in lock step by barriers
 * so that every moment's sum is known, peak at the highest of those sums. The
 * planted fault arena_lease_never_asks (an arena's rise past its lease
 * asks for none, so the peaks miss it) is caught. */
#include "arena_testing.h"

#include <pthread.h>

TestSuite(core_arena_peaks, .fini = core_fini, .timeout = 60);

/* Arena 0 holds 10 MiB and frees it; arena 1 then holds 10 MiB: the
 * ordinal never held more than 10 (the arenas' peaks add up to 20). */
Test(core_arena_peaks, arenas_that_peak_in_turn_are_not_added) {
  core_start("arenas:2,arena_spread:first,sim_events:auto");
  ca_stream_t s1 = test_stream(false), s2 = test_stream(false);
  void *a = alloc_on(10 * MiB, s1);
  cr_assert_eq(cudalloc_free_sync(a), cudaSuccess);
  void *b = alloc_on(10 * MiB, s2);
  cr_assert_eq(arena_of(a)->arena, 0);
  cr_assert_eq(arena_of(b)->arena, 1);
  cudalloc_stats_t s = stats0();
  cr_assert_eq(arena(0)->stats.allocated_bytes.peak + arena(1)->stats.allocated_bytes.peak, 20 * MiB);
  cr_assert_eq(s.allocated_bytes.peak, 10 * MiB, "peak allocated %lld", (long long)s.allocated_bytes.peak);
  cr_assert_eq(s.requested_bytes.peak, 10 * MiB, "peak requested %lld", (long long)s.requested_bytes.peak);
  cr_assert_eq(cudalloc_free_sync(b), cudaSuccess);
}

/* 6 MiB in arena 0 and 8 in arena 1 at once: 14; arena 1's freed and 4
 * more in arena 0: 10 live, the peak stays 14; a reset: 10. Returns false
 * at the first figure that is not so (the fault's test expects one). */
static bool held_at_once_add_up(void) {
  ca_stream_t s1 = test_stream(false), s2 = test_stream(false);
  void *a = alloc_on(6 * MiB, s1);
  void *b = alloc_on(8 * MiB, s2);
  cr_assert_eq(arena_of(a)->arena, 0);
  cr_assert_eq(arena_of(b)->arena, 1);
  bool exact = stats0().allocated_bytes.peak == 14 * MiB && stats0().requested_bytes.peak == 14 * MiB;
  cr_assert_eq(cudalloc_free_sync(b), cudaSuccess);
  void *c = alloc_on(4 * MiB, s1);
  exact = exact && stats0().allocated_bytes.peak == 14 * MiB && stats0().allocated_bytes.current == 10 * MiB;
  cudalloc_reset_peaks();
  exact = exact && stats0().allocated_bytes.peak == 10 * MiB && stats0().requested_bytes.peak == 10 * MiB;
  void *d = alloc_on(2 * MiB, s2);   /* arena 1 rises past the lease the reset left it */
  exact = exact && stats0().allocated_bytes.peak == 12 * MiB;
  cr_assert_eq(cudalloc_free_sync(a), cudaSuccess);
  cr_assert_eq(cudalloc_free_sync(c), cudaSuccess);
  cr_assert_eq(cudalloc_free_sync(d), cudaSuccess);
  return exact;
}

Test(core_arena_peaks, arenas_that_hold_memory_at_once_add_up) {
  core_start("arenas:2,arena_spread:first,sim_events:auto");
  cr_assert(held_at_once_add_up(), "the ordinal's peaks are not the sums at one moment");
}

Test(core_arena_peaks, a_rise_that_asks_no_lease_is_caught) {
  core_start("arenas:2,arena_spread:first,sim_events:auto");
  ca_debug.arena_lease_never_asks = true;
  bool exact = held_at_once_add_up();
  ca_debug.arena_lease_never_asks = false;
  cr_assert_not(exact, "the planted fault went unnoticed: the peaks missed no rise");
}

// ----------------------------------------------------------------------------
// Threads in lock step
// ----------------------------------------------------------------------------

#define ROUNDS 200
#define MAX_THREADS 3
static pthread_barrier_t step;
static int nthreads;
static size_t size_of(int thread, int round) {   /* MiB multiples: no rounding */
  return (size_t)(1 + (round * 7 + thread * 13) % 17) * MiB;
}

typedef struct {
  int id;
  ca_stream_t stream;
  int arena;
} lockstep_t;

/* Each round: the threads allocate one at a time in turn, then free one
 * at a time in turn, each move between two barriers: every moment's sum is
 * known, and the round's highest is all of its sizes together. */
static void *lockstep(void *arg) {
  lockstep_t *w = arg;
  ca_state.be->set_device(0);
  for (int r = 0; r < ROUNDS; r++) {
    void *p = NULL;
    for (int t = 0; t < nthreads; t++) {
      pthread_barrier_wait(&step);
      if (t != w->id) continue;
      if (cudalloc_malloc(&p, size_of(w->id, r), (cudaStream_t)w->stream)) p = NULL;
      ca_device_t *d = p ? ca_device_lock_owner((uintptr_t)p) : NULL;
      w->arena = d ? d->arena : -1;
      if (d) ca_devlock_release(&d->lock);
    }
    for (int t = 0; t < nthreads; t++) {
      pthread_barrier_wait(&step);
      if (t == w->id && p) cudalloc_free_sync(p);
    }
  }
  return NULL;
}

static void threads_in_lock_step(int threads) {
  char conf[96];
  snprintf(conf, sizeof conf, "arenas:%d,arena_spread:first,sim_events:auto", threads);
  core_start(conf);
  nthreads = threads;
  pthread_barrier_init(&step, NULL, (unsigned)threads);
  lockstep_t w[MAX_THREADS];
  int64_t want = 0;
  for (int r = 0; r < ROUNDS; r++) {
    int64_t all = 0;
    for (int i = 0; i < threads; i++) all += (int64_t)size_of(i, r);
    if (all > want) want = all;
  }
  pthread_t t[MAX_THREADS];
  for (int i = 0; i < threads; i++) {
    w[i] = (lockstep_t){i, test_stream(false), -1};
    pthread_create(&t[i], NULL, lockstep, &w[i]);
  }
  for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
  pthread_barrier_destroy(&step);
  for (int i = 0; i < threads; i++) {
    cr_assert_geq(w[i].arena, 0, "thread %d: an allocation failed", i);
    for (int j = 0; j < i; j++) cr_assert_neq(w[i].arena, w[j].arena, "threads %d and %d shared an arena", i, j);
  }
  cudalloc_stats_t s = stats0();
  cr_assert_eq(s.allocated_bytes.current, 0);
  cr_assert_eq(s.allocated_bytes.peak, want, "peak allocated %lld, the highest moment %lld",
               (long long)s.allocated_bytes.peak, (long long)want);
  cr_assert_eq(s.requested_bytes.peak, want);
}

Test(core_arena_peaks, two_threads_peak_at_the_highest_moment) { threads_in_lock_step(2); }
Test(core_arena_peaks, three_threads_peak_at_the_highest_moment) { threads_in_lock_step(3); }

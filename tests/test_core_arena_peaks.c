/* The ordinal's peaks of allocated and requested bytes at arenas:N are
 * exact (alloc/arena.h's leases), not the sum of its arenas' own peaks:
 * arenas that peak one after the other hold no more than one of them
 * did; arenas that hold memory at once add up; a reset starts from what
 * is live; two threads on two arenas, in lock step by barriers so that
 * every moment's sum is known, peak at the highest of those sums. The
 * planted fault arena_lease_never_asks (an arena's rise past its lease
 * asks for none, so the peaks miss it) is caught. */
#include "core_testing.h"

#include <pthread.h>

TestSuite(core_arena_peaks, .fini = core_fini, .timeout = 60);

static ca_device_t *arena(int k) { return ca_state.devices[k * CA_MAX_DEVICES]; }

static void *alloc_on(size_t size, ca_stream_t s) {
  void *p = NULL;
  cr_assert_eq(cudalloc_malloc(&p, size, (cudaStream_t)s), cudaSuccess, "allocation of %zu bytes", size);
  return p;
}

static int arena_index(const void *p) {
  ca_device_t *d = ca_device_lock_owner((uintptr_t)p);
  cr_assert_not_null(d, "no arena holds %p", p);
  ca_devlock_release(&d->lock);
  return d->arena;
}

static cudalloc_stats_t ordinal_stats(void) {
  cudalloc_stats_t s;
  cr_assert_eq(cudalloc_get_stats(0, &s), cudaSuccess);
  return s;
}

/* Arena 0 holds 10 MiB and frees it; arena 1 then holds 10 MiB: the
 * ordinal never held more than 10 (the arenas' peaks add up to 20). */
Test(core_arena_peaks, arenas_that_peak_in_turn_are_not_added) {
  core_start("arenas:2,arena_spread:first,sim_events:auto");
  ca_stream_t s1 = test_stream(false), s2 = test_stream(false);
  void *a = alloc_on(10 * MiB, s1);
  cr_assert_eq(cudalloc_free_sync(a), cudaSuccess);
  void *b = alloc_on(10 * MiB, s2);
  cr_assert_eq(arena_index(a), 0);
  cr_assert_eq(arena_index(b), 1);
  cudalloc_stats_t s = ordinal_stats();
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
  cr_assert_eq(arena_index(a), 0);
  cr_assert_eq(arena_index(b), 1);
  bool exact = ordinal_stats().allocated_bytes.peak == 14 * MiB && ordinal_stats().requested_bytes.peak == 14 * MiB;
  cr_assert_eq(cudalloc_free_sync(b), cudaSuccess);
  void *c = alloc_on(4 * MiB, s1);
  exact = exact && ordinal_stats().allocated_bytes.peak == 14 * MiB && ordinal_stats().allocated_bytes.current == 10 * MiB;
  cudalloc_reset_peaks();
  exact = exact && ordinal_stats().allocated_bytes.peak == 10 * MiB && ordinal_stats().requested_bytes.peak == 10 * MiB;
  void *d = alloc_on(2 * MiB, s2);   /* arena 1 rises past the lease the reset left it */
  exact = exact && ordinal_stats().allocated_bytes.peak == 12 * MiB;
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
// Two threads in lock step
// ----------------------------------------------------------------------------

#define ROUNDS 200
static pthread_barrier_t step;
static size_t size_of(int thread, int round) {   /* MiB multiples: no rounding */
  return (size_t)(1 + (round * 7 + thread * 13) % 17) * MiB;
}

typedef struct {
  int id;
  ca_stream_t stream;
  int arena;
} lockstep_t;

/* Each round: both allocate (thread 0 first, then thread 1), both free
 * (thread 0 first): the round's highest sum is its two sizes together. */
static void *lockstep(void *arg) {
  lockstep_t *w = arg;
  ca_state.be->set_device(0);
  for (int r = 0; r < ROUNDS; r++) {
    void *p = NULL;
    if (w->id == 1) pthread_barrier_wait(&step);
    if (cudalloc_malloc(&p, size_of(w->id, r), (cudaStream_t)w->stream)) return NULL;
    ca_device_t *d = ca_device_lock_owner((uintptr_t)p);
    w->arena = d->arena;
    ca_devlock_release(&d->lock);
    if (w->id == 0) pthread_barrier_wait(&step);
    pthread_barrier_wait(&step);   /* both hold theirs */
    if (w->id == 1) pthread_barrier_wait(&step);
    cudalloc_free_sync(p);
    if (w->id == 0) pthread_barrier_wait(&step);
    pthread_barrier_wait(&step);   /* both freed */
  }
  return NULL;
}

Test(core_arena_peaks, two_threads_peak_at_the_highest_moment) {
  core_start("arenas:2,arena_spread:first,sim_events:auto");
  pthread_barrier_init(&step, NULL, 2);
  lockstep_t w[2] = {{0, test_stream(false), -1}, {1, test_stream(false), -1}};
  int64_t want = 0;
  for (int r = 0; r < ROUNDS; r++) {
    int64_t both = (int64_t)(size_of(0, r) + size_of(1, r));
    if (both > want) want = both;
  }
  pthread_t t[2];
  for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, lockstep, &w[i]);
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  pthread_barrier_destroy(&step);
  cr_assert_neq(w[0].arena, w[1].arena, "the threads shared an arena");
  cudalloc_stats_t s = ordinal_stats();
  cr_assert_eq(s.allocated_bytes.current, 0);
  cr_assert_eq(s.allocated_bytes.peak, want, "peak allocated %lld, the highest moment %lld",
               (long long)s.allocated_bytes.peak, (long long)want);
  cr_assert_eq(s.requested_bytes.peak, want);
}

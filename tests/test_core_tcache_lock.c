/* The front cache's asymmetric lock (alloc/tcache_lock.c): its owner takes
 * it with a plain store and a load, another thread with a claim, one
 * membarrier and a wait. Each guard has a twin with the test-only switch
 * that breaks it: tclock_owner_ignores_stop (the owner does not look for a
 * claim), tclock_no_membarrier (the claimer skips the barrier that stands
 * for the owner's fence), tclock_fenced_relaxed (without membarrier, the
 * owner's take makes a plain store and load instead of fencing). */
#include "core_testing.h"

#include <pthread.h>
#include <sched.h>
#include <time.h>

#include "tcache.h"
#include "tcache_lock.h"

static void sim_only(void) { SKIP_ON_CUDA("the simulated device's counters"); }
static void fini(void) {
  ca_sim_complete_all();
  core_fini();
}
TestSuite(core_tcache_lock, .init = sim_only, .fini = fini);

#define SMALL 4096

// ----------------------------------------------------------------------------
// Through the cache: a hold by another thread keeps the owner out
// ----------------------------------------------------------------------------

typedef struct {
  ca_stream_t s;
  void *p;
  pthread_mutex_t m;
  pthread_cond_t cv;
  int step;                 /* 1: p allocated; 2: held by main; 3: tried while held */
  bool given_while_held;
} owner_t;

static void wait_step(owner_t *o, int step) {
  pthread_mutex_lock(&o->m);
  while (o->step < step) pthread_cond_wait(&o->cv, &o->m);
  pthread_mutex_unlock(&o->m);
}
static void set_step(owner_t *o, int step) {
  pthread_mutex_lock(&o->m);
  o->step = step;
  pthread_cond_broadcast(&o->cv);
  pthread_mutex_unlock(&o->m);
}

/* The owner: allocates p on its stream (so that its cache will take p's
 * free), waits until main holds every cache, then tries the free into its
 * cache while held. */
static void *owner(void *arg) {
  owner_t *o = arg;
  cr_assert_eq(cudalloc_malloc(&o->p, SMALL, (cudaStream_t)o->s), cudaSuccess);
  set_step(o, 1);
  wait_step(o, 2);
  o->given_while_held = ca_tcache_give(o->p, o->s);
  set_step(o, 3);
  return NULL;
}

/* Returns whether the owner's free went into its cache while main held
 * every cache (ca_tcache_quiesce: what a reader of the live blocks does). */
static bool owner_gets_in_while_held(bool ignore_stop, bool exchange) {
  ca_debug.tclock_exchange = exchange;   /* before the first cache: the mode is chosen once per process */
  core_start("track:caller,sim_events:auto");
  ca_debug.tclock_owner_ignores_stop = ignore_stop;
  owner_t o = {.s = test_stream(true), .m = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
  ca_stream_created(o.s, true);
  pthread_t t;
  pthread_create(&t, NULL, owner, &o);
  wait_step(&o, 1);
  ca_tcache_quiesce();
  set_step(&o, 2);
  wait_step(&o, 3);
  ca_tcache_resume();
  pthread_join(t, NULL);
  ca_debug.tclock_owner_ignores_stop = false;
  cr_assert_eq(ca_tclock_asymmetric, !exchange, "the mode asked for");
  if (!o.given_while_held) cr_assert_eq(cudalloc_free(o.p, (cudaStream_t)o.s), cudaSuccess, "still the program's");
  return o.given_while_held;
}

Test(core_tcache_lock, the_mode_here_is_asymmetric) {
  core_start("track:caller,sim_events:auto");
  void *p = NULL;
  ca_stream_t s = test_stream(true);
  ca_stream_created(s, true);
  cr_assert_eq(cudalloc_malloc(&p, SMALL, (cudaStream_t)s), cudaSuccess);
  cr_assert(ca_tclock_asymmetric, "this kernel has membarrier's private expedited command: the tests below need it");
  cr_assert_eq(cudalloc_free(p, (cudaStream_t)s), cudaSuccess);
}

Test(core_tcache_lock, another_threads_hold_keeps_the_owner_out) {
  cr_assert_not(owner_gets_in_while_held(false, false), "the free went to the core while every cache was held");
}

/* Where membarrier is missing: both sides fence. */
Test(core_tcache_lock, in_exchange_mode_another_threads_hold_keeps_the_owner_out) {
  cr_assert_not(owner_gets_in_while_held(false, true), "the free went to the core while every cache was held");
}

Test(core_tcache_lock, an_owner_that_ignores_the_claim_gets_in) {
  cr_assert(owner_gets_in_while_held(true, false), "the broken lock let the owner in: the test above catches it");
}

/* The twin without membarrier: the owner's one test of stop is what keeps
 * it out there too (stop says FENCED for good, and CLAIMED while held). */
Test(core_tcache_lock, in_exchange_mode_an_owner_that_ignores_the_claim_gets_in) {
  cr_assert(owner_gets_in_while_held(true, true), "the broken lock let the owner in: the test above catches it");
}

// ----------------------------------------------------------------------------
// The lock alone, raced: the owner's takes against another thread's
// ----------------------------------------------------------------------------

typedef struct {
  ca_tclock_t lock;
  long inside;              /* bumped in both critical sections by a load and a store: lost when both are inside */
  long plain;               /* the same without atomics, where TSan must see every take ordered */
  bool with_plain;
  long owner_takes, other_takes;
  int stop_racing;
} race_t;

/* The critical section of either side. */
static void inside(race_t *r, long *takes) {
  long v = __atomic_load_n(&r->inside, __ATOMIC_RELAXED);
  __atomic_store_n(&r->inside, v + 1, __ATOMIC_RELAXED);
  if (r->with_plain) r->plain++;
  __atomic_store_n(takes, *takes + 1, __ATOMIC_RELAXED);
}

static void *owner_races(void *arg) {
  race_t *r = arg;
  while (!__atomic_load_n(&r->stop_racing, __ATOMIC_ACQUIRE))
    if (ca_tclock_try(&r->lock)) {
      inside(r, &r->owner_takes);
      ca_tclock_release(&r->lock);
    }
  return NULL;
}

#define RACE_MS 500
/* Both sides must have been inside often for a race to mean anything: on a
 * loaded machine the race goes on past RACE_MS until the owner has (it
 * failed "the owner took the lock" at load 6 when it stopped at RACE_MS). */
#define RACE_MIN_OWNER_TAKES 1000
#define RACE_MAX_MS 20000

static long elapsed_ms(const struct timespec *a, const struct timespec *b) {
  return (b->tv_sec - a->tv_sec) * 1000 + (b->tv_nsec - a->tv_nsec) / 1000000;
}

/* Races the owner's takes against another thread's for RACE_MS;
 * returns the updates lost (both inside at once). */
static long lost_updates_broken(bool no_membarrier, bool exchange, bool fenced_relaxed) {
  ca_debug.tclock_exchange = exchange;
  ca_tclock_init();
  cr_assert_eq(ca_tclock_asymmetric, !exchange, "membarrier's private expedited command is available here");
  ca_debug.tclock_no_membarrier = no_membarrier;
  ca_debug.tclock_fenced_relaxed = fenced_relaxed;
  no_membarrier |= fenced_relaxed;   /* either way broken: stop at the first loss, no plain count */
  race_t r = {.with_plain = !no_membarrier};   /* broken, TSan would report the plain one */
  ca_tclock_make(&r.lock);   /* in the mode chosen (without membarrier its stop word says so) */
  pthread_t t;
  pthread_create(&t, NULL, owner_races, &r);
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  long lost = 0, owner = 0;
  do {
    for (int i = 0; i < 1000; i++) {
      ca_tclock_claim(&r.lock);
      ca_tclock_barrier(true);
      ca_tclock_await(&r.lock);
      inside(&r, &r.other_takes);
      ca_tclock_release_other(&r.lock);
      /* a window with no claim: without it a loaded machine could run the
       * owner only while the claim stood, and the race proved nothing */
      if (i % 16 == 0) sched_yield();
    }
    clock_gettime(CLOCK_MONOTONIC, &now);
    owner = __atomic_load_n(&r.owner_takes, __ATOMIC_RELAXED);
    lost = owner + r.other_takes - __atomic_load_n(&r.inside, __ATOMIC_RELAXED);   /* approximate while racing */
  } while ((elapsed_ms(&start, &now) < RACE_MS ||
            (owner < RACE_MIN_OWNER_TAKES && elapsed_ms(&start, &now) < RACE_MAX_MS)) &&
           !(no_membarrier && lost > 0));
  __atomic_store_n(&r.stop_racing, 1, __ATOMIC_RELEASE);
  pthread_join(t, NULL);
  ca_debug.tclock_no_membarrier = false;
  ca_debug.tclock_fenced_relaxed = false;
  cr_assert_gt(r.owner_takes, 0, "the owner took the lock within %d ms", RACE_MAX_MS);
  if (r.with_plain) cr_assert_eq(r.plain, r.inside);
  return r.owner_takes + r.other_takes - r.inside;
}

static long lost_updates(bool no_membarrier, bool exchange) {
  return lost_updates_broken(no_membarrier, exchange, false);
}

Test(core_tcache_lock, the_owner_and_another_thread_are_never_inside_at_once) {
  cr_assert_eq(lost_updates(false, false), 0);
}

Test(core_tcache_lock, in_exchange_mode_too) { cr_assert_eq(lost_updates(false, true), 0); }

/* Without the barrier, the owner's store may wait in its store buffer past
 * its load of the claim while the claimer's load misses it: both inside.
 * That needs the two threads running at the same instant, which a loaded
 * machine may not give within RACE_MS: then the twin says so and skips. */
Test(core_tcache_lock, without_the_barrier_both_get_in) {
  long lost = lost_updates(true, false);
  if (!lost) cr_skip_test("no collision within %d ms here (the threads may not have run in parallel)", RACE_MS);
  cr_assert_gt(lost, 0, "updates lost: the test above catches the missing barrier");
}

/* The same in exchange mode (no membarrier): the owner's fenced take is
 * the guard there, and without its fence the owner's store may pass its
 * load of the claim in the same way. */
Test(core_tcache_lock, in_exchange_mode_without_the_owners_fence_both_get_in) {
  long lost = lost_updates_broken(false, true, true);
  if (!lost) cr_skip_test("no collision within %d ms here (the threads may not have run in parallel)", RACE_MS);
  cr_assert_gt(lost, 0, "updates lost: in_exchange_mode_too catches the missing fence");
}

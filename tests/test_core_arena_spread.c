/* arena_spread:contended (alloc/siblings.c), the default way of arenas:N:
 * a thread allocates from its device's first arena, whatever its streams,
 * until its takes of the device lock keep waiting; it then moves to the
 * ordinal's next arena in turn, and moves again only after a window twice
 * as long. Contention is planted by adding to the thread's count of waited
 * takes (ca_devlock_contended), so that the tests do not depend on the
 * machine's timing. The first guard's twin is arena_spread:first, the
 * policy that spreads a one-thread program's streams (test_replay_economy
 * replays the ten-stream snapshot both ways). */
#include "arena_testing.h"

#include <pthread.h>

#include "devlock.h"

TestSuite(core_arena_spread, .fini = core_fini, .timeout = 120);

/* SPREAD_WINDOW, SPREAD_CONTENDED of siblings.c: what a test must pass. */
#define WINDOW 256
#define CONTENDED 32
#define NSTREAMS 8

/* One thread, eight streams, three windows of allocations above the front
 * cache's sizes: the arenas other than the first that any block went to. */
static int other_arenas_used(const char *conf) {
  core_start(conf);
  ca_stream_t s[NSTREAMS];
  for (int i = 0; i < NSTREAMS; i++) s[i] = test_stream(i & 1);
  int others = 0;
  for (int i = 0; i < 3 * WINDOW; i++) {
    void *p = alloc_on(128 << 10, s[i % NSTREAMS]);
    others |= arena_of(p)->arena ? 1 << arena_of(p)->arena : 0;
    cr_assert_eq(cudalloc_free(p, (cudaStream_t)s[i % NSTREAMS]), cudaSuccess);
  }
  cr_assert_eq(cudalloc_check(), 0);
  cr_assert_eq(ca_sim_oracle_violations(), 0, "the reuse oracle: %s", ca_sim_oracle_report(0));
  return __builtin_popcount((unsigned)others);
}

Test(core_arena_spread, one_thread_keeps_the_first_arena_whatever_its_streams) {
  cr_assert_eq(other_arenas_used("arenas:4,sim_events:auto"), 0);
  for (int k = 1; k < 4; k++) cr_assert_null(arena(k), "arena %d was made", k);
}

Test(core_arena_spread, spreading_at_first_sight_is_caught) {
  cr_assert_geq(other_arenas_used("arenas:4,arena_spread:first,sim_events:auto"), 1);
}

/* Allocates n blocks on s, each freed at once, and returns the arena of
 * the last one. */
static int arena_after(int n, ca_stream_t s) {
  int k = -1;
  for (int i = 0; i < n; i++) {
    void *p = alloc_on(128 << 10, s);
    k = arena_of(p)->arena;
    cr_assert_eq(cudalloc_free(p, (cudaStream_t)s), cudaSuccess);
  }
  return k;
}

typedef struct {
  ca_stream_t s;
  int before, after;
} mover_t;

/* A window of allocations with waits planted, on a thread of its own. */
static void *contend_a_window(void *arg) {
  mover_t *m = arg;
  ca_state.be->set_device(0);
  m->before = arena_after(WINDOW - 1, m->s);
  ca_devlock_contended += CONTENDED;
  m->after = arena_after(1, m->s);
  return NULL;
}

Test(core_arena_spread, a_contended_thread_moves_and_the_next_one_takes_the_other_arena) {
  core_start("arenas:2,sim_events:auto");
  mover_t a = {.s = test_stream(false)}, b = {.s = test_stream(false)};
  pthread_t t;
  pthread_create(&t, NULL, contend_a_window, &a);
  pthread_join(t, NULL);
  cr_assert_eq(a.before, 0, "a thread starts in the first arena");
  cr_assert_eq(a.after, 1, "the window's waits moved it to arena 1");
  pthread_create(&t, NULL, contend_a_window, &b);
  pthread_join(t, NULL);
  cr_assert_eq(b.before, 0);
  cr_assert_eq(b.after, 0, "the second to move, at arenas:2: arena 0 (the first has arena 1)");
  cr_assert_eq(cudalloc_check(), 0);
}

/* Fewer waits than the bound leave the thread home; after a move, the
 * next window is twice as long and needs twice the waits. */
Test(core_arena_spread, a_thread_moves_only_on_enough_waits_and_then_less_often) {
  core_start("arenas:3,sim_events:auto");
  ca_stream_t s = test_stream(false);
  cr_assert_eq(arena_after(WINDOW - 1, s), 0);
  ca_devlock_contended += CONTENDED - 1;
  cr_assert_eq(arena_after(1, s), 0, "31 waits in a window: no move");
  cr_assert_eq(arena_after(WINDOW - 1, s), 0);
  ca_devlock_contended += CONTENDED;
  cr_assert_eq(arena_after(1, s), 1, "32 waits: moved to arena 1");
  cr_assert_eq(arena_after(WINDOW - 1, s), 1);
  ca_devlock_contended += 2 * CONTENDED;
  cr_assert_eq(arena_after(1, s), 1, "a window of 256 no longer ends the window: 512 now");
  cr_assert_eq(arena_after(WINDOW - 1, s), 1);
  ca_devlock_contended += 2 * CONTENDED;
  cr_assert_eq(arena_after(1, s), 2, "the longer window's waits: arena 2");
  cr_assert_eq(cudalloc_check(), 0);
}

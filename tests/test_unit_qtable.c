/* Unit tests of qtable.c, the stream queues by (stream, owner): open
 * addressing with backward-shift deletion, and the lists a seal and a poll
 * visit. After any interleaving of puts and deletions every queue put and
 * not deleted is found, every deleted one is not, and the lists hold each
 * queue once. The twin with qtable_no_shift (deletion leaves a hole in the
 * middle of a run) loses queues. And a slow path with 64 streams visits
 * only the queues that have something to seal or poll. */
#include "core_testing.h"

TestSuite(unit_qtable, .fini = core_fini);

#define QUEUES 3000

/* Returns how many queues the table got wrong: live ones it could not
 * find, removed ones it still finds. */
static int wrong_after_churn(bool no_shift) {
  ca_debug.qtable_no_shift = no_shift;
  static ca_device_t d;
  static ca_queue_t q[QUEUES];
  static bool in[QUEUES];
  memset(&d, 0, sizeof d);
  memset(q, 0, sizeof q);
  memset(in, 0, sizeof in);
  uint64_t seed = 12;
  for (int i = 0; i < QUEUES; i++) {
    q[i].stream = (ca_stream_t)(uintptr_t)(0x7f0000001000ull + 0x40ull * (uint64_t)(i % 700));
    q[i].owner = (uint64_t)(i / 700);   /* the same handle on several threads */
  }
  for (int round = 0; round < 4 * QUEUES; round++) {
    int i = (int)(rng_next(&seed) % QUEUES);
    if (in[i]) ca_qtable_remove(&d, &q[i]);
    else cr_assert(ca_qtable_put(&d, &q[i]));
    in[i] = !in[i];
  }
  int wrong = 0;
  size_t listed = 0;
  for (ca_queue_t *x = ca_qlist_first(&d, CA_QL_ALL); x; x = ca_qlist_next(x, CA_QL_ALL)) listed++;
  for (int i = 0; i < QUEUES; i++) {
    ca_queue_t *got = ca_qtable_get(&d, q[i].stream, q[i].owner);
    if (in[i] != (got == &q[i])) wrong++;
    listed -= in[i];
  }
  cr_assert_eq(listed, 0, "the list of all queues holds exactly the queues put");
  ca_qtable_free(&d);
  return wrong;
}

Test(unit_qtable, every_queue_put_is_found_after_churn) { cr_assert_eq(wrong_after_churn(false), 0); }

Test(unit_qtable, deletion_without_shift_is_caught) {
  cr_assert_gt(wrong_after_churn(true), 0, "a hole in a run hides the queues behind it");
}

/* The memo of the last lookup: a removed queue (a destroyed stream, whose
 * handle a new stream may get) must not answer for its (stream, owner),
 * nor must a queue answer for another owner of the same handle. Returns
 * what a lookup of the removed queue's key found. */
static ca_queue_t *found_after_removing_the_last_found(bool keep_last) {
  ca_debug.qtable_keep_last = keep_last;
  static ca_device_t d;
  static ca_queue_t a, b, other_owner;
  memset(&d, 0, sizeof d);
  a = (ca_queue_t){.stream = (ca_stream_t)0x1000, .owner = 0};
  b = (ca_queue_t){.stream = (ca_stream_t)0x2000, .owner = 0};
  other_owner = (ca_queue_t){.stream = (ca_stream_t)0x1000, .owner = 7};
  cr_assert(ca_qtable_put(&d, &a) && ca_qtable_put(&d, &b) && ca_qtable_put(&d, &other_owner));
  cr_assert_eq(ca_qtable_get(&d, a.stream, 0), &a);
  cr_assert_eq(ca_qtable_get(&d, a.stream, 0), &a, "the memo's answer is the table's");
  cr_assert_eq(ca_qtable_get(&d, a.stream, 7), &other_owner, "the memo is keyed on the owner too");
  cr_assert_eq(ca_qtable_get(&d, b.stream, 0), &b);
  cr_assert_eq(ca_qtable_get(&d, a.stream, 0), &a);
  ca_qtable_remove(&d, &a);
  ca_queue_t *got = ca_qtable_get(&d, a.stream, 0);
  cr_assert_eq(ca_qtable_get(&d, b.stream, 0), &b, "the other queues are still found");
  ca_qtable_free(&d);
  ca_debug.qtable_keep_last = false;
  return got;
}

Test(unit_qtable, a_removed_queue_is_not_found_through_the_memo) {
  cr_assert_null(found_after_removing_the_last_found(false));
}

Test(unit_qtable, a_memo_that_outlives_its_queue_is_caught) {
  cr_assert_not_null(found_after_removing_the_last_found(true), "the stale memo answers for a removed queue");
}

/* 64 streams with a sealed-and-completed past and blocks reused on their
 * own stream, then slow paths on one stream: how many queues they visit. */
static uint64_t visits_with_64_streams(bool visit_all) {
  SKIP_ON_CUDA("counts the queues the core visits on the simulated device");
  core_start("sim_events:manual,thread_cache_kb:0");   /* the frees reach the queues */
  ca_debug.visit_all_queues = visit_all;
  ca_stream_t s[64];
  for (int i = 0; i < 64; i++) {
    s[i] = test_stream(false);
    void *p = NULL;
    cr_assert_eq(cudalloc_malloc(&p, 4096, (cudaStream_t)s[i]), cudaSuccess);
    cr_assert_eq(cudalloc_free(p, (cudaStream_t)s[i]), cudaSuccess);
  }
  seal_and_poll();          /* every queue sealed */
  ca_sim_complete_all();
  seal_and_poll();          /* and released: nothing is left to seal or poll */
  uint64_t before = ca_debug.queue_visits;
  for (int i = 0; i < 10; i++) {
    void *p = NULL;
    cr_assert_eq(cudalloc_malloc(&p, 4096, (cudaStream_t)s[0]), cudaSuccess);
    cr_assert_eq(cudalloc_free(p, (cudaStream_t)s[0]), cudaSuccess);
    seal_and_poll();        /* as a slow path does */
    ca_sim_complete_all();
  }
  CHECK_CONSISTENT();
  for (int i = 0; i < 64; i++) ca_stream_destroyed(s[i]);
  return ca_debug.queue_visits - before;
}

Test(unit_qtable, a_slow_path_visits_only_busy_queues) {
  uint64_t v = visits_with_64_streams(false);
  cr_assert_leq(v, 20, "10 seals and polls of one busy stream visited %llu queues", (unsigned long long)v);
  cr_assert_gt(v, 0, "the tally counts visits");
}

Test(unit_qtable, visiting_every_queue_is_caught) {
  cr_assert_gt(visits_with_64_streams(true), 20 * 64 / 2, "walking all 64 queues each time");
}

/* Regression: a seal of every stream makes a fence per busy queue, and the
 * core kept 8 spare fences: with 32 busy streams, each round of seal and
 * release allocated 24 fences with the program's calloc and freed them
 * again (about 3,200 calls of each in 100,000 GPU-like pairs at 64
 * streams). Now a spare is kept per queue: from the second round on,
 * nothing is allocated. */
Test(unit_qtable, seals_of_many_streams_reuse_their_fences) {
  SKIP_ON_CUDA("counts the simulated device's fences");
  core_start("sim_events:manual,thread_cache_kb:0");   /* the frees reach the queues */
  enum { STREAMS = 32, ROUNDS = 6 };
  ca_stream_t s[STREAMS];
  for (int i = 0; i < STREAMS; i++) s[i] = test_stream(false);
  uint64_t after_first = 0;
  for (int r = 0; r < ROUNDS; r++) {
    for (int i = 0; i < STREAMS; i++) {
      void *p = NULL;
      cr_assert_eq(cudalloc_malloc(&p, 4096, (cudaStream_t)s[i]), cudaSuccess);
      cr_assert_eq(cudalloc_free(p, (cudaStream_t)s[i]), cudaSuccess);
    }
    seal_and_poll();        /* a fence per stream */
    ca_sim_complete_all();
    seal_and_poll();        /* all released */
    if (r == 0) after_first = ca_debug.fence_allocs;
  }
  cr_assert_gt(after_first, 0, "the tally counts the fences allocated");
  cr_assert_eq(ca_debug.fence_allocs, after_first, "%llu fences allocated after the first round",
               (unsigned long long)(ca_debug.fence_allocs - after_first));
  CHECK_CONSISTENT();
  for (int i = 0; i < STREAMS; i++) ca_stream_destroyed(s[i]);
}

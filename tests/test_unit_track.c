/* Unit tests of track.c and stackwalk.c: what a block stores as its call
 * site under each `track` setting, the interning of stacks (identical
 * stacks are stored once: the same pointer; different stacks or depths are
 * not), and the cached stack walk of track:stack: it tells apart the
 * callers of a helper and their callers, as the uncached unwinder does. */
#include <criterion/criterion.h>
#include <pthread.h>

#include "core_testing.h"

static void track(ca_track_t how, unsigned depth) {
  ca_config_defaults(&ca_config);
  ca_config.track = how;
  ca_config.track_depth = depth;
}

/* One allocating call site of the "program": each call of it from the same
 * line of a caller yields the same stack. */
__attribute__((noinline)) static void *site_here(void) {
  void *site = ca_track_site(__builtin_return_address(0));
  __asm__ volatile("" ::: "memory");   /* keep the call a call, not a tail call */
  return site;
}

TestSuite(unit_track, .fini = ca_track_forget);

Test(unit_track, identical_stacks_are_stored_once) {
  track(CA_TRACK_BACKTRACE, 16);
  void *sites[4];
  volatile int count = 4;   /* a count the compiler cannot unroll into four call sites */
  for (int i = 0; i < count; i++) sites[i] = site_here();   /* one line: one stack */
  cr_assert_not_null(sites[0]);
  for (int i = 1; i < 4; i++) cr_assert_eq(sites[i], sites[0], "call %d stored a second copy", i);
  void *const *frames;
  int n = ca_track_frames(sites[0], &frames);
  cr_assert_geq(n, 2, "the test's frame and its caller's");
  cr_assert_leq(n, 16, "no deeper than track_depth");
}

Test(unit_track, different_stacks_are_stored_apart) {
  track(CA_TRACK_BACKTRACE, 16);
  void *a = site_here();
  void *b = site_here();   /* another line: another innermost frame */
  cr_assert_neq(a, b);
  void *const *fa, *const *fb;
  int na = ca_track_frames(a, &fa), nb = ca_track_frames(b, &fb);
  cr_assert_eq(na, nb, "the same depth below the two lines");
  cr_assert_neq(fa[0], fb[0], "the innermost frames differ");
  for (int i = 1; i < na; i++) cr_assert_eq(fa[i], fb[i], "the outer frames are shared (frame %d)", i);
}

/* Both depths start at the same line, inside this function. */
__attribute__((noinline)) static void *site_at_depth(unsigned depth) {
  ca_config.track_depth = depth;
  void *site = site_here();
  __asm__ volatile("" ::: "memory");
  return site;
}

Test(unit_track, a_shallower_stack_of_the_same_frames_is_its_own_entry) {
  track(CA_TRACK_BACKTRACE, 16);
  void *deep = site_at_depth(16), *shallow = site_at_depth(1);
  cr_assert_neq(deep, shallow);
  void *const *fd, *const *fs;
  cr_assert_eq(ca_track_frames(shallow, &fs), 1);
  cr_assert_gt(ca_track_frames(deep, &fd), 1);
  cr_assert_eq(fs[0], fd[0], "both start at the allocating line");
}

Test(unit_track, caller_and_off_store_no_backtrace) {
  track(CA_TRACK_CALLER, 16);
  void *caller = (void *)0x1234;
  cr_assert_eq(ca_track_site(caller), caller, "track:caller stores the return address itself");
  void *const *frames;
  cr_assert_eq(ca_track_frames(caller, &frames), 1);
  cr_assert_eq(frames[0], caller);
  track(CA_TRACK_OFF, 16);
  cr_assert_null(ca_track_site(caller), "track:off stores nothing");
  cr_assert_eq(ca_track_frames(NULL, &frames), 0);
}

// ----------------------------------------------------------------------------
// track:stack, the cached walk: a helper's callers, and theirs

/* The allocating call (cudaMalloc in the shim): its return address is the caller. */
__attribute__((noinline)) static void *alloc_call(void) {
  void *site = ca_track_site(__builtin_return_address(0));
  __asm__ volatile("" ::: "memory");
  return site;
}

/* An allocation helper (the workload's dev_alloc): one call instruction for all. */
__attribute__((noinline)) static void *helper(void) {
  void *site = alloc_call();
  __asm__ volatile("" ::: "memory");
  return site;
}

__attribute__((noinline)) static void *from_a(void) {
  void *site = helper();
  __asm__ volatile("" ::: "memory");
  return site;
}

__attribute__((noinline)) static void *from_b(void) {
  void *site = helper();
  __asm__ volatile("" ::: "memory");
  return site;
}

/* A second layer: a and b call mid, which calls the helper. */
__attribute__((noinline)) static void *mid(void) {
  void *site = helper();
  __asm__ volatile("" ::: "memory");
  return site;
}

__attribute__((noinline)) static void *mid_from_a(void) {
  void *site = mid();
  __asm__ volatile("" ::: "memory");
  return site;
}

__attribute__((noinline)) static void *mid_from_b(void) {
  void *site = mid();
  __asm__ volatile("" ::: "memory");
  return site;
}

/* Each pair twice, interleaved: the second round is served by the cache. */
static void expect_told_apart(void *(*a)(void), void *(*b)(void), int differing_frame) {
  void *sa = NULL, *sb = NULL;
  for (volatile int round = 0; round < 3; round++) {
    void *x = a(), *y = b();
    if (round) {
      cr_assert_eq(x, sa, "round %d: the same stack is the same site", round);
      cr_assert_eq(y, sb, "round %d: the same stack is the same site", round);
    }
    sa = x;
    sb = y;
  }
  cr_assert_neq(sa, sb, "two callers, one site: the helper's callers are not told apart");
  void *const *fa, *const *fb;
  int na = ca_track_frames(sa, &fa), nb = ca_track_frames(sb, &fb);
  cr_assert(na > differing_frame && nb > differing_frame);
  for (int i = 0; i < differing_frame; i++) cr_assert_eq(fa[i], fb[i], "frame %d is shared", i);
  cr_assert_neq(fa[differing_frame], fb[differing_frame]);
}

Test(unit_track, the_callers_of_a_helper_are_told_apart) {
  track(CA_TRACK_STACK, 6);
  expect_told_apart(from_a, from_b, 1);
}

Test(unit_track, their_callers_are_told_apart_too) {
  track(CA_TRACK_STACK, 6);
  expect_told_apart(mid_from_a, mid_from_b, 2);
}

/* The cached walk finds the frames the DWARF unwinder finds, every time. */
Test(unit_track, the_cached_walk_agrees_with_the_unwinder) {
  void *site[3][2];
  for (volatile int round = 0; round < 3; round++) {   /* the same call instructions in every round */
    track(round ? CA_TRACK_STACK : CA_TRACK_BACKTRACE, 6);
    site[round][0] = mid_from_a();
    site[round][1] = mid_from_b();
  }
  for (int i = 0; i < 2; i++) {
    cr_assert_eq(site[1][i], site[0][i], "the same frames: the same interned site");
    cr_assert_eq(site[2][i], site[0][i], "and from the cache as well");
  }
  cr_assert_neq(site[0][0], site[0][1]);
}

/* The checks above can fail: with the stack check broken (a remembered
 * stack trusted on its innermost frame alone), the helper's callers
 * collapse into the first one seen, which the assertions above reject. */
Test(unit_track, a_walk_that_trusts_the_innermost_frame_is_caught) {
  track(CA_TRACK_STACK, 6);
  void *a = from_a();
  ca_debug.stackwalk_trust_caller = true;
  void *b = from_b();
  ca_debug.stackwalk_trust_caller = false;
  cr_assert_eq(a, b, "the broken walk took b's stack for a's");
  cr_assert_neq(from_b(), a, "and the real one tells them apart");
}

/* The thread's memo of matched stacks (stackwalk.c): from_a and from_b
 * have the same frame sizes, so helper's allocating call comes with the
 * same caller and the same CFA from both, and only the outer frames tell
 * them apart. The memo answers the told-apart tests above (its tally
 * moves), and they can fail through it: a memo that believes (caller, CFA)
 * alone takes b's stack for a's. */
Test(unit_track, the_threads_memo_answers_and_still_tells_callers_apart) {
  track(CA_TRACK_STACK, 6);
  uint64_t hits = ca_debug.stackwalk_memo_hits;
  expect_told_apart(from_a, from_b, 1);
  expect_told_apart(mid_from_a, mid_from_b, 2);
  cr_assert_gt(ca_debug.stackwalk_memo_hits - hits, 0, "the memo answered some of them");
}

Test(unit_track, a_memo_that_trusts_caller_and_cfa_is_caught) {
  track(CA_TRACK_STACK, 6);
  void *a = NULL;
  for (volatile int round = 0; round < 2; round++) a = from_a();   /* one call instruction: now in the memo */
  ca_debug.stackwalk_memo_trust = true;
  void *b = from_b();
  ca_debug.stackwalk_memo_trust = false;
  cr_assert_eq(a, b, "the broken memo took b's stack for a's");
  cr_assert_neq(from_b(), a, "and the real one tells them apart");
}

/* Deeper than the memo's copy of six frames (track_depth:8): d1..d6 make
 * the stacks of from_a8 and from_b8 the same up to frame 6, and only frame
 * 7 tells them apart, which a deep entry of the memo checks out of line
 * (stackwalk.c: keyed by its CFA + 1, its further frames through the
 * stack's entry). A memo that believes the frames it copies takes b's
 * stack for a's. */
#define DEEPER(name, inner)                      \
  __attribute__((noinline)) static void *name(void) { \
    void *site = inner();                        \
    __asm__ volatile("" ::: "memory");           \
    return site;                                 \
  }
DEEPER(d1, helper)
DEEPER(d2, d1)
DEEPER(d3, d2)
DEEPER(d4, d3)
DEEPER(d5, d4)
DEEPER(d6, d5)
DEEPER(from_a8, d6)
DEEPER(from_b8, d6)

Test(unit_track, the_memo_tells_apart_stacks_that_differ_past_its_copy) {
  track(CA_TRACK_STACK, 8);
  uint64_t hits = ca_debug.stackwalk_memo_hits;
  expect_told_apart(from_a8, from_b8, 7);
  cr_assert_gt(ca_debug.stackwalk_memo_hits - hits, 0, "the memo answered some of them");
}

Test(unit_track, a_memo_that_believes_its_copy_of_a_deep_stack_is_caught) {
  track(CA_TRACK_STACK, 8);
  void *a = NULL;
  for (volatile int round = 0; round < 2; round++) a = from_a8();
  ca_debug.stackwalk_memo_shallow = true;
  void *b = from_b8();
  ca_debug.stackwalk_memo_shallow = false;
  cr_assert_eq(a, b, "the broken memo took b's stack for a's");
  cr_assert_neq(from_b8(), a, "and the real one tells them apart");
}

Test(unit_track, python_frames_only_with_python_loaded) {
  track(CA_TRACK_PYTHON, 6);
  void *s = helper();
  const ca_pyframe_t *const *py;
  cr_assert_eq(ca_track_py_frames(s, &py), 0, "no Python in this process: C frames only");
  void *const *frames;
  cr_assert_gt(ca_track_frames(s, &frames), 1);
}

/* Regression: a thread whose stack bounds are unknown (pthread_getattr_np
 * failed; or no memory for its block) was to read no stack word through
 * the tables' check, so that its stacks are unwound, but the bounds it
 * used, {0, 1}, let every read through (hi - 8 wrapped): a slot past the
 * thread's stack would have been read. A second thread asks for a stack
 * that the first taught the tables: with its bounds unknown it must
 * unwind it, with them known it must not. */
static void *site_in_thread(void *arg) {
  (void)arg;
  void *site = site_here();
  __asm__ volatile("" ::: "memory");
  return site;
}

static void *site_of_a_thread(uint64_t *unwinds) {
  pthread_t t;
  void *site = NULL;
  uint64_t before = ca_debug.stackwalk_unwinds;
  cr_assert_eq(pthread_create(&t, NULL, site_in_thread, NULL), 0);
  cr_assert_eq(pthread_join(t, &site), 0);
  *unwinds = ca_debug.stackwalk_unwinds - before;
  return site;
}

Test(unit_track, unknown_stack_bounds_read_no_stack_word) {
  track(CA_TRACK_STACK, 6);
  uint64_t unwinds;
  void *site = site_of_a_thread(&unwinds);
  cr_assert_eq(unwinds, 1, "the first thread unwinds its stack");
  cr_assert_eq(site_of_a_thread(&unwinds), site);
  cr_assert_eq(unwinds, 0, "a thread with known bounds finds the stack in the tables");
  ca_debug.stackwalk_bounds_unknown = true;
  void *again = site_of_a_thread(&unwinds);
  ca_debug.stackwalk_bounds_unknown = false;
  cr_assert_eq(again, site, "the same stack");
  cr_assert_eq(unwinds, 1, "with unknown bounds the stack is unwound, not read from the tables");
}

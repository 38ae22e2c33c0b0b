/* Unit tests of track.c: what a block stores as its call site under each
 * `track` setting, and the interning of backtraces (identical stacks are
 * stored once: the same pointer; different stacks or depths are not). */
#include <criterion/criterion.h>

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

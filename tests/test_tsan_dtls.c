/* GCC 12's ThreadSanitizer runtime, at a thread's first touch of a
 * dlopen'ed library's thread-local variables, guesses the new TLS block's
 * range from the 16 bytes before it whenever the block sits 16 bytes into
 * a page (a glibc 2.19 header; glibc 2.36 writes none), then resets the
 * range's shadow. libdw, dlopen'ed to name call sites, has such variables,
 * and its block comes from the runtime's heap: once in a few hundred runs
 * the guess read a neighbouring heap block as a range of hundreds of
 * terabytes and the process died, "ThreadSanitizer failed to allocate
 * 0x1ec5000037000 (541303318474752) bytes at address 100000801000
 * (errno: 12)", in cudalloc_shutdown's peak report through libdw's
 * dwarf_errno (test_stress_threads: CI once, here 2 of 250 runs). The
 * suite turns the guess off (tests/run.sh: intercept_tls_get_addr=0).
 * tests/progs/dtls_guess paints the heap so that the guess fails at once;
 * under the suite's options it must live, under the runtime's own it dies
 * (the program does reach the guess). */
#include "test_shim.h"

static bool under_tsan(void) {
  const char *san = getenv("CUDALLOC_SAN");
  return san && !strcmp(san, "tsan");
}

/* dtls_guess under the sanitizer runtime alone, with `extra` options after
 * the suite's (later options win). */
static shim_run_t *guess(const char *extra) {
  char env[2048], cmd[512];
  const char *suite = getenv("TSAN_OPTIONS");
  snprintf(env, sizeof env, "LD_PRELOAD='%s' TSAN_OPTIONS='%s%s'", shim_san_runtime(), suite ? suite : "", extra);
  snprintf(cmd, sizeof cmd, "%s/progs/dtls_guess 1024", shim_build());
  shim_run_t *r = shim_sh(env, cmd);
  if (r->status == 77) cr_skip_test("no libdw.so.1 to dlopen: %s", r->out);
  return r;
}

Test(tsan_dtls, the_suites_options_live_through_the_runtimes_tls_guess) {
  if (!under_tsan()) cr_skip_test("ThreadSanitizer's runtime only: make test-tsan runs it");
  cr_assert_not_null(getenv("TSAN_OPTIONS"), "run through tests/run.sh, which sets the suite's TSAN_OPTIONS");
  shim_run_t *r = guess("");
  cr_assert_eq(r->status, 0, "dtls_guess died under the suite's TSAN_OPTIONS (%s):\n%s", getenv("TSAN_OPTIONS"), r->out);
  shim_assert_has(r, "dtls_guess: ok");
}

Test(tsan_dtls, the_runtimes_own_guess_dies_on_the_painted_heap) {
  if (!under_tsan()) cr_skip_test("ThreadSanitizer's runtime only: make test-tsan runs it");
  shim_run_t *r = guess(":intercept_tls_get_addr=1");
  if (r->status == 0) cr_skip_test("this runtime survives its TLS guess: the suite's option is no longer needed");
  shim_assert_has(r, "ThreadSanitizer failed to allocate");
  shim_assert_lacks(r, "dtls_guess: ok");
}

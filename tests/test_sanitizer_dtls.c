/* The sanitizers' runtimes (GCC 12), at a thread's first touch of a
 * dlopen'ed library's thread-local variables, guess the new TLS block's
 * range from the 16 bytes before it whenever the block sits 16 bytes into
 * a page (a glibc 2.19 header; glibc 2.36 writes none). libdw, dlopen'ed
 * to name call sites, has such variables, and its block comes from the
 * runtime's heap, so the guess reads a neighbouring heap block:
 * - ThreadSanitizer resets the range's shadow at once. Once in a few
 *   hundred runs the range was hundreds of terabytes and the process died,
 *   "ThreadSanitizer failed to allocate 0x1ec5000037000 (541303318474752)
 *   bytes at address 100000801000 (errno: 12)", in cudalloc_shutdown's peak
 *   report through libdw's dwarf_errno (test_stress_threads: 2 of about 155
 *   runs here; the last CI failed in that binary).
 * - AddressSanitizer reads its own chunk header, and LeakSanitizer scans
 *   that range at exit: "Tracer caught signal 11", for which the preloaded
 *   programs had run without the leak check since d7ffab9.
 * The suite turns the guess off (tests/run.sh: intercept_tls_get_addr=0).
 * tests/progs/dtls_guess makes the guess go wrong at once; under the
 * suite's options it must live, under the runtime's own it dies (the
 * program does reach the guess). */
#include "test_shim.h"

/* TSan: the guess on every thread's first touch; ASan: LeakSanitizer's
 * scan of the threads alive at exit. */
static bool tsan(void) { return !strcmp(shim_sanitizer(), "tsan"); }
static const char *args_for(void) { return tsan() ? "1024" : "512 hold"; }
static const char *death_of(void) { return tsan() ? "ThreadSanitizer failed to allocate" : "Tracer caught signal"; }

/* dtls_guess under the sanitizer's runtime alone, with `extra` options
 * after the suite's (later options win). */
static shim_run_t *guess(const char *extra) {
  const char *var = tsan() ? "TSAN_OPTIONS" : "ASAN_OPTIONS", *suite = getenv(var);
  char env[2048], cmd[512];
  cr_assert_not_null(suite, "run through tests/run.sh, which sets the suite's %s", var);
  snprintf(env, sizeof env, "LD_PRELOAD='%s' %s='%s%s'", shim_san_runtime(), var, suite, extra);
  snprintf(cmd, sizeof cmd, "%s/progs/dtls_guess %s", shim_build(), args_for());
  shim_run_t *r = shim_sh(env, cmd);
  if (r->status == 77) cr_skip_test("no libdw.so.1 to dlopen: %s", r->out);
  return r;
}

Test(sanitizer_dtls, the_suites_options_live_through_the_runtimes_tls_guess) {
  if (!shim_sanitizer()) cr_skip_test("a sanitizer's runtime only: make test-tsan and make test-asan run it");
  shim_run_t *r = guess("");
  cr_assert_eq(r->status, 0, "dtls_guess %s died under the suite's options:\n%s", args_for(), r->out);
  shim_assert_has(r, "dtls_guess: ok");
}

Test(sanitizer_dtls, the_runtimes_own_guess_dies) {
  if (!shim_sanitizer()) cr_skip_test("a sanitizer's runtime only: make test-tsan and make test-asan run it");
  shim_run_t *r = guess(":intercept_tls_get_addr=1");
  if (r->status == 0) cr_skip_test("this runtime survives its TLS guess: the suite's option is no longer needed");
  shim_assert_has(r, death_of());
}

/* What the front cache's suites share (test_core_tcache.c,
 * test_core_tcache_large.c): the stream-ordered pair's two halves, a
 * stream the shim would have seen created, the bytes the caches hold, and
 * the scenario of a cached block that only its own stream may get back. */
#ifndef TCACHE_TESTING_H
#define TCACHE_TESTING_H

#include "core_testing.h"

/* As a program synchronizes before it shuts cudalloc down. */
static inline void tcache_fini(void) {
  ca_sim_complete_all();
  core_fini();
}

/* One call site for every request (never inlined), so that a cached
 * block's site is the next request's: hits need it (tcache.c take_at). */
static __attribute__((noinline, unused)) void *alloc_on(size_t size, ca_stream_t s) {
  void *p = NULL;
  cr_assert_eq(cudalloc_malloc(&p, size, (cudaStream_t)s), cudaSuccess, "%zu bytes", size);
  return p;
}

static inline void free_on(void *p, ca_stream_t s) { cr_assert_eq(cudalloc_free(p, (cudaStream_t)s), cudaSuccess); }

static inline ca_stream_t new_stream(void) {
  ca_stream_t s = test_stream(true);
  ca_stream_created(s, true);
  return s;
}

/* The size of the live block at p, as the core holds it. */
static inline size_t block_size(void *p) {
  ca_block_t *b = ca_ptrmap_get(&dev0()->live, (uintptr_t)p);
  cr_assert_not_null(b);
  return b->size;
}

/* r, as the compiler cannot know it to be: no test of the round is then
 * threaded through a request made in a loop, which stays one call site (a
 * copy of the call for the last round would be another stack, and another
 * site). */
static inline int opaque(int r) {
  __asm__ volatile("" : "+r"(r));
  return r;
}

/* Bytes the front caches hold: LIVE to the core, freed to the program. */
static inline int64_t cached_bytes(void) {
  return dev0()->stats.allocated_bytes.current - stats0().allocated_bytes.current;
}

/* Started with conf: a kernel on A writes p (size bytes); p is freed on A
 * into the cache; B asks for the same size. Returns whether B got p (the
 * oracle judges the hand-out; break_guard plants tcache_any_stream). */
static inline bool another_stream_gets_the_cached_block(const char *conf, size_t size, bool break_guard) {
  core_start(conf);
  ca_debug.tcache_any_stream = break_guard;
  ca_stream_t a = new_stream(), b = new_stream();
  void *p = alloc_on(size, a);
  TOUCH(a, p, size, true);
  free_on(p, a);
  cr_assert_geq(cached_bytes(), (int64_t)size, "p is in the thread's cache");
  void *q = alloc_on(size, b);
  CHECK_CONSISTENT();
  return q == p;
}

/* A cudaMalloc of size while the caches hold what the device lacks: true
 * when it succeeded (the slow path's flush gave their blocks back); what it
 * says on failure is captured. */
static inline bool sync_request_succeeds(size_t size) {
  void *big = NULL;
  capture_t c;
  capture_begin(&c);
  CUresult rc = ca_malloc(&big, size, NULL, CA_ALLOC_SYNC, NULL);
  char buf[4096];
  capture_end(&c, buf, sizeof buf);
  if (!rc) cr_assert_eq(ca_free_sync(big), CUDA_SUCCESS);
  CHECK_CONSISTENT();
  return rc == CUDA_SUCCESS;
}

#endif /* TCACHE_TESTING_H */

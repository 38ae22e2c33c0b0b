/* Helpers of the allocator core's suites: start cudalloc on the simulated
 * device, reach device 0's internals, and model what the program owns. */
#ifndef CUDALLOC_CORE_TESTING_H
#define CUDALLOC_CORE_TESTING_H

#include "testing.h"

#include <criterion/redirect.h>

#include "backend_sim.h"
#include "core.h"
#include "cudalloc.h"
#include "internal.h"
#include "stderr_capture.h"

#define MiB (1ull << 20)

/* The suite's default on the simulated device: device work lags behind the
 * host, as on a GPU, so that every test runs with memory pending (a conf
 * that names sim_events replaces it). */
#define TEST_SIM_EVENTS "sim_events:lag"

/* Starts cudalloc on the simulated device with conf appended; with
 * CUDALLOC_TEST_BACKEND=cuda (bench/gpu-check.sh) on the CUDA backend
 * instead, dropping the sim_* settings: tests whose assertions need the
 * simulation say so with SKIP_ON_CUDA before they start. */
static inline void core_start(const char *conf) {
  char full[512];
  size_t n = (size_t)snprintf(full, sizeof full, "backend:%s", test_on_cuda() ? "cuda" : "sim," TEST_SIM_EVENTS);
  for (const char *c = conf ? conf : ""; *c;) {
    size_t len = strcspn(c, ",");
    if (!(test_on_cuda() && strncmp(c, "sim_", 4) == 0))
      n += (size_t)snprintf(full + n, sizeof full - n, ",%.*s", (int)len, c);
    c += len + (c[len] == ',');
  }
  cr_assert_eq(cudalloc_init(full), cudaSuccess, "cudalloc_init(\"%s\") failed", full);
  /* the test's thread is a runtime program's: its first call gives it a context */
  if (!test_on_cuda()) ca_sim_thread_init();
}

/* .fini of the core suites. A test may end with blocks live: the leak
 * report that cudalloc_shutdown() then writes is not what it is about
 * (core_api's shutdown tests assert on that report), so it is discarded. */
static inline void core_stop(void) { capture_discard(cudalloc_shutdown); }

/* A stream for a test: a new simulated stream, or on a GPU the per-thread
 * default stream (the backend contract creates no streams). */
static inline ca_stream_t test_stream(bool nonblocking) {
  if (test_on_cuda()) return CA_STREAM_PER_THREAD;
  ca_stream_t s;
  cr_assert_eq(ca_sim_stream_create(&s, nonblocking), CUDA_SUCCESS);
  return s;
}

/* .fini of the core suites: cudalloc shuts down, and the simulated
 * device's reuse oracle saw no block handed out while work could still
 * touch it (a test that plants one checks it and calls
 * ca_sim_oracle_reset). */
static inline void core_fini(void) {
  core_stop();   /* its leak report, expected of tests that end with live blocks, discarded */
  FINI_ASSERT(ca_sim_oracle_violations() == 0, "the reuse oracle found %llu violations; the first: %s",
              (unsigned long long)ca_sim_oracle_violations(), ca_sim_oracle_report(0));
}

/* A kernel on stream reads (write false) or writes [p, p+n) now: pending
 * on the simulated device until the stream gets there. Nothing on a GPU,
 * where the test has no kernel to run. */
#define TOUCH(stream, p, n, write)                                                        \
  do {                                                                                    \
    if (!test_on_cuda())                                                                  \
      cr_assert_eq(ca_sim_touch((stream), (p), (n), (write)), CUDA_SUCCESS, "touch of %p failed", (void *)(p)); \
  } while (0)

static inline ca_device_t *dev0(void) { return ca_state.devices[0]; }

static inline cudalloc_stats_t stats0(void) {
  cudalloc_stats_t s;
  cr_assert_eq(cudalloc_get_stats(0, &s), cudaSuccess);
  return s;
}

/* Seals every queue with open blocks and polls, as a slow path does
 * (cudalloc_step seals only cudaFree's queue, the epoch). */
static inline void seal_and_poll(void) {
  ca_device_t *d = dev0();
  ca_devlock_take(&d->lock);
  ca_fences_seal(d);
  ca_fences_poll(d);
  ca_devlock_release(&d->lock);
}

/* A non-blocking stream of device 1 made while device 0 is current, as
 * the shim reports it. */
static inline ca_stream_t stream_of_device_1(void) {
  ca_stream_t s;
  cr_assert_eq(ca_backend_sim.set_device(1), CUDA_SUCCESS);
  cr_assert_eq(ca_sim_stream_create(&s, 1), CUDA_SUCCESS);
  ca_stream_created(s, true);
  cr_assert_eq(ca_backend_sim.set_device(0), CUDA_SUCCESS);
  return s;
}

#define CHECK_CONSISTENT() cr_assert_eq(cudalloc_check(), 0, "cudalloc_check() found a broken invariant")

/* Memory-changing backend calls: what "zero backend calls" counts. */
static inline int64_t memory_calls(const cudalloc_stats_t *s) {
  return s->backend_reserve.total + s->backend_create.total + s->backend_map.total + s->backend_unmap.total +
         s->backend_release.total + s->backend_set_access.total + s->backend_va_free.total;
}

/* splitmix64: the seeded generator of the randomized suites. */
static inline uint64_t rng_next(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* What the test wrote to stderr so far (needs .init = cr_redirect_stderr). */
static inline const char *captured_stderr(void) {
  static char buf[1 << 16];
  fflush(stderr);
  FILE *f = cr_get_redirected_stderr();
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = 0;
  return buf;
}


#endif

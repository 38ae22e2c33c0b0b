/* Shared helpers of the Criterion suites. */
#ifndef CUDALLOC_TESTING_H
#define CUDALLOC_TESTING_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "config.h"

/* true when CUDALLOC_TEST_BACKEND=cuda asks the tests that can use a real
 * device to run against the CUDA backend (bench/gpu-check.sh does). */
static inline int test_on_cuda(void) {
  const char *b = getenv("CUDALLOC_TEST_BACKEND");
  return b && strcmp(b, "cuda") == 0;
}

/* Loads conf (plus backend:cuda when test_on_cuda()) and starts that
 * backend; returns it. Aborts the test when it cannot start. */
static inline const ca_backend_t *test_start_backend(const char *conf) {
  cr_assert_eq(ca_config_load(conf), 0, "bad test configuration '%s'", conf);
  if (test_on_cuda()) strcpy(ca_config.backend, "cuda");
  const ca_backend_t *be = ca_backend_find(ca_config.backend);
  cr_assert_not_null(be, "no backend '%s'", ca_config.backend);
  CUresult rc = be->init(&ca_config.sim);
  cr_assert_eq(rc, CUDA_SUCCESS, "backend %s failed to start: %d", be->name, rc);
  return be;
}

/* An assertion of a suite's .fini. Criterion 2.4 prints a failed
 * cr_assert there but still counts the test as passed (and the binary
 * exits 0), so a check at .fini (the reuse oracle's, the simulation's
 * leftovers) could never fail a test: this one ends the worker, which
 * Criterion counts as a crash. */
#define FINI_ASSERT(cond, ...)                         \
  do {                                                 \
    if (!(cond)) {                                     \
      fprintf(stderr, "fini check failed: " __VA_ARGS__); \
      fputc('\n', stderr);                            \
      fflush(stderr);                                  \
      abort();                                         \
    }                                                  \
  } while (0)

/* Skips a test that only the simulated device can run. */
#define SKIP_ON_CUDA(why)                                       \
  do {                                                          \
    if (test_on_cuda()) cr_skip_test("needs the simulated device: %s", why); \
  } while (0)

#endif

/* Shared helpers of the Criterion suites. */
#ifndef CUDALLOC_TESTING_H
#define CUDALLOC_TESTING_H

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

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

/* Skips a test that only the simulated device can run. */
#define SKIP_ON_CUDA(why)                                       \
  do {                                                          \
    if (test_on_cuda()) cr_skip_test("needs the simulated device: %s", why); \
  } while (0)

#endif

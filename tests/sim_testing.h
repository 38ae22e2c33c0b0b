/* Helpers of the backend suites (test_sim_*.c). The rules that hold on a
 * real GPU go through the backend table, so that CUDALLOC_TEST_BACKEND=cuda
 * runs them against the driver; what only the simulation can show (host
 * access to device memory, counters, fault injection) is skipped there. */
#ifndef CUDALLOC_SIM_TESTING_H
#define CUDALLOC_SIM_TESTING_H

#include <signal.h>
#include <stdint.h>
#include <time.h>

#include "backend_sim.h"
#include "testing.h"

/* Starts the backend (the simulated device unless CUDALLOC_TEST_BACKEND=cuda)
 * and returns the granularity of device 0 in *gran. The test's thread gets
 * device 0's context, as a runtime program's first call gives it one. */
static inline const ca_backend_t *sim_start(const char *conf, size_t *gran) {
  const ca_backend_t *be = test_start_backend(conf);
  int dev;
  cr_assert_eq(be->get_device(&dev), CUDA_SUCCESS);
  ca_device_props_t props;
  cr_assert_eq(be->device_props(0, &props), CUDA_SUCCESS);
  if (gran) *gran = props.granularity;
  return be;
}

/* Starts the simulated device whatever CUDALLOC_TEST_BACKEND says: for death
 * tests, which cannot be skipped (a skipped test raises no signal). */
static inline const ca_backend_t *sim_only_start(const char *conf, size_t *gran) {
  cr_assert_eq(ca_config_load(conf), 0, "bad test configuration '%s'", conf);
  const ca_backend_t *be = &ca_backend_sim;
  ca_device_props_t props;
  int dev;
  cr_assert_eq(be->init(&ca_config.sim), CUDA_SUCCESS);
  cr_assert_eq(be->get_device(&dev), CUDA_SUCCESS);
  cr_assert_eq(be->device_props(0, &props), CUDA_SUCCESS);
  *gran = props.granularity;
  return be;
}

/* The reuse oracle found nothing in this process (a test that plants a
 * violation checks it and calls ca_sim_oracle_reset). */
#define ORACLE_SILENT()                                                                  \
  cr_assert_eq(ca_sim_oracle_violations(), 0, "the reuse oracle found %llu violations; the first: %s", \
               (unsigned long long)ca_sim_oracle_violations(), ca_sim_oracle_report(0))

/* .fini of every suite: the simulation leaves nothing behind, and the
 * oracle saw no early reuse. */
static inline void sim_fini(void) {
  ca_sim_shutdown();
  FINI_ASSERT(ca_sim_oracle_violations() == 0, "the reuse oracle found %llu violations; the first: %s",
              (unsigned long long)ca_sim_oracle_violations(), ca_sim_oracle_report(0));
}

#define OK(call) cr_assert_eq((call), CUDA_SUCCESS, "%s failed", #call)

/* call must fail with err and, on the simulated device, count as one broken
 * rule of the contract. */
#define BREAKS_RULE(call, err)                                                  \
  do {                                                                          \
    uint64_t v0_ = ca_sim_violations();                                         \
    CUresult rc_ = (call);                                                      \
    cr_assert_eq(rc_, (err), "%s returned %d, not %s", #call, rc_, #err);       \
    if (!test_on_cuda())                                                        \
      cr_assert_eq(ca_sim_violations(), v0_ + 1, "%s was not counted", #call);  \
  } while (0)

/* Sanitizers catch SIGSEGV to report it; a death test wants the plain
 * signal, so that it holds under make test-asan and test-tsan as well. */
static inline void plain_sigsegv(void) { signal(SIGSEGV, SIG_DFL); }

/* Reserves size bytes, creates a handle of hsize bytes and maps it all at
 * the start of the reservation, with access set. */
static inline void *sim_mapped(const ca_backend_t *be, int dev, size_t size, size_t hsize,
                               ca_phys_t *h) {
  uintptr_t va;
  OK(be->reserve(dev, size, &va));
  OK(be->create(dev, hsize, h));
  OK(be->map(va, hsize, *h, 0));
  OK(be->set_access(dev, va, hsize));
  return (void *)va;
}

static inline double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

#endif /* CUDALLOC_SIM_TESTING_H */

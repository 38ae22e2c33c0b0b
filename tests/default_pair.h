/* The default stream's pair of the two default-device suites
 * (test_core_default_device.c on the simulated device,
 * test_core_default_device_cuda.c on the fake driver). */
#ifndef DEFAULT_PAIR_H
#define DEFAULT_PAIR_H

#include <criterion/criterion.h>

#include "cudalloc.h"

#define SMALL 4096

/* One call site (never inlined), so that a cached block's site matches the
 * next request's: the front cache's hits need it. */
static __attribute__((noinline, unused)) void *alloc_default(void) {
  void *p = NULL;
  cr_assert_eq(cudalloc_malloc(&p, SMALL, NULL), cudaSuccess);
  return p;
}

static inline void free_default(void *p) { cr_assert_eq(cudalloc_free(p, NULL), cudaSuccess); }

#endif /* DEFAULT_PAIR_H */

/* What the arena suites share (test_core_arenas.c, test_core_arena_spread.c,
 * test_core_arena_peaks.c): an ordinal's arena k, the arena that holds a
 * block, and an allocation on a stream that must succeed. */
#ifndef ARENA_TESTING_H
#define ARENA_TESTING_H

#include "core_testing.h"

/* Arena k of ordinal 0 (NULL: not made). */
static inline ca_device_t *arena(int k) { return ca_state.devices[k * CA_MAX_DEVICES]; }

/* The arena that holds p (its struct; unlocked again). */
static inline ca_device_t *arena_of(const void *p) {
  ca_device_t *d = ca_device_lock_owner((uintptr_t)p);
  cr_assert_not_null(d, "no arena holds %p", p);
  ca_devlock_release(&d->lock);
  return d;
}

static inline void *alloc_on(size_t size, ca_stream_t s) {
  void *p = NULL;
  cr_assert_eq(cudalloc_malloc(&p, size, (cudaStream_t)s), cudaSuccess, "allocation of %zu bytes", size);
  return p;
}

#endif /* ARENA_TESTING_H */

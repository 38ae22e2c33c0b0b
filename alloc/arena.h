/* "arena.c": a device's arenas, as the core below the device module sees
 * them. With arenas:N an ordinal is N sibling devices (a ca_device_t each:
 * lock, reservation, pools, queues, pointer map, statistics; types.h's
 * slots), so that the core runs unchanged inside one and threads on
 * different streams take different locks. Here: finding an arena, naming
 * it in reports, and the ordinal-wide cap on reserved memory that growth
 * charges. siblings.h has what crosses arenas above the core (routing,
 * squeezing a sibling, the folds). A free finds its arena by address
 * (ca_device_lock_owner); a block's arena is its slot (b->slot). */
#ifndef CUDALLOC_ARENA_H
#define CUDALLOC_ARENA_H

#include <stdio.h>

#include "types.h"

/* " arena k" for a sibling, "" for an ordinal's first arena: what the
 * reports add after "device N", so that arenas:1 prints as before. */
static inline const char *ca_arena_label(const ca_device_t *d, char buf[16]) {
  buf[0] = 0;
  if (d->arena) snprintf(buf, 16, " arena %d", d->arena);
  return buf;
}

/* Arena k of ordinal (NULL: not made yet). */
static inline ca_device_t *ca_arena_at(int ordinal, int k) {
  return __atomic_load_n(&ca_state.devices[k * CA_MAX_DEVICES + ordinal], __ATOMIC_ACQUIRE);
}

/* fn on every ready arena of d's ordinal but d, that arena's lock alone
 * held (never two arena locks at once: their order is not defined); with
 * d_locked, d's lock is let go meanwhile and taken again at the end. */
void ca_arena_each_sibling(ca_device_t *d, bool d_locked, void (*fn)(ca_device_t *, void *), void *arg);

/* Growth's charge of bytes against the ordinal's limit, for all its
 * arenas together: false (nothing charged) when it would pass it. The
 * refund gives bytes back (pages released, a create that failed). */
bool ca_arena_charge(ca_device_t *d, size_t bytes);
void ca_arena_refund(ca_device_t *d, size_t bytes);
/* cudalloc_reset_peaks: the ordinal's peak of reserved bytes is its current. */
void ca_arena_reset_peak(const ca_device_t *d);
/* The highest the ordinal's reserved bytes were (since the last reset). */
static inline size_t ca_arena_reserved_peak(const ca_device_t *d) {
  return __atomic_load_n(&ca_state.reserved_peak[d->ordinal], __ATOMIC_ACQUIRE);
}
/* Every arena's reserved bytes on d's ordinal. */
static inline size_t ca_arena_reserved(const ca_device_t *d) {
  return __atomic_load_n(&ca_state.reserved[d->ordinal], __ATOMIC_ACQUIRE);
}

#endif /* CUDALLOC_ARENA_H */

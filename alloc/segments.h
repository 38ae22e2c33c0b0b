/* "segments.c": classic segments. */
#ifndef CUDALLOC_SEGMENTS_H
#define CUDALLOC_SEGMENTS_H

#include "types.h"

size_t ca_classic_segment_size(size_t rounded);
CUresult ca_classic_grow(ca_device_t *d, ca_pool_t *pool, size_t rounded);
/* Releases every segment of d that holds no live or pending block; one
 * the driver will not (wholly) take back stays counted: in its pool while
 * still mapped, else among the leftovers, tried again here next time.
 * Returns the reserved bytes given back. */
size_t ca_classic_release_free(ca_device_t *d);
void ca_segment_teardown(ca_device_t *d, ca_segment_t *seg, bool call_backend);
void ca_classic_teardown_leftovers(ca_device_t *d, bool call_backend);
void ca_classic_leftover_bytes(const ca_device_t *d, int64_t *reserved, int64_t *mapped);
ca_segment_t *ca_segment_of(ca_device_t *d, uintptr_t addr);

#endif /* CUDALLOC_SEGMENTS_H */

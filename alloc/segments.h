/* "segments.c": classic segments. */
#ifndef CUDALLOC_SEGMENTS_H
#define CUDALLOC_SEGMENTS_H

#include "types.h"

size_t ca_classic_segment_size(size_t rounded);
CUresult ca_classic_grow(ca_device_t *d, ca_pool_t *pool, size_t rounded);
/* Releases every segment of d that holds no live or pending block. */
size_t ca_classic_release_free(ca_device_t *d);
void ca_segment_teardown(ca_device_t *d, ca_segment_t *seg, bool call_backend);
ca_segment_t *ca_segment_of(ca_device_t *d, uintptr_t addr);

#endif /* CUDALLOC_SEGMENTS_H */

/* "pool.c": finding and taking blocks, and growing a pool. */
#ifndef CUDALLOC_POOL_H
#define CUDALLOC_POOL_H

#include "types.h"

/* A block of `rounded` bytes for stream, or NULL (no driver call made). */
ca_block_t *ca_pool_take(ca_device_t *d, ca_pool_t *pool, size_t rounded, ca_stream_t stream);
/* Gets memory for `rounded` bytes from the device: maps pages or creates a
 * segment. Never waits. */
CUresult ca_pool_grow(ca_device_t *d, ca_pool_t *pool, size_t rounded);
/* The most such a growth charges against the limit: the request in whole
 * pages (expandable segments), or the classic segment that holds it. */
size_t ca_pool_growth_bytes(const ca_device_t *d, size_t rounded);

#endif /* CUDALLOC_POOL_H */

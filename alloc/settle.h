/* "settle.c": a stream that misses grows, or takes what its own frees
 * give, before it takes the blocks other streams just freed. */
#ifndef CUDALLOC_SETTLE_H
#define CUDALLOC_SETTLE_H

#include "types.h"

/* The first rungs of the slow path for `rounded` bytes on stream (NULL:
 * not stream-ordered), while memory is not short: what completed already,
 * growth within the slack of the peak, the stream's own frees, fences
 * sealed before; then every open batch is sealed and the pool grows.
 * Returns the block, or NULL (*rc: the failed growth's error, if any):
 * the rest of the ladder. Expandable segments only. */
ca_block_t *ca_settle_take(ca_device_t *d, size_t rounded, ca_stream_t stream, CUresult *rc);

#endif /* CUDALLOC_SETTLE_H */

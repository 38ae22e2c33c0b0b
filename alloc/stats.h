/* "stats.c": what the statistics say, derived in one place. The counters
 * themselves are updated inline (ca_stat_add, types.h). */
#ifndef CUDALLOC_STATS_H
#define CUDALLOC_STATS_H

#include <stdio.h>

#include "types.h"

/* Reserved bytes not in live blocks (cudalloc.h's cached_bytes): free
 * blocks, pending blocks and the page cache. */
int64_t ca_stats_cached(const ca_device_t *d);
/* The largest block allocatable without a driver call, over both pools. */
size_t ca_stats_largest_free(const ca_device_t *d);
void ca_stats_snapshot(ca_device_t *d, cudalloc_stats_t *out);
void ca_stats_print(FILE *f);

#endif /* CUDALLOC_STATS_H */

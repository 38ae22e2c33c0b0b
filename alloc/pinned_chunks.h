/* "pinned_chunks.c": the pinned arena's extent hooks, and the chunks the
 * backend pinned behind them (pinned.h has the picture). */
#ifndef CUDALLOC_PINNED_CHUNKS_H
#define CUDALLOC_PINNED_CHUNKS_H

#include "jemalloc_private.h"
#include "types.h"

/* The smallest chunk pinned at once: the arena's extents are carved from it. */
#define CA_PINNED_CHUNK ((size_t)2 << 20)
#define CA_PINNED_CHUNK_MAX ((size_t)64 << 20)   /* the most a chunk grows to */

extern extent_hooks_t ca_pinned_hooks;
/* true when p lies inside a pinned chunk. */
bool ca_pinned_chunks_contain(uintptr_t p);
/* true when [p, p+n) lies inside one pinned chunk. */
bool ca_pinned_chunks_hold(uintptr_t p, size_t n);
/* Gives back idle chunks (wholly returned by jemalloc) beyond keep bytes. */
void ca_pinned_chunks_trim(size_t keep);
/* Gives back every chunk, idle or not (the arena is gone); call_backend
 * false forgets them instead (fork child). */
void ca_pinned_chunks_drop(bool call_backend);
/* Reserved bytes and backend calls, into the pinned statistics. */
void ca_pinned_chunks_stats(cudalloc_pinned_stats_t *out);
/* Extents the hooks refused because they crossed chunks (0 when sound). */
uint64_t ca_pinned_chunks_violations(void);

#endif /* CUDALLOC_PINNED_CHUNKS_H */

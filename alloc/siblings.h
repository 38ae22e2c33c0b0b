/* "siblings.c": what crosses a device's arenas (arena.h) above the core:
 * which arena an allocation goes to, the squeeze of the siblings when an
 * arena is short of memory, and the folds of the ordinal's figures. */
#ifndef CUDALLOC_SIBLINGS_H
#define CUDALLOC_SIBLINGS_H

#include "arena.h"

/* The arena of first's ordinal (first: its arena 0) that the calling
 * thread's allocations on stream go to (arenas > 1): the thread's home
 * arena, the first until its takes of the lock keep waiting
 * (arena_spread:contended), or one assigned round-robin at the thread's
 * first allocation on the stream and remembered (arena_spread:first). */
ca_device_t *ca_siblings_route(ca_device_t *first, ca_stream_t stream);

/* Short of memory in d (locked): d's siblings, one at a time, give back
 * what they cache (front caches flushed, pending frees waited for, free
 * pages released), d's lock released meanwhile and taken again. Returns
 * the bytes given back; false in *gone when d was torn down meanwhile. */
size_t ca_siblings_squeeze(ca_device_t *d, bool *gone);
/* The same visit without the squeeze: what the siblings allocate and have
 * pending now, for an out-of-memory report that no squeeze preceded (a
 * request above the cap). d may be torn down meanwhile (then not ready). */
void ca_siblings_count(ca_device_t *d);

/* The ordinal's statistics: every arena's snapshot summed (first locked
 * by the caller; the others are taken one at a time). */
void ca_siblings_stats(ca_device_t *first, cudalloc_stats_t *out);
/* Bytes every arena of first's ordinal could give back (api.c's
 * reclaimable, per arena, locked): summed. */
size_t ca_siblings_sum(ca_device_t *first, size_t (*fn)(ca_device_t *));

#endif /* CUDALLOC_SIBLINGS_H */

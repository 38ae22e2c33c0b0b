/* The pinned host-memory cache (cudaHostAlloc and friends), inside the core.
 *
 * A private jemalloc arena (jemalloc_private.h) serves every pinned
 * allocation: its size classes, coalescing and a cache of its own. Its
 * extent hooks (pinned_chunks.c) carve the arena's extents out of large
 * chunks pinned by the backend (host_alloc), never split or merge across
 * two chunks, and give a chunk back once jemalloc has returned all of it
 * and more than pinned_cache_mb of chunks lie idle.
 *
 * pinned.c keeps a record of every live block (ca_block_t: address, sizes,
 * call site) for frees, leak reports and statistics, and the async copies
 * in flight on pinned memory: a freed block waits, out of jemalloc's reach,
 * until the events recorded after the copies that touched it complete.
 *
 * Locks: pinned.c's lock, then jemalloc's own, then pinned_chunks.c's
 * (taken inside the hooks); never the other way.
 */
#ifndef CUDALLOC_PINNED_H
#define CUDALLOC_PINNED_H

#include "pinned_chunks.h"
#include "ptrmap.h"

/* cudaHostAlloc's flags (cuMemHostAlloc's have the same values). */
#define CA_HOST_PORTABLE 1u
#define CA_HOST_MAPPED 2u
#define CA_HOST_WRITE_COMBINED 4u
#define CA_HOST_FLAGS_KNOWN (CA_HOST_PORTABLE | CA_HOST_MAPPED | CA_HOST_WRITE_COMBINED)
/* Chunks are pinned portable and mapped: they serve these. */
#define CA_HOST_FLAGS_SERVED (CA_HOST_PORTABLE | CA_HOST_MAPPED)

/* What ca_pinned_check() returns (cudalloc_check() passes it on when the
 * devices are sound): numbered apart from check.h's device codes. */
typedef enum {
  CA_PINNED_CHECK_OK = 0,
  CA_PINNED_CHECK_CHUNK = 40,   /* a live block is not inside one pinned chunk */
  CA_PINNED_CHECK_STATS,        /* live blocks and the statistics disagree */
  CA_PINNED_CHECK_CROSSED,      /* jemalloc handed back an extent across chunks */
} ca_pinned_check_code_t;

/* Walks the live blocks: each inside one chunk, the sizes adding up to the
 * statistics. Returns 0 or a code, with one line on stderr. */
ca_pinned_check_code_t ca_pinned_check(void);
/* The live pinned blocks with the lock held (NULL when pinned memory was
 * never used), for the leak report; ca_pinned_unlock() after. */
const ca_ptrmap_t *ca_pinned_lock_live(void);
void ca_pinned_unlock(void);
/* Gives every idle chunk back (cudalloc_empty_cache). */
void ca_pinned_empty_cache(void);
void ca_pinned_reset_peaks(void);
/* Destroys the arena and gives every chunk back (cudalloc_shutdown). */
void ca_pinned_shutdown(void);
/* Forgets everything without a backend call (fork child). */
void ca_pinned_fork_child(void);
/* The arena and explicit thread cache of the pinned cache, for tests that
 * read jemalloc's own statistics; false before the first allocation. */
bool ca_pinned_jemalloc_ids(unsigned *arena, unsigned *tcache);

#endif /* CUDALLOC_PINNED_H */

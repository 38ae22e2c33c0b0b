/* "tcache.c": the per-thread, per-stream front cache of small blocks.
 *
 * A stream-ordered free of a small block (<= CA_TCACHE_MAX_SIZE) that the
 * same thread allocated goes into the thread's cache under the freeing
 * stream, within thread_cache_kb (a large one, to CA_TCACHE_LARGE_MAX,
 * within thread_cache_large_mb); a stream-ordered allocation of the same
 * size class on that stream, by that thread, takes it back (a large class
 * holds several sizes: only a block at least as large as the request). Neither takes
 * the device lock: a hit is a try-lock of the thread's own cache (a
 * flusher holding it sends the call down the core's path), so a hit never
 * waits. While cached, a block stays LIVE in the core (in its pointer map
 * and its statistics): the core's invariants hold unchanged, and only the
 * statistics read by the program are corrected ("folded") by what the
 * caches hold.
 *
 * Every cache is in a registry, so that the slow path (the calling
 * thread's own cache before it grows, every cache before it waits or
 * fails), stream destruction, empty_cache and cudaMemGetInfo, a device
 * reset and shutdown give the cached blocks back to the core (each into its
 * freeing stream's queue, as the free would have put it). Lock order:
 * device lock, then the registry, then a cache. */
#ifndef CUDALLOC_TCACHE_H
#define CUDALLOC_TCACHE_H

#include "types.h"

#define CA_TCACHE_MAX_SIZE (64u << 10)   /* small blocks: exact 512-byte classes, within thread_cache_kb */
#define CA_TCACHE_LARGE_MAX (8u << 20)   /* large ones: 8 classes per octave, within thread_cache_large_mb */

/* The block has been freed into some thread's front cache (the core sees a
 * LIVE block; the program does not own it). */
static inline bool ca_tcache_holds(const ca_block_t *b) { return __atomic_load_n(&b->tc, __ATOMIC_ACQUIRE) & 1; }

/* The one place where per-call hooks go (leak tracking, peak, event log):
 * called on every hand-out and every free the program makes, whether the
 * front cache served it (hit true: the device lock is NOT held; the
 * calling thread's cache is, and b is the thread's) or the core did (hit
 * false: called with d locked). A hook that needs the device lock keeps
 * the cache off while it is active, as the event log does (tcache.c's
 * usable()). */
static inline void ca_tcache_on_handout(ca_device_t *d, ca_block_t *b, bool hit) {
  (void)d, (void)b, (void)hit;
}
static inline void ca_tcache_on_free(ca_device_t *d, ca_block_t *b, bool hit) {
  (void)d, (void)b, (void)hit;
}

/* A stream-ordered request (ca_malloc_on's dev, ptr, size and stream,
 * non-NULL and non-zero, the core started; site its call site), tried
 * before anything else of the allocation path: a block of its size class,
 * freed on stream by this thread and last handed out at the same call
 * site, handed out again (requested and stream set) into *ptr. The
 * hand-out's hooks (the leak stamp, ca_tcache_on_handout, the backend's
 * check_handout with caller) run in it, the first two with the thread's
 * cache still held, so that a reader holding the caches sees them done.
 * false: ask the core (nothing changed); the core then makes its own
 * checks of dev and stream, and answers their errors. */
bool ca_tcache_hit(int dev, void **ptr, size_t size, ca_stream_t stream, void *site, void *caller);
/* The fronts' inline tries (alloc.c), which call nothing but the backend's
 * check, last, so that a hit or a cached free saves few registers: the same
 * as ca_tcache_hit and ca_tcache_give, DONE (served), CORE (the core
 * answers: nothing the full try could serve) or FULL: something needs a
 * call (a stream not seen under this generation, a default handle, the
 * thread's lock claimed, a large request), nothing changed: ask the full
 * try. Called only while calm (calm.h), which a capture, the event log and
 * the exit stir: the tries test none of them. */
typedef enum { CA_TCACHE_DONE, CA_TCACHE_CORE, CA_TCACHE_FULL, CA_TCACHE_NEAR } ca_tcache_try_t;
ca_tcache_try_t ca_tcache_hit_inline(int dev, void **ptr, size_t size, ca_stream_t stream, void *site, void *caller);
/* NEAR, the hit's other answer: a miss of its own size class that a block
 * of a larger one may serve (tcache.c's take_near, a call the inline try
 * leaves out): the same try with it, out of line; DONE, CORE or FULL. */
ca_tcache_try_t ca_tcache_hit_near(int dev, void **ptr, size_t size, ca_stream_t stream, void *site, void *caller);
ca_tcache_try_t ca_tcache_give_inline(void *ptr, ca_stream_t stream);
/* The core handed b out for a stream-ordered request on stream (d locked):
 * true when the thread will remember it, so that its free can be a hit;
 * then ca_tcache_remember(b) once d is unlocked. */
bool ca_tcache_claim(ca_device_t *d, ca_block_t *b, ca_stream_t stream);
void ca_tcache_remember(ca_block_t *b);
/* A free on stream of ptr that the cache takes (true), or leaves to the
 * core (false: not this thread's block, another device, the cache full,
 * a capture underway). */
bool ca_tcache_give(void *ptr, ca_stream_t stream);
/* The core's free path, d locked: false when b is cached (a double free),
 * else b is no longer any thread's (a cached free of its thread that is
 * looking at b is waited out; one that has not marked b yet loses). */
bool ca_tcache_disown(ca_block_t *b);

/* Gives d's cached blocks back to the core (d locked): every thread's, or
 * only those freed on stream (non-NULL). forget: d is about to be torn
 * down, so the threads forget its blocks too. Returns the bytes given. */
size_t ca_tcache_flush(ca_device_t *d, ca_stream_t stream, bool forget);
/* The same for the calling thread's cache alone: what a slow path tries
 * before it disturbs other threads (its large blocks alone when it holds
 * some: tcache.c). */
size_t ca_tcache_flush_mine(ca_device_t *d);
/* After a free that went to the core (d locked): once the cache has missed
 * or refused enough since the last trim (tcache_flush.c), the thread's blocks on
 * d cached since that trim go back to the core, so that what it caches
 * follows what the program asks for now. True when the trim skipped the
 * thread's blocks of d's sibling arenas (arenas:N): then, d's lock let go,
 * ca_tcache_trim_siblings gives them the same trim, one arena lock at a
 * time. */
bool ca_tcache_trim(ca_device_t *d);
void ca_tcache_trim_siblings(ca_device_t *d);
/* Corrects a snapshot of d's statistics by what the caches hold (d locked). */
void ca_tcache_fold(const ca_device_t *d, cudalloc_stats_t *s);
/* Holds every cache still (hits go to the core) while a reader looks at
 * the requested sizes and sites of live blocks, which a hit writes. */
void ca_tcache_quiesce(void);
void ca_tcache_resume(void);
/* The blocks the caches hold on d (LIVE in its map, freed to the program). */
int64_t ca_tcache_blocks(const ca_device_t *d);
/* Between quiesce and resume: what hits changed the requested sizes of
 * d's live blocks by, which the core's requested_bytes does not count yet. */
int64_t ca_tcache_drift(const ca_device_t *d);
/* In a fork child: every cache is the parent's, forgotten untouched. */
void ca_tcache_forget_after_fork(void);
#ifdef CA_TESTING
/* The cache of threads without one of their own is still all zeros. */
bool ca_tcache_none_untouched(void);
#endif

#endif /* CUDALLOC_TCACHE_H */

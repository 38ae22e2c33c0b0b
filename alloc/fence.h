/* "fence.c": streams, queues, events and epochs. */
#ifndef CUDALLOC_FENCE_H
#define CUDALLOC_FENCE_H

#include "arena.h"
#include "streams.h"
#include "types.h"

static inline ca_stream_t ca_stream_normal(ca_stream_t stream) { return stream ? stream : CA_STREAM_LEGACY; }
/* What tells per-thread default streams apart: the calling thread's tag
 * for CA_STREAM_PER_THREAD, else 0. */
uint64_t ca_stream_owner(ca_stream_t stream);
/* The queue of stream for the thread whose tag is owner (0: not a
 * per-thread stream). */
ca_queue_t *ca_queue_find_owned(ca_device_t *d, ca_stream_t stream, uint64_t owner, bool create);
/* The queue of stream as the calling thread names it (a per-thread
 * default stream is the calling thread's). Inline: the take and the free
 * of every core pair ask, and the last queue found (qtable.h) answers
 * nearly all of them with one compare. */
static inline ca_queue_t *ca_queue_find(ca_device_t *d, ca_stream_t stream, bool create) {
  stream = ca_stream_normal(stream);
  uint64_t owner = stream == CA_STREAM_PER_THREAD ? ca_stream_owner(stream) : 0;
  ca_queue_t *q = d->qtable_last;
  if (q && q->stream == stream && q->owner == owner) return q;
  return ca_queue_find_owned(d, stream, owner, create);
}
/* ca_stream_check(d, stream) for a stream-ordered free, answered by the
 * stream's queue while the streamdev generation under which the queue's
 * last check succeeded stands (a created stream keeps its device until a
 * stream is created or destroyed, a reset, shutdown or fork: streamdev.h);
 * else asked, and on success stamped. *q: the stream's queue as found
 * (NULL: none yet), which the free files the block in, so that it looks
 * the queue up once. */
static inline CUresult ca_queue_check_stream(ca_device_t *d, ca_stream_t stream, ca_queue_t **q) {
  *q = NULL;
  if (ca_streamdev_is_default(stream)) return CUDA_SUCCESS;
  uint64_t gen = __atomic_load_n(&ca_streamdev_generation.v, __ATOMIC_ACQUIRE);   /* before asking */
  ca_queue_t *found = *q = ca_queue_find(d, stream, false);
  if (found && (found->checked_gen == gen || (CA_DEBUG(queue_check_any_gen) && found->checked_gen))) return CUDA_SUCCESS;
  CUresult rc = ca_stream_check(d, stream);
  if (!rc && found) found->checked_gen = gen;
  return rc;
}
/* The queue of a live block's allocation stream and thread; NULL when
 * that stream is gone (or no memory). */
ca_queue_t *ca_queue_of_block(ca_device_t *d, const ca_block_t *b);
/* A count that only falls: no peak to raise, no total to add to (only
 * ca_stat_add raises allocated_bytes and num_live_blocks, and it keeps
 * current <= peak). */
static inline void ca_stat_fall(cudalloc_stat_t *s, int64_t by) { s->current -= by; }
/* A count that rises by one and never falls (num_allocs, num_frees): its
 * peak is its current, set on read (ca_stats_snapshot) rather than by
 * every allocation and free. */
static inline void ca_stat_tick(cudalloc_stat_t *s) { s->current++, s->total++; }
/* A live block the program freed leaves the statistics of live memory
 * (ca_queue_add files it then). count_free: counted in num_frees (a front
 * cache counted its own frees when the program made them). Inline, with
 * the falling counts' peak tests left out: every core free counts. */
static inline void ca_queue_count_freed(ca_device_t *d, const ca_block_t *b, bool count_free) {
  ca_stat_fall(&d->stats.allocated_bytes, (int64_t)b->size);
  int64_t requested = (int64_t)b->requested;
  ca_assert(requested >= 0);
  if (requested < 0) __builtin_unreachable();   /* a size: so that the fall adds nothing to the total, untested */
  ca_stat_add(&d->stats.requested_bytes, -requested);   /* a front cache's drift may raise it */
  ca_arena_live(d, -(int64_t)b->size, -requested);
  if (count_free) ca_stat_tick(&d->stats.num_frees);
  ca_stat_fall(&d->stats.num_live_blocks, 1);
}
/* Puts a freed block into queue q (merging with its pending neighbours). */
void ca_queue_add(ca_device_t *d, ca_queue_t *q, ca_block_t *b);
/* Moves pending block b to the front of its fence's blocks, where a block
 * filed now would go (a split's rest: the order a fence releases its
 * blocks in decides how they coalesce). */
void ca_queue_refile(ca_block_t *b);
/* Removes a pending block from its queue (before reuse on its stream). */
void ca_queue_remove(ca_device_t *d, ca_block_t *b);
/* Moves q's open batch (no events yet) into the epoch queue: those blocks
 * will wait like cudaFree's. */
void ca_queue_open_to_epoch(ca_device_t *d, ca_queue_t *q);
/* Files pending block b under fence f of queue q, without merging. */
void ca_queue_add_to_fence(ca_device_t *d, ca_queue_t *q, ca_fence_t *f, ca_block_t *b);
/* Test-only broken policy: a pending block of any stream's queue. */
ca_block_t *ca_queue_find_any(ca_device_t *d, ca_pool_t *pool, size_t size, size_t max, ca_queue_t **out);
/* Records events for every open batch. Does nothing during a capture. */
void ca_fences_seal(ca_device_t *d);
/* The same for queue q only. */
void ca_fences_seal_queue(ca_device_t *d, ca_queue_t *q);
/* The same for the epoch queue only (cudaFree's blocks, at a step's end). */
void ca_fences_seal_epoch(ca_device_t *d);
/* Releases the blocks of every completed fence; returns bytes released. */
size_t ca_fences_poll(ca_device_t *d);
/* A synchronization of the whole device is about to start: every open
 * batch is filed under a fence with no events, which no poll takes before
 * ca_fences_sync_end says the synchronization returned. Returns the token
 * (the fence sequence then) for ca_fences_sync_end; 0 during a capture
 * (nothing is filed). */
uint64_t ca_fences_sync_begin(ca_device_t *d);
/* The synchronization returned (ok: successfully). ok: every fence up to
 * token is complete, its events too: released with no query. Not ok: the
 * fences filed by the begin get their events at the next seal, as open
 * batches do. Returns the bytes released. */
size_t ca_fences_sync_end(ca_device_t *d, uint64_t token, bool ok);
/* Waits for the oldest sealed fence (never during a capture) and releases
 * what completed, *released bytes (an empty fence releases 0). Returns
 * false when nothing was pending or the wait did not complete the fence. */
bool ca_fences_wait_one(ca_device_t *d, size_t *released);
/* The same without sealing first: only fences sealed before are waited for. */
bool ca_fences_wait_sealed(ca_device_t *d, size_t *released);
/* Seals every open batch and waits until no fence is pending (or a wait
 * fails; never during a capture): what the calls that promise a settled
 * cache (empty_cache, mem_get_info) need, at the cost of blocking as
 * PyTorch's empty_cache does. */
void ca_fences_wait_all(ca_device_t *d);
void ca_fences_teardown(ca_device_t *d, bool call_backend);
void ca_queue_stream_gone(ca_device_t *d, ca_stream_t stream);

#endif /* CUDALLOC_FENCE_H */

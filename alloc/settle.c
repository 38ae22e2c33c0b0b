/* Streams that settle: the first rungs of the slow path (alloc.c).
 *
 * A block freed on stream S waits in S's queue, where S reuses it with no
 * event: S's own cache, as PyTorch keeps one per stream. The ladder used to
 * start by sealing and polling every stream's queue, so a stream that
 * missed took the blocks the other streams had just freed and were about to
 * reuse; they missed in turn and took its blocks back, and nothing settled
 * (two streams of the GPU-like sequence never settled, each slow path two
 * event records and two queries; docs/benchmarks.md). PyTorch never hands
 * a block to another stream without an event; it grows. Here, in order:
 *   1. fences sealed earlier and complete by now: their blocks were left
 *      alone by their streams since (queries, no event recorded), and
 *      cudaFree's blocks (the epoch, sealed now: nobody's cache);
 *   2. growth while reserved memory stays within slack.c's slack (2% and
 *      20 MiB above allocated memory): memory is not short yet;
 *   3. the stream's own frees, sealed and merged with free neighbours, once
 *      they are worth it (slack.c's measure): releasing them lets the other
 *      streams take them, so not for a few blocks;
 *   4. fences sealed earlier, waited for before growing past the slack
 *      (slack.c), but none sealed now;
 *   5. every stream's latest frees sealed, for a later slow path to take if
 *      their streams have not reused them by then, and growth.
 * The rest of the ladder (alloc.c) takes other streams' blocks at once, and
 * waits: memory is short there. Classic segments, and a garbage-collection
 * threshold (whose trims a growth would undo), keep the ladder as before. */
#include "settle.h"

#include "blocks.h"
#include "fence.h"
#include "pool.h"
#include "qtable.h"
#include "slack.h"

/* Another stream than own's has freed blocks waiting in its queue, open
 * or sealed: a working set to leave alone. The lists hold only busy
 * queues, so this looks at two of each at most. */
static bool others_hold_frees(const ca_device_t *d, const ca_queue_t *own) {
  static const ca_qlist_id_t lists[] = {CA_QL_OPEN, CA_QL_SEALED};
  for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) {
    const ca_queue_t *q = ca_qlist_first(d, lists[i]);
    if (q && (q != own || ca_qlist_next(q, lists[i]))) return true;
  }
  return false;
}

/* Bytes waiting in own's bins, which its stream may reuse at once. */
static double pending_in(const ca_queue_t *own) {
  double bytes = 0;
  for (int p = 0; own && p < CA_POOL_COUNT; p++)
    if (own->bins[p]) bytes += (double)own->bins[p]->bytes;
  return bytes;
}

static ca_block_t *grow_and_take(ca_device_t *d, ca_pool_t *pool, size_t rounded, ca_stream_t stream,
                                 CUresult *rc) {
  *rc = ca_pool_grow(d, pool, rounded);
  return *rc ? NULL : ca_pool_take(d, pool, rounded, stream);
}

ca_block_t *ca_settle_take(ca_device_t *d, size_t rounded, ca_stream_t stream, CUresult *rc) {
  if (!ca_config.expandable_segments || ca_config.gc_threshold > 0) return NULL;
  ca_queue_t *own = stream ? ca_queue_find(d, stream, false) : NULL;
  if (!others_hold_frees(d, own)) return NULL;   /* one stream: nobody to take from */
  ca_pool_t *pool = ca_pool_for(d, rounded);
  ca_block_t *b;
  ca_fences_seal_epoch(d);   /* cudaFree's blocks are nobody's cache */
  if (ca_fences_poll(d) && (b = ca_pool_take(d, pool, rounded, stream))) return b;
  if (CA_DEBUG(settle_take_fresh)) return NULL;   /* the planted fault: the ladder as before */
  if (ca_slack_room(d, rounded) && (b = grow_and_take(d, pool, rounded, stream, rc))) return b;
  if (own && ca_slack_worth_it(d, pending_in(own))) {
    ca_fences_seal_queue(d, own);
    if (ca_fences_poll(d) && (b = ca_pool_take(d, pool, rounded, stream))) return b;
  }
  if ((b = ca_slack_wait_sealed(d, rounded, stream))) return b;
  ca_fences_seal(d);
  return grow_and_take(d, pool, rounded, stream, rc);
}

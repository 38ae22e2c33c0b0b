/* Streams, queues, events and epochs: when may freed memory be reused?
 *
 * A block freed on stream S joins S's queue: S may reuse it at once, every
 * other stream only after an event recorded on S has completed. A block
 * freed with cudaFree's promise joins the device's epoch queue, whose
 * events go on the legacy default stream (which orders every blocking
 * stream) and on each non-blocking stream the program created. Every event
 * of device d's fences is d's and names d's streams (the backend records it
 * in d's context), whichever device the calling thread has current.
 *
 * Events are recorded lazily ("sealing"), when the allocator looks for
 * memory it does not have, so a free costs no driver call. Each queue's
 * fences complete in the order they were sealed, so polling stops at the
 * first incomplete one, and one slow stream never holds up another. */
#include "fence.h"

#include <stdlib.h>
#include <string.h>

#include "bins.h"
#include "blocks.h"
#include "log.h"
#include "qtable.h"
#include "streams.h"
#include "trace.h"

static bool reusable(const ca_queue_t *q) { return q->stream && !q->dead; }

/* The queue's bins for b's pool, made on first use: NULL when there is no
 * memory for them, and b then waits for its fence without being reusable
 * on its stream at once, which is safe. */
static ca_bins_t *queue_bins(ca_queue_t *q, const ca_block_t *b) {
  ca_bins_t **bins = &q->bins[b->seg->pool->id];
  if (!*bins && (*bins = malloc(sizeof **bins))) ca_bins_init(*bins);
  return *bins;
}

/* A stream queue, not the device's epoch or capture queue (which live in
 * the device and are visited by name). */
static bool listed(const ca_device_t *d, const ca_queue_t *q) { return q != &d->epoch && q != &d->held; }

/* Every thread's per-thread default stream is named 0x2, yet each is a
 * stream of its own: their queues are told apart by a tag of the thread
 * (not pthread_self, whose values a new thread may reuse). */
static uint64_t thread_tag(void) {
  static uint64_t next;
  static __thread uint64_t tag;
  if (!tag) tag = __atomic_add_fetch(&next, 1, __ATOMIC_RELAXED);
  return tag;
}

uint64_t ca_stream_owner(ca_stream_t stream) {
  return stream == CA_STREAM_PER_THREAD && !CA_DEBUG(shared_per_thread) ? thread_tag() : 0;
}

/* Out of line: the lookups that find their queue (nearly all) need no
 * registers saved. */
static __attribute__((noinline)) ca_queue_t *queue_new(ca_device_t *d, ca_stream_t stream, uint64_t owner) {
  ca_queue_t *q = calloc(1, sizeof *q);
  if (!q) return NULL;
  q->stream = stream;
  q->owner = owner;
  if (!ca_qtable_put(d, q)) {
    free(q);
    return NULL;
  }
  d->nqueues++;
  return q;
}

static ca_queue_t *queue_find(ca_device_t *d, ca_stream_t stream, uint64_t owner, bool create) {
  ca_queue_t *q = ca_qtable_get(d, stream, owner);
  return q || !create ? q : queue_new(d, stream, owner);
}

static void queue_free(ca_device_t *d, ca_queue_t *q) {
  ca_qtable_remove(d, q);
  for (int p = 0; p < CA_POOL_COUNT; p++) free(q->bins[p]);
  free(q);
  d->nqueues--;
}

ca_queue_t *ca_queue_find_owned(ca_device_t *d, ca_stream_t stream, uint64_t owner, bool create) {
  return queue_find(d, ca_stream_normal(stream), owner, create);
}

/* The block's own stream, and for a per-thread stream the thread that
 * allocated it, not the one freeing it. */
ca_queue_t *ca_queue_of_block(ca_device_t *d, const ca_block_t *b) {
  if (ca_stream_check(d, b->stream) != CUDA_SUCCESS) return NULL;
  return queue_find(d, b->stream, b->owner, true);
}

// ----------------------------------------------------------------------------
// Blocks in queues
// ----------------------------------------------------------------------------

static void fence_link(ca_fence_t *f, ca_block_t *b) {
  b->fence = f;
  b->fence_prev = NULL;
  b->fence_next = f->blocks;
  if (f->blocks) f->blocks->fence_prev = b;
  f->blocks = b;
}

static void fence_unlink(ca_block_t *b) {
  ca_fence_t *f = b->fence;
  if (b->fence_prev) b->fence_prev->fence_next = b->fence_next;
  else f->blocks = b->fence_next;
  if (b->fence_next) b->fence_next->fence_prev = b->fence_prev;
  b->fence_prev = b->fence_next = NULL;
  b->fence = NULL;
}

/* Inlined into ca_queue_add, a free with no pending neighbour. */
__attribute__((always_inline)) inline void ca_queue_add_to_fence(ca_device_t *d, ca_queue_t *q, ca_fence_t *f, ca_block_t *b) {
  b->state = CA_PENDING;
  b->queue = q;
  fence_link(f, b);
  if (f == &q->open && listed(d, q)) ca_qlist_add(d, CA_QL_OPEN, q);
  ca_bins_t *bins = reusable(q) ? queue_bins(q, b) : NULL;
  if (bins) ca_bins_insert(bins, b);
}

void ca_queue_refile(ca_block_t *b) {
  ca_fence_t *f = b->fence;
  if (f->blocks == b) return;
  fence_unlink(b);
  fence_link(f, b);
}

/* Inlined (a merge with both neighbours, a take of a whole block), with
 * ca_bins_remove. */
__attribute__((always_inline)) inline void ca_queue_remove(ca_device_t *d, ca_block_t *b) {
  (void)d;
  if (b->in_bins) ca_bins_remove(b->queue->bins[b->seg->pool->id], b);
  fence_unlink(b);
}

static bool joins_queue(const ca_block_t *n, const ca_queue_t *q) {
  return n && n->state == CA_PENDING && n->queue == q;
}

/* Neighbours pending in the same queue merge into the open batch, the
 * latest of all fences, so that no part is released early. The merge
 * keeps a neighbour's struct and its place in its bins: only a change of
 * bin moves it there. Inlined into its callers by the shipped library's
 * link-time optimization: the core's free saves its registers once for
 * both (7 instructions a GPU-like pair). */
__attribute__((always_inline)) inline void ca_queue_add(ca_device_t *d, ca_queue_t *q, ca_block_t *b) {
  ca_block_t *p = b->prev, *n = b->next;
  bool with_p = joins_queue(p, q), with_n = joins_queue(n, q);
  if (!with_p && !with_n) {
    ca_queue_add_to_fence(d, q, &q->open, b);
    return;
  }
  ca_block_t *keep = with_p ? p : n;
  size_t old = keep->size;
  if (with_p) ca_block_absorb_next(d, p);   /* b into p */
  else ca_block_absorb_prev(d, n);          /* b into n */
  if (with_p && with_n) {
    ca_queue_remove(d, n);
    ca_block_absorb_next(d, p);
  }
  /* The survivor goes to the front of the open batch, as a block filed
   * now would: the order a fence releases its blocks in decides how they
   * coalesce, and repeated sequences settle on that order (test_core_settle). */
  bool was_open = keep->fence == &q->open;
  if (was_open || !CA_DEBUG(merge_keeps_old_fence)) {
    fence_unlink(keep);
    fence_link(&q->open, keep);
  }
  if (!was_open && listed(d, q)) ca_qlist_add(d, CA_QL_OPEN, q);
  ca_bins_t *bins;
  if (keep->in_bins) ca_bins_resized(q->bins[keep->seg->pool->id], keep, old);
  else if ((bins = reusable(q) ? queue_bins(q, keep) : NULL)) ca_bins_insert(bins, keep);
}

ca_block_t *ca_queue_find_any(ca_device_t *d, ca_pool_t *pool, size_t size, size_t max, ca_queue_t **out) {
  for (ca_queue_t *q = ca_qlist_first(d, CA_QL_ALL); q; q = ca_qlist_next(q, CA_QL_ALL)) {
    ca_block_t *b = reusable(q) && q->bins[pool->id] ? ca_bins_find(q->bins[pool->id], size, max) : NULL;
    if (b) {
      *out = q;
      return b;
    }
  }
  return NULL;
}

// ----------------------------------------------------------------------------
// Events
// ----------------------------------------------------------------------------

static CUresult event_get(ca_device_t *d, ca_event_t *e) {
  if (d->event_pool_count) {
    *e = d->event_pool[--d->event_pool_count];
    return CUDA_SUCCESS;
  }
  return ca_state.be->event_create(d->ordinal, e);
}

static void event_put(ca_device_t *d, ca_event_t e) {
  if (d->event_pool_count == d->event_pool_cap) {
    size_t cap = d->event_pool_cap ? d->event_pool_cap * 2 : 16;
    ca_event_t *pool = realloc(d->event_pool, cap * sizeof *pool);
    if (!pool) {
      ca_state.be->event_destroy(e);
      return;
    }
    d->event_pool = pool;
    d->event_pool_cap = cap;
  }
  d->event_pool[d->event_pool_count++] = e;
}

static CUresult record(ca_device_t *d, ca_fence_t *f, ca_stream_t stream) {
  ca_event_t e;
  CUresult rc = event_get(d, &e);
  if (rc) return rc;
  rc = CA_CALL(d, backend_event_record, ca_state.be->event_record(e, stream));
  if (rc) {
    event_put(d, e);
    return rc;
  }
  ca_assert(f->nevents < f->cap);
  f->events[f->nevents++] = e;
  return CUDA_SUCCESS;
}

static void fence_drop_events(ca_device_t *d, ca_fence_t *f) {
  while (f->nevents) event_put(d, f->events[--f->nevents]);
}

// ----------------------------------------------------------------------------
// Sealing, polling, waiting
// ----------------------------------------------------------------------------

/* Files every block of q's open batch under fence f. */
static void close_open_batch(ca_queue_t *q, ca_fence_t *f) {
  while (q->open.blocks) {
    ca_block_t *b = q->open.blocks;
    fence_unlink(b);
    fence_link(f, b);
  }
}

void ca_queue_open_to_epoch(ca_device_t *d, ca_queue_t *q) {
  while (q->open.blocks) {
    ca_block_t *b = q->open.blocks;
    ca_queue_remove(d, b);
    ca_queue_add(d, &d->epoch, b);
  }
}

/* Fences come and go with every seal: spare ones keep the program's malloc
 * off the steady state, a few for a cudaMalloc/cudaFree loop and one per
 * queue, since a seal of every stream makes a fence for each (at 64
 * streams, 8 spares left about 3,200 calloc and free calls in 100,000
 * pairs; docs/benchmarks.md, nineteenth session). */
#define SPARE_FENCES 8
static bool keeps_spare(const ca_device_t *d) { return (size_t)d->nspare_fences < SPARE_FENCES + d->nqueues; }

/* A fence with room for n events, which follow it in the same allocation:
 * a spare one with room enough, else a new one. */
static ca_fence_t *fence_new(ca_device_t *d, int n) {
  for (ca_fence_t **p = &d->spare_fences; *p; p = &(*p)->next) {
    ca_fence_t *f = *p;
    if (f->cap < n) continue;
    *p = f->next;
    d->nspare_fences--;
    int cap = f->cap;
    memset(f, 0, sizeof *f);
    f->events = (ca_event_t *)(f + 1), f->cap = cap;
    return f;
  }
  CA_DEBUG_TALLY(fence_allocs);
  ca_fence_t *f = calloc(1, sizeof *f + (size_t)n * sizeof(ca_event_t));
  if (f) f->events = (ca_event_t *)(f + 1), f->cap = n;
  return f;
}

static void fence_delete(ca_device_t *d, ca_fence_t *f) {
  if (!keeps_spare(d)) {
    free(f);
    return;
  }
  f->next = d->spare_fences;
  d->spare_fences = f;
  d->nspare_fences++;
}

/* q's open batch becomes fence f, the newest of q's sealed ones. */
static void file_open_batch(ca_device_t *d, ca_queue_t *q, ca_fence_t *f) {
  f->seq = ++d->fence_seq;
  close_open_batch(q, f);
  if (q->tail) q->tail->next = f;
  else q->head = f;
  q->tail = f;
  if (listed(d, q)) ca_qlist_add(d, CA_QL_SEALED, q);
}

/* A non-blocking stream with all its work done needs no event in an epoch
 * fence: nothing issued before the free can still touch the block. A side
 * stream that copies once a step then costs one query, not a record, at
 * every seal of the epoch. Any answer but "done" records. */
static bool idle(ca_device_t *d, ca_stream_t stream) {
  if (CA_DEBUG(busy_streams_idle)) return true;   /* the planted fault: a query believed blindly */
  return CA_CALL(d, backend_event_query, ca_state.be->stream_query(stream)) == CUDA_SUCCESS;
}

static void seal(ca_device_t *d, ca_queue_t *q) {
  if (!q->open.blocks) return;
  /* Placing deferred streams may register some: the fence is sized after. */
  bool wait = !q->stream && (ca_streams_place(d) || d->nonblocking_overflow);
  ca_fence_t *f = fence_new(d, q->stream ? 1 : wait ? 0 : 1 + d->nnonblocking);
  if (!f) return;
  CUresult rc;
  if (q->stream) {
    /* Another thread may seal a per-thread stream's queue: an event on the
     * legacy stream, which waits for every per-thread stream, covers it. */
    rc = record(d, f, q->stream == CA_STREAM_PER_THREAD ? CA_STREAM_LEGACY : q->stream);
  } else if (wait) {
    /* A stream whose device is unknown, or more non-blocking streams than
     * a fence holds: wait as cudaFree does. */
    rc = CA_CALL(d, backend_sync, ca_state.be->device_sync(d->ordinal));
  } else {
    rc = record(d, f, CA_STREAM_LEGACY);
    for (int i = 0; !rc && i < d->nnonblocking; i++)
      if (!idle(d, d->nonblocking[i])) rc = record(d, f, d->nonblocking[i]);
  }
  if (rc) {   /* try again at the next seal; the blocks stay unreleased */
    fence_drop_events(d, f);
    fence_delete(d, f);
    return;
  }
  file_open_batch(d, q, f);
}

/* Only queues with open blocks are visited; one whose open blocks were
 * all reused since leaves the list here. */
void ca_fences_seal(ca_device_t *d) {
  if (__atomic_load_n(&ca_state.captures, __ATOMIC_ACQUIRE) > 0) return;
  ca_qlist_id_t l = CA_DEBUG(visit_all_queues) ? CA_QL_ALL : CA_QL_OPEN;
  ca_queue_t *next;
  for (ca_queue_t *q = ca_qlist_first(d, l); q; q = next) {
    next = ca_qlist_next(q, l);
    CA_DEBUG_TALLY(queue_visits);
    seal(d, q);
    if (!q->open.blocks) ca_qlist_del(d, CA_QL_OPEN, q);
  }
  seal(d, &d->epoch);
}

/* One queue: the others' open batches stay theirs (settle.c). */
void ca_fences_seal_queue(ca_device_t *d, ca_queue_t *q) {
  if (__atomic_load_n(&ca_state.captures, __ATOMIC_ACQUIRE) > 0 || !q->open.blocks) return;
  seal(d, q);
  if (!q->open.blocks && listed(d, q)) ca_qlist_del(d, CA_QL_OPEN, q);
}

void ca_fences_seal_epoch(ca_device_t *d) {
  if (__atomic_load_n(&ca_state.captures, __ATOMIC_ACQUIRE) > 0) return;
  seal(d, &d->epoch);
}

/* Queries the fence's remaining events, dropping the completed ones. A
 * fence that awaits a synchronization is complete only when that returns. */
static bool fence_done(ca_device_t *d, ca_fence_t *f) {
  if (CA_DEBUG(skip_fences)) return true;
  if (f->awaits_sync) return CA_DEBUG(sync_fences_done_early);
  while (f->nevents) {
    ca_event_t e = f->events[f->nevents - 1];
    if (CA_CALL(d, backend_event_query, ca_state.be->event_query(e))) return false;
    event_put(d, e);
    f->nevents--;
  }
  return true;
}

static size_t release_fence(ca_device_t *d, ca_queue_t *q, ca_fence_t *f) {
  size_t bytes = 0;
  q->head = f->next;
  if (!q->head) q->tail = NULL;
  while (f->blocks) {
    ca_block_t *b = f->blocks;
    ca_queue_remove(d, b);
    bytes += b->size;
    ca_trace_free_completed(d, b);
    ca_block_release(d, b);
  }
  ca_stat_add(&d->stats.active_bytes, -(int64_t)bytes);
  fence_drop_events(d, f);
  fence_delete(d, f);
  return bytes;
}

static size_t poll_queue(ca_device_t *d, ca_queue_t *q) {
  size_t bytes = 0;
  while (q->head && fence_done(d, q->head)) bytes += release_fence(d, q, q->head);
  /* With fences skipped (a test's broken policy) even open batches go. */
  if (CA_DEBUG(skip_fences) && q->open.blocks) {
    ca_fence_t *f = fence_new(d, 0);
    if (f) {
      close_open_batch(q, f);
      f->next = q->head;
      q->head = f;
      if (!q->tail) q->tail = f;
      bytes += release_fence(d, q, f);
    }
  }
  return bytes;
}

/* Queues of destroyed streams go once nothing waits in them, and so do
 * empty per-thread ones (their thread may have exited; a queue is made
 * again when needed). */
static bool collectable(const ca_queue_t *q) { return (q->dead || q->owner) && !q->head && !q->open.blocks; }

/* Per-thread queues emptied by reuse are never polled: they are looked for
 * among all queues once their number has doubled, so that the search costs
 * O(1) per queue made. */
static void collect_idle(ca_device_t *d) {
  if (d->nqueues < d->collect_at) return;
  ca_queue_t *next;
  for (ca_queue_t *q = ca_qlist_first(d, CA_QL_ALL); q; q = next) {
    next = ca_qlist_next(q, CA_QL_ALL);
    if (collectable(q)) queue_free(d, q);
  }
  d->collect_at = 2 * d->nqueues + 16;
}

/* Only queues with sealed fences are visited. An event query during a
 * global or thread-local capture invalidates it, and the count holds every
 * capture, whatever its mode or thread. */
size_t ca_fences_poll(ca_device_t *d) {
  if (__atomic_load_n(&ca_state.captures, __ATOMIC_ACQUIRE) > 0) return 0;
  size_t bytes = poll_queue(d, &d->epoch);
  ca_qlist_id_t l = CA_DEBUG(visit_all_queues) ? CA_QL_ALL : CA_QL_SEALED;
  ca_queue_t *next;
  for (ca_queue_t *q = ca_qlist_first(d, l); q; q = next) {
    next = ca_qlist_next(q, l);
    CA_DEBUG_TALLY(queue_visits);
    bytes += poll_queue(d, q);
    if (q->head) continue;
    ca_qlist_del(d, CA_QL_SEALED, q);
    if (collectable(q)) queue_free(d, q);
  }
  collect_idle(d);
  return bytes;
}

// ----------------------------------------------------------------------------
// A synchronization of the whole device proves completion
// ----------------------------------------------------------------------------

/* cudaDeviceSynchronize returns once all work issued before it on any
 * stream of the device has completed, and every block in an open batch
 * was freed (so its last work issued) before the call: filing the open
 * batches at the start and releasing them at a successful return needs no
 * event at all. A C training loop synchronizes once per step, so its
 * cudaFree'd blocks come back every step with no driver call. */

static void file_for_sync(ca_device_t *d, ca_queue_t *q) {
  if (!q->open.blocks) return;
  ca_fence_t *f = fence_new(d, 0);
  if (!f) return;   /* the blocks stay open: the next seal records events for them */
  f->awaits_sync = true;
  file_open_batch(d, q, f);
}

uint64_t ca_fences_sync_begin(ca_device_t *d) {
  if (__atomic_load_n(&ca_state.captures, __ATOMIC_ACQUIRE) > 0) return 0;
  ca_queue_t *next;
  for (ca_queue_t *q = ca_qlist_first(d, CA_QL_OPEN); q; q = next) {
    next = ca_qlist_next(q, CA_QL_OPEN);
    file_for_sync(d, q);
    if (!q->open.blocks) ca_qlist_del(d, CA_QL_OPEN, q);
  }
  file_for_sync(d, &d->epoch);
  return d->fence_seq;
}

/* The fences of q filed up to token: released (ok), or given back to the
 * open batch to be sealed with events (not ok). */
static size_t sync_end_queue(ca_device_t *d, ca_queue_t *q, uint64_t token, bool ok) {
  size_t bytes = 0;
  if (ok) {
    while (q->head && q->head->seq <= token) {
      q->head->awaits_sync = false;
      bytes += release_fence(d, q, q->head);
    }
    return bytes;
  }
  for (ca_fence_t *f = q->head; f && f->seq <= token; f = f->next) {
    if (!f->awaits_sync) continue;
    f->awaits_sync = false;
    while (f->blocks) {   /* back to the open batch, which the next seal files with events */
      ca_block_t *b = f->blocks;
      fence_unlink(b);
      fence_link(&q->open, b);
    }
    if (listed(d, q)) ca_qlist_add(d, CA_QL_OPEN, q);
  }
  return 0;   /* the emptied fences go at the next poll */
}

size_t ca_fences_sync_end(ca_device_t *d, uint64_t token, bool ok) {
  if (!token) return 0;
  size_t bytes = sync_end_queue(d, &d->epoch, token, ok);
  ca_queue_t *next;
  for (ca_queue_t *q = ca_qlist_first(d, CA_QL_SEALED); q; q = next) {
    next = ca_qlist_next(q, CA_QL_SEALED);
    bytes += sync_end_queue(d, q, token, ok);
    if (q->head) continue;
    ca_qlist_del(d, CA_QL_SEALED, q);
    if (collectable(q)) queue_free(d, q);
  }
  return bytes;
}

bool ca_fences_wait_one(ca_device_t *d, size_t *released) {
  *released = 0;
  if (__atomic_load_n(&ca_state.captures, __ATOMIC_ACQUIRE) > 0) return false;
  ca_fences_seal(d);
  return ca_fences_wait_sealed(d, released);
}

bool ca_fences_wait_sealed(ca_device_t *d, size_t *released) {
  *released = 0;
  if (__atomic_load_n(&ca_state.captures, __ATOMIC_ACQUIRE) > 0) return false;
  ca_queue_t *oldest = d->epoch.head ? &d->epoch : NULL;
  for (ca_queue_t *q = ca_qlist_first(d, CA_QL_SEALED); q; q = ca_qlist_next(q, CA_QL_SEALED))
    if (q->head && (!oldest || q->head->seq < oldest->head->seq)) oldest = q;
  if (!oldest) return false;
  ca_fence_t *f = oldest->head;
  for (int i = 0; i < f->nevents; i++) CA_CALL(d, backend_sync, ca_state.be->event_sync(f->events[i]));
  ca_stat_add(&d->stats.num_waits, 1);
  /* A wait that did not complete the fence (a failing driver) ends the
   * waiting; one that did is progress even when the fence held nothing
   * (its blocks merged into a later batch, or went back to their stream). */
  bool done = fence_done(d, f);
  *released = ca_fences_poll(d);
  return done;
}

void ca_fences_wait_all(ca_device_t *d) {
  size_t released;
  ca_fences_seal(d);
  while (ca_fences_wait_one(d, &released)) {
  }
}

// ----------------------------------------------------------------------------
// Streams coming and going
// ----------------------------------------------------------------------------

/* Work issued on a destroyed non-blocking stream runs on, yet no later
 * epoch fence records on the stream: an event recorded on it now, in a
 * fence of no blocks at the end of the epoch, holds back every block that
 * waits in the epoch after it (its fences complete in order). Without an
 * event, wait as cudaFree does. */
static void fence_orphaned_work(ca_device_t *d, ca_stream_t stream) {
  ca_fence_t *f = fence_new(d, 1);
  if (f && !record(d, f, stream)) {
    f->seq = ++d->fence_seq;
    if (d->epoch.tail) d->epoch.tail->next = f;
    else d->epoch.head = f;
    d->epoch.tail = f;
    return;
  }
  if (f) fence_delete(d, f);
  CA_CALL(d, backend_sync, ca_state.be->device_sync(d->ordinal));
}

void ca_queue_stream_gone(ca_device_t *d, ca_stream_t stream) {
  ca_queue_t *q = ca_queue_find(d, stream, false);
  for (int i = 0; i < d->nnonblocking; i++)
    if (d->nonblocking[i] == stream) {
      d->nonblocking[i--] = d->nonblocking[--d->nnonblocking];
      fence_orphaned_work(d, stream);
    }
  if (!q) return;
  /* Its blocks wait for the stream's last work, then free as usual; they
   * must leave the bins, as a new stream may reuse the handle's value. */
  seal(d, q);
  ca_queue_open_to_epoch(d, q);   /* no event could be recorded: wait like cudaFree */
  ca_qlist_del(d, CA_QL_OPEN, q);
  for (ca_fence_t *f = q->head; f; f = f->next)
    for (ca_block_t *b = f->blocks; b; b = b->fence_next)
      if (b->in_bins) ca_bins_remove(q->bins[b->seg->pool->id], b);
  q->dead = true;
  ca_qtable_forget(d, q);   /* a new stream may get the handle's value */
  if (collectable(q)) queue_free(d, q);
}

static void teardown_queue(ca_device_t *d, ca_queue_t *q, bool call_backend) {
  ca_fence_t *next;
  for (ca_fence_t *f = q->head; f; f = next) {
    next = f->next;
    if (call_backend) fence_drop_events(d, f);
    free(f);
  }
  q->head = q->tail = NULL;
}

void ca_fences_teardown(ca_device_t *d, bool call_backend) {
  ca_queue_t *next;
  for (ca_queue_t *q = ca_qlist_first(d, CA_QL_ALL); q; q = next) {
    next = ca_qlist_next(q, CA_QL_ALL);
    teardown_queue(d, q, call_backend);
    for (int p = 0; p < CA_POOL_COUNT; p++) free(q->bins[p]);
    free(q);
  }
  ca_qtable_free(d);
  d->nqueues = d->collect_at = 0;
  teardown_queue(d, &d->epoch, call_backend);
  teardown_queue(d, &d->held, call_backend);
  if (call_backend)
    for (size_t i = 0; i < d->event_pool_count; i++) ca_state.be->event_destroy(d->event_pool[i]);
  free(d->event_pool);
  d->event_pool = NULL;
  d->event_pool_count = d->event_pool_cap = 0;
  while (d->spare_fences) {
    ca_fence_t *f = d->spare_fences;
    d->spare_fences = f->next;
    free(f);
  }
  d->nspare_fences = 0;
}

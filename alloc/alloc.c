/* The path of one allocation and one free, and the ladder an allocation
 * climbs before it admits out-of-memory:
 *   1. a free block, or a block its own stream freed   (no driver call)
 *      then, while another stream's frees wait: streams settle (settle.c):
 *      grow before taking the blocks other streams just freed
 *   2. seal and poll fences: reuse what completed       (event calls)
 *   3. garbage collection above the threshold           (give back cache)
 *   4. grow: cached pages, pages moved out of free holes, new pages;
 *      first, when growing would pass the slack over allocated memory,
 *      wait for pending frees (slack.c)
 *   5. wait for pending frees, oldest first, until none is left,
 *      retrying 1 and 4 after each that released memory
 *   6. give every cached page back and grow once more
 * and only then fails, with a report. */
#include <time.h>

#include "arena.h"
#include "blocks.h"
#include "calm.h"
#include "core.h"
#include "demand.h"
#include "device.h"
#include "devlock.h"
#include "entry.h"
#include "fence.h"
#include "leaks.h"
#include "legacyq.h"
#include "log.h"
#include "oom.h"
#include "pages.h"
#include "peak.h"
#include "pool.h"
#include "ptrmap.h"
#include "segments.h"
#include "settle.h"
#include "siblings.h"
#include "slack.h"
#include "streamdev.h"
#include "streams.h"
#include "tcache.h"
#include "trace.h"
#include "track.h"

/* Written at exit by whichever thread runs the exit handlers. */
static bool exited(void) { return __atomic_load_n(&ca_state.exited, __ATOMIC_ACQUIRE); }

static ca_block_t *take(ca_device_t *d, size_t rounded, ca_stream_t stream) {
  return ca_pool_take(d, ca_pool_for(d, rounded), rounded, stream);
}

static ca_block_t *grow_and_take(ca_device_t *d, size_t rounded, ca_stream_t stream, CUresult *rc) {
  *rc = ca_pool_grow(d, ca_pool_for(d, rounded), rounded);
  return *rc ? NULL : take(d, rounded, stream);
}

/* The threshold is the ordinal's (all its arenas'): d gives back what the
 * ordinal holds above it, as far as d's own reserved memory goes. */
static void collect_garbage(ca_device_t *d) {
  double thr = ca_config.gc_threshold;
  size_t target = (size_t)(thr * (double)d->limit);
  size_t all = ca_arena_reserved(d), own = (size_t)d->stats.reserved_bytes.current;
  if (thr > 0 && all > target) ca_trim(d, own > all - target ? own - (all - target) : 0);
}

/* Blocks given back by front caches wait in their streams' queues: the
 * freeing stream may take them at once, the others once sealed and done. */
static ca_block_t *reuse_flushed(ca_device_t *d, size_t rounded, ca_stream_t stream) {
  ca_block_t *b = take(d, rounded, stream);
  if (b) return b;
  ca_fences_seal(d);
  ca_fences_poll(d);
  return take(d, rounded, stream);
}

/* How long an arena waits for another's claim to go (arena.h): a claim
 * lasts one squeeze and one growth. */
#define CLAIM_WAIT_NS (1000L * 1000 * 1000)
#define CLAIM_WAIT_STEP_NS (50L * 1000)

/* d's lock let go until no other arena holds a claim (or the wait is
 * over); false when d was torn down meanwhile. */
static bool wait_out_claims(ca_device_t *d) {
  ca_devlock_release(&d->lock);
  for (long waited = 0; waited < CLAIM_WAIT_NS && ca_arena_claimed_elsewhere(d); waited += CLAIM_WAIT_STEP_NS)
    nanosleep(&(struct timespec){.tv_nsec = CLAIM_WAIT_STEP_NS}, NULL);
  ca_devlock_take(&d->lock);
  return d->ready;
}

/* A free block, else growth: the retry after memory was given back. */
static ca_block_t *take_or_grow(ca_device_t *d, size_t rounded, ca_stream_t stream, CUresult *rc) {
  ca_block_t *b = take(d, rounded, stream);
  return b ? b : grow_and_take(d, rounded, stream, rc);
}

/* The ordinal's cap is every arena's: what the siblings cache, each in
 * turn, with d's lock let go meanwhile and d's growth claimed (arena.h).
 * Other threads may have freed into d or taken from it then (nothing of
 * this path's is held across), or torn it down (a device reset: no retry
 * on a device that is gone). An arena that squeezes while another's
 * claim holds the memory it needs tries once more when the claim goes. */
static ca_block_t *squeeze_siblings(ca_device_t *d, size_t rounded, ca_stream_t stream, CUresult *rc) {
  int ordinal = d->ordinal;
  uint64_t claim = ca_arena_claim(d, ca_pool_growth_bytes(d, rounded));
  bool gone;
  ca_block_t *b = NULL;
  ca_siblings_squeeze(d, &gone);
  if (!gone) {
    *rc = CUDA_SUCCESS;
    b = take_or_grow(d, rounded, stream, rc);
  }
  ca_arena_unclaim(ordinal, claim);
  if (b || gone || claim || !ca_arena_claimed_elsewhere(d) || CA_DEBUG(arena_claim_no_wait) || !wait_out_claims(d))
    return b;
  *rc = CUDA_SUCCESS;
  return take_or_grow(d, rounded, stream, rc);
}

static ca_block_t *slow_path(ca_device_t *d, size_t rounded, ca_stream_t stream, CUresult *rc) {
  ca_block_t *b;
  ca_stat_add(&d->stats.num_retries, 1);
  if ((b = ca_settle_take(d, rounded, stream, rc))) return b;
  ca_fences_seal(d);
  if (ca_fences_poll(d) && (b = take(d, rounded, stream))) return b;
  /* What this thread's front cache holds, before memory is taken from
   * elsewhere: its blocks join their streams' queues, to be sealed. */
  if (ca_tcache_flush_mine(d) && (b = reuse_flushed(d, rounded, stream))) return b;
  collect_garbage(d);
  if ((b = ca_slack_wait_before_growing(d, rounded, stream))) return b;
  if ((b = grow_and_take(d, rounded, stream, rc))) return b;
  /* Short of memory: every thread's cache, before waiting for the device. */
  if (ca_tcache_flush(d, NULL, false) && (b = reuse_flushed(d, rounded, stream))) return b;
  /* Until nothing is pending: the oldest fences are often empty, and what
   * one releases may not be contiguous with what the request needs. */
  size_t released;
  while (ca_fences_wait_one(d, &released)) {
    if (!released) continue;   /* nothing changed: no point searching again */
    if ((b = take_or_grow(d, rounded, stream, rc))) return b;
  }
  if (ca_trim(d, 0) && (b = grow_and_take(d, rounded, stream, rc))) return b;
  if (ca_config.arenas > 1 && (b = squeeze_siblings(d, rounded, stream, rc))) return b;
  if (!*rc) *rc = CUDA_ERROR_OUT_OF_MEMORY;
  return NULL;
}

/* ca_stat_add of a count that rises (a block's size, a request's: never 0),
 * so that its test of the sign folds away: 3 instructions a GPU-like pair. */
static inline void stat_rise(cudalloc_stat_t *s, int64_t by) {
  ca_assert(by > 0);
  if (by <= 0) __builtin_unreachable();
  ca_stat_add(s, by);
}

static void count_alloc(ca_device_t *d, ca_block_t *b) {
  stat_rise(&d->stats.allocated_bytes, (int64_t)b->size);
  stat_rise(&d->stats.requested_bytes, (int64_t)b->requested);
  ca_arena_live(d, (int64_t)b->size, (int64_t)b->requested);
  ca_stat_tick(&d->stats.num_allocs);
  ca_stat_add(&d->stats.num_live_blocks, 1);
  ca_oom_on_alloc(d);
  ca_peak_on_alloc(d, b);
}

static CUresult out_of_memory(ca_device_t *d, size_t size, CUresult rc) {
  ca_stat_add(&d->stats.num_ooms, 1);
  ca_trace_mem(d, CA_EV_OOM, 0, size);
  ca_oom_report(d, size, rc);
  d->sibling_allocated = d->sibling_pending = d->sibling_usual = 0;   /* the next report's come from its own visit */
  return rc;
}

/* The device an allocation on stream goes to: dev when given (-1: the
 * stream's own); a stream of another device than dev is a bad handle. */
static CUresult device_of(int dev, ca_stream_t stream, ca_device_t **out) {
  int sdev = dev;
  if (dev < 0 || !ca_stream_is_default(stream)) {   /* an explicit device's default streams are its own */
    CUresult rc = ca_stream_device(stream, &sdev);
    if (rc) return rc;
    if (dev >= 0 && sdev != dev) return CUDA_ERROR_INVALID_HANDLE;
  }
  CUresult rc = ca_device_get(sdev, out);
  if (__builtin_expect(ca_config.arenas > 1, 0) && !rc) *out = ca_siblings_route(*out, stream);
  return rc;
}

static CUresult malloc_core(int dev, void **ptr, size_t size, ca_stream_t stream, ca_alloc_kind_t kind,
                            void *site, void *caller);

/* What the stirred path says: the answer, or the stream to go on with (in
 * two registers: the front keeps its stream in one). */
typedef struct {
  ca_stream_t stream;
  CUresult rc;
  bool answered;
} stirred_t;

/* An allocation while the calm word is stirred (calm.h): the report asked
 * by signal, the start, the exit and legacyq's mode, each looked at. */
static __attribute__((noinline)) stirred_t stirred_front(void **ptr, size_t size, ca_stream_t stream, bool ordered) {
  ca_demand_poll();
  CUresult rc = !ptr ? CUDA_ERROR_INVALID_VALUE : ca_ready() ? CUDA_SUCCESS : ca_init(NULL);
  if (rc) return (stirred_t){stream, rc, true};
  if (size == 0) {   /* as cudaMalloc: success, and a NULL that frees fine */
    *ptr = NULL;
    return (stirred_t){stream, CUDA_SUCCESS, true};
  }
  if (exited()) return (stirred_t){stream, CUDA_ERROR_DEINITIALIZED, true};
  /* Not stream-ordered: nobody's pending blocks (stream NULL to take), but
   * the legacy stream's while it is the only one (legacyq.c). */
  return (stirred_t){ca_legacyq_alloc_stream(ordered, stream), CUDA_SUCCESS, false};
}

/* An entry point: the front cache's inline try inlined into it (link-time
 * optimization left it a call in the shared library, where the shim's
 * entry points add callers); the fallbacks are noinline, so nothing else. */
#define CA_ENTRY __attribute__((flatten))

/* Every allocation's full front: its argument and start checks, the call
 * site (site, when ca_track_site_inline answered; else asked with the entry point's cfa) and the
 * thread's front cache. Out of line: what malloc_front's inline try leaves. */
static __attribute__((noinline)) CUresult malloc_full(int dev, void **ptr, size_t size, ca_stream_t stream,
                                                      ca_alloc_kind_t kind, void *caller, const char *cfa,
                                                      void *site) {
  CA_DEBUG_TALLY(full_fronts);
  uint32_t stirred = ca_stirs();
  if (__builtin_expect(stirred, 0)) {
    /* legacyq's mode alone (a single-stream program, preloaded) and good
     * arguments: its own call only */
    if (stirred == CA_STIR_LEGACYQ && ptr && size) {
      stream = ca_legacyq_alloc_stream_slow(kind != CA_ALLOC_SYNC, stream);
    } else {
      stirred_t st = stirred_front(ptr, size, stream, kind != CA_ALLOC_SYNC);
      if (st.answered) return st.rc;
      stream = st.stream;
    }
  } else if (!ptr || !size) {   /* stirred_front's answers, started and not exiting */
    if (ptr) *ptr = NULL;
    return ptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  } else {
    stream = ca_legacyq_over_stream(kind != CA_ALLOC_SYNC, stream);
  }
  /* Taken here for both paths, outside every lock: the stack walk needs
   * the same frames below each caller (stackwalk.c). */
  if (!site) site = ca_track_site_at(caller, cfa);   /* (a stack of no site is asked again: the same answer) */
  /* The thread's front cache first: a hit needs nothing below. */
  if (kind == CA_ALLOC_ASYNC && ca_tcache_hit(dev, ptr, size, stream, site, caller)) return CUDA_SUCCESS;
  return malloc_core(dev, ptr, size, stream, kind, site, caller);
}

/* The front cache's NEAR answer: its try again, with the larger classes. */
static __attribute__((noinline)) CUresult malloc_near(int dev, void **ptr, size_t size, ca_stream_t stream,
                                                      ca_alloc_kind_t kind, void *caller, const char *cfa,
                                                      void *site) {
  ca_tcache_try_t t = ca_tcache_hit_near(dev, ptr, size, stream, site, caller);
  if (t == CA_TCACHE_DONE) return CUDA_SUCCESS;
  if (t == CA_TCACHE_CORE) return malloc_core(dev, ptr, size, ca_legacyq_over_stream(true, stream), kind, site, caller);
  return malloc_full(dev, ptr, size, stream, kind, caller, cfa, site);
}

/* Every allocation's front, inlined into each entry point (ca_malloc,
 * ca_malloc_on, ca_entry_malloc), so that none calls another on the way
 * to a hit: calm, good arguments, a call site known without a call and the front
 * cache's inline try, which call nothing (a hit saves no register);
 * anything else goes out of line, to the core or the full front. */
static inline __attribute__((always_inline)) CUresult malloc_front(int dev, void **ptr, size_t size,
                                                                   ca_stream_t stream, ca_alloc_kind_t kind,
                                                                   void *caller) {
  const char *cfa = __builtin_dwarf_cfa();
  void *site = NULL;
  if (kind == CA_ALLOC_ASYNC && ca_calm() && ptr && size && ca_track_site_inline(caller, cfa, &site)) {
    ca_tcache_try_t t = ca_tcache_hit_inline(dev, ptr, size, stream, site, caller);   /* NULL: the legacy stream */
    if (t == CA_TCACHE_DONE) return CUDA_SUCCESS;
    if (t == CA_TCACHE_CORE) return malloc_core(dev, ptr, size, ca_legacyq_over_stream(true, stream), kind, site, caller);
    if (t == CA_TCACHE_NEAR) return malloc_near(dev, ptr, size, stream, kind, caller, cfa, site);
  }
  return malloc_full(dev, ptr, size, stream, kind, caller, cfa, site);
}

CA_ENTRY CUresult ca_malloc(void **ptr, size_t size, ca_stream_t stream, ca_alloc_kind_t kind, void *caller) {
  return malloc_front(-1, ptr, size, stream, kind, caller);
}

CA_ENTRY CUresult ca_malloc_on(int dev, void **ptr, size_t size, ca_stream_t stream, ca_alloc_kind_t kind,
                      void *caller) {
  return malloc_front(dev, ptr, size, stream, kind, caller);
}

CA_ENTRY cudaError_t ca_entry_malloc(void **ptr, size_t size, ca_stream_t stream, void *caller) {
  CUresult rc = malloc_front(-1, ptr, size, stream, CA_ALLOC_ASYNC, caller);
  return rc ? ca_cuda_error(rc) : cudaSuccess;
}

/* Below the front cache: the device lock (apart, so that a hit saves no
 * registers for it). */
static __attribute__((noinline)) CUresult malloc_core(int dev, void **ptr, size_t size, ca_stream_t stream,
                                                      ca_alloc_kind_t kind, void *site, void *caller) {
  CUresult rc;
  ca_block_t *b = NULL;
  ca_device_t *d;
  if ((rc = device_of(dev, stream ? stream : CA_STREAM_LEGACY, &d))) return rc;
  bool claimed = false;
  ca_devlock_take(&d->lock);
  if (size > d->limit) {
    if (ca_config.arenas > 1) ca_siblings_count(d);   /* the report's figures are the ordinal's, now */
    rc = out_of_memory(d, size, CUDA_ERROR_OUT_OF_MEMORY);
  } else {
    size_t rounded = ca_round_size(size);
    if (!(b = take(d, rounded, stream)) && !(b = slow_path(d, rounded, stream, &rc)))
      rc = out_of_memory(d, size, rc);
  }
  if (b) {
    rc = CUDA_SUCCESS;   /* a failed rung of the ladder does not count once a block is found */
    b->requested = size;
    b->site = site;
    ca_leaks_stamp(b);
    if (ca_ptrmap_insert(&d->live, b)) {
      count_alloc(d, b);
      ca_trace_alloc(d, b);
    } else {   /* no host memory to remember it: give it back */
      ca_queue_add(d, &d->epoch, b);
      b = NULL;
      rc = CUDA_ERROR_OUT_OF_MEMORY;
    }
  }
  if (b) {
    ca_tcache_on_handout(d, b, false);
    /* a stream-ordered block that a stream-ordered free may give to the
     * thread's front cache (not cudaMalloc's, cuMemAlloc's, pitch, 3D, nor
     * PyTorch's whose frees keep cudaFree's promise) */
    claimed = kind == CA_ALLOC_ASYNC && ca_tcache_claim(d, b, stream);
  }
  if (b && ca_handout_checked())   /* a backend that sees device work checks the hand-out */
    ca_state.be->check_handout(b->addr, size, stream, stream != NULL, caller);
  ca_devlock_release(&d->lock);
  if (claimed) ca_tcache_remember(b);
  if (b) *ptr = (void *)b->addr;
  return rc;
}

// ----------------------------------------------------------------------------
// Frees
// ----------------------------------------------------------------------------

static bool stream_capturing(ca_stream_t stream) {
  int capturing = 0;
  return ca_state.be->is_capturing(stream, &capturing) == CUDA_SUCCESS && capturing;
}

/* The queue a freed block waits in: with free_mode:stream, a cudaFree
 * waits in the block's own stream's (the device's epoch when it is gone).
 * A free on a stream the backend could not vouch for (unsure) waits in the
 * epoch, as cudaFree's would. found: stream's queue as the stream check
 * found it (NULL: look it up). */
static ca_queue_t *queue_for(ca_device_t *d, ca_block_t *b, ca_stream_t stream, bool sync, bool unsure,
                             ca_queue_t *found) {
  bool capture = __atomic_load_n(&ca_state.captures, __ATOMIC_ACQUIRE) > 0;
  if (capture && (sync || unsure || stream_capturing(stream))) return &d->held;
  ca_queue_t *q = sync ? ca_legacyq_free_queue(d) : NULL;   /* all work is one FIFO */
  if (q) return q;
  if (unsure || (sync && ca_config.free_mode == CA_FREE_DEVICE)) return &d->epoch;
  q = sync ? ca_queue_of_block(d, b) : found ? found : ca_queue_find(d, stream, true);
  return q ? q : &d->epoch;
}

/* The live block that p is just past the end of (p is in its rounding
 * padding, or where the next block starts), or NULL. */
static const ca_block_t *just_past(const ca_block_t *b, uintptr_t p) {
  if (b->state == CA_LIVE) return p >= b->addr + b->requested ? b : NULL;
  const ca_block_t *prev = b->prev;
  return b->addr == p && prev && prev->state == CA_LIVE ? prev : NULL;
}

static CUresult bad_free(ca_device_t *d, uintptr_t p) {
  ca_stat_add(&d->stats.num_bad_frees, 1);
  ca_segment_t *seg = ca_segment_of(d, p);
  ca_block_t *b = seg ? seg->first : NULL;
  while (b && !(p >= b->addr && p < b->addr + b->size)) b = b->next;
  if (b && b->addr == p && b->state == CA_LIVE && ca_tcache_holds(b)) {
    ca_log("free of %p rejected: it is a block already freed (a double free); nothing was freed", (void *)p);
    return CUDA_ERROR_INVALID_VALUE;
  }
  ca_tcache_quiesce();   /* the live blocks' sizes, which front-cache hits write */
  const ca_block_t *live = b ? just_past(b, p) : NULL;
  size_t live_requested = live ? live->requested : 0;
  ca_tcache_resume();
  if (live) {   /* a pointer one past an array, or a double free of the block after it */
    ca_log("free of %p rejected: it is just past the end of the live block at %p (%zu bytes)%s; nothing was freed",
           (void *)p, (void *)live->addr, live_requested, live == b ? "" : ", or a block already freed");
    return CUDA_ERROR_INVALID_VALUE;
  }
  const char *why = !b ? "outside every block"
                  : b->state == CA_LIVE ? "inside a live block (an interior pointer)"
                  : b->addr == p ? "a block already freed (a double free)"
                  : "inside freed memory (a double free or an interior pointer)";
  ca_log("free of %p rejected: it is %s; nothing was freed", (void *)p, why);
  return CUDA_ERROR_INVALID_VALUE;
}

static CUresult free_block(void *ptr, ca_stream_t stream, bool sync) {
  ca_demand_poll();
  if (!ptr) return CUDA_SUCCESS;
  if (exited()) return CUDA_SUCCESS;
  if (!ca_state.be) return CUDA_ERROR_NOT_FOUND;
  uintptr_t p = (uintptr_t)ptr;
  ca_device_t *d = ca_device_lock_owner(p);
  if (!d) return CUDA_ERROR_NOT_FOUND;
  /* A bad stream changes nothing: the block stays the program's. One the
   * backend cannot answer for just now (a transient error) loses nothing. */
  ca_queue_t *found = NULL;
  CUresult rc = sync ? CUDA_SUCCESS : ca_queue_check_stream(d, stream, &found);
  bool unsure = rc && rc != CUDA_ERROR_INVALID_HANDLE;
  if (unsure) rc = CUDA_SUCCESS;
  ca_block_t *b = NULL;
  size_t slot;
  bool siblings = false;   /* the front cache's trim left other arenas' blocks to trim (tcache.h) */
  /* a block in a thread's front cache is freed already */
  if (!rc && (!(b = ca_ptrmap_get_slot(&d->live, p, &slot)) || !ca_tcache_disown(b))) {
    b = NULL;
    rc = bad_free(d, p);
  }
  if (b) {
    ca_ptrmap_remove_slot(&d->live, slot);
    ca_tcache_on_free(d, b, false);
    ca_peak_on_free(d, b);
    ca_queue_count_freed(d, b, true);
    ca_trace_free(d, b, ca_stream_normal(stream), sync);
    ca_queue_add(d, queue_for(d, b, ca_stream_normal(stream), sync, unsure, found), b);
    siblings = ca_tcache_trim(d);
  }
  ca_devlock_release(&d->lock);
  if (__builtin_expect(siblings, 0)) ca_tcache_trim_siblings(d);
  return rc;
}

/* Both frees tell legacyq.c the stream and thread first (before any lock:
 * that may end its mode), the front cache's frees too. Inlined into both
 * entry points of a stream-ordered free. */
/* Out of line and cold, so that the calm path's layout holds; the mode's
 * owner on its legacy stream (what it has seen already) calls no further. */
static __attribute__((noinline, cold)) void free_stirred(ca_stream_t stream) {
  ca_demand_poll();
  ca_legacyq_saw(stream);
}
/* The core's free, out of line: a cached free saves no register for its work. */
static __attribute__((noinline)) CUresult free_core(void *ptr, ca_stream_t stream) {
  return free_block(ptr, stream, false);
}
/* What free_front's inline try leaves: the free as it was (stirred, a
 * stream not seen under this generation, the lock claimed, a large block). */
static __attribute__((noinline)) CUresult free_full(void *ptr, ca_stream_t stream) {
  if (__builtin_expect(!ca_calm(), 0)) free_stirred(stream);   /* calm: no report asked, legacyq's mode over */
  if (ca_tcache_give(ptr, stream)) return CUDA_SUCCESS;   /* the thread's front cache: no lock */
  return free_core(ptr, stream);
}
static inline __attribute__((always_inline)) CUresult free_front(void *ptr, ca_stream_t stream) {
  if (__builtin_expect(ca_calm(), 1)) {
    ca_tcache_try_t t = ca_tcache_give_inline(ptr, stream);
    if (t == CA_TCACHE_DONE) return CUDA_SUCCESS;
    if (t == CA_TCACHE_CORE) return free_core(ptr, stream);
  }
  return free_full(ptr, stream);
}

CA_ENTRY CUresult ca_free(void *ptr, ca_stream_t stream) { return free_front(ptr, stream); }

CA_ENTRY cudaError_t ca_entry_free(void *ptr, ca_stream_t stream) {
  CUresult rc = free_front(ptr, stream);
  return rc ? ca_cuda_error(rc) : cudaSuccess;
}

CUresult ca_free_sync(void *ptr) {
  ca_legacyq_saw(CA_STREAM_LEGACY);
  return free_block(ptr, CA_STREAM_LEGACY, true);
}

/* torch_free:stream: PyTorch's frees are stream-ordered (else cudaFree's). */
static bool torch_frees_ordered(void) { return ca_config.torch_free == CA_FREE_STREAM; }

CUresult ca_free_torch(void *ptr, ca_stream_t stream) {
  return torch_frees_ordered() ? ca_free(ptr, stream) : ca_free_sync(ptr);
}

/* By default PyTorch's blocks come back through ca_free_sync, never into a
 * front cache: trying the cache first and claiming each block for it cost a
 * pair a tenth to a fifth of its instructions for nothing (docs/benchmarks.md,
 * eighteenth session). */
CUresult ca_malloc_torch(int dev, void **ptr, size_t size, ca_stream_t stream, void *caller) {
  return ca_malloc_on(dev, ptr, size, stream, torch_frees_ordered() ? CA_ALLOC_ASYNC : CA_ALLOC_ASYNC_UNCACHED,
                      caller);
}

// ----------------------------------------------------------------------------
// Lookups
// ----------------------------------------------------------------------------

bool ca_owns(const void *ptr) {
  if (!ptr || !ca_state.be) return false;
  ca_device_t *d = ca_device_lock_owner((uintptr_t)ptr);
  if (d) ca_devlock_release(&d->lock);
  return d != NULL;
}

CUresult ca_address_range(const void *ptr, void **base, size_t *size) {
  uintptr_t p = (uintptr_t)ptr;
  if (!ptr || !ca_state.be) return CUDA_ERROR_NOT_FOUND;
  ca_device_t *d = ca_device_lock_owner(p);
  if (!d) return CUDA_ERROR_NOT_FOUND;
  ca_block_t *b = ca_ptrmap_get(&d->live, p);
  bool interior = !b;
  if (interior) {   /* an interior pointer: walk the segment (rare) */
    ca_segment_t *seg = ca_segment_of(d, p);
    for (b = seg ? seg->first : NULL; b; b = b->next)
      if (p >= b->addr && p < b->addr + b->size) break;
    if (b && b->state != CA_LIVE) b = NULL;
  }
  if (b && ca_tcache_holds(b)) b = NULL;   /* freed into a front cache */
  ca_tcache_quiesce();   /* requested, which front-cache hits write */
  if (b && interior && p >= b->addr + b->requested) b = NULL;   /* the rounding padding belongs to no range */
  if (b) {
    if (base) *base = (void *)b->addr;
    if (size) *size = b->requested;
  }
  ca_tcache_resume();
  ca_devlock_release(&d->lock);
  return b ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

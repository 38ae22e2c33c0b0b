/* The pinned host-memory cache: what cudaHostAlloc and cudaFreeHost reach
 * (pinned.h has the picture).
 *
 * Allocation: the private jemalloc arena, through an explicit thread cache
 * used only under this file's lock (so that a block never comes from
 * another arena's cache, and every hand-off between threads is ordered by a
 * lock the sanitizers see). The record of a live block is a ca_block_t in
 * a ca_ptrmap_t, as for device blocks; records come from jemalloc's own
 * default arena, so that the program's malloc is never called for them.
 *
 * Stream safety: an async copy that touches a pinned chunk records an event
 * on its stream (one event per range and stream, recorded again by later
 * copies: later work on a stream completes after earlier work). A block
 * freed while such an event is pending waits in `waiting`, out of
 * jemalloc's reach, and goes back to the arena when the events complete.
 */
#include "pinned.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "core.h"
#include "debug.h"
#include "device.h"
#include "log.h"
#include "track.h"

#define MAX_EVENTS 64     /* spare events kept */

typedef struct copy_s {
  uintptr_t lo, hi;       /* bytes an async copy touches */
  ca_stream_t stream;
  ca_event_t event;       /* recorded on stream after the copy */
  int dev;
} copy_t;

typedef struct spare_s {
  ca_event_t event;
  int dev;
} spare_t;

static struct {
  pthread_mutex_t lock;
  bool ready;             /* the arena exists */
  unsigned arena, tcache;
  int flags;              /* MALLOCX_ARENA | MALLOCX_TCACHE */
  ca_ptrmap_t live;
  ca_block_t *waiting;    /* freed, copies in flight: linked by bin_next */
  copy_t *copies;
  size_t ncopies, copies_cap;
  spare_t spare[MAX_EVENTS];
  int nspare;
  size_t purge_floor;     /* cached bytes after the last purge */
  cudalloc_pinned_stats_t stats;   /* all but the chunks' */
} pinned = {.lock = PTHREAD_MUTEX_INITIALIZER};

static int live_count;    /* atomic: copies are tracked only while blocks live */

static size_t host_page(void) { return (size_t)sysconf(_SC_PAGESIZE); }

// ----------------------------------------------------------------------------
// The arena
// ----------------------------------------------------------------------------

/* A fresh arena with the pinned hooks, and its own thread cache. Its dirty
 * extents never decay: jemalloc reuses them itself, and gives them back
 * only when purge_locked asks. Decay would hand extents back on a timer
 * (pinned_chunks.c reuses a chunk only once it is whole again), so a
 * repeated loop pinned a new chunk now and then, at times no test could
 * foresee. */
static CUresult arena_locked(void) {
  if (pinned.ready) return CUDA_SUCCESS;
  extent_hooks_t *hooks = &ca_pinned_hooks;
  size_t sz = sizeof pinned.arena;
  if (ca_je_mallctl("arenas.create", &pinned.arena, &sz, &hooks, sizeof hooks)) return CUDA_ERROR_OUT_OF_MEMORY;
  ssize_t never = -1;
  char name[64];
  snprintf(name, sizeof name, "arena.%u.dirty_decay_ms", pinned.arena);
  ca_je_mallctl(name, NULL, NULL, &never, sizeof never);
  snprintf(name, sizeof name, "arena.%u.muzzy_decay_ms", pinned.arena);
  ca_je_mallctl(name, NULL, NULL, &never, sizeof never);
  sz = sizeof pinned.tcache;
  if (ca_je_mallctl("tcache.create", &pinned.tcache, &sz, NULL, 0)) return CUDA_ERROR_OUT_OF_MEMORY;
  pinned.flags = MALLOCX_ARENA(pinned.arena) | MALLOCX_TCACHE(pinned.tcache);
  pinned.ready = true;
  return CUDA_SUCCESS;
}

/* Page-aligned from a page on (what cudaHostAlloc returns, and what direct
 * I/O into pinned buffers needs), 256-byte aligned below (cudaMalloc's). */
static int align_flags(size_t size) {
  return size >= host_page() ? MALLOCX_ALIGN(host_page()) : MALLOCX_ALIGN(256);
}

static char arena_ctl[64];

static const char *arena_name(const char *what) {
  snprintf(arena_ctl, sizeof arena_ctl, "arena.%u.%s", pinned.arena, what);
  return arena_ctl;
}

/* jemalloc hands its dirty extents back (through the hooks' dalloc). */
static void purge_locked(void) {
  if (pinned.ready) ca_je_mallctl(arena_name("purge"), NULL, NULL, NULL, 0);
}

// ----------------------------------------------------------------------------
// Statistics
// ----------------------------------------------------------------------------

static int64_t reserved_now(void) {
  cudalloc_pinned_stats_t s;
  ca_pinned_chunks_stats(&s);
  return s.pinned_reserved_bytes.current;
}

static void count_live(ca_block_t *b, int sign) {
  ca_stat_add(&pinned.stats.pinned_allocated_bytes, sign * (int64_t)b->size);
  ca_stat_add(&pinned.stats.pinned_requested_bytes, sign * (int64_t)b->requested);
  ca_stat_add(&pinned.stats.pinned_num_live_blocks, sign);
  __atomic_add_fetch(&live_count, sign, __ATOMIC_RELEASE);
}

/* When more than pinned_cache_mb is cached, jemalloc gives its dirty
 * extents back, and chunks that come back whole go (pinned_chunks.c). Not
 * again before the cache has grown by a chunk since: what cannot be given
 * back (chunks still partly used) must not cost a purge per free. */
static void keep_cache_small_locked(void) {
  size_t limit = ca_config.pinned_cache;
  int64_t cached = reserved_now() - pinned.stats.pinned_allocated_bytes.current;
  if (cached <= (int64_t)limit) {
    pinned.purge_floor = 0;
    return;
  }
  if ((size_t)cached < pinned.purge_floor + CA_PINNED_CHUNK) return;
  purge_locked();
  pinned.purge_floor = (size_t)(reserved_now() - pinned.stats.pinned_allocated_bytes.current);
}

// ----------------------------------------------------------------------------
// Records
// ----------------------------------------------------------------------------

static ca_block_t *record_new(uintptr_t addr, size_t size, size_t requested, void *caller) {
  ca_block_t *b = ca_je_mallocx(sizeof *b, MALLOCX_ZERO);
  if (!b) return NULL;
  b->addr = addr;
  b->size = size;
  b->requested = requested;
  b->state = CA_LIVE;
  b->site = ca_track_site(caller);
  return b;
}

static void record_delete(ca_block_t *b) { ca_je_dallocx(b, 0); }

/* The block goes back to jemalloc, its record away. */
static void release_locked(ca_block_t *b) {
  ca_je_dallocx((void *)b->addr, pinned.flags);
  record_delete(b);
}

// ----------------------------------------------------------------------------
// Copies in flight
// ----------------------------------------------------------------------------

static CUresult event_get(int dev, ca_event_t *ev) {
  for (int i = pinned.nspare - 1; i >= 0; i--) {
    if (pinned.spare[i].dev != dev) continue;
    *ev = pinned.spare[i].event;
    pinned.spare[i] = pinned.spare[--pinned.nspare];
    return CUDA_SUCCESS;
  }
  return ca_state.be->event_create(dev, ev);
}

static void event_put(ca_event_t ev, int dev) {
  if (pinned.nspare < MAX_EVENTS) pinned.spare[pinned.nspare++] = (spare_t){ev, dev};
  else ca_state.be->event_destroy(ev);
}

static void copy_drop_locked(size_t i) {
  event_put(pinned.copies[i].event, pinned.copies[i].dev);
  pinned.copies[i] = pinned.copies[--pinned.ncopies];
}

/* Forgets the copies whose events have completed. */
static void copies_poll_locked(void) {
  for (size_t i = pinned.ncopies; i-- > 0;)
    if (ca_state.be->event_query(pinned.copies[i].event) != CUDA_ERROR_NOT_READY) copy_drop_locked(i);
}

/* Waits for every copy in flight (the allocation would fail otherwise). */
static void copies_wait_locked(void) {
  for (size_t i = pinned.ncopies; i-- > 0;) {
    ca_state.be->event_sync(pinned.copies[i].event);
    copy_drop_locked(i);
  }
}

static bool copies_touch_locked(const ca_block_t *b) {
  if (CA_DEBUG(pinned_ignore_copies)) return false;
  for (size_t i = 0; i < pinned.ncopies; i++)
    if (pinned.copies[i].lo < b->addr + b->size && b->addr < pinned.copies[i].hi) return true;
  return false;
}

/* Waiting blocks that no copy touches any more go back to jemalloc. */
static void waiting_poll_locked(void) {
  if (!pinned.waiting) return;
  copies_poll_locked();
  for (ca_block_t **p = &pinned.waiting; *p;) {
    ca_block_t *b = *p;
    if (copies_touch_locked(b)) {
      p = &b->bin_next;
      continue;
    }
    *p = b->bin_next;
    ca_stat_add(&pinned.stats.pinned_waiting_bytes, -(int64_t)b->size);
    release_locked(b);
  }
}

static bool copies_grow_locked(void) {
  if (pinned.ncopies < pinned.copies_cap) return true;
  size_t cap = pinned.copies_cap ? pinned.copies_cap * 2 : 64;
  copy_t *v = ca_je_mallocx(cap * sizeof *v, 0);
  if (!v) return false;
  if (pinned.copies) memcpy(v, pinned.copies, pinned.ncopies * sizeof *v);
  if (pinned.copies) ca_je_dallocx(pinned.copies, 0);
  pinned.copies = v;
  pinned.copies_cap = cap;
  return true;
}

/* An event after the copy on stream, for [lo, hi): the event of a range
 * of the same stream that overlaps or touches it, recorded again (so that
 * a buffer copied piece by piece costs one event), or a new one. When none
 * can be recorded the stream is synchronized instead: the copy is done. */
static void copy_track_locked(uintptr_t lo, uintptr_t hi, ca_stream_t stream) {
  const ca_backend_t *be = ca_state.be;
  for (size_t i = 0; i < pinned.ncopies; i++) {
    copy_t *c = &pinned.copies[i];
    if (c->stream != stream || c->lo > hi || lo > c->hi) continue;   /* overlapping or adjacent */
    ca_stat_add(&pinned.stats.pinned_copies_tracked, 1);
    if (be->event_record(c->event, stream) != CUDA_SUCCESS) break;
    c->lo = lo < c->lo ? lo : c->lo;
    c->hi = hi > c->hi ? hi : c->hi;
    return;
  }
  int dev = ca_device_current();
  ca_event_t ev;
  if (copies_grow_locked() && event_get(dev, &ev) == CUDA_SUCCESS) {
    ca_stat_add(&pinned.stats.pinned_copies_tracked, 1);
    if (be->event_record(ev, stream) == CUDA_SUCCESS) {
      pinned.copies[pinned.ncopies++] = (copy_t){lo, hi, stream, ev, dev};
      return;
    }
    event_put(ev, dev);
  }
  be->stream_sync(stream);
}

void ca_host_copy_issued(const void *dst, const void *src, size_t n, ca_stream_t stream) {
  if (!n || !__atomic_load_n(&live_count, __ATOMIC_ACQUIRE) || !ca_ready()) return;
  if (ca_stream_capturing(stream)) {
    /* the copy runs when the graph is launched: no event can say when */
    ca_log_once("an async copy on pinned memory is being captured into a graph: cudalloc cannot tell when "
                "it runs; keep the buffer alive until the graph has run");
    return;
  }
  pthread_mutex_lock(&pinned.lock);
  const void *ends[2] = {dst, src};
  for (int i = 0; i < 2; i++) {
    uintptr_t p = (uintptr_t)ends[i];
    if (p && ca_pinned_chunks_contain(p)) copy_track_locked(p, p + n, stream);
  }
  pthread_mutex_unlock(&pinned.lock);
}

// ----------------------------------------------------------------------------
// Allocation and free
// ----------------------------------------------------------------------------

/* jemalloc's block, or NULL once waiting for copies and giving the cache
 * back have not helped either. */
static void *take_locked(size_t size) {
  int flags = pinned.flags | align_flags(size);
  void *p = ca_je_mallocx(size, flags);
  if (p || !pinned.waiting) return p;
  copies_wait_locked();
  waiting_poll_locked();
  return ca_je_mallocx(size, flags);
}

static void *take_or_trim_locked(size_t size) {
  void *p = take_locked(size);
  if (p) return p;
  purge_locked();
  ca_pinned_chunks_trim(0);
  return ca_je_mallocx(size, pinned.flags | align_flags(size));
}

static CUresult alloc_locked(void **ptr, size_t size, void *caller) {
  CUresult rc = arena_locked();
  if (rc) return rc;
  waiting_poll_locked();
  void *p = take_or_trim_locked(size);
  ca_block_t *b = p ? record_new((uintptr_t)p, ca_je_sallocx(p, 0), size, caller) : NULL;
  if (b && !ca_ptrmap_insert(&pinned.live, b)) {
    record_delete(b);
    b = NULL;
  }
  if (!b) {
    if (p) ca_je_dallocx(p, pinned.flags);
    ca_stat_add(&pinned.stats.pinned_num_ooms, 1);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  count_live(b, +1);
  ca_stat_add(&pinned.stats.pinned_num_allocs, 1);
  /* A backend that sees device work checks the hand-out, as for device
   * blocks: any stream may use pinned memory at once, so no copy may still
   * be in flight on it. */
  if (ca_handout_checked()) ca_state.be->check_handout((uintptr_t)p, size, NULL, false, caller);
  *ptr = p;
  return CUDA_SUCCESS;
}

CUresult ca_host_alloc(void **ptr, size_t size, unsigned flags, void *caller) {
  if (!ptr || (flags & ~CA_HOST_FLAGS_KNOWN)) return CUDA_ERROR_INVALID_VALUE;
  if (flags & ~CA_HOST_FLAGS_SERVED) return CUDA_ERROR_NOT_SUPPORTED;
  CUresult rc = ca_init(NULL);
  if (rc) return rc;
  if (size == 0) {
    *ptr = NULL;
    return CUDA_SUCCESS;
  }
  pthread_mutex_lock(&pinned.lock);
  rc = alloc_locked(ptr, size, caller);
  pthread_mutex_unlock(&pinned.lock);
  return rc;
}

static CUresult bad_free_locked(void *ptr) {
  ca_stat_add(&pinned.stats.pinned_num_bad_frees, 1);
  ca_log("free of pinned %p rejected: it is not a live pinned block (freed already, or inside one); "
         "nothing was freed", ptr);
  return CUDA_ERROR_INVALID_VALUE;
}

/* After exit the driver may be gone: the block is forgotten, not reused. */
static void free_locked(ca_block_t *b) {
  count_live(b, -1);
  ca_stat_add(&pinned.stats.pinned_num_frees, 1);
  if (__atomic_load_n(&ca_state.exited, __ATOMIC_ACQUIRE)) {
    record_delete(b);
    return;
  }
  if (copies_touch_locked(b)) copies_poll_locked();
  if (copies_touch_locked(b)) {
    b->state = CA_PENDING;
    b->bin_next = pinned.waiting;
    pinned.waiting = b;
    ca_stat_add(&pinned.stats.pinned_waiting_bytes, (int64_t)b->size);
  } else {
    release_locked(b);
  }
  waiting_poll_locked();
  keep_cache_small_locked();
}

CUresult ca_host_free(void *ptr) {
  if (!ptr) return CUDA_SUCCESS;
  if (!ca_ready()) return CUDA_ERROR_NOT_FOUND;
  pthread_mutex_lock(&pinned.lock);
  ca_block_t *b = ca_ptrmap_remove(&pinned.live, (uintptr_t)ptr);
  CUresult rc = CUDA_SUCCESS;
  if (b) free_locked(b);
  else rc = ca_pinned_chunks_contain((uintptr_t)ptr) ? bad_free_locked(ptr) : CUDA_ERROR_NOT_FOUND;
  pthread_mutex_unlock(&pinned.lock);
  return rc;
}

// ----------------------------------------------------------------------------
// Statistics, checks, reports
// ----------------------------------------------------------------------------

static void snapshot_locked(cudalloc_pinned_stats_t *out) {
  ca_pinned_chunks_stats(&pinned.stats);
  cudalloc_stat_t *cached = &pinned.stats.pinned_cached_bytes;
  cached->current = pinned.stats.pinned_reserved_bytes.current - pinned.stats.pinned_allocated_bytes.current;
  if (cached->current > cached->peak) cached->peak = cached->current;
  *out = pinned.stats;
}

cudaError_t cudalloc_get_pinned_stats(cudalloc_pinned_stats_t *out) {
  if (!out) return cudaErrorInvalidValue;
  pthread_mutex_lock(&pinned.lock);
  snapshot_locked(out);
  pthread_mutex_unlock(&pinned.lock);
  return cudaSuccess;
}

void ca_pinned_reset_peaks(void) {
  pthread_mutex_lock(&pinned.lock);
#define CA_RESET_PEAK(name, doc) pinned.stats.name.peak = pinned.stats.name.current;
  CUDALLOC_STAT_PINNED_BYTES(CA_RESET_PEAK)
  CUDALLOC_STAT_PINNED_COUNTS(CA_RESET_PEAK)
#undef CA_RESET_PEAK
  pthread_mutex_unlock(&pinned.lock);
}

static ca_pinned_check_code_t check_locked(void) {
  int64_t bytes = 0, count = 0;
  for (size_t i = 0; i < pinned.live.cap; i++) {
    ca_block_t *b = pinned.live.vals[i];
    if (!b) continue;
    if (!ca_pinned_chunks_hold(b->addr, b->size)) {
      ca_log("check: live pinned block %p (%zu bytes) is not inside one pinned chunk", (void *)b->addr, b->size);
      return CA_PINNED_CHECK_CHUNK;
    }
    bytes += (int64_t)b->size;
    count++;
  }
  if (bytes != pinned.stats.pinned_allocated_bytes.current || count != pinned.stats.pinned_num_live_blocks.current) {
    ca_log("check: live pinned blocks hold %lld bytes in %lld blocks; the statistics say %lld in %lld",
           (long long)bytes, (long long)count, (long long)pinned.stats.pinned_allocated_bytes.current,
           (long long)pinned.stats.pinned_num_live_blocks.current);
    return CA_PINNED_CHECK_STATS;
  }
  if (ca_pinned_chunks_violations()) {
    ca_log("check: jemalloc handed back %llu pinned extents that crossed chunks",
           (unsigned long long)ca_pinned_chunks_violations());
    return CA_PINNED_CHECK_CROSSED;
  }
  return CA_PINNED_CHECK_OK;
}

ca_pinned_check_code_t ca_pinned_check(void) {
  pthread_mutex_lock(&pinned.lock);
  ca_pinned_check_code_t rc = check_locked();
  pthread_mutex_unlock(&pinned.lock);
  return rc;
}

const ca_ptrmap_t *ca_pinned_lock_live(void) {
  pthread_mutex_lock(&pinned.lock);
  if (pinned.ready) return &pinned.live;
  pthread_mutex_unlock(&pinned.lock);
  return NULL;
}

void ca_pinned_unlock(void) { pthread_mutex_unlock(&pinned.lock); }

bool ca_pinned_jemalloc_ids(unsigned *arena, unsigned *tcache) {
  pthread_mutex_lock(&pinned.lock);
  bool ready = pinned.ready;
  *arena = pinned.arena;
  *tcache = pinned.tcache;
  pthread_mutex_unlock(&pinned.lock);
  return ready;
}

// ----------------------------------------------------------------------------
// Cache, shutdown, fork
// ----------------------------------------------------------------------------

void ca_pinned_empty_cache(void) {
  pthread_mutex_lock(&pinned.lock);
  waiting_poll_locked();
  if (pinned.ready) ca_je_mallctl("tcache.flush", NULL, NULL, &pinned.tcache, sizeof pinned.tcache);
  purge_locked();
  ca_pinned_chunks_trim(0);
  pthread_mutex_unlock(&pinned.lock);
}

static void forget_records_locked(void) {
  for (size_t i = 0; i < pinned.live.cap; i++)
    if (pinned.live.vals[i]) record_delete(pinned.live.vals[i]);
  while (pinned.waiting) {
    ca_block_t *b = pinned.waiting;
    pinned.waiting = b->bin_next;
    record_delete(b);
  }
  ca_ptrmap_free(&pinned.live);
  if (pinned.copies) ca_je_dallocx(pinned.copies, 0);
}

/* Live blocks are forgotten with the arena, as device blocks are with
 * their pools. */
void ca_pinned_shutdown(void) {
  pthread_mutex_lock(&pinned.lock);
  if (pinned.ready) {
    copies_wait_locked();
    for (int i = 0; i < pinned.nspare; i++) ca_state.be->event_destroy(pinned.spare[i].event);
    ca_je_mallctl("tcache.destroy", NULL, NULL, &pinned.tcache, sizeof pinned.tcache);
    ca_je_mallctl(arena_name("destroy"), NULL, NULL, NULL, 0);
    forget_records_locked();
  }
  ca_pinned_chunks_drop(true);
  memset(&pinned.stats, 0, sizeof pinned.stats);
  pthread_mutex_t lock = pinned.lock;
  memset(&pinned, 0, sizeof pinned);
  pinned.lock = lock;
  __atomic_store_n(&live_count, 0, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&pinned.lock);
}

/* In a fork child, the parent's records: kept reachable, never touched. */
static ca_ptrmap_t abandoned_live;

void ca_pinned_fork_child(void) {
  abandoned_live = pinned.live;
  ca_pinned_chunks_drop(false);
  memset(&pinned, 0, sizeof pinned);
  pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
  pinned.lock = fresh;
  __atomic_store_n(&live_count, 0, __ATOMIC_RELEASE);
}

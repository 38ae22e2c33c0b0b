/* The path of one allocation and one free, and the ladder an allocation
 * climbs before it admits out-of-memory:
 *   1. a free block, or a block its own stream freed   (no driver call)
 *   2. seal and poll fences: reuse what completed       (event calls)
 *   3. garbage collection above the threshold           (give back cache)
 *   4. grow: cached pages, pages moved out of free holes, new pages
 *   5. wait for pending frees, oldest first, retrying 1 and 4 after each
 *   6. give every cached page back and grow once more
 * and only then fails, with a report. */
#include "blocks.h"
#include "core.h"
#include "device.h"
#include "fence.h"
#include "log.h"
#include "pages.h"
#include "pool.h"
#include "ptrmap.h"
#include "report.h"
#include "segments.h"
#include "track.h"

static ca_block_t *take(ca_device_t *d, size_t rounded, ca_stream_t stream) {
  return ca_pool_take(d, ca_pool_for(d, rounded), rounded, stream);
}

static ca_block_t *grow_and_take(ca_device_t *d, size_t rounded, ca_stream_t stream, CUresult *rc) {
  *rc = ca_pool_grow(d, ca_pool_for(d, rounded), rounded);
  return *rc ? NULL : take(d, rounded, stream);
}

static void collect_garbage(ca_device_t *d) {
  double thr = ca_config.gc_threshold;
  size_t target = (size_t)(thr * (double)d->limit);
  if (thr > 0 && (size_t)d->stats.reserved_bytes.current > target) ca_trim(d, target);
}

static ca_block_t *slow_path(ca_device_t *d, size_t rounded, ca_stream_t stream, CUresult *rc) {
  ca_block_t *b;
  ca_stat_add(&d->stats.num_retries, 1);
  ca_fences_seal(d);
  if (ca_fences_poll(d) && (b = take(d, rounded, stream))) return b;
  collect_garbage(d);
  if ((b = grow_and_take(d, rounded, stream, rc))) return b;
  while (ca_fences_wait_one(d) > 0) {
    if ((b = take(d, rounded, stream)) || (b = grow_and_take(d, rounded, stream, rc))) return b;
  }
  if (ca_trim(d, 0) && (b = grow_and_take(d, rounded, stream, rc))) return b;
  if (!*rc) *rc = CUDA_ERROR_OUT_OF_MEMORY;
  return NULL;
}

static void count_alloc(ca_device_t *d, ca_block_t *b) {
  ca_stat_add(&d->stats.allocated_bytes, (int64_t)b->size);
  ca_stat_add(&d->stats.requested_bytes, (int64_t)b->requested);
  ca_stat_add(&d->stats.num_allocs, 1);
  ca_stat_add(&d->stats.num_live_blocks, 1);
}

static CUresult out_of_memory(ca_device_t *d, size_t size, CUresult rc) {
  ca_stat_add(&d->stats.num_ooms, 1);
  ca_report_oom(d, size);
  return rc;
}

CUresult ca_malloc(void **ptr, size_t size, ca_stream_t stream, void *caller) {
  return ca_malloc_on(-1, ptr, size, stream, caller);
}

CUresult ca_malloc_on(int dev, void **ptr, size_t size, ca_stream_t stream, void *caller) {
  if (!ptr) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = ca_init(NULL);
  if (rc) return rc;
  if (size == 0) {   /* as cudaMalloc: success, and a NULL that frees fine */
    *ptr = NULL;
    return CUDA_SUCCESS;
  }
  if (ca_state.exited) return CUDA_ERROR_DEINITIALIZED;
  ca_device_t *d;
  if ((rc = dev < 0 ? ca_current_device(&d) : ca_device_get(dev, &d))) return rc;
  bool ordered = stream != NULL;   /* NULL: cudaMalloc, cuMemAlloc, pitch, 3D (usable by any stream) */
  stream = ca_stream_normal(stream);
  void *site = ca_track_site(caller);   /* a backtrace is taken outside the lock */
  pthread_mutex_lock(&d->lock);
  ca_block_t *b = NULL;
  if (size > d->limit) rc = out_of_memory(d, size, CUDA_ERROR_OUT_OF_MEMORY);
  else {
    size_t rounded = ca_round_size(size);
    if (!(b = take(d, rounded, stream)) && !(b = slow_path(d, rounded, stream, &rc)))
      rc = out_of_memory(d, size, rc);
  }
  if (b) {
    rc = CUDA_SUCCESS;   /* a failed rung of the ladder does not count once a block is found */
    b->requested = size;
    b->site = site;
    if (ca_ptrmap_insert(&d->live, b)) count_alloc(d, b);
    else {   /* no host memory to remember it: give it back */
      ca_queue_add(d, &d->epoch, b);
      b = NULL;
      rc = CUDA_ERROR_OUT_OF_MEMORY;
    }
  }
  if (b && ca_state.be->check_handout)   /* a backend that sees device work checks the hand-out */
    ca_state.be->check_handout(b->addr, size, stream, ordered, caller);
  pthread_mutex_unlock(&d->lock);
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

/* The queue a freed block waits in. */
static ca_queue_t *queue_for(ca_device_t *d, ca_block_t *b, ca_stream_t stream, bool sync) {
  bool capture = __atomic_load_n(&ca_state.captures, __ATOMIC_ACQUIRE) > 0;
  if (capture && (sync || stream_capturing(stream))) return &d->held;
  if (sync && ca_config.free_mode == CA_FREE_DEVICE) return &d->epoch;
  ca_queue_t *q = ca_queue_find(d, sync ? b->stream : stream, true);
  return q ? q : &d->epoch;
}

static CUresult bad_free(ca_device_t *d, uintptr_t p) {
  ca_stat_add(&d->stats.num_bad_frees, 1);
  ca_segment_t *seg = ca_segment_of(d, p);
  ca_block_t *b = seg ? seg->first : NULL;
  while (b && !(p >= b->addr && p < b->addr + b->size)) b = b->next;
  const char *why = !b ? "outside every block"
                  : b->state == CA_LIVE ? "inside a live block (an interior pointer)"
                  : b->addr == p ? "a block already freed (a double free)"
                  : "inside freed memory (a double free or an interior pointer)";
  ca_log("free of %p rejected: it is %s; nothing was freed", (void *)p, why);
  return CUDA_ERROR_INVALID_VALUE;
}

static CUresult free_block(void *ptr, ca_stream_t stream, bool sync) {
  if (!ptr) return CUDA_SUCCESS;
  if (!ca_state.be || ca_state.exited) return ca_state.exited ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
  uintptr_t p = (uintptr_t)ptr;
  ca_device_t *d = ca_device_lock_owner(p);
  if (!d) return CUDA_ERROR_NOT_FOUND;
  ca_block_t *b = ca_ptrmap_remove(&d->live, p);
  CUresult rc = CUDA_SUCCESS;
  if (!b) rc = bad_free(d, p);
  else {
    ca_stat_add(&d->stats.allocated_bytes, -(int64_t)b->size);
    ca_stat_add(&d->stats.requested_bytes, -(int64_t)b->requested);
    ca_stat_add(&d->stats.num_frees, 1);
    ca_stat_add(&d->stats.num_live_blocks, -1);
    ca_queue_add(d, queue_for(d, b, ca_stream_normal(stream), sync), b);
  }
  pthread_mutex_unlock(&d->lock);
  return rc;
}

CUresult ca_free(void *ptr, ca_stream_t stream) { return free_block(ptr, stream, false); }

CUresult ca_free_sync(void *ptr) { return free_block(ptr, CA_STREAM_LEGACY, true); }

// ----------------------------------------------------------------------------
// Lookups
// ----------------------------------------------------------------------------

bool ca_owns(const void *ptr) {
  if (!ptr || !ca_state.be) return false;
  ca_device_t *d = ca_device_lock_owner((uintptr_t)ptr);
  if (d) pthread_mutex_unlock(&d->lock);
  return d != NULL;
}

CUresult ca_address_range(const void *ptr, void **base, size_t *size) {
  uintptr_t p = (uintptr_t)ptr;
  if (!ptr || !ca_state.be) return CUDA_ERROR_NOT_FOUND;
  ca_device_t *d = ca_device_lock_owner(p);
  if (!d) return CUDA_ERROR_NOT_FOUND;
  ca_block_t *b = ca_ptrmap_get(&d->live, p);
  if (!b) {   /* an interior pointer: walk the segment (rare) */
    ca_segment_t *seg = ca_segment_of(d, p);
    for (b = seg ? seg->first : NULL; b; b = b->next)
      if (p >= b->addr && p < b->addr + b->size) break;
    if (b && b->state != CA_LIVE) b = NULL;
  }
  if (b) {
    if (base) *base = (void *)b->addr;
    if (size) *size = b->requested;
  }
  pthread_mutex_unlock(&d->lock);
  return b ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Classic segments (expandable_segments:false): each growth reserves,
 * creates and maps one segment sized the way PyTorch sizes them, and only
 * a segment with nothing live in it can be given back. Kept so that the
 * two modes can be compared on the same program. */
#include "segments.h"

#include <stdlib.h>

#include "arena.h"
#include "bins.h"
#include "blocks.h"
#include "log.h"
#include "peers.h"
#include "trace.h"

size_t ca_classic_segment_size(size_t rounded) {
  if (rounded <= CA_SMALL_REQUEST) return CA_CLASSIC_SMALL_SEGMENT;
  if (rounded <= CA_CLASSIC_MID_REQUEST) return CA_CLASSIC_MID_SEGMENT;
  return (rounded + CA_CLASSIC_SMALL_SEGMENT - 1) / CA_CLASSIC_SMALL_SEGMENT * CA_CLASSIC_SMALL_SEGMENT;
}

/* What the driver holds for a classic segment (ca_segment_t.held). */
enum { HELD_RANGE = 1, HELD_HANDLE = 2, HELD_MAPPING = 4 };

/* Gives back what the driver still holds for seg, mapping first; stops at
 * the first failure, so that a later call resumes there. The stats follow
 * each step: reserved bytes are the handle's, mapped bytes the mapping's. */
static CUresult give_back(ca_device_t *d, ca_segment_t *seg) {
  const ca_backend_t *be = ca_state.be;
  CUresult rc;
  if (seg->held & HELD_MAPPING) {
    if ((rc = CA_CALL(d, backend_unmap, be->unmap(seg->base, seg->size)))) return rc;
    seg->held &= ~HELD_MAPPING;
    ca_stat_add(&d->stats.mapped_bytes, -(int64_t)seg->size);
    ca_trace_mem(d, CA_EV_SEGMENT_UNMAP, seg->base, seg->size);
  }
  if (seg->held & HELD_HANDLE) {
    if ((rc = CA_CALL(d, backend_release, be->release(seg->handle)))) return rc;
    seg->held &= ~HELD_HANDLE;
    ca_stat_add(&d->stats.reserved_bytes, -(int64_t)seg->size);
    ca_arena_refund(d, seg->size);
    ca_trace_mem(d, CA_EV_RELEASE, seg->base, seg->size);
  }
  if (seg->held & HELD_RANGE) {
    if ((rc = CA_CALL(d, backend_va_free, be->va_free(seg->base, seg->size)))) return rc;
    seg->held &= ~HELD_RANGE;
  }
  return CUDA_SUCCESS;
}

/* The structs go back to the device's spare ones, not to the heap: a
 * thread's front cache may still read one it remembers (tcache.c, stale()),
 * so a struct lives as long as its device. */
static void free_blocks(ca_device_t *d, ca_segment_t *seg) {
  ca_block_t *next;
  for (ca_block_t *b = seg->first; b; b = next) {
    next = b->next;
    ca_block_delete(d, b);
  }
  seg->first = NULL;
}

/* A segment out of use that the driver would not take back entirely: it
 * waits in the device's leftovers, still counted, for the next trim. */
static void keep_leftover(ca_device_t *d, ca_segment_t *seg) {
  free_blocks(d, seg);
  seg->pool = NULL;
  seg->prev = NULL;
  seg->next = d->leftovers;
  d->leftovers = seg;
}

/* Reserve, create, map, grant access (seg's size charged already: arena.c);
 * on a failure gives back what was done (or keeps it as a leftover when
 * the driver refuses even that). */
static CUresult map_segment(ca_device_t *d, ca_segment_t *seg) {
  const ca_backend_t *be = ca_state.be;
  CUresult rc = CA_CALL(d, backend_reserve, be->reserve(d->ordinal, seg->size, &seg->base));
  if (rc) {   /* nothing is held: seg goes, as after the later failures */
    ca_arena_refund(d, seg->size);
    free(seg);
    return rc;
  }
  seg->held = HELD_RANGE;
  if ((rc = CA_CALL(d, backend_create, be->create(d->ordinal, seg->size, &seg->handle)))) ca_arena_refund(d, seg->size);
  else {
    seg->held |= HELD_HANDLE;
    ca_stat_add(&d->stats.reserved_bytes, (int64_t)seg->size);
    ca_trace_mem(d, CA_EV_RESERVE, seg->base, seg->size);
    if (!(rc = CA_CALL(d, backend_map, be->map(seg->base, seg->size, seg->handle, 0)))) {
      seg->held |= HELD_MAPPING;
      ca_stat_add(&d->stats.mapped_bytes, (int64_t)seg->size);
      ca_trace_mem(d, CA_EV_SEGMENT_MAP, seg->base, seg->size);
      rc = ca_grant_access(d, seg->base, seg->size);
    }
  }
  if (rc && give_back(d, seg)) keep_leftover(d, seg);
  else if (rc) free(seg);
  return rc;
}

CUresult ca_classic_grow(ca_device_t *d, ca_pool_t *pool, size_t rounded) {
  size_t size = ca_classic_segment_size(rounded);
  size = (size + d->page - 1) / d->page * d->page;
  if (!ca_arena_charge(d, size)) return CUDA_ERROR_OUT_OF_MEMORY;
  ca_segment_t *seg = calloc(1, sizeof *seg);
  ca_block_t *b = ca_block_new(d);
  if (!seg || !b) {
    ca_arena_refund(d, size);
    free(seg);
    if (b) ca_block_delete(d, b);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  seg->size = size;
  seg->classic = true;
  CUresult rc = map_segment(d, seg);
  if (rc) {
    ca_block_delete(d, b);
    return rc;
  }
  seg->pool = pool;
  seg->first = b;
  seg->next = pool->segments;
  if (pool->segments) pool->segments->prev = seg;
  pool->segments = seg;
  b->addr = seg->base;
  b->size = size;
  b->seg = seg;
  ca_block_set_free(b, CA_MAPPED);
  ca_bins_insert(&pool->bins, b);
  ca_stat_add(&d->stats.num_segments, 1);
  return CUDA_SUCCESS;
}

void ca_segment_teardown(ca_device_t *d, ca_segment_t *seg, bool call_backend) {
  if (seg->classic) {
    CUresult rc = CUDA_SUCCESS;
    for (int i = 0; call_backend && seg->held && i < CA_TEARDOWN_TRIES; i++) rc = give_back(d, seg);
    if (call_backend && seg->held)
      ca_log("device %d: the driver kept refusing to give back a segment of %zu bytes (error %d); it is lost",
             d->ordinal, seg->size, rc);
    free_blocks(d, seg);
  }
  free(seg);
}

static void unlink_segment(ca_pool_t *pool, ca_segment_t *seg) {
  if (seg->prev) seg->prev->next = seg->next;
  else pool->segments = seg->next;
  if (seg->next) seg->next->prev = seg->prev;
}

/* Leftovers of earlier failures go first: the driver may take them now. */
static void retry_leftovers(ca_device_t *d) {
  for (ca_segment_t **ps = &d->leftovers; *ps;) {
    ca_segment_t *seg = *ps;
    if (give_back(d, seg)) {
      ps = &seg->next;
      continue;
    }
    *ps = seg->next;
    free(seg);
  }
}

size_t ca_classic_release_free(ca_device_t *d) {
  size_t before = (size_t)d->stats.reserved_bytes.current;
  retry_leftovers(d);
  for (int p = 0; p < CA_POOL_COUNT; p++) {
    ca_pool_t *pool = &d->pools[p];
    ca_segment_t *next;
    for (ca_segment_t *seg = pool->segments; seg; seg = next) {
      next = seg->next;
      ca_block_t *b = seg->first;
      if (!seg->classic || b->state != CA_FREE || b->next || !b->in_bins) continue;
      CUresult rc = give_back(d, seg);
      if (seg->held & HELD_MAPPING) continue;   /* still whole: it keeps serving */
      ca_bins_remove(&pool->bins, b);
      unlink_segment(pool, seg);
      ca_stat_add(&d->stats.num_segments, -1);
      if (rc) keep_leftover(d, seg);
      else ca_segment_teardown(d, seg, false);
    }
  }
  return before - (size_t)d->stats.reserved_bytes.current;
}

void ca_classic_teardown_leftovers(ca_device_t *d, bool call_backend) {
  while (d->leftovers) {
    ca_segment_t *seg = d->leftovers;
    d->leftovers = seg->next;
    ca_segment_teardown(d, seg, call_backend);
  }
}

/* Bytes the leftovers still hold: physical (handles) and mapped. */
void ca_classic_leftover_bytes(const ca_device_t *d, int64_t *reserved, int64_t *mapped) {
  *reserved = *mapped = 0;
  for (const ca_segment_t *seg = d->leftovers; seg; seg = seg->next) {
    if (seg->held & HELD_HANDLE) *reserved += (int64_t)seg->size;
    if (seg->held & HELD_MAPPING) *mapped += (int64_t)seg->size;
  }
}

ca_segment_t *ca_segment_of(ca_device_t *d, uintptr_t addr) {
  for (int p = 0; p < CA_POOL_COUNT; p++)
    for (ca_segment_t *seg = d->pools[p].segments; seg; seg = seg->next)
      if (addr >= seg->base && addr < seg->base + seg->size) return seg;
  return NULL;
}

/* Classic segments (expandable_segments:false): each growth reserves,
 * creates and maps one segment sized the way PyTorch sizes them, and only
 * a segment with nothing live in it can be given back. Kept so that the
 * two modes can be compared on the same program. */
#include "segments.h"

#include <stdlib.h>

#include "bins.h"
#include "blocks.h"
#include "peers.h"

size_t ca_classic_segment_size(size_t rounded) {
  if (rounded <= CA_SMALL_REQUEST) return CA_CLASSIC_SMALL_SEGMENT;
  if (rounded <= CA_CLASSIC_MID_REQUEST) return CA_CLASSIC_MID_SEGMENT;
  return (rounded + CA_CLASSIC_SMALL_SEGMENT - 1) / CA_CLASSIC_SMALL_SEGMENT * CA_CLASSIC_SMALL_SEGMENT;
}

/* Reserve, create, map, grant access; undo what was done on a failure. */
static CUresult map_segment(ca_device_t *d, size_t size, uintptr_t *va, ca_phys_t *h) {
  const ca_backend_t *be = ca_state.be;
  CUresult rc = CA_CALL(d, backend_reserve, be->reserve(d->ordinal, size, va));
  if (rc) return rc;
  rc = CA_CALL(d, backend_create, be->create(d->ordinal, size, h));
  if (!rc) {
    rc = CA_CALL(d, backend_map, be->map(*va, size, *h, 0));
    if (!rc) {
      rc = ca_grant_access(d, *va, size);
      if (!rc) return CUDA_SUCCESS;
      CA_CALL(d, backend_unmap, be->unmap(*va, size));
    }
    CA_CALL(d, backend_release, be->release(*h));
  }
  CA_CALL(d, backend_va_free, be->va_free(*va, size));
  return rc;
}

CUresult ca_classic_grow(ca_device_t *d, ca_pool_t *pool, size_t rounded) {
  size_t size = ca_classic_segment_size(rounded);
  size = (size + d->page - 1) / d->page * d->page;
  if ((size_t)d->stats.reserved_bytes.current + size > d->limit) return CUDA_ERROR_OUT_OF_MEMORY;
  ca_segment_t *seg = calloc(1, sizeof *seg);
  ca_block_t *b = ca_block_new(d);
  if (!seg || !b) {
    free(seg);
    if (b) ca_block_delete(d, b);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  CUresult rc = map_segment(d, size, &seg->base, &seg->handle);
  if (rc) {
    free(seg);
    ca_block_delete(d, b);
    return rc;
  }
  seg->size = size;
  seg->pool = pool;
  seg->classic = true;
  seg->first = b;
  seg->next = pool->segments;
  if (pool->segments) pool->segments->prev = seg;
  pool->segments = seg;
  b->addr = seg->base;
  b->size = size;
  b->seg = seg;
  ca_block_set_free(b, CA_MAPPED);
  ca_bins_insert(&pool->bins, b);
  ca_stat_add(&d->stats.reserved_bytes, (int64_t)size);
  ca_stat_add(&d->stats.mapped_bytes, (int64_t)size);
  ca_stat_add(&d->stats.num_segments, 1);
  return CUDA_SUCCESS;
}

void ca_segment_teardown(ca_device_t *d, ca_segment_t *seg, bool call_backend) {
  if (seg->classic) {
    if (call_backend) {
      const ca_backend_t *be = ca_state.be;
      CA_CALL(d, backend_unmap, be->unmap(seg->base, seg->size));
      CA_CALL(d, backend_release, be->release(seg->handle));
      CA_CALL(d, backend_va_free, be->va_free(seg->base, seg->size));
    }
    ca_block_t *next;
    for (ca_block_t *b = seg->first; b; b = next) {
      next = b->next;
      free(b);
    }
  }
  free(seg);
}

static void unlink_segment(ca_pool_t *pool, ca_segment_t *seg) {
  if (seg->prev) seg->prev->next = seg->next;
  else pool->segments = seg->next;
  if (seg->next) seg->next->prev = seg->prev;
}

size_t ca_classic_release_free(ca_device_t *d) {
  size_t bytes = 0;
  for (int p = 0; p < CA_POOL_COUNT; p++) {
    ca_pool_t *pool = &d->pools[p];
    ca_segment_t *next;
    for (ca_segment_t *seg = pool->segments; seg; seg = next) {
      next = seg->next;
      ca_block_t *b = seg->first;
      if (!seg->classic || b->state != CA_FREE || b->next || !b->in_bins) continue;
      ca_bins_remove(&pool->bins, b);
      unlink_segment(pool, seg);
      bytes += seg->size;
      ca_stat_add(&d->stats.reserved_bytes, -(int64_t)seg->size);
      ca_stat_add(&d->stats.mapped_bytes, -(int64_t)seg->size);
      ca_stat_add(&d->stats.num_segments, -1);
      ca_segment_teardown(d, seg, true);
    }
  }
  return bytes;
}

ca_segment_t *ca_segment_of(ca_device_t *d, uintptr_t addr) {
  for (int p = 0; p < CA_POOL_COUNT; p++)
    for (ca_segment_t *seg = d->pools[p].segments; seg; seg = seg->next)
      if (addr >= seg->base && addr < seg->base + seg->size) return seg;
  return NULL;
}

/* Block structs (host memory, recycled per device), splitting, merging,
 * the change to FREE (a freed block coalesces into its pool's bins), and
 * the size policy: rounding and which pool a request belongs to. */
#include "blocks.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "bins.h"

#define ZERO_HALF (offsetof(ca_block_t, tc) / 2 & ~(size_t)7)
_Static_assert(offsetof(ca_block_t, tc) - ZERO_HALF <= 64, "each piece of the zeroing is at most 64 bytes");

/* A struct all zero. A recycled struct's tc may be read by another
 * thread's front cache at any time (tcache.c, stale()): it is written
 * atomically, the rest around it. Inlined (into a cut, under the shipped
 * library's LTO): 7 instructions a GPU-like pair. */
__attribute__((always_inline)) inline ca_block_t *ca_block_new(ca_device_t *d) {
  ca_block_t *b = d->spare_blocks;
  if (b) d->spare_blocks = b->next;
  else if (!(b = malloc(sizeof *b))) return NULL;
  /* Two pieces of at most 64 bytes: the compiler stores them inline, where
   * one of 128 bytes became a `rep stos` (a step per 8 bytes). */
  memset(b, 0, ZERO_HALF);
  memset((char *)b + ZERO_HALF, 0, offsetof(ca_block_t, tc) - ZERO_HALF);
  __atomic_store_n(&b->tc, 0, __ATOMIC_RELAXED);
  memset(&b->tc_next, 0, sizeof *b - offsetof(ca_block_t, tc_next));
  b->slot = (uint8_t)d->slot;
  return b;
}

bool ca_block_reserve(ca_device_t *d, int n) {
  int have = 0;
  for (ca_block_t *b = d->spare_blocks; b && have < n; b = b->next) have++;
  for (; have < n; have++) {
    ca_block_t *b = malloc(sizeof *b);
    if (!b) return false;
    b->next = d->spare_blocks;
    d->spare_blocks = b;
  }
  return true;
}

void ca_block_delete(ca_device_t *d, ca_block_t *b) {
  b->next = d->spare_blocks;
  d->spare_blocks = b;
}

ca_block_t *ca_block_split(ca_device_t *d, ca_block_t *b, size_t offset) {
  ca_assert(offset && offset < b->size && offset % CA_MIN_BLOCK == 0);
  ca_block_t *rest = ca_block_new(d);
  if (!rest) return NULL;
  rest->addr = b->addr + offset;
  rest->size = b->size - offset;
  rest->seg = b->seg;
  rest->state = b->state;
  rest->kind = b->kind;
  rest->queue = b->queue;
  rest->prev = b;
  rest->next = b->next;
  if (b->next) b->next->prev = rest;
  b->next = rest;
  b->size = offset;
  return rest;
}

ca_block_t *ca_block_split_front(ca_device_t *d, ca_block_t *b, size_t offset) {
  ca_assert(offset && offset < b->size && offset % CA_MIN_BLOCK == 0);
  ca_block_t *head = ca_block_new(d);
  if (!head) return NULL;
  head->addr = b->addr;
  head->size = offset;
  head->seg = b->seg;
  head->state = b->state;
  head->kind = b->kind;
  head->queue = b->queue;
  head->prev = b->prev;
  head->next = b;
  if (b->prev) b->prev->next = head;
  else b->seg->first = head;
  b->prev = head;
  b->addr += offset;
  b->size -= offset;
  return head;
}

void ca_block_absorb_prev(ca_device_t *d, ca_block_t *b) {
  ca_block_t *p = b->prev;
  ca_assert(p && b->addr == p->addr + p->size && !p->in_bins);
  b->addr = p->addr;
  b->size += p->size;
  b->prev = p->prev;
  if (p->prev) p->prev->next = b;
  else b->seg->first = b;
  ca_block_delete(d, p);
}

void ca_block_absorb_next(ca_device_t *d, ca_block_t *b) {
  ca_block_t *n = b->next;
  ca_assert(n && n->addr == b->addr + b->size && !n->in_bins);
  b->size += n->size;
  b->next = n->next;
  if (n->next) n->next->prev = b;
  ca_block_delete(d, n);
}

void ca_block_set_free(ca_block_t *b, ca_block_kind_t kind) {
  b->state = CA_FREE;
  b->kind = kind;
  b->queue = NULL;
  b->fence = NULL;
  b->stream = NULL;
  b->site = NULL;
}

static ca_bins_t *free_bins(ca_pool_t *pool, const ca_block_t *b) {
  return b->kind == CA_HOLE ? &pool->holes : &pool->bins;
}

static bool joins(const ca_block_t *b, const ca_block_t *neighbour) {
  return neighbour && neighbour->state == CA_FREE && neighbour->kind == b->kind && neighbour->in_bins;
}

ca_block_t *ca_block_coalesce_free(ca_device_t *d, ca_block_t *b) {
  ca_pool_t *pool = b->seg->pool;
  ca_block_t *p = b->prev, *n = b->next;
  if (joins(b, p)) {
    ca_bins_remove(free_bins(pool, p), p);
    ca_block_absorb_next(d, p);
    b = p;
  }
  if (joins(b, n)) {
    ca_bins_remove(free_bins(pool, n), n);
    ca_block_absorb_next(d, b);
  }
  ca_bins_insert(free_bins(pool, b), b);
  return b;
}

void ca_block_release(ca_device_t *d, ca_block_t *b) {
  ca_block_set_free(b, CA_MAPPED);
  ca_block_coalesce_free(d, b);
}

/* PyTorch's roundup_power2_divisions: a size between two powers of two is
 * rounded up to one of `div` equal steps, so that variable sizes reuse each
 * other's blocks. */
static size_t round_power2_division(size_t size, unsigned div) {
  size_t floor = (size_t)1 << (63 - __builtin_clzll(size));
  if (floor == size) return size;
  size_t step = floor / div;
  if (step <= CA_MIN_BLOCK) return size;
  return (size + step - 1) & ~(step - 1);
}

size_t ca_round_size_divided(size_t size) {
  size = round_power2_division(size, ca_config.roundup_power2_divisions);
  return (size + CA_MIN_BLOCK - 1) & ~(size_t)(CA_MIN_BLOCK - 1);
}

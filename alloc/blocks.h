/* "blocks.c": block structs, splitting and merging, the state change to
 * FREE, and the size policy. */
#ifndef CUDALLOC_BLOCKS_H
#define CUDALLOC_BLOCKS_H

#include "types.h"

ca_block_t *ca_block_new(ca_device_t *d);
void ca_block_delete(ca_device_t *d, ca_block_t *b);
/* Makes sure the next n ca_block_new calls cannot fail. */
bool ca_block_reserve(ca_device_t *d, int n);
/* Cuts b at offset: b keeps [addr, addr+offset), the returned block the
 * rest (same state and kind, not in any list but the address order). */
ca_block_t *ca_block_split(ca_device_t *d, ca_block_t *b, size_t offset);
/* Cuts b at offset the other way round: a new block takes [addr,
 * addr+offset) and is returned (same state and kind, in no list but the
 * address order); b keeps the rest and every list it is on, so that the
 * rest of a block in bins or a fence costs no move (its bins need
 * ca_bins_resized). */
ca_block_t *ca_block_split_front(ca_device_t *d, ca_block_t *b, size_t offset);
/* Absorbs b->next into b and deletes it. */
void ca_block_absorb_next(ca_device_t *d, ca_block_t *b);
/* Absorbs b->prev into b (b starts where it started) and deletes it: b
 * keeps its lists. */
void ca_block_absorb_prev(ca_device_t *d, ca_block_t *b);
/* Marks b FREE of the given kind and forgets what it served or waited
 * for; it is in no bins yet. */
void ca_block_set_free(ca_block_t *b, ca_block_kind_t kind);
/* Merges b with the FREE neighbours of its kind that sit in their bins
 * (a free block out of its bins is being worked on, and is left alone),
 * then files the result in its pool's bins. */
ca_block_t *ca_block_coalesce_free(ca_device_t *d, ca_block_t *b);
/* Makes a FREE mapped block of b (coalescing, into its pool's bins). */
void ca_block_release(ca_device_t *d, ca_block_t *b);
/* ca_round_size with roundup_power2_divisions set (at least 512 bytes). */
size_t ca_round_size_divided(size_t size);
/* The size a request takes: a multiple of CA_MIN_BLOCK (inline: every
 * allocation under the lock asks). */
static inline size_t ca_round_size(size_t size) {
  if (size < CA_MIN_BLOCK) return CA_MIN_BLOCK;
  if (ca_config.roundup_power2_divisions > 1) return ca_round_size_divided(size);
  return (size + CA_MIN_BLOCK - 1) & ~(size_t)(CA_MIN_BLOCK - 1);
}
static inline ca_pool_t *ca_pool_for(ca_device_t *d, size_t rounded) {
  return &d->pools[rounded <= CA_SMALL_REQUEST ? CA_POOL_SMALL : CA_POOL_LARGE];
}

#endif /* CUDALLOC_BLOCKS_H */

/* "bins.c": segregated-fit index of free blocks (TLSF-style, O(1) search). */
#ifndef CUDALLOC_BINS_H
#define CUDALLOC_BINS_H

#include "types.h"

void ca_bins_init(ca_bins_t *bins);
void ca_bins_insert(ca_bins_t *bins, ca_block_t *b);
void ca_bins_remove(ca_bins_t *bins, ca_block_t *b);
/* b, in bins, changed size from old_size (a split or a merge in place):
 * it moves to its new size's bin, if that is another one. */
void ca_bins_resized(ca_bins_t *bins, ca_block_t *b, size_t old_size);
/* A block with min_size <= size <= max_size, the best fit among those it
 * looks at; NULL only when there is none. */
ca_block_t *ca_bins_find(ca_bins_t *bins, size_t min_size, size_t max_size);
/* The same with no upper bound (max_size SIZE_MAX: expandable segments,
 * or classic ones without max_split_size). */
ca_block_t *ca_bins_find_any(ca_bins_t *bins, size_t min_size);
/* False when no block of bins is as large as size: the top non-empty
 * bin's bound (no block of it is larger) is below size, and every other
 * bin holds smaller blocks. Inline, so that a search that would miss
 * (the pool's, for a strictly tighter fit than the stream's own block,
 * where the pool holds small blocks only) costs a few instructions. */
static inline bool ca_bins_may_hold(const ca_bins_t *bins, size_t size) {
  if (!bins->fl_bitmap) return false;
  int fl = CA_DEBUG(bins_may_hold_lowest) ? __builtin_ctzll(bins->fl_bitmap) : 63 - __builtin_clzll(bins->fl_bitmap);
  int sl = CA_DEBUG(bins_may_hold_lowest) ? __builtin_ctz(bins->sl_bitmap[fl]) : 31 - __builtin_clz(bins->sl_bitmap[fl]);
  return CA_DEBUG(bins_may_hold_strict) ? bins->bound[fl][sl] > size : bins->bound[fl][sl] >= size;
}
/* b, marked in bins, sits in the bin its size maps to, that bin's bits
 * are set and its bound is no less than b's size (what ca_bins_find and
 * ca_bins_may_hold rely on; check.c). */
bool ca_bins_files(const ca_bins_t *bins, const ca_block_t *b);
/* The largest block, or NULL. */
ca_block_t *ca_bins_largest(const ca_bins_t *bins);
/* Calls fn on every block, largest bins first; stops when fn returns false. */
void ca_bins_each(const ca_bins_t *bins, bool (*fn)(ca_block_t *, void *), void *arg);
/* The same for the blocks of at least min_size only: the bins whose bound
 * is below it are passed over without a look at their blocks. */
void ca_bins_each_at_least(const ca_bins_t *bins, size_t min_size, bool (*fn)(ca_block_t *, void *), void *arg);

#endif /* CUDALLOC_BINS_H */

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
/* The largest block, or NULL. */
ca_block_t *ca_bins_largest(const ca_bins_t *bins);
/* Calls fn on every block, largest bins first; stops when fn returns false. */
void ca_bins_each(const ca_bins_t *bins, bool (*fn)(ca_block_t *, void *), void *arg);

#endif /* CUDALLOC_BINS_H */

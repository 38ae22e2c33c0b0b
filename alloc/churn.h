/* "churn.c": pages that growths keep moving out of a place and back. */
#ifndef CUDALLOC_CHURN_H
#define CUDALLOC_CHURN_H

#include "types.h"

/* A growth moved pages [from, to) of seg out of a free block. */
void ca_churn_moved_out(ca_segment_t *seg, size_t from, size_t to);
/* A growth maps pages [first, first + n) of seg: each that a growth had
 * moved out of this place comes back, once more. */
void ca_churn_mapped_back(ca_segment_t *seg, size_t first, size_t n);
/* Of the `want` pages below page `top` of seg, how many (from top down)
 * a growth may move: it stops at the first page that came back
 * CA_CHURN_RETURNS times, while reserved memory plus `add` bytes stays
 * within page_churn_cap above peak allocated memory (the highest seen at a
 * growth: cudalloc_reset_peaks does not lower it). */
size_t ca_churn_movable(ca_device_t *d, const ca_segment_t *seg, size_t top, size_t want, size_t add);

#endif /* CUDALLOC_CHURN_H */

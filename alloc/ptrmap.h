/* "ptrmap.c": live blocks by address (open addressing). */
#ifndef CUDALLOC_PTRMAP_H
#define CUDALLOC_PTRMAP_H

#include "types.h"

bool ca_ptrmap_insert(ca_ptrmap_t *m, ca_block_t *b);   /* false: out of host memory */
ca_block_t *ca_ptrmap_get(const ca_ptrmap_t *m, uintptr_t addr);
ca_block_t *ca_ptrmap_remove(ca_ptrmap_t *m, uintptr_t addr);
/* A lookup that remembers where it found the block (meaningful only when
 * one is returned), so that a free removes it without a second lookup; the
 * map must not change in between. */
ca_block_t *ca_ptrmap_get_slot(const ca_ptrmap_t *m, uintptr_t addr, size_t *slot);
void ca_ptrmap_remove_slot(ca_ptrmap_t *m, size_t slot);
void ca_ptrmap_free(ca_ptrmap_t *m);

#endif /* CUDALLOC_PTRMAP_H */

/* "pages.c": expandable segments' physical pages. */
#ifndef CUDALLOC_PAGES_H
#define CUDALLOC_PAGES_H

#include "types.h"

CUresult ca_region_init(ca_segment_t *seg, ca_pool_t *pool, uintptr_t base, size_t size);
void ca_region_teardown(ca_device_t *d, ca_segment_t *seg, bool call_backend);
bool ca_page_mapped(const ca_segment_t *seg, size_t page_index);
/* The whole pages inside block b: [*lo, *hi), empty when *hi <= *lo. */
void ca_whole_pages(const ca_block_t *b, size_t page, uintptr_t *lo, uintptr_t *hi);
/* Maps the pages of [addr, addr+size) (page-aligned, all unmapped) and
 * grants access. On a failure a prefix may remain mapped and accessible:
 * *mapped says how many bytes, so that the caller can keep them. */
CUresult ca_map_range(ca_device_t *d, ca_segment_t *seg, uintptr_t addr, size_t size, size_t *mapped);
/* Unmaps whole pages inside free mapped blocks that sit in their bins
 * (largest blocks first) until `want` bytes have been gathered; keeps the
 * handles in the page cache. Returns bytes gathered. */
size_t ca_steal_pages(ca_device_t *d, size_t want);
/* Releases every chunk and frees the page cache (device teardown, after
 * the regions'). */
void ca_pages_teardown(ca_device_t *d, bool call_backend);
/* Releases chunks whose pages are all cached, and unmaps the free pages of free blocks until
 * reserved memory is at most `target`; returns bytes given back. */
size_t ca_trim(ca_device_t *d, size_t target);

#endif /* CUDALLOC_PAGES_H */

/* "check.c": the invariant checker behind cudalloc_check(). */
#ifndef CUDALLOC_CHECK_H
#define CUDALLOC_CHECK_H

#include "types.h"

/* What cudalloc_check() returns: 0, or the first broken invariant found
 * (segments are walked block by block, then queues, then statistics).
 * Each code also prints one line on stderr. */
typedef enum {
  CA_CHECK_OK = 0,
  CA_CHECK_TILING,          /* blocks do not tile their segment, a segment is in the wrong pool, a bad state */
  CA_CHECK_SIZE,            /* a block size is zero, not a multiple of CA_MIN_BLOCK, or below a live block's request */
  CA_CHECK_UNCOALESCED,     /* two free neighbours of one kind, both in their bins, not merged */
  CA_CHECK_BINS,            /* bins disagree with the blocks' states, or a block is not in its size's bin */
  CA_CHECK_UNMAPPED_LIVE,   /* a live, pending or free mapped block touches an unmapped page */
  CA_CHECK_HOLE,            /* a hole is misaligned or has a mapped page */
  CA_CHECK_LIVE_MAP,        /* the live-pointer map disagrees with the blocks */
  CA_CHECK_QUEUE,           /* a pending block is not where its queue says */
  CA_CHECK_STATS,           /* statistics do not add up */
  CA_CHECK_CHUNKS,          /* a chunk's pages are not each mapped or cached (pages.c) */
  CA_CHECK_CODES            /* how many codes there are */
} ca_check_code_t;

ca_check_code_t ca_check_device(ca_device_t *d);

#endif /* CUDALLOC_CHECK_H */

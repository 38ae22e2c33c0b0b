/* Segregated-fit index of free blocks, after TLSF: a first level per power
 * of two, CA_BINS_SL linear sub-bins within it, and a bitmap per level so
 * that finding the first non-empty bin above a size costs two bit scans.
 * Sizes are multiples of CA_MIN_BLOCK, so the linear first level covers
 * CA_MIN_BLOCK steps up to CA_BINS_SL * CA_MIN_BLOCK.
 *
 * A bin above the request's own holds only blocks large enough, so the
 * search costs two bit scans and a short look for the tightest fit. The
 * request's own bin mixes blocks too small with ones that fit: when the
 * short look misses and no other bin serves, it is scanned whole, once,
 * and its remembered bound (largest size) spares later requests it cannot
 * serve another scan; a search never misses a block that fits. */
#include "bins.h"

#include <string.h>

#define MIN_SHIFT 9 /* log2(CA_MIN_BLOCK) */
#define LINEAR_SHIFT (MIN_SHIFT + CA_BINS_SL_LOG2)

_Static_assert(1u << MIN_SHIFT == CA_MIN_BLOCK, "MIN_SHIFT is log2(CA_MIN_BLOCK)");
/* The last first-level bin starts below the largest size, so every size
 * has a bin (sizes beyond it share the last one). */
_Static_assert(LINEAR_SHIFT + CA_BINS_FL - 2 < 64, "the first level reaches the largest size");

static int log2_floor(size_t x) { return 63 - __builtin_clzll((unsigned long long)x); }

/* The bin that holds blocks of exactly this size. */
static void bin_of(size_t size, int *fl, int *sl) {
  if (size < ((size_t)1 << LINEAR_SHIFT)) {
    *fl = 0;
    *sl = (int)(size >> MIN_SHIFT);
    return;
  }
  int f = log2_floor(size);
  *sl = (int)(size >> (f - CA_BINS_SL_LOG2)) ^ CA_BINS_SL;
  *fl = f - LINEAR_SHIFT + 1;
  if (*fl >= CA_BINS_FL) { *fl = CA_BINS_FL - 1; *sl = CA_BINS_SL - 1; }
}

/* The smallest size a bin holds. */
static size_t bin_floor(int fl, int sl) {
  if (fl == 0) return (size_t)sl << MIN_SHIFT;
  return (size_t)(CA_BINS_SL + sl) << (fl + LINEAR_SHIFT - 1 - CA_BINS_SL_LOG2);
}

void ca_bins_init(ca_bins_t *bins) { memset(bins, 0, sizeof *bins); }

/* Into bin (fl, sl), b's size's: a bin's bits are set while it holds a
 * block, so only a bin that was empty sets them. */
static inline void link_block(ca_bins_t *bins, ca_block_t *b, int fl, int sl) {
  ca_block_t *head = bins->heads[fl][sl];
  b->bin_prev = NULL;
  b->bin_next = head;
  if (head) {
    head->bin_prev = b;
  } else {
    bins->fl_bitmap |= 1ull << fl;
    bins->sl_bitmap[fl] |= 1u << sl;
  }
  bins->heads[fl][sl] = b;
  if (b->size > bins->bound[fl][sl]) bins->bound[fl][sl] = b->size;
  b->bin_fl = (uint8_t)fl;
  b->bin_sl = (uint8_t)sl;
}

/* Out of its bin, whose bits go when it empties; b's own links are left
 * for the caller to reset or overwrite. */
static inline void unlink_block(ca_bins_t *bins, ca_block_t *b) {
  int fl = b->bin_fl, sl = b->bin_sl;
  ca_block_t *prev = b->bin_prev, *next = b->bin_next;
  if (next) next->bin_prev = prev;
  if (prev) {
    prev->bin_next = next;
  } else {
    /* Whether the bin empties, and its level with it, follows the sizes
     * freed and taken: no branch on either (docs/benchmarks.md, eighteenth
     * session). */
    bins->heads[fl][sl] = next;
    uint32_t emptied = !next;
    bins->bound[fl][sl] = emptied ? 0 : bins->bound[fl][sl];
    uint32_t level = bins->sl_bitmap[fl] & ~(emptied << sl);
    bins->sl_bitmap[fl] = level;
    bins->fl_bitmap &= ~((uint64_t)(level == 0) << fl);
  }
}

/* Inlined into its callers by the shipped library's link-time
 * optimization, with ca_queue_add_to_fence (fence.c): a free with no
 * pending neighbour files its block at once (2 instructions a GPU-like
 * pair). */
__attribute__((always_inline)) inline void ca_bins_insert(ca_bins_t *bins, ca_block_t *b) {
  ca_assert(!b->in_bins && b->size && b->size % CA_MIN_BLOCK == 0);
  int fl, sl;
  bin_of(b->size, &fl, &sl);
  link_block(bins, b, fl, sl);
  b->in_bins = 1;
  bins->count++;
  bins->bytes += b->size;
}

/* Inlined into its callers by the shipped library's link-time
 * optimization, with ca_queue_remove (fence.c): a merge with both
 * neighbours takes one out of the stream's bins (3 instructions a
 * GPU-like pair). */
__attribute__((always_inline)) inline void ca_bins_remove(ca_bins_t *bins, ca_block_t *b) {
  ca_assert(b->in_bins);
  unlink_block(bins, b);
  b->bin_prev = b->bin_next = NULL;
  b->in_bins = 0;
  bins->count--;
  bins->bytes -= b->size;
}

/* A split's rest or a merge's survivor: within its bin's width it stays
 * where it is (a bin's bound only follows a block that grew), else it
 * moves bins with no change of count. On the GPU-like pairs most resizes
 * move (a request is often more than 1/16 of what it is cut from).
 * Inlined into its two callers (a cut, a merge) by the shipped library's
 * link-time optimization: 6 instructions a GPU-like pair. */
__attribute__((always_inline)) inline void ca_bins_resized(ca_bins_t *bins, ca_block_t *b, size_t old_size) {
  ca_assert(b->in_bins && b->size && b->size % CA_MIN_BLOCK == 0);
  bins->bytes += b->size - old_size;
  int fl, sl;
  bin_of(b->size, &fl, &sl);
  if ((fl != b->bin_fl || sl != b->bin_sl) && !CA_DEBUG(bins_resize_stays)) {
    unlink_block(bins, b);
    link_block(bins, b, fl, sl);
  } else if (b->size > bins->bound[b->bin_fl][b->bin_sl]) {
    bins->bound[b->bin_fl][b->bin_sl] = b->size;
  }
}

bool ca_bins_files(const ca_bins_t *bins, const ca_block_t *b) {
  int fl, sl;
  bin_of(b->size, &fl, &sl);
  return b->in_bins && fl == b->bin_fl && sl == b->bin_sl && bins->heads[fl][sl] &&
         (bins->fl_bitmap >> fl & 1) && (bins->sl_bitmap[fl] >> sl & 1) && bins->bound[fl][sl] >= b->size;
}

/* The first non-empty bin at or after (fl, sl), or false. */
static bool next_bin(const ca_bins_t *bins, int *fl, int *sl) {
  uint32_t sl_map = *sl < CA_BINS_SL ? bins->sl_bitmap[*fl] & (~0u << *sl) : 0;
  if (!sl_map) {
    uint64_t fl_map = *fl + 1 < 64 ? bins->fl_bitmap & (~0ull << (*fl + 1)) : 0;
    if (!fl_map) return false;
    *fl = __builtin_ctzll(fl_map);
    sl_map = bins->sl_bitmap[*fl];
  }
  *sl = __builtin_ctz(sl_map);
  return true;
}

#define SCAN_BUDGET 16

/* Within one bin sizes differ, so scan a few entries for the tightest fit. */
static ca_block_t *best_in_bin(ca_block_t *head, size_t min_size, size_t max_size) {
  ca_block_t *best = NULL;
  int budget = SCAN_BUDGET;
  for (ca_block_t *b = head; b && budget--; b = b->bin_next) {
    if (b->size < min_size || b->size > max_size) continue;
    if (!best || b->size < best->size) best = b;
    if (b->size == min_size) break;
  }
  return best;
}

/* The whole bin, when the budget missed: the fit may sit behind many
 * blocks too small (or too large) for the request. The scan leaves the
 * bin's bound exact, so that the next request the bin cannot serve skips
 * it without a scan. */
static ca_block_t *scan_bin(ca_bins_t *bins, int fl, int sl, size_t min_size, size_t max_size) {
  if (bins->bound[fl][sl] < min_size) return NULL;
  ca_block_t *best = NULL;
  size_t largest = 0;
  for (ca_block_t *b = bins->heads[fl][sl]; b; b = b->bin_next) {
    if (b->size > largest) largest = b->size;
    if (b->size >= min_size && b->size <= max_size && (!best || b->size < best->size)) best = b;
  }
  bins->bound[fl][sl] = largest;
  return best;
}

/* Every block of a bin above the request's own is large enough, so the
 * first non-empty one serves it, unless its sizes reach past max_size.
 * Only the request's own bin and that one may hide a fit past the scan
 * budget; they are scanned whole, and only when nothing else fits. */
static inline __attribute__((always_inline)) ca_block_t *find(ca_bins_t *bins, size_t min_size, size_t max_size) {
  int fl, sl;
  bin_of(min_size, &fl, &sl);
  int own_fl = fl, own_sl = sl;
  /* No bin from the request's own up holds anything: nothing fits. */
  if (!next_bin(bins, &fl, &sl)) return NULL;
  ca_block_t *b;
  bool edge = true;
  if (fl == own_fl && sl == own_sl) {   /* its own bin may hold a closer fit than the next one up */
    if ((b = best_in_bin(bins->heads[fl][sl], min_size, max_size))) return b;
    sl++;
    edge = next_bin(bins, &fl, &sl);
  }
  /* A first bin up that starts past max_size: only the own bin may serve. */
  edge = edge && bin_floor(fl, sl) <= max_size;
  if (edge && (b = best_in_bin(bins->heads[fl][sl], min_size, max_size))) return b;
  if ((b = scan_bin(bins, own_fl, own_sl, min_size, max_size))) return b;
  return edge ? scan_bin(bins, fl, sl, min_size, max_size) : NULL;
}

ca_block_t *ca_bins_find(ca_bins_t *bins, size_t min_size, size_t max_size) {
  return find(bins, min_size, max_size);
}

/* With no upper bound the compiler drops the bound's tests (the floor of
 * the first bin up, each entry's size against it): 11 instructions a
 * GPU-like pair, whose stream's own search is unbounded. */
ca_block_t *ca_bins_find_any(ca_bins_t *bins, size_t min_size) { return find(bins, min_size, SIZE_MAX); }

ca_block_t *ca_bins_largest(const ca_bins_t *bins) {
  if (!bins->fl_bitmap) return NULL;
  int fl = log2_floor(bins->fl_bitmap);
  int sl = 31 - __builtin_clz(bins->sl_bitmap[fl]);
  ca_block_t *best = NULL;
  for (ca_block_t *b = bins->heads[fl][sl]; b; b = b->bin_next)
    if (!best || b->size > best->size) best = b;
  return best;
}

void ca_bins_each_at_least(const ca_bins_t *bins, size_t min_size, bool (*fn)(ca_block_t *, void *), void *arg) {
  for (int fl = CA_BINS_FL - 1; fl >= 0; fl--) {
    if (!(bins->fl_bitmap >> fl & 1)) continue;
    for (int sl = CA_BINS_SL - 1; sl >= 0; sl--) {
      if (bins->bound[fl][sl] < min_size) continue;   /* empty, or no block large enough */
      ca_block_t *next;
      for (ca_block_t *b = bins->heads[fl][sl]; b; b = next) {
        next = b->bin_next;   /* fn may take b out of the bins */
        if (b->size >= min_size && !fn(b, arg)) return;
      }
    }
  }
}

void ca_bins_each(const ca_bins_t *bins, bool (*fn)(ca_block_t *, void *), void *arg) {
  ca_bins_each_at_least(bins, 0, fn, arg);
}

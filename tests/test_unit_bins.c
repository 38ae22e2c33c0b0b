/* Unit tests of bins.c, the segregated-fit index of free blocks: which bin
 * a size maps to (its boundaries and the clamp at the top), best fit under
 * a minimum and a maximum, the largest block, removal, and the order of
 * ca_bins_each. Blocks here are bare structs: no device is involved. */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "core_testing.h"

static ca_bins_t *new_bins(void) {
  ca_bins_t *bins = malloc(sizeof *bins);
  cr_assert_not_null(bins);
  ca_bins_init(bins);
  return bins;
}

static ca_block_t *block(size_t size) {
  ca_block_t *b = calloc(1, sizeof *b);
  cr_assert_not_null(b);
  b->size = size;
  return b;
}

/* The bin a block of this size is filed in. */
static void bin_of(size_t size, int *fl, int *sl) {
  ca_bins_t *bins = new_bins();
  ca_block_t *b = block(size);
  ca_bins_insert(bins, b);
  *fl = b->bin_fl;
  *sl = b->bin_sl;
  ca_bins_remove(bins, b);
  free(b);
  free(bins);
}

#define ASSERT_BIN(size, want_fl, want_sl)                                                       \
  do {                                                                                           \
    int fl, sl;                                                                                  \
    bin_of(size, &fl, &sl);                                                                      \
    cr_assert(fl == (want_fl) && sl == (want_sl), "size %zu: bin (%d, %d), expected (%d, %d)", \
              (size_t)(size), fl, sl, want_fl, want_sl);                                         \
  } while (0)

Test(unit_bins, sizes_map_to_their_bins_at_the_boundaries) {
  /* The linear first level: one bin per 512 bytes below 8 KiB. */
  ASSERT_BIN(512, 0, 1);
  ASSERT_BIN(1024, 0, 2);
  ASSERT_BIN(8192 - 512, 0, CA_BINS_SL - 1);
  /* Then one first-level bin per power of two, split in CA_BINS_SL steps. */
  ASSERT_BIN(8192, 1, 0);
  ASSERT_BIN(8192 + 512, 1, 1);
  ASSERT_BIN(16384 - 512, 1, CA_BINS_SL - 1);
  ASSERT_BIN(16384, 2, 0);
  ASSERT_BIN(16384 + 512, 2, 0);    /* steps of 1 KiB from here */
  ASSERT_BIN(16384 + 1024, 2, 1);
  ASSERT_BIN((size_t)1 << 30, 18, 0);
  ASSERT_BIN(((size_t)1 << 30) + ((size_t)1 << 26), 18, 1);
  /* The last first-level bin starts at 2^61 and takes every larger size. */
  ASSERT_BIN((size_t)1 << 61, CA_BINS_FL - 1, 0);
  ASSERT_BIN((size_t)1 << 62, CA_BINS_FL - 1, CA_BINS_SL - 1);
  ASSERT_BIN(SIZE_MAX & ~(size_t)511, CA_BINS_FL - 1, CA_BINS_SL - 1);
}

Test(unit_bins, bins_grow_with_size_sixteen_per_power_of_two) {
  int last_fl = 0, last_sl = 0, bins_in_level = 0;
  for (size_t size = 512; size < ((size_t)1 << 24); size += 512) {
    int fl, sl;
    bin_of(size, &fl, &sl);
    cr_assert(fl > last_fl || (fl == last_fl && sl >= last_sl), "size %zu went down a bin", size);
    if (fl != last_fl) {
      cr_assert(last_fl == 0 || bins_in_level == CA_BINS_SL, "level %d had %d bins", last_fl, bins_in_level);
      cr_assert_eq(size & (size - 1), 0, "a new first-level bin begins at a power of two, not %zu", size);
      bins_in_level = 0;
    }
    if (fl != last_fl || sl != last_sl) bins_in_level++;
    last_fl = fl;
    last_sl = sl;
  }
}

Test(unit_bins, find_respects_the_minimum_and_the_maximum) {
  ca_bins_t *bins = new_bins();
  ca_block_t *b1 = block(1024), *b4 = block(4096), *b64 = block(65536);
  ca_bins_insert(bins, b64);
  ca_bins_insert(bins, b1);
  ca_bins_insert(bins, b4);
  cr_assert_eq(ca_bins_find(bins, 1024, 1024), b1, "an exact fit");
  cr_assert_eq(ca_bins_find(bins, 512, SIZE_MAX), b1, "the smallest that fits");
  cr_assert_eq(ca_bins_find(bins, 1025, SIZE_MAX), b4);
  cr_assert_eq(ca_bins_find(bins, 4097, 65536), b64, "the maximum is inclusive");
  cr_assert_null(ca_bins_find(bins, 4097, 65535), "nothing between the two");
  cr_assert_null(ca_bins_find(bins, 512, 512), "smaller than every block");
  cr_assert_null(ca_bins_find(bins, 65536 + 512, SIZE_MAX), "larger than every block");
  free(b1), free(b4), free(b64), free(bins);
}

Test(unit_bins, find_prefers_the_closer_fit_in_the_requests_own_bin) {
  /* 16384 + 512 and 16384 share bin (2, 0); 16384 + 1024 is the next bin. */
  ca_bins_t *bins = new_bins();
  ca_block_t *same = block(16384 + 512), *next = block(16384 + 1024);
  ca_bins_insert(bins, next);
  ca_bins_insert(bins, same);
  cr_assert_eq(ca_bins_find(bins, 16384 + 100, SIZE_MAX), same);
  cr_assert_eq(ca_bins_find(bins, 16384 + 600, SIZE_MAX), next, "the own bin's block is too small");
  free(same), free(next), free(bins);
}

/* A size of 512 bytes to 64 MiB, spread over the powers of two. */
static size_t random_size(uint64_t *rng) {
  int shift = 9 + (int)(rng_next(rng) % 17);
  return ((size_t)1 << shift) + (rng_next(rng) % ((size_t)1 << shift) & ~(size_t)511);
}

/* At most CA_BINS_SL blocks, so that no bin holds more than find scans:
 * then find is the exact best fit, which a linear search confirms. */
Test(unit_bins, find_is_the_best_fit_a_linear_search_finds) {
  uint64_t rng = 42;
  ca_bins_t *bins = new_bins();
  ca_block_t *blocks[CA_BINS_SL];
  for (int round = 0; round < 200; round++) {
    for (int i = 0; i < CA_BINS_SL; i++) ca_bins_insert(bins, blocks[i] = block(random_size(&rng)));
    for (int q = 0; q < 50; q++) {
      size_t min = random_size(&rng), max = rng_next(&rng) % 2 ? SIZE_MAX : min + random_size(&rng);
      size_t best = 0;
      for (int i = 0; i < CA_BINS_SL; i++)
        if (blocks[i]->size >= min && blocks[i]->size <= max && (!best || blocks[i]->size < best)) best = blocks[i]->size;
      ca_block_t *got = ca_bins_find(bins, min, max);
      cr_assert_eq(got ? got->size : 0, best, "round %d: find(%zu, %zu)", round, min, max);
      /* the allocation path's unbounded search is the same search (it failed "round 0:
       * find_any(1536)" with find_any searching for 512 bytes more) */
      if (max == SIZE_MAX) cr_assert_eq(ca_bins_find_any(bins, min), got, "round %d: find_any(%zu)", round, min);
    }
    size_t largest = 0;
    for (int i = 0; i < CA_BINS_SL; i++) largest = blocks[i]->size > largest ? blocks[i]->size : largest;
    cr_assert_eq(ca_bins_largest(bins)->size, largest);
    for (int i = 0; i < CA_BINS_SL; i++) {
      ca_bins_remove(bins, blocks[i]);
      free(blocks[i]);
    }
    cr_assert(bins->count == 0 && bins->bytes == 0 && bins->fl_bitmap == 0, "round %d: emptied", round);
  }
  free(bins);
}

Test(unit_bins, removal_keeps_counts_and_bitmaps) {
  ca_bins_t *bins = new_bins();
  ca_block_t *a = block(8192), *b = block(8192), *c = block(1 << 20);
  ca_bins_insert(bins, a);
  ca_bins_insert(bins, b);
  ca_bins_insert(bins, c);
  cr_assert(bins->count == 3 && bins->bytes == 16384 + (1 << 20));
  ca_bins_remove(bins, a);   /* the bin keeps b: its bits stay */
  cr_assert_eq(ca_bins_find(bins, 8192, 8192), b);
  ca_bins_remove(bins, b);
  cr_assert_null(ca_bins_find(bins, 8192, 8192));
  cr_assert_eq(bins->sl_bitmap[1], 0, "the emptied level's bits are gone");
  cr_assert_eq(ca_bins_largest(bins), c);
  ca_bins_remove(bins, c);
  cr_assert(bins->count == 0 && bins->bytes == 0 && bins->fl_bitmap == 0);
  cr_assert_null(ca_bins_largest(bins));
  cr_assert_null(ca_bins_find(bins, 512, SIZE_MAX));
  free(a), free(b), free(c), free(bins);
}

typedef struct visit_s {
  int n, stop_after;
  int fl[8], sl[8];
} visit_t;

static bool visit(ca_block_t *b, void *arg) {
  visit_t *v = arg;
  v->fl[v->n] = b->bin_fl;
  v->sl[v->n] = b->bin_sl;
  return ++v->n < v->stop_after;
}

Test(unit_bins, each_visits_the_largest_bins_first_and_stops_when_told) {
  ca_bins_t *bins = new_bins();
  size_t sizes[] = {4096, 1 << 20, 512, 65536, 1 << 24, 8192};
  ca_block_t *blocks[6];
  for (int i = 0; i < 6; i++) ca_bins_insert(bins, blocks[i] = block(sizes[i]));
  visit_t all = {.stop_after = 8};
  ca_bins_each(bins, visit, &all);
  cr_assert_eq(all.n, 6);
  for (int i = 1; i < all.n; i++)
    cr_assert(all.fl[i] < all.fl[i - 1] || (all.fl[i] == all.fl[i - 1] && all.sl[i] < all.sl[i - 1]),
              "visit %d is not in a smaller bin", i);
  visit_t some = {.stop_after = 2};
  ca_bins_each(bins, visit, &some);
  cr_assert_eq(some.n, 2, "ca_bins_each stops when fn returns false");
  for (int i = 0; i < 6; i++) ca_bins_remove(bins, blocks[i]), free(blocks[i]);
  free(bins);
}

/* Blocks resized in place (a split's rest shrinks, a merge grows) must be
 * found as if removed and inserted at their new size: find stays the
 * exact best fit, the byte count follows, and the block sits in its new
 * size's bin. Returns the finds that disagreed with a linear search. */
static int wrong_finds_after_resizes(bool resize_stays) {
  ca_debug.bins_resize_stays = resize_stays;
  uint64_t rng = 7;
  ca_bins_t *bins = new_bins();
  ca_block_t *blocks[CA_BINS_SL];
  size_t bytes = 0;
  for (int i = 0; i < CA_BINS_SL; i++) {
    ca_bins_insert(bins, blocks[i] = block(random_size(&rng)));
    bytes += blocks[i]->size;
  }
  int wrong = 0, moved = 0, stayed = 0;
  for (int round = 0; round < 2000; round++) {
    ca_block_t *b = blocks[rng_next(&rng) % CA_BINS_SL];
    size_t old = b->size;
    /* within its bin now and then (a few units), else anywhere */
    b->size = rng_next(&rng) % 2 ? random_size(&rng) : old + CA_MIN_BLOCK * (rng_next(&rng) % 3);
    int fl = b->bin_fl, sl = b->bin_sl;
    ca_bins_resized(bins, b, old);
    bytes += b->size - old;
    if (b->bin_fl == fl && b->bin_sl == sl) stayed++;
    else moved++;
    size_t min = random_size(&rng), best = 0;
    for (int i = 0; i < CA_BINS_SL; i++)
      if (blocks[i]->size >= min && (!best || blocks[i]->size < best)) best = blocks[i]->size;
    ca_block_t *got = ca_bins_find(bins, min, SIZE_MAX);
    wrong += (got ? got->size : 0) != best;
  }
  ca_debug.bins_resize_stays = false;
  cr_assert_eq(bins->bytes, bytes, "the byte count follows the resizes");
  cr_assert_eq(bins->count, CA_BINS_SL);
  if (!resize_stays) cr_assert(moved > 100 && stayed > 100, "both kinds of resize: %d moved, %d stayed", moved, stayed);
  for (int i = 0; i < CA_BINS_SL; i++) ca_bins_remove(bins, blocks[i]), free(blocks[i]);
  cr_assert(bins->count == 0 && bins->bytes == 0 && bins->fl_bitmap == 0, "emptied");
  free(bins);
  return wrong;
}

Test(unit_bins, a_resized_block_is_found_at_its_new_size) { cr_assert_eq(wrong_finds_after_resizes(false), 0); }

Test(unit_bins, a_resize_that_leaves_the_block_in_its_old_bin_is_caught) {
  cr_assert_gt(wrong_finds_after_resizes(true), 0, "a block in the wrong bin is missed or found too small");
}

Test(unit_bins, a_bin_that_starts_past_the_maximum_ends_the_search) {
  /* 1 MiB only: a search up to 1 MiB - 512 finds nothing; up to 1 MiB finds it;
   * a block in the request's own bin is still found under a tight maximum. */
  ca_bins_t *bins = new_bins();
  ca_block_t *big = block(1 << 20), *own = block(65536 + 2048);
  ca_bins_insert(bins, big);
  cr_assert_null(ca_bins_find(bins, 65536, (1 << 20) - 512));
  cr_assert_eq(ca_bins_find(bins, 65536, 1 << 20), big);
  ca_bins_insert(bins, own);
  cr_assert_eq(ca_bins_find(bins, 65536, 65536 + 2048), own, "the own bin under a tight maximum");
  cr_assert_null(ca_bins_find(bins, 65536 + 2560, 65536 + 4096), "neither: the own bin's is too small");
  ca_bins_remove(bins, big), ca_bins_remove(bins, own);
  free(big), free(own), free(bins);
}

/* Unit tests of blocks.c's cuts and merges that keep a block's struct in
 * place (the split's rest and the merge's survivor stay on their lists):
 * the address order, the segment's first block, and sizes tile the
 * segment after each. A bare segment and device: no backend involved. */
#include "core_testing.h"

static ca_device_t dev;
static ca_segment_t seg;

/* The segment's blocks tile [base, base + size) in address order, with
 * prev and next links that agree; returns the number of blocks. */
static int tiles(void) {
  int n = 0;
  uintptr_t at = seg.base;
  const ca_block_t *prev = NULL;
  for (const ca_block_t *b = seg.first; b; prev = b, b = b->next, n++) {
    cr_assert_eq(b->prev, prev, "block %d's prev link", n);
    cr_assert_eq(b->addr, at, "block %d starts where the one before ended", n);
    cr_assert_eq(b->seg, &seg);
    at += b->size;
  }
  cr_assert_eq(at, seg.base + seg.size, "the blocks cover the segment");
  return n;
}

static ca_block_t *whole_segment(size_t size) {
  memset(&dev, 0, sizeof dev);
  seg = (ca_segment_t){.base = 0x100000, .size = size};
  ca_block_t *b = ca_block_new(&dev);
  cr_assert_not_null(b);
  *b = (ca_block_t){.addr = seg.base, .size = size, .seg = &seg, .state = CA_PENDING};
  seg.first = b;
  return b;
}

static void free_all(void) {
  for (ca_block_t *b = seg.first, *next; b; b = next) next = b->next, free(b);
  for (ca_block_t *b = dev.spare_blocks, *next; b; b = next) next = b->next, free(b);
}

Test(unit_blocks, split_front_gives_the_front_and_keeps_the_rest_in_place) {
  ca_block_t *b = whole_segment(8 * 4096);
  ca_block_t *head = ca_block_split_front(&dev, b, 4096);
  cr_assert(head && head != b);
  cr_assert_eq(seg.first, head, "the front is the segment's first block now");
  cr_assert(head->addr == seg.base && head->size == 4096 && head->state == CA_PENDING);
  cr_assert(b->addr == seg.base + 4096 && b->size == 7 * 4096, "the rest keeps b's struct");
  cr_assert_eq(tiles(), 2);
  ca_block_t *mid = ca_block_split_front(&dev, b, 2 * 4096);   /* in the middle of the segment */
  cr_assert(head->next == mid && mid->next == b && b->prev == mid);
  cr_assert_eq(tiles(), 3);
  free_all();
}

Test(unit_blocks, absorb_prev_grows_the_block_backwards_and_frees_the_other) {
  ca_block_t *c = whole_segment(6 * 4096);
  ca_block_t *a = ca_block_split_front(&dev, c, 4096);
  ca_block_t *b = ca_block_split_front(&dev, c, 4096);   /* a b c */
  ca_block_absorb_prev(&dev, c);                          /* a c: c took b's bytes */
  cr_assert(c->addr == seg.base + 4096 && c->size == 5 * 4096);
  cr_assert(a->next == c && c->prev == a);
  cr_assert_eq(dev.spare_blocks, b, "b's struct is recycled");
  cr_assert_eq(tiles(), 2);
  ca_block_absorb_prev(&dev, c);                          /* c alone: the segment's first */
  cr_assert_eq(seg.first, c);
  cr_assert(c->addr == seg.base && c->size == 6 * 4096 && !c->prev);
  cr_assert_eq(tiles(), 1);
  free_all();
}

/* Unit tests of ptrmap.c, the live blocks by address: open addressing with
 * linear probing and backward-shift deletion. Deleting from the middle or
 * the head of a collision chain, or from a chain that wraps around the end
 * of the table, must leave every other key findable; a deleted key must be
 * gone and insertable again; growth must keep every key. Keys that collide
 * are found by observing where a key alone lands, so the tests do not copy
 * the hash function. */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "core_testing.h"

#define KEYS 16384
static ca_block_t blocks[KEYS];   /* block i has address (i + 1) * 512 */

static ca_block_t *blk(size_t i) {
  blocks[i].addr = (uintptr_t)(i + 1) * 512;
  return &blocks[i];
}

/* The slot where block i lands in an empty map of the initial capacity. */
static size_t home_of(size_t i) {
  ca_ptrmap_t m = {0};
  cr_assert(ca_ptrmap_insert(&m, blk(i)));
  size_t slot = 0;
  while (m.keys[slot] != blk(i)->addr) slot++;
  size_t cap = m.cap;
  ca_ptrmap_free(&m);
  cr_assert_eq(cap, 1024, "the initial capacity these tests assume");
  return slot;
}

/* The slot key 0 hashes to: in an empty map (of the initial capacity)
 * its lookup stops at once, at its home, which is empty and so "holds" 0;
 * the map's own answer, so that the tests do not copy the hash. */
static size_t home_of_zero(void) {
  ca_ptrmap_t m = {0};
  cr_assert(ca_ptrmap_insert(&m, blk(0)));   /* the initial capacity */
  ca_ptrmap_remove(&m, blk(0)->addr);
  size_t slot = SIZE_MAX;
  ca_ptrmap_get_slot(&m, 0, &slot);
  ca_ptrmap_free(&m);
  cr_assert_lt(slot, 1024, "0's lookup stops at its home");
  return slot;
}

/* n blocks whose keys share one home slot (the home, if want_home >= 0). */
static void colliding(int n, long want_home, size_t *out) {
  long home = want_home;
  int found = 0;
  for (size_t i = 0; i < KEYS && found < n; i++) {
    size_t h = home_of(i);
    if (home < 0) home = (long)h;
    if ((long)h == home) out[found++] = i;
  }
  cr_assert_eq(found, n, "%d keys with home %ld among %d", n, home, KEYS);
}

static void assert_holds(const ca_ptrmap_t *m, const size_t *keys, int n, const char *when) {
  for (int k = 0; k < n; k++)
    cr_assert_eq(ca_ptrmap_get(m, blk(keys[k])->addr), blk(keys[k]), "%s: key %d lost", when, k);
}

/* Every order of deleting three keys of one chain keeps the others. */
Test(unit_ptrmap, deleting_anywhere_in_a_collision_chain_keeps_the_rest) {
  size_t keys[3];
  colliding(3, -1, keys);
  int orders[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
  for (int o = 0; o < 6; o++) {
    ca_ptrmap_t m = {0};
    for (int k = 0; k < 3; k++) cr_assert(ca_ptrmap_insert(&m, blk(keys[k])));
    for (int step = 0; step < 3; step++) {
      size_t gone = keys[orders[o][step]];
      cr_assert_eq(ca_ptrmap_remove(&m, blk(gone)->addr), blk(gone), "order %d step %d", o, step);
      cr_assert_null(ca_ptrmap_get(&m, blk(gone)->addr), "a deleted key is gone");
      cr_assert_eq(m.count, (size_t)(2 - step));
      size_t left[2];
      int n = 0;
      for (int later = step + 1; later < 3; later++) left[n++] = keys[orders[o][later]];
      assert_holds(&m, left, n, "after a deletion");
    }
    ca_ptrmap_free(&m);
  }
}

/* A chain that starts in the last slot continues at slot 0: deletion must
 * shift across the wrap, and a key homed at slot 0 must stay in place. */
Test(unit_ptrmap, deleting_from_a_chain_that_wraps_around) {
  size_t tail[3], head[1];
  colliding(3, 1023, tail);
  colliding(1, 0, head);
  ca_ptrmap_t m = {0};
  for (int k = 0; k < 3; k++) cr_assert(ca_ptrmap_insert(&m, blk(tail[k])));
  cr_assert(ca_ptrmap_insert(&m, blk(head[0])));
  cr_assert_eq(ca_ptrmap_remove(&m, blk(tail[0])->addr), blk(tail[0]));
  assert_holds(&m, tail + 1, 2, "after deleting the chain's first key");
  assert_holds(&m, head, 1, "the key homed at slot 0");
  cr_assert_eq(ca_ptrmap_remove(&m, blk(tail[1])->addr), blk(tail[1]));
  assert_holds(&m, tail + 2, 1, "after deleting the second");
  assert_holds(&m, head, 1, "the key homed at slot 0");
  ca_ptrmap_free(&m);
}

Test(unit_ptrmap, a_deleted_key_can_be_inserted_again) {
  size_t keys[2];
  colliding(2, -1, keys);
  ca_ptrmap_t m = {0};
  cr_assert(ca_ptrmap_insert(&m, blk(keys[0])));
  cr_assert(ca_ptrmap_insert(&m, blk(keys[1])));
  for (int round = 0; round < 3; round++) {
    cr_assert_eq(ca_ptrmap_remove(&m, blk(keys[0])->addr), blk(keys[0]));
    cr_assert_null(ca_ptrmap_remove(&m, blk(keys[0])->addr), "a second removal finds nothing");
    cr_assert_eq(m.count, 1);
    cr_assert(ca_ptrmap_insert(&m, blk(keys[0])));
    assert_holds(&m, keys, 2, "after reinsertion");
    cr_assert_eq(m.count, 2);
  }
  ca_ptrmap_free(&m);
}

Test(unit_ptrmap, missing_and_zero_keys_are_not_found) {
  ca_ptrmap_t m = {0};
  cr_assert_null(ca_ptrmap_get(&m, 512), "an empty map");
  cr_assert_null(ca_ptrmap_remove(&m, 512));
  cr_assert(ca_ptrmap_insert(&m, blk(0)));
  cr_assert_null(ca_ptrmap_get(&m, 0), "0 marks an empty slot, never a key");
  cr_assert_null(ca_ptrmap_get(&m, blk(1)->addr));
  cr_assert_null(ca_ptrmap_remove(&m, blk(1)->addr));
  cr_assert_eq(m.count, 1);
  ca_ptrmap_free(&m);
}

/* The map doubles past half full; every key survives each doubling, and
 * deleting every other key then all of them leaves an empty map. */
Test(unit_ptrmap, growth_keeps_every_key) {
  ca_ptrmap_t m = {0};
  size_t caps_seen = 0, last_cap = 0;
  for (size_t i = 0; i < KEYS; i++) {
    cr_assert(ca_ptrmap_insert(&m, blk(i)));
    if (m.cap != last_cap) caps_seen++, last_cap = m.cap;
    cr_assert_leq(m.count * 2, m.cap, "at most half full");
  }
  cr_assert_geq(caps_seen, 3, "the map grew at least twice (capacity %zu)", m.cap);
  for (size_t i = 0; i < KEYS; i++) cr_assert_eq(ca_ptrmap_get(&m, blk(i)->addr), blk(i), "key %zu", i);
  for (size_t i = 0; i < KEYS; i += 2) cr_assert_eq(ca_ptrmap_remove(&m, blk(i)->addr), blk(i));
  for (size_t i = 0; i < KEYS; i++)
    cr_assert_eq(ca_ptrmap_get(&m, blk(i)->addr), i % 2 ? blk(i) : NULL, "key %zu after deleting the even ones", i);
  for (size_t i = 1; i < KEYS; i += 2) cr_assert_eq(ca_ptrmap_remove(&m, blk(i)->addr), blk(i));
  cr_assert_eq(m.count, 0);
  for (size_t i = 0; i < m.cap; i++) cr_assert_eq(m.keys[i], 0, "slot %zu is empty again", i);
  ca_ptrmap_free(&m);
}

/* Random inserts and deletes against a model of which keys are present. */
Test(unit_ptrmap, random_churn_matches_a_model) {
  static bool present[KEYS];
  ca_ptrmap_t m = {0};
  uint64_t rng = 7;
  size_t count = 0;
  for (int op = 0; op < 100000; op++) {
    size_t i = rng_next(&rng) % 1500;   /* dense enough for long chains */
    if (present[i]) {
      cr_assert_eq(ca_ptrmap_remove(&m, blk(i)->addr), blk(i), "op %d", op);
      count--;
    } else {
      cr_assert(ca_ptrmap_insert(&m, blk(i)));
      count++;
    }
    present[i] = !present[i];
    size_t probe = rng_next(&rng) % 1500;
    cr_assert_eq(ca_ptrmap_get(&m, blk(probe)->addr), present[probe] ? blk(probe) : NULL, "op %d", op);
  }
  cr_assert_eq(m.count, count);
  for (size_t i = 0; i < 1500; i++) cr_assert_eq(ca_ptrmap_get(&m, blk(i)->addr), present[i] ? blk(i) : NULL);
  ca_ptrmap_free(&m);
}

/* A free's single lookup: get_slot says where the key sits (SIZE_MAX for
 * a key not there), and removing that slot keeps the rest of its chain. */
Test(unit_ptrmap, a_lookup_remembers_its_slot_for_the_removal) {
  size_t keys[3];
  colliding(3, -1, keys);
  ca_ptrmap_t m = {0};
  for (int k = 0; k < 3; k++) cr_assert(ca_ptrmap_insert(&m, blk(keys[k])));
  size_t slot = 0;
  cr_assert_null(ca_ptrmap_get_slot(&m, blk(KEYS - 1)->addr, &slot));
  cr_assert_eq(slot, SIZE_MAX, "a key not in the map has no slot");
  cr_assert_eq(ca_ptrmap_get_slot(&m, blk(keys[0])->addr, &slot), blk(keys[0]));
  cr_assert_eq(m.keys[slot], blk(keys[0])->addr, "the slot is where the key sits");
  ca_ptrmap_remove_slot(&m, slot);   /* the head of the chain: the others shift back */
  cr_assert_null(ca_ptrmap_get(&m, blk(keys[0])->addr));
  cr_assert_eq(m.count, 2);
  assert_holds(&m, keys + 1, 2, "after removing the chain's head by its slot");
  ca_ptrmap_free(&m);
}

/* Key 0 has no test of its own (ptrmap.c): its lookup ends at an empty
 * slot, whose value is NULL, in an empty map, a sparse one and one whose
 * chain covers the slot 0 hashes to; a removal of 0 removes nothing. */
Test(unit_ptrmap, zero_finds_an_empty_slot_and_removes_nothing) {
  ca_ptrmap_t m = {0};
  size_t slot = 0;
  cr_assert_null(ca_ptrmap_get_slot(&m, 0, &slot), "an empty map");
  cr_assert_null(ca_ptrmap_remove(&m, 0));
  size_t keys[3];
  colliding(3, (long)home_of_zero(), keys);   /* a chain from the slot 0 hashes to */
  for (int k = 0; k < 3; k++) cr_assert(ca_ptrmap_insert(&m, blk(keys[k])));
  cr_assert_null(ca_ptrmap_get(&m, 0));
  cr_assert_null(ca_ptrmap_get_slot(&m, 0, &slot));
  cr_assert_null(ca_ptrmap_remove(&m, 0));
  cr_assert_eq(m.count, 3, "nothing removed");
  assert_holds(&m, keys, 3, "after looking up and removing 0");
  ca_ptrmap_free(&m);
}

/* Unit tests of sitelive.c, live bytes per call site: after allocations
 * and frees of many sites, interleaved (so that the memo of the last entry
 * found keeps changing hands) and through the table's growth (which moves
 * every entry the memo may point to), each site's totals are what a model
 * counts. The twin with sitelive_memo_any_site (the memo answers for any
 * site) puts one site's bytes on another. Blocks here are bare structs. */
#include "core_testing.h"

#define SITES 300   /* past 64 slots, the table grows three times */
#define SITE(i) ((void *)(uintptr_t)(0x40000 + 64 * (i)))

/* Returns how many sites the table got wrong. */
static int wrong_sites(bool memo_any_site) {
  ca_debug.sitelive_memo_any_site = memo_any_site;
  ca_sitelive_t t = {0};
  static ca_block_t blocks[2 * SITES];
  static int64_t want_bytes[SITES], want_count[SITES];
  memset(want_bytes, 0, sizeof want_bytes);
  memset(want_count, 0, sizeof want_count);
  uint64_t seed = 5;
  for (int i = 0; i < 2 * SITES; i++) {
    int site = i % 2 ? i / 2 : (i / 2 + 7) % SITES;   /* two sites in turn */
    blocks[i] = (ca_block_t){.site = SITE(site), .size = 512 * (1 + rng_next(&seed) % 64), .requested = 100};
    ca_sitelive_add(&t, &blocks[i], +1);
    want_bytes[site] += (int64_t)blocks[i].size;
    want_count[site]++;
  }
  for (int i = 0; i < 2 * SITES; i += 3) {   /* a third freed, out of the order they came */
    int site = (int)(((uintptr_t)blocks[i].site - 0x40000) / 64);
    ca_sitelive_add(&t, &blocks[i], -1);
    want_bytes[site] -= (int64_t)blocks[i].size;
    want_count[site]--;
  }
  ca_debug.sitelive_memo_any_site = false;
  static ca_site_live_t out[SITES + 1];
  size_t n = ca_sitelive_copy(&t, out);
  int wrong = 0;
  int64_t total = 0;
  for (size_t k = 0; k < n; k++) {
    int site = (int)(((uintptr_t)out[k].site - 0x40000) / 64);
    if (out[k].lost || site < 0 || site >= SITES) {
      wrong++;
      continue;
    }
    wrong += out[k].bytes != want_bytes[site] || out[k].count != want_count[site];
    total += out[k].bytes;
  }
  int64_t want_total = 0;
  int holding = 0;
  for (int s = 0; s < SITES; s++) want_total += want_bytes[s], holding += want_count[s] > 0;
  cr_assert_eq(ca_sitelive_total(&t), want_total, "the table's total is what was allocated and not freed");
  if (!memo_any_site) cr_assert_eq((int)n, holding, "one entry per site still holding blocks");
  if (!memo_any_site) cr_assert_gt(t.cap, 256, "the table grew past 256 slots");
  free(t.slots);
  return wrong;
}

Test(unit_sitelive, every_site_holds_what_it_allocated_and_did_not_free) { cr_assert_eq(wrong_sites(false), 0); }

Test(unit_sitelive, a_memo_that_answers_for_any_site_is_caught) {
  cr_assert_gt(wrong_sites(true), 0, "one site's bytes counted on another");
}
